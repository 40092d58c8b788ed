/**
 * Local refusals and lease give-backs on one real Redis. A give-back credits the global bucket's
 * shard (lease-script.ts), so the refusal cache's premise "other sidecars only charge" does not hold
 * for the global bucket once any quota is approximate: an exact subject refused by the global
 * bucket must not go on being refused here after another sidecar gave tokens back to it, while
 * Redis itself would admit.
 */
import t from 'tap';
import { isPending, RedisCounterStore, type AdmitRequest, type GlobalBucket, type LimitParams } from '../../../limiter/admission/index.js';
import { RefusalCache } from '../../../limiter/admission/refusal-cache.js';
import { LeaseStore, RedisLessor } from '../../../limiter/admission/lease.js';
import { useRedis } from '../../harness/redis.js';
import { waitFor } from '../../harness/wait.js';

const HOUR = 3_600_000;
const slow = (burst: number): LimitParams => ({ algorithm: 'token_bucket', rate: 1, burst, intervalMs: HOUR });

t.test('a global refusal is not answered locally once a give-back may have refilled the global bucket', async (t) => {
  const { prefix, url } = await useRedis(t, 'refusal-credit');
  const open = async () => {
    const s = new RedisCounterStore({ url, prefix: prefix.slice(0, -1), deadlineMs: 2000 });
    t.teardown(() => s.close());
    await s.ready();
    return s;
  };
  // Sidecar A leases an approximate subject; sidecar C decides an exact one. One global bucket.
  const storeA = await open();
  const storeC = await open();
  const global: GlobalBucket = { name: 'g', limit: slow(30) };
  let mono = 1_000;
  const cacheA = new RefusalCache(storeA, { monotonic: () => mono });
  let givenBack = 0;
  const leases = new LeaseStore(cacheA, new RedisLessor(storeA), cacheA, {
    monotonic: () => mono,
    sweepTimer: false,
    id: 'sidecar-a',
    onGiveBack: (n) => (givenBack += n),
  });
  await leases.start();
  t.teardown(() => leases.close());
  t.equal(leases.peers, 1, 'A is the only lessee');
  const cacheC = new RefusalCache(storeC, { globalCredited: () => true });

  const approx: AdmitRequest = { key: 'ap', limit: slow(100), global, cost: 1, accuracy: 'approximate' };
  const r1 = leases.admit(approx);
  t.ok(isPending(r1) && (await r1).allowed, 'first lease: one token');
  mono += 1;
  const r2 = leases.admit(approx);
  t.ok(isPending(r2) && (await r2).allowed, 'second lease: a share');
  const held = leases.book.get('ap')!.tokens;
  t.ok(held > 0, `A holds ${held} unspent tokens, taken from the global bucket too`);

  // The exact subject spends what the global bucket has left, then is refused by it.
  const exactLimit = slow(1000);
  // Taken from the global bucket so far: the first lease's token and the second lease (held + 1).
  const left = { remaining: 30 - 1 - (held + 1) };
  const ex = (cost: number): AdmitRequest => ({ key: 'ex', limit: exactLimit, global, cost });
  const spend = cacheC.admit(ex(left.remaining));
  t.ok(isPending(spend) && (await spend).allowed, `the exact subject takes the global bucket's last ${left.remaining}`);
  const refused = cacheC.admit(ex(1));
  t.ok(isPending(refused), 'its next request goes to Redis');
  const rr = await refused;
  t.same([rr.allowed, rr.binding], [false, 'global'], 'and is refused by the global bucket');

  // A's lease expires; its unspent tokens go back to the subject's bucket and the global shard.
  mono += leases.book.ttlMs;
  leases.sweep();
  await waitFor(() => givenBack === held, { what: 'the give-back' });

  const truth = await storeC.admit({ key: 'ex-twin', limit: exactLimit, global, cost: 1 });
  t.same([truth.allowed, truth.binding], [true, 'key'], 'Redis admits a request of cost 1 under the global bucket again');
  const after = cacheC.admit(ex(1));
  t.ok(isPending(after), 'so the exact subject is not refused locally: Redis decides');
  if (isPending(after)) t.equal((await after).allowed, true, 'and admits it');

  // Refusals by the subject's own bucket are still answered here.
  const own: AdmitRequest = { key: 'own', limit: slow(1), global, cost: 1 };
  const first = cacheC.admit(own);
  t.ok(isPending(first) && (await first).allowed, "a subject spends its own bucket's one token");
  const local = cacheC.admit(own);
  t.same(
    isPending(local) ? 'redis' : [local.allowed, local.binding],
    [false, 'key'],
    'and its next request is refused locally, bound by its bucket',
  );
});
