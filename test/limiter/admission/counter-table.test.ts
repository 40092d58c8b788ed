// @tier: pure
/**
 * The counter table against a reference model: a `Map` whose insertion order is the recency order
 * (a use deletes and re-adds), evicting its first key when full. Random sequences of lookups,
 * inserts, updates, peeks and clears over a small key pool (so keys come back, after eviction too)
 * with a small `maxKeys` and initial capacity (so the table grows, and the index is crowded enough
 * for long probe runs and backward shifts), checked after every step: the same keys present with
 * the same values, the same recency order, the same evictions with the same `live` flags.
 */
import t from 'tap';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { CounterTable, sharedTableBytes, type CounterTableOptions } from '../../../limiter/admission/counter-table.js';
import { createSharedCounters } from '../../../limiter/admission/shared-counters.js';
import { FakeClock } from '../../../shared/clock.js';
import { MemoryCounterStore, step, type BucketState, type LimitParams } from '../../../limiter/admission/index.js';
import { limitArb, START_MS } from './models.js';

const sha256hex = (s: string): string => createHash('sha256').update(s).digest('hex');

/** Keys of every shape the table fingerprints differently. */
const POOL: readonly string[] = [
  ...Array.from({ length: 12 }, (_, i) => `key:${sha256hex(`raw-${i}`)}`), // parsed digests
  ...Array.from({ length: 6 }, (_, i) => `user:${i}`),
  'ip:203.0.113.7',
  'ip:2001:db8::1',
  `key:${sha256hex('raw-0')}|/v1/uploads`, // a route bucket: hashed
  `key:${sha256hex('raw-1').toUpperCase()}`, // not lowercase hex: hashed
  `key:${sha256hex('raw-2').slice(0, 63)}g`, // not hex: hashed
  'user:1', // the raw key whose digest is key:sha256("user:1"): must stay a different subject
  `key:${sha256hex('user:1')}`,
  'user:\uD800', // lone surrogates: UTF-8 would turn both into U+FFFD
  'user:\uDBFF',
  '',
];
const KEYS = [...new Set(POOL)];

interface Value {
  alg: number;
  a: number;
  b: number;
  c: number;
  rest: number;
}

type Op =
  | { op: 'get'; k: number }
  | { op: 'peek'; k: number }
  | { op: 'insert'; k: number; v: Value }
  | { op: 'update'; k: number; v: Value }
  | { op: 'tick'; dt: number }
  | { op: 'clear' };

const valueArb: fc.Arbitrary<Value> = fc.record({
  alg: fc.integer({ min: 1, max: 4 }),
  // Integers up to 2^50 (the algorithms' units) and epoch ms: stored exactly.
  a: fc.integer({ min: 0, max: 2 ** 50 }),
  b: fc.integer({ min: 0, max: 2 ** 50 }),
  c: fc.integer({ min: 0, max: 2 ** 50 }),
  rest: fc.integer({ min: START_MS - 10_000, max: START_MS + 100_000 }),
});
const keyArb = fc.integer({ min: 0, max: KEYS.length - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('get' as const), k: keyArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('peek' as const), k: keyArb }) },
  { weight: 5, arbitrary: fc.record({ op: fc.constant('insert' as const), k: keyArb, v: valueArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('update' as const), k: keyArb, v: valueArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('tick' as const), dt: fc.integer({ min: 0, max: 20_000 }) }) },
  { weight: 1, arbitrary: fc.constant({ op: 'clear' as const }) },
);

function write(table: CounterTable, s: number, v: Value): void {
  table.alg[s] = v.alg;
  table.a[s] = v.a;
  table.b[s] = v.b;
  table.c[s] = v.c;
  table.rest[s] = v.rest;
}

function read(table: CounterTable, s: number): Value {
  return { alg: table.alg[s]!, a: table.a[s]!, b: table.b[s]!, c: table.c[s]!, rest: table.rest[s]! };
}

/** A table in arrays of its own, or laid out in a `SharedArrayBuffer` (at an offset, as the shared store does). */
function newTable(shared: boolean, opts: CounterTableOptions): CounterTable {
  if (!shared) return new CounterTable(opts);
  const buffer = new SharedArrayBuffer(64 + sharedTableBytes(opts.maxKeys));
  const table = new CounterTable({ ...opts, shared: { buffer, byteOffset: 64, init: true } });
  buffers.set(table, buffer);
  return table;
}
const buffers = new WeakMap<CounterTable, SharedArrayBuffer>();

