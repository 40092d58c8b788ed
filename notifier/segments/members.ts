/**
 * A segment's members in keyset order, for the campaign fan-out: shard boundaries in one pass, then
 * each shard's members by range. The order is user_id byte order (`COLLATE "C"` on both columns,
 * migration 080), which for user ids (visible ASCII) is also JavaScript's `<`: a boundary computed
 * here compares the same in SQL and in JS.
 *
 * A list segment is read at the version the caller pinned (a retired version stays readable while
 * an open fan-out pins it, cleanup.ts); a rule segment is read live from `user_profiles` with the
 * rule the caller passes.
 */
import type { Queryable, SegmentKind } from './store.js';
import { ruleCondition, type SegmentRule } from './rule.js';

/** What the member reads need of a segment (a {@link SegmentView} will do). */
export interface SegmentRef {
  id: string;
  kind: SegmentKind;
  version: number;
  rule?: SegmentRule;
}

/** `[first, next)`: members with first ≤ user_id < next; `next` null means to the end. */
export interface MemberRange {
  first: string;
  next: string | null;
}

/**
 * The smallest user id after `id` in keyset order (ids are visible ASCII, and `!` is the smallest
 * such character): `{first: keyAfter(last), next}` reads on after the last member seen.
 */
export function keyAfter(id: string): string {
  return `${id}!`;
}

/** The member source as SQL: a table with a `user_id` column and its condition, parameters numbered from 1. */
function source(seg: SegmentRef): { from: string; where: string; params: unknown[] } {
  if (seg.kind === 'list') {
    return { from: 'segment_members', where: 'segment_id = $1 AND version = $2', params: [seg.id, seg.version] };
  }
  if (!seg.rule) throw new Error(`rule segment ${seg.id}: the rule is needed to read its members`);
  const c = ruleCondition(seg.rule, 1);
  return { from: 'user_profiles', where: c.sql, params: c.params };
}

/**
 * The first user id of each shard of `shardSize` members, in keyset order (shard i covers
 * firstUsers[i] ≤ user_id < firstUsers[i+1], the last one to the end), and the member count; one
 * ordered pass over the index. An empty segment has no shards.
 */
export async function shardBoundaries(db: Queryable, seg: SegmentRef, shardSize: number): Promise<{ firstUsers: string[]; size: number }> {
  if (!Number.isInteger(shardSize) || shardSize < 1) throw new RangeError('shardSize must be a positive integer');
  const s = source(seg);
  const n = s.params.length + 1;
  // lead() needs one row of look-ahead only, so the window never holds the whole segment; the last
  // row is returned for its row number, the count.
  const { rows } = await db.query<{ user_id: string; rn: string }>(
    `SELECT user_id, rn FROM (
       SELECT user_id, row_number() OVER w AS rn, lead(user_id) OVER w IS NULL AS last
         FROM ${s.from} WHERE ${s.where}
       WINDOW w AS (ORDER BY user_id COLLATE "C")) m
      WHERE (rn - 1) % $${n} = 0 OR last
      ORDER BY rn`,
    [...s.params, shardSize],
  );
  const firstUsers: string[] = [];
  let size = 0;
  for (const r of rows) {
    const rn = Number(r.rn);
    if ((rn - 1) % shardSize === 0) firstUsers.push(r.user_id);
    size = rn;
  }
  return { firstUsers, size };
}

/**
 * The members in `range`, in keyset order, at most `limit` of them (all when unset): a list
 * segment's at `seg.version`, a rule segment's as the profiles are now.
 */
export async function readMembers(db: Queryable, seg: SegmentRef, range: MemberRange, limit?: number): Promise<string[]> {
  const s = source(seg);
  const params: unknown[] = [...s.params, range.first];
  let sql = `SELECT user_id FROM ${s.from} WHERE ${s.where} AND user_id COLLATE "C" >= $${params.length}`;
  if (range.next !== null) {
    params.push(range.next);
    sql += ` AND user_id COLLATE "C" < $${params.length}`;
  }
  sql += ' ORDER BY user_id COLLATE "C"';
  if (limit !== undefined) {
    params.push(limit);
    sql += ` LIMIT $${params.length}`;
  }
  const { rows } = await db.query<{ user_id: string }>(sql, params);
  return rows.map((r) => r.user_id);
}
