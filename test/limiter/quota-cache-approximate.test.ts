// @tier: pure
/**
 * `QuotaCache.approximate`: whether any quota (plans included) is approximate, which tells the
 * refusal cache that lease give-backs may credit the global bucket (refusal-cache.ts,
 * `globalCredited`). Set by any snapshot holding one; a full snapshot without one clears it; a
 * delta never clears it (it errs towards true).
 */
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { Accuracy, Algorithm, QuotaSchema, SnapshotSchema, type Quota } from '../../proto/gen/quota/v1/quota_pb.js';
import { QuotaCache } from '../../limiter/quota-cache.js';

const quota = (subjectId: string, accuracy: Accuracy, algorithm = Algorithm.TOKEN_BUCKET): Quota =>
  create(QuotaSchema, { subjectId, algorithm, rate: 10, burst: 10, accuracy });

t.test('the quota cache says whether any quota is approximate', async (t) => {
  const c = new QuotaCache(100);
  t.equal(c.approximate, false, 'empty: no');
  c.apply(create(SnapshotSchema, { version: 1n, quotas: [quota('user:a', Accuracy.EXACT)] }), 1);
  t.equal(c.approximate, false, 'exact quotas only: no');
  c.apply(create(SnapshotSchema, { version: 2n, quotas: [quota('user:w', Accuracy.APPROXIMATE, Algorithm.FIXED_WINDOW)] }), 2);
  t.equal(c.approximate, false, 'an approximate window is held exact: no');
  c.apply(create(SnapshotSchema, { version: 3n, delta: true, baseVersion: 2n, quotas: [quota('plan:free', Accuracy.APPROXIMATE)] }), 3);
  t.equal(c.approximate, true, 'a delta with an approximate plan: yes');
  c.apply(create(SnapshotSchema, { version: 4n, delta: true, baseVersion: 3n, quotas: [quota('plan:free', Accuracy.EXACT)] }), 4);
  t.equal(c.approximate, true, 'a delta making it exact again leaves it set (errs towards true)');
  c.apply(create(SnapshotSchema, { version: 5n, quotas: [quota('plan:free', Accuracy.EXACT)] }), 5);
  t.equal(c.approximate, false, 'a full snapshot without one clears it');
});
