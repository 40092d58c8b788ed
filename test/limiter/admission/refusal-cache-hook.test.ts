// @tier: pure
/**
 * The quota cache tells the refusal cache about every subject a snapshot writes or deletes
 * (`QuotaCache.onChange`, wired to `RefusalCache.forget` in limiter/sidecar.ts), full snapshots and
 * deltas alike; a snapshot it ignores (stale, another base) tells nothing. Recompiled records are
 * new `LimitParams` objects, which no remembered entry matches (the second guard).
 */
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { Algorithm, QuotaSchema, SnapshotSchema } from '../../../proto/gen/quota/v1/quota_pb.js';
import { QuotaCache } from '../../../limiter/quota-cache.js';

const q = (subjectId: string, rate = 5) => create(QuotaSchema, { subjectId, algorithm: Algorithm.TOKEN_BUCKET, rate, burst: rate });

t.test('onChange names every subject written or deleted', async (t) => {
  const cache = new QuotaCache(100);
  const changed: string[] = [];
  cache.onChange = (s) => changed.push(s);
  cache.apply(create(SnapshotSchema, { version: 1n, quotas: [q('user:a'), q('user:b'), q('plan:p')] }), 0);
  t.same(changed.splice(0), ['user:a', 'user:b', 'plan:p'], 'a full snapshot: every record');
  const before = cache.resolve('user:a')!.limit;
  cache.apply(
    create(SnapshotSchema, { version: 2n, delta: true, baseVersion: 1n, quotas: [q('user:a', 9)], deletedSubjectIds: ['user:b'] }),
    0,
  );
  t.same(changed.splice(0), ['user:b', 'user:a'], 'a delta: the deleted and the written');
  t.not(cache.resolve('user:a')!.limit, before, 'the changed record has a new LimitParams object');
  cache.apply(create(SnapshotSchema, { version: 2n, delta: true, baseVersion: 1n, quotas: [q('user:c')] }), 0);
  cache.apply(create(SnapshotSchema, { version: 5n, delta: true, baseVersion: 4n, quotas: [q('user:d')] }), 0);
  t.same(changed, [], 'stale and other-base snapshots are ignored: nothing to forget');
});
