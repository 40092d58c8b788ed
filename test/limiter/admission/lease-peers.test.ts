/**
 * The lessee count when heartbeats fail (limiter/admission/lease.ts): lease shares are
 * `burst / (4 × N)`, so a count frozen at its last value while sidecars join would size shares for
 * too few and break the bound. On a real Redis whose lessee set's key is made unusable (a string
 * where the sorted set was, so ZADD fails while decisions and leases still work), the count drops
 * to 0 once no heartbeat has succeeded for three periods, and approximate requests are decided
 * exactly (no lease taken).
 */
import t from 'tap';
import { isPending, RedisCounterStore, type AdmitRequest, type LimitParams } from '../../../limiter/admission/index.js';
import { RefusalCache } from '../../../limiter/admission/refusal-cache.js';
import { LeaseStore, PEERS_PERIOD_MS, RedisLessor } from '../../../limiter/admission/lease.js';
import { useRedis } from '../../harness/redis.js';

const HOUR = 3_600_000;
const L: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 400, intervalMs: HOUR };

t.test('a lessee count no heartbeat has confirmed for three periods is dropped', async (t) => {
  const { prefix, url, redis } = await useRedis(t, 'lease-peers');
  const store = new RedisCounterStore({ url, prefix: prefix.slice(0, -1), deadlineMs: 2000 });
  t.teardown(() => store.close());
  await store.ready();
  let mono = 1_000;
  const cache = new RefusalCache(store, { monotonic: () => mono });
  let takes = 0;
  const leases = new LeaseStore(cache, new RedisLessor(store), cache, {
    monotonic: () => mono,
    sweepTimer: false,
    id: 'peers-a',
    onLease: (event) => {
      if (event !== 'local_admit') takes++;
    },
  });
  t.teardown(() => leases.close());
  await leases.start();
  t.equal(leases.peers, 1, 'counted');

  // The lessee set becomes unusable: every heartbeat fails from now on.
  const head = store.globalShardKey('x', 0);
  await redis.set(head.slice(0, head.length - 'g:x'.length) + 'lessees', 'not a sorted set');
  mono += PEERS_PERIOD_MS;
  await leases.start(); // one more heartbeat (start() beats before it returns)
  t.equal(leases.peers, 1, 'one failed heartbeat keeps the count');
  mono += 2 * PEERS_PERIOD_MS;
  await leases.start();
  t.equal(leases.peers, 0, 'three periods without one: the count is dropped');

  const req: AdmitRequest = { key: 'subject', limit: L, cost: 1, accuracy: 'approximate' };
  const r = leases.admit(req);
  t.ok(isPending(r) && (await r).allowed, 'an approximate request is still admitted');
  t.equal(takes, 0, 'decided exactly: no lease taken');
});