/** Another table object over the same shared memory, with no seed given: it reads the seeds there. */
function newView(table: CounterTable, maxKeys: number): CounterTable {
  return new CounterTable({ maxKeys, shared: { buffer: buffers.get(table)!, byteOffset: 64, init: false } });
}

for (const shared of [false, true])
  t.test(
    `agrees with a Map-based LRU model: lookups, inserts, updates, evictions, growth${shared ? ' (shared memory)' : ''}`,
    async (t) => {
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 1, max: 4 }),
          fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
          fc.array(opArb, { maxLength: 150 }),
          (maxKeys, initialCapacity, seed, ops) => {
            const evicted: boolean[] = [];
            const table = newTable(shared, { maxKeys, initialCapacity, seed, onEvict: (live) => evicted.push(live) });
            // A second view of the same shared table, as another thread attaches: it must see it all.
            const view = shared ? newView(table, maxKeys) : table;
            const model = new Map<string, Value>();
            const modelEvicted: boolean[] = [];
            let now = START_MS;
            const use = (key: string): void => {
              const v = model.get(key)!;
              model.delete(key);
              model.set(key, v);
            };
            for (const o of ops) {
              switch (o.op) {
                case 'tick':
                  now += o.dt;
                  break;
                case 'clear':
                  table.clear();
                  model.clear();
                  break;
                case 'get': {
                  const key = KEYS[o.k]!;
                  const s = table.get(key);
                  if (s >= 0 !== model.has(key)) throw new Error(`get ${JSON.stringify(key)}: table ${s}, model ${model.has(key)}`);
                  if (s >= 0) use(key);
                  break;
                }
                case 'peek': {
                  const key = KEYS[o.k]!;
                  if (table.peek(key) >= 0 !== model.has(key)) throw new Error(`peek ${JSON.stringify(key)}`);
                  break;
                }
                case 'insert': {
                  const key = KEYS[o.k]!;
                  const s = table.insert(key, now);
                  if (model.has(key)) use(key);
                  else if (model.size === maxKeys) {
                    const [victim, v] = model.entries().next().value!;
                    model.delete(victim);
                    modelEvicted.push(v.rest > now);
                  }
                  write(table, s, o.v);
                  model.set(key, o.v);
                  break;
                }
                case 'update': {
                  // The store's path for a known subject: get, then write the columns.
                  const key = KEYS[o.k]!;
                  const s = table.get(key);
                  if (s >= 0) {
                    use(key);
                    write(table, s, o.v);
                    model.set(key, o.v);
                  }
                  break;
                }
              }
              if (view.size !== model.size) throw new Error(`size: table ${view.size}, model ${model.size}`);
              if (view.capacity > maxKeys || view.size > view.capacity) throw new Error(`capacity ${view.capacity}`);
              const slots: number[] = [];
              for (const key of KEYS) {
                const s = view.peek(key);
                const want = model.get(key);
                if (s >= 0 !== (want !== undefined))
                  throw new Error(`${JSON.stringify(key)}: table slot ${s}, model ${JSON.stringify(want)}`);
                if (want !== undefined) {
                  const got = read(view, s);
                  for (const f of ['alg', 'a', 'b', 'c', 'rest'] as const) {
                    if (got[f] !== want[f]) throw new Error(`${JSON.stringify(key)}.${f}: table ${got[f]}, model ${want[f]}`);
                  }
                }
              }
              for (const key of [...model.keys()].reverse()) slots.push(view.peek(key));
              const recency = view.recency();
              if (recency.join() !== slots.join()) throw new Error(`recency: table ${recency.join()}, model ${slots.join()}`);
              if (evicted.join() !== modelEvicted.join())
                throw new Error(`evictions: table ${evicted.join()}, model ${modelEvicted.join()}`);
            }
            if (view.evictions !== modelEvicted.length) throw new Error('eviction count');
            if (view.liveEvictions !== modelEvicted.filter(Boolean).length) throw new Error('live eviction count');
          },
        ),
        { numRuns: 400 },
      );
      t.pass('400 random sequences agreed with the model');
    },
  );

