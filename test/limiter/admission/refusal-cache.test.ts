/**
 * The refusal cache's rules, one at a time, over a real Redis (its exactness under load, across
 * sidecars and on a cluster, is test/limiter/local-refusals.test.ts): a refusal is per cost, a
 * quota change or `forget` drops an entry, the bound holds, connection events and failures clear
 * everything, a breaker that is not closed bypasses it, and an entry stops refusing at the instant
 * its bucket could admit (on the injected monotonic clock).
 */
import t from 'tap';
import { isPending, RedisCounterStore, type AdmitRequest, type AdmitResult, type LimitParams } from '../../../limiter/admission/index.js';
import { RefusalCache, redisTimeBound } from '../../../limiter/admission/refusal-cache.js';
import { useRedis } from '../../harness/redis.js';

const HOUR = 3_600_000;
const slow = (burst: number): LimitParams => ({ algorithm: 'token_bucket', rate: 1, burst, intervalMs: HOUR });

t.test('the refusal cache', async (t) => {
  const { prefix, url } = await useRedis(t, 'refusal-cache');
  const store = new RedisCounterStore({ url, prefix: prefix.slice(0, -1), deadlineMs: 2000 });
  t.teardown(() => store.close());
  await store.ready();
  let mono = 1_000;
  let active = true;
  const cache = new RefusalCache(store, { maxEntries: 3, monotonic: () => mono, active: () => active });
  let n = 0;
  const key = () => `rc:${++n}`;
  /** Sends and says where the answer came from. */
  const admit = async (req: AdmitRequest): Promise<{ local: boolean; r: AdmitResult }> => {
    const p = cache.admit(req);
    return isPending(p) ? { local: false, r: await p } : { local: true, r: { ...p } };
  };

  t.test('a refusal is per cost: a smaller request that fits still goes to Redis', async (t) => {
    const k = key();
    const L = slow(5);
    t.same((await admit({ key: k, limit: L, cost: 3 })).r.remaining, 2, 'cost 3 of 5: 2 left');
    const big = await admit({ key: k, limit: L, cost: 3 });
    t.same([big.local, big.r.allowed, big.r.remaining], [true, false, 2], 'cost 3 again: refused here, 2 remaining');
    t.ok(big.r.retryAfterMs > 1000, 'with the wait for the third token');
    const small = await admit({ key: k, limit: L, cost: 2 });
    t.same([small.local, small.r.allowed, small.r.remaining], [false, true, 0], 'cost 2 fits: sent to Redis and admitted');
    const one = await admit({ key: k, limit: L, cost: 1 });
    t.same([one.local, one.r.allowed], [true, false], 'then cost 1 is refused here');
    t.equal(cache.localRefusals, 2);
  });

  t.test('a quota change (another LimitParams) and forget() drop the entry', async (t) => {
    const k = key();
    await admit({ key: k, limit: slow(1), cost: 1 });
    t.equal((await admit({ key: k, limit: slow(1), cost: 1 })).local, false, 'a recompiled quota (a new object, same numbers) asks Redis');
    const L = slow(1);
    await admit({ key: k, limit: L, cost: 1 });
    t.equal((await admit({ key: k, limit: L, cost: 1 })).local, true, 'the same object is answered here');
    cache.forget(k);
    t.equal((await admit({ key: k, limit: L, cost: 1 })).local, false, 'after forget(), Redis again');
    const bigger = slow(3);
    t.equal((await admit({ key: k, limit: bigger, cost: 1 })).local, false, 'a raised limit is decided by Redis, never from the old entry');
  });

  t.test('bounded: the oldest entries go first', async (t) => {
    cache.clear();
    const L = slow(1);
    const keys = [key(), key(), key(), key(), key()];
    for (const k of keys) await admit({ key: k, limit: L, cost: 1 });
    t.equal(cache.size, 3, 'maxEntries 3');
    t.equal((await admit({ key: keys[0]!, limit: L, cost: 1 })).local, false, 'the first was evicted');
    t.equal((await admit({ key: keys[4]!, limit: L, cost: 1 })).local, true, 'the last is kept');
  });

  t.test('a breaker that is not closed bypasses it; connection events clear it', async (t) => {
    const k = key();
    const L = slow(1);
    await admit({ key: k, limit: L, cost: 1 });
    active = false;
    t.equal((await admit({ key: k, limit: L, cost: 1 })).local, false, 'inactive: Redis answers');
    active = true;
    t.equal((await admit({ key: k, limit: L, cost: 1 })).local, true, 'active again: local');
    store.client.emit('reconnecting');
    t.equal(cache.size, 0, 'a reconnect (Redis may have lost its data) clears every entry');
    t.equal((await admit({ key: k, limit: L, cost: 1 })).local, false);
  });

  t.test('an entry refuses until its bucket could admit, by the monotonic clock, and never after', async (t) => {
    const k = key();
    const L: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 1, intervalMs: 60_000 };
    const sent = mono;
    const first = await admit({ key: k, limit: L, cost: 1 });
    t.same([first.local, first.r.allowed, first.r.remaining], [false, true, 0], 'admitted by Redis, 0 left < cost: remembered');
    const denied = await admit({ key: k, limit: L, cost: 1 });
    t.same([denied.local, denied.r.allowed], [true, false], 'the next one is refused here');
    // The bound on Redis's clock the cache uses: elapsed + 1 ms + 0.1%.
    t.equal(redisTimeBound(1000, 10_000), 1000 + 10_000 + 1 + 10);
    mono = sent + 30_000;
    const mid = await admit({ key: k, limit: L, cost: 1 });
    t.same([mid.local, mid.r.allowed], [true, false], 'half way: refused here');
    t.equal(mid.r.retryAfterMs, 60_000 - 30_000 - 1 - 30, 'Retry-After counts down with the local clock (less the margin)');
    // A token is due 60 s after the admission (Redis time); the cache's margin is 1 ms + 0.1%.
    mono = sent + 60_000 - 62;
    t.equal((await admit({ key: k, limit: L, cost: 1 })).local, true, '1 ms before the margin runs out: still refused here');
    mono = sent + 60_000 - 61;
    t.equal((await admit({ key: k, limit: L, cost: 1 })).local, false, 'from the instant a token could be due, Redis is asked');
  });
});
