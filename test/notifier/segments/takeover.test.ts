/**
 * An upload whose writer died (its process killed mid-upload) is taken over: after
 * UPLOAD_STALE_MS without a stored batch the next upload, or the clean-up, abandons it; a batch
 * the old writer still sends then stores nothing and fails, so no member lands in a version after
 * it is abandoned.
 */
import t from 'tap';
import { beginUpload, storeBatch, switchVersion, UploadLostError } from '../../../notifier/segments/store.js';
import { cleanUpSegments } from '../../../notifier/segments/cleanup.js';
import { UPLOAD_STALE_MS } from '../../../notifier/segments/upload.js';
import { startSegmentCore, storedMembers, versionRow } from './helpers.js';

const core = await startSegmentCore(t, 'notifier_segments_takeover');
const pool = core.db.pool;
const age = (id: string, version: number): Promise<unknown> =>
  pool.query(`UPDATE segment_versions SET touched_at = now() - make_interval(secs => $3) WHERE segment_id = $1 AND version = $2`, [
    id,
    version,
    UPLOAD_STALE_MS / 1000 + 1,
  ]);

t.test('a stale upload is taken over by the next one; its late batch stores nothing', async (t) => {
  const dead = await beginUpload(pool, 'to', 'user:a', UPLOAD_STALE_MS);
  await storeBatch(pool, 'to', dead, ['a1', 'a2']);
  await t.rejects(beginUpload(pool, 'to', 'user:b', UPLOAD_STALE_MS), { code: 'segment_upload_in_progress' }, 'fresh: still running');
  await age('to', dead);
  const next = await beginUpload(pool, 'to', 'user:b', UPLOAD_STALE_MS);
  t.equal(next, dead + 1, 'a new version');
  t.equal((await versionRow(core, 'to', dead))?.state, 'abandoned');
  await t.rejects(storeBatch(pool, 'to', dead, ['late']), UploadLostError, 'the old writer fails');
  await t.rejects(switchVersion(pool, 'to', dead, 'user:a'), UploadLostError, 'and cannot switch');
  t.same(await storedMembers(core, 'to', dead), ['a1', 'a2'], 'its late batch stored nothing');
  await storeBatch(pool, 'to', next, ['b1']);
  const { view } = await switchVersion(pool, 'to', next, 'user:b');
  t.match(view, { version: next, size: 1, updatedBy: 'user:b' });
});

t.test('the clean-up abandons a stale upload and purges it; a fresh one is left alone', async (t) => {
  const stale = await beginUpload(pool, 'cl-stale', 'user:a', UPLOAD_STALE_MS);
  await storeBatch(pool, 'cl-stale', stale, ['s1', 's2', 's3']);
  const fresh = await beginUpload(pool, 'cl-fresh', 'user:a', UPLOAD_STALE_MS);
  await storeBatch(pool, 'cl-fresh', fresh, ['f1']);
  await age('cl-stale', stale);
  await core.notifier.segmentCleanup.idle();
  const r = await cleanUpSegments(pool, UPLOAD_STALE_MS);
  t.equal(r.stale, 1, 'one upload abandoned');
  t.ok(r.members >= 3, 'its members deleted');
  t.match(await versionRow(core, 'cl-stale', stale), { state: 'abandoned', size: '3' });
  t.ok((await versionRow(core, 'cl-stale', stale))?.purged_at, 'purged');
  t.same(await storedMembers(core, 'cl-stale', stale), []);
  t.equal((await versionRow(core, 'cl-fresh', fresh))?.state, 'uploading', 'the fresh upload goes on');
  t.same(await storedMembers(core, 'cl-fresh', fresh), ['f1']);
});