t.test('every key shape is its own subject', async (t) => {
  const table = new CounterTable({ maxKeys: KEYS.length });
  const slots = KEYS.map((k) => table.insert(k, START_MS));
  t.equal(new Set(slots).size, KEYS.length, `${KEYS.length} keys, ${KEYS.length} slots`);
  t.same(
    KEYS.map((k) => table.peek(k)),
    slots,
    'each found again',
  );
  t.not(table.peek('user:1'), table.peek(`key:${sha256hex('user:1')}`), 'an API key named after a subject is not that subject');
  t.not(table.peek('user:\uD800'), table.peek('user:\uDBFF'), 'strings UTF-8 would blur stay apart');
});

t.test('no accidental fingerprint collisions over 300,000 subjects of each shape', async (t) => {
  const n = 100_000;
  const table = new CounterTable({ maxKeys: 3 * n });
  for (let i = 0; i < n; i++) {
    table.insert(`key:${sha256hex(`c-${i}`)}`, START_MS);
    table.insert(`ip:10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`, START_MS);
    table.insert(`user:${i}`, START_MS);
  }
  t.equal(table.size, 3 * n, 'every subject got a slot of its own');
  t.equal(table.evictions, 0);
});

t.test('bounded to maxKeys: the least recently used go first, growth stops at the bound', async (t) => {
  const max = 1000;
  const evictedLive: boolean[] = [];
  const table = new CounterTable({ maxKeys: max, initialCapacity: 16, onEvict: (live) => evictedLive.push(live) });
  const key = (i: number): string => `key:${sha256hex(String(i))}`;
  for (let i = 0; i < max; i++) {
    const s = table.insert(key(i), START_MS);
    table.rest[s] = i % 2 === 0 ? START_MS + 1 : START_MS; // even subjects still refilling
  }
  t.equal(table.capacity, max, 'grew by doubling up to maxKeys, not beyond');
  t.equal(table.evictions, 0);
  // Use the first 100 again: they become the most recent, so the next 100 are the oldest.
  for (let i = 0; i < 100; i++) table.get(key(i));
  for (let i = max; i < max + 300; i++) table.insert(key(i), START_MS);
  t.equal(table.size, max, 'never above maxKeys');
  t.equal(table.capacity, max);
  t.equal(table.evictions, 300);
  t.equal(evictedLive.length, 300);
  t.equal(table.liveEvictions, 150, 'live told apart: the even half was still refilling');
  const present = (i: number): boolean => table.peek(key(i)) >= 0;
  t.ok(Array.from({ length: 100 }, (_, i) => i).every(present), 'the recently used first 100 stayed');
  t.notOk(Array.from({ length: 300 }, (_, i) => 100 + i).some(present), 'the 300 least recently used (100..399) went, in order');
  t.ok(Array.from({ length: 900 }, (_, i) => 400 + i).every(present), 'everything newer stayed');
  t.ok(table.bytes / max < 80, `${(table.bytes / max).toFixed(1)} bytes allocated per slot at the bound`);
  table.clear();
  t.equal(table.size, 0);
  t.equal(table.capacity, 16, 'clear goes back to the initial allocation');
  t.equal(table.peek(key(500)), -1);
});

t.test('rejects a bound it cannot index', async (t) => {
  t.throws(() => new CounterTable({ maxKeys: 0 }), RangeError);
  t.throws(() => new CounterTable({ maxKeys: 2 ** 28 + 1 }), RangeError);
  t.throws(() => new CounterTable({ maxKeys: 10, initialCapacity: 0 }), RangeError);
  const buffer = new SharedArrayBuffer(sharedTableBytes(10));
  t.throws(() => new CounterTable({ maxKeys: 11, shared: { buffer, byteOffset: 0, init: true } }), RangeError, 'a region too small');
  t.throws(
    () => new CounterTable({ maxKeys: 10, shared: { buffer, byteOffset: 4, init: true } }),
    RangeError,
    'an offset Float64 columns cannot start at',
  );
  new CounterTable({ maxKeys: 10, shared: { buffer, byteOffset: 0, init: true } });
  t.throws(
    () => new CounterTable({ maxKeys: 9, shared: { buffer, byteOffset: 0, init: false } }),
    /holds 10 keys, not 9/,
    'attached with another bound',
  );
});

