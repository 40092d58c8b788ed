// @tier: pure
/**
 * The in-memory counter store: synchronous, exact (same decisions as the pure algorithms), atomic
 * over key and global buckets, LRU-bounded with an eviction callback that tells harmless
 * evictions (bucket already back at rest) from live ones (a reset in the subject's favour).
 */
import t from 'tap';
import fc from 'fast-check';
import { FakeClock } from '../../../shared/clock.js';
import {
  ALGORITHMS,
  createCounterStore,
  isPending,
  MemoryCounterStore,
  step,
  type AdmitRequest,
  type BucketState,
  type LimitParams,
} from '../../../limiter/admission/index.js';
import { limitArb, requestsArb, START_MS } from './models.js';

const tb = (burst: number, rate = 1, intervalMs = 60_000): LimitParams => ({ algorithm: 'token_bucket', rate, burst, intervalMs });

t.test('answers synchronously, with the same decisions as the pure algorithm', async (t) => {
  fc.assert(
    fc.property(
      limitArb(ALGORITHMS as LimitParams['algorithm'][]).chain((p) => fc.tuple(fc.constant(p), requestsArb(p))),
      ([p, reqs]) => {
        const clock = new FakeClock(START_MS);
        const store = new MemoryCounterStore({ clock, maxKeys: 10 });
        let state: BucketState | undefined;
        for (const r of reqs) {
          const now = clock.advance(r.dt);
          const got = store.admit({ key: 'k', limit: p, cost: r.cost });
          const want = step(p, state, now, r.cost);
          if (want.allowed) state = { ...want.newState };
          const fields = ['allowed', 'limit', 'remaining', 'resetAtMs', 'retryAfterMs'] as const;
          for (const f of fields) if (got[f] !== want[f]) throw new Error(`${f}: store ${got[f]}, algorithm ${want[f]}`);
        }
      },
    ),
    { numRuns: 200 },
  );
  const store = new MemoryCounterStore({ clock: new FakeClock() });
  const r = store.admit({ key: 'k', limit: tb(1), cost: 1 });
  t.equal(isPending(r), false, 'no promise');
  t.equal(r.allowed, true);
});

t.test('global bucket: both or neither across keys', async (t) => {
  const clock = new FakeClock(START_MS);
  const store = new MemoryCounterStore({ clock });
  const global = { name: 'global', limit: tb(25) };
  let admitted = 0;
  const perKey = new Map<string, number>();
  for (let i = 0; i < 100; i++) {
    const key = `user:${i % 5}`;
    const r = store.admit({ key, limit: tb(10), global, cost: 1 });
    if (r.allowed) {
      admitted++;
      perKey.set(key, (perKey.get(key) ?? 0) + 1);
    }
  }
  t.equal(admitted, 25, 'the global bucket holds all keys to its burst');
  t.equal(
    [...perKey.values()].reduce((a, b) => a + b, 0),
    25,
  );
  // Key buckets were charged only for admitted requests: each still has 10 − its admissions.
  for (const [key, n] of perKey) {
    const probe = store.admit({ key, limit: tb(10), cost: 0 });
    t.equal(probe.remaining, 10 - n, `${key} was charged only for its ${n} admitted requests`);
  }
  const denied = store.admit({ key: 'user:9', limit: tb(10), global, cost: 1 });
  t.same(
    { allowed: denied.allowed, binding: denied.binding, remaining: denied.remaining, limit: denied.limit },
    { allowed: false, binding: 'global', remaining: 0, limit: 10 },
  );
});

t.test('LRU bound: evictions counted, live ones told apart, an evicted subject starts full', async (t) => {
  const clock = new FakeClock(START_MS);
  // The store keeps no key strings, so the callback hears only whether the eviction was live;
  // which subject went is seen through has().
  const events: boolean[] = [];
  const store = new MemoryCounterStore({ clock, maxKeys: 3, onEvict: (live) => events.push(live) });
  const limit = tb(2, 1, 1000); // full again 1 s after one request
  for (const k of ['a', 'b', 'c']) store.admit({ key: k, limit, cost: 1 });
  t.equal(store.size, 3);
  store.admit({ key: 'a', limit, cost: 1 }); // a is now empty and most recent
  store.admit({ key: 'd', limit, cost: 1 }); // evicts b (least recent), still refilling
  t.equal(store.size, 3, 'bounded to maxKeys');
  t.same(events, [true], 'b evicted while not yet full: a live eviction');
  t.same(
    ['a', 'b', 'c', 'd'].map((k) => store.has(k)),
    [true, false, true, true],
    'the least recently used subject (b) is the one evicted',
  );
  t.equal(store.evictions, 1);
  t.equal(store.liveEvictions, 1);
  clock.advance(5000); // every bucket is back at rest
  store.admit({ key: 'e', limit, cost: 1 }); // evicts c, which had refilled: harmless
  t.equal(events[1], false, 'c evicted after refilling: not live');
  t.equal(store.has('c'), false);
  t.equal(store.liveEvictions, 1);
  // b was evicted while holding 1 token; back in the store it starts full again.
  store.admit({ key: 'f', limit, cost: 1 });
  store.admit({ key: 'g', limit, cost: 1 });
  const back = store.admit({ key: 'b', limit, cost: 1 });
  t.equal(back.remaining, 1, 'an evicted subject starts full again (2 − 1)');
});

t.test('createCounterStore picks the memory store without a Redis', async (t) => {
  const store = createCounterStore({ kind: 'auto', clock: new FakeClock() });
  t.equal(store.kind, 'memory');
  const req: AdmitRequest = { key: 'k', limit: tb(1), cost: 1 };
  const first = store.admit(req);
  const second = store.admit(req);
  t.equal(isPending(first) || isPending(second), false);
  if (!isPending(first) && !isPending(second)) {
    t.equal(first.allowed, true);
    t.equal(second.allowed, false);
    t.equal(second.retryAfterMs, 60_000, 'one token per minute');
  }
  await store.close();
});
