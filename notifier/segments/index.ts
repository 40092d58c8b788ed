/**
 * Segments (README, "Segments"): who a campaign is sent to. A `list` segment is a stored list of
 * user ids uploaded as a stream, versioned; a `rule` segment selects profiles by locale, timezone
 * and tags. What the campaign fan-out uses:
 *
 * - {@link loadSegment}: the segment (kind, version, size); pass `{lock: true}` with a client in
 *   the transaction that pins the version, so the pinned version's members are kept (cleanup.ts);
 * - {@link shardBoundaries}: the first user id of each shard, in keyset order, and the count;
 * - {@link readMembers}: one shard's members (`[first, next)`), from the pinned version for a
 *   list, live for a rule.
 */
export { loadSegment, type LoadOptions, type Queryable, type SegmentKind, type SegmentView } from './store.js';
export { keyAfter, readMembers, shardBoundaries, type MemberRange, type SegmentRef } from './members.js';
export { type SegmentRule } from './rule.js';
export { isSegmentId } from './segment-id.js';
export { cleanUpSegments, SegmentCleanup } from './cleanup.js';
export { registerSegmentRoutes, segmentJson } from './routes.js';
export { UPLOAD_STALE_MS } from './upload.js';