t.test('a shared table is laid out at its bound and never grows; clear empties it in place', async (t) => {
  const max = 100;
  const table = newTable(true, { maxKeys: max, initialCapacity: 4 });
  t.equal(table.capacity, max, 'capacity is the bound from the start');
  const other = newView(table, max);
  const key = (i: number): string => `user:${i}`;
  for (let i = 0; i < 150; i++) {
    const s = table.insert(key(i), START_MS);
    table.a[s] = i;
  }
  t.equal(other.size, max, 'the other view sees the size');
  t.equal(other.evictions, 50, 'and the evictions');
  t.equal(other.a[other.peek(key(120))], 120, 'and the state, in the same slot');
  other.insert(key(999), START_MS);
  t.equal(table.recency()[0], table.peek(key(999)), 'an insert by the other view is the most recent for both');
  t.equal(table.evictions, 51);
  other.clear();
  t.equal(table.size, 0);
  t.equal(table.peek(key(120)), -1, 'cleared for both');
  t.equal(table.capacity, max);
});

t.test('a table that does not evict refuses a key beyond its bound', async (t) => {
  const table = new CounterTable({ maxKeys: 2, evict: false });
  t.ok(table.insert('global', START_MS) >= 0);
  t.ok(table.insert('global:b', START_MS) >= 0);
  t.equal(table.insert('global:c', START_MS), -1);
  t.ok(table.insert('global', START_MS) >= 0, 'a key it holds is still found');
  t.equal(table.evictions, 0);
});

for (const shared of [false, true])
  t.test(
    `the store over the table decides as the pure algorithm does per subject, with LRU eviction${shared ? ' (shared memory)' : ''}`,
    async (t) => {
      fc.assert(
        fc.property(
          limitArb(['token_bucket', 'sliding_window', 'leaky_bucket', 'fixed_window']),
          fc.integer({ min: 1, max: 6 }),
          fc.array(
            fc.record({ k: fc.integer({ min: 0, max: 9 }), dt: fc.integer({ min: 0, max: 3000 }), cost: fc.integer({ min: 0, max: 3 }) }),
            {
              maxLength: 120,
            },
          ),
          (limit: LimitParams, maxKeys, reqs) => {
            const clock = new FakeClock(START_MS);
            const live: boolean[] = [];
            const store = shared
              ? new MemoryCounterStore({ clock, shared: createSharedCounters({ maxKeys }), onEvict: (l) => live.push(l) })
              : new MemoryCounterStore({ clock, maxKeys, initialCapacity: 1, onEvict: (l) => live.push(l) });
            // The model: per-subject state from the pure algorithm, in a Map kept in recency order.
            const model = new Map<string, { state: BucketState; rest: number }>();
            const modelLive: boolean[] = [];
            for (const r of reqs) {
              const now = clock.advance(r.dt);
              const key = r.k < 5 ? `key:${sha256hex(String(r.k))}` : `user:${r.k}`;
              const held = model.get(key);
              if (held) {
                model.delete(key);
                model.set(key, held);
              }
              const want = step(limit, held?.state, now, r.cost);
              if (want.allowed) {
                if (!held && model.size === maxKeys) {
                  const [victim, v] = model.entries().next().value!;
                  model.delete(victim);
                  modelLive.push(v.rest > now);
                }
                model.set(key, { state: { ...want.newState }, rest: want.resetAtMs });
              }
              const got = store.admit({ key, limit, cost: r.cost });
              for (const f of ['allowed', 'limit', 'remaining', 'resetAtMs', 'retryAfterMs'] as const) {
                if (got[f] !== want[f]) throw new Error(`${key} ${f}: store ${got[f]}, model ${want[f]}`);
              }
              if (store.size !== model.size) throw new Error(`size: store ${store.size}, model ${model.size}`);
              if (live.join() !== modelLive.join()) throw new Error(`evictions: store ${live.join()}, model ${modelLive.join()}`);
            }
          },
        ),
        { numRuns: 300 },
      );
      t.pass('300 random request sequences agreed');
    },
  );
