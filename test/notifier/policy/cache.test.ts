// @tier: pure
/**
 * The preference cache of one replica (notifier/preferences/cache.ts) under a fake clock, with a
 * loader the test answers by hand: hits within the TTL, misses after it, nothing cached while the
 * replica does not hear writes, invalidation, a load racing an invalidation or a clear (what it
 * read is answered but not stored), the stale entry or `unavailable` when a load fails, eviction
 * of the oldest entry, and a loader given to one call.
 */
import t from 'tap';
import fc from 'fast-check';
import { FakeClock } from '../../../shared/clock.js';
import { PreferenceCache, type PreferenceCacheOptions } from '../../../notifier/preferences/cache.js';
import type { PreferenceDoc } from '../../../notifier/preferences/document.js';

const TTL = 30_000;
const START = Date.parse('2026-01-15T12:00:00Z');

/** A distinct document per label, so that which read was returned or stored shows. */
function doc(label: string): PreferenceDoc {
  return { types: { [label]: { push: false } } };
}

interface Call {
  ids: string[];
  answer: (docs: Record<string, PreferenceDoc>) => Promise<void>;
  fail: (err: Error) => Promise<void>;
}

/** Flushes pending promise callbacks (no timers: a macrotask hop, not a sleep). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A loader that records each call and waits for the test to answer it. */
function handLoader(): { calls: Call[]; load: PreferenceCacheOptions['load'] } {
  const calls: Call[] = [];
  const load: PreferenceCacheOptions['load'] = (ids) =>
    new Promise((resolve, reject) => {
      calls.push({
        ids: [...ids],
        answer: async (docs) => {
          resolve(new Map(Object.entries(docs)));
          await settle();
        },
        fail: async (err) => {
          reject(err);
          await settle();
        },
      });
    });
  return { calls, load };
}

function setup(over: Partial<PreferenceCacheOptions> = {}) {
  const clock = new FakeClock(START);
  const loader = handLoader();
  let listening = true;
  const cache = new PreferenceCache({
    ttlMs: TTL,
    maxEntries: 100,
    clock,
    listening: () => listening,
    load: loader.load,
    ...over,
  });
  const lastCall = (): Call => {
    const c = loader.calls.at(-1);
    if (!c) throw new Error('no load was made');
    return c;
  };
  return {
    clock,
    cache,
    calls: loader.calls,
    lastCall,
    setListening: (on: boolean) => {
      listening = on;
    },
    /** get() answered by the loader with `docs` (the loader must be asked). */
    async fetch(ids: string[], docs: Record<string, PreferenceDoc>) {
      const p = cache.get(ids);
      await lastCall().answer(docs);
      return p;
    },
  };
}

t.test('a hit within the TTL makes no load; at the TTL it is a miss', async (t) => {
  const s = setup();
  const first = s.cache.get(['u']);
  t.equal(s.calls.length, 1);
  t.same(s.lastCall().ids, ['u']);
  await s.lastCall().answer({ u: doc('v1') });
  t.same(await first, new Map([['u', doc('v1')]]));
  t.equal(s.cache.size, 1);

  s.clock.advance(TTL - 1);
  t.same(await s.cache.get(['u']), new Map([['u', doc('v1')]]), 'a hit');
  t.equal(s.calls.length, 1, 'no load for a hit');

  s.clock.advance(1);
  const second = s.cache.get(['u']);
  t.equal(s.calls.length, 2, 'at the TTL: a miss');
  await s.lastCall().answer({ u: doc('v2') });
  t.same(await second, new Map([['u', doc('v2')]]));
  t.same(await s.cache.get(['u']), new Map([['u', doc('v2')]]), 'the new read is cached');
  t.equal(s.calls.length, 2);
});

t.test('only the missing users are loaded, each once', async (t) => {
  const s = setup();
  await s.fetch(['u'], { u: doc('u') });
  const p = s.cache.get(['u', 'v', 'w', 'v', 'u']);
  t.same(s.lastCall().ids, ['v', 'w'], 'the cached user is not asked, duplicates once');
  await s.lastCall().answer({ v: doc('v'), w: doc('w') });
  t.same(
    await p,
    new Map([
      ['u', doc('u')],
      ['v', doc('v')],
      ['w', doc('w')],
    ]),
  );
  t.equal(s.calls.length, 2);
});

t.test('nothing is cached while the replica does not hear preference writes', async (t) => {
  const s = setup();
  s.setListening(false);
  t.same(await s.fetch(['u'], { u: doc('v1') }), new Map([['u', doc('v1')]]), 'the read is still answered');
  t.equal(s.cache.size, 0);
  t.same(await s.fetch(['u'], { u: doc('v2') }), new Map([['u', doc('v2')]]));
  t.equal(s.calls.length, 2, 'every get loads');
  t.equal(s.cache.size, 0);

  s.setListening(true);
  await s.fetch(['u'], { u: doc('v3') });
  t.equal(s.cache.size, 1, 'listening again: cached');

  const p = s.cache.get(['v']);
  s.setListening(false);
  await s.lastCall().answer({ v: doc('v') });
  t.same(await p, new Map([['v', doc('v')]]));
  t.notOk(s.cache.has('v'), 'a load that ends while not listening is not stored');
});

t.test('invalidate drops the entry', async (t) => {
  const s = setup();
  await s.fetch(['u', 'v'], { u: doc('u1'), v: doc('v1') });
  t.equal(s.cache.size, 2);
  s.cache.invalidate('u');
  t.equal(s.cache.size, 1);
  t.notOk(s.cache.has('u'));
  t.ok(s.cache.has('v'));
  const p = s.cache.get(['u', 'v']);
  t.same(s.lastCall().ids, ['u'], 'only the invalidated user is loaded again');
  await s.lastCall().answer({ u: doc('u2') });
  t.same(
    await p,
    new Map([
      ['v', doc('v1')],
      ['u', doc('u2')],
    ]),
  );
  s.cache.invalidate('nobody');
  t.equal(s.cache.size, 2, 'invalidating a user without an entry changes nothing');
});

t.test('a load that began before an invalidation of its user does not store it; other users of that load are stored', async (t) => {
  const s = setup();
  const p = s.cache.get(['u', 'v']);
  t.same(s.lastCall().ids, ['u', 'v']);
  s.cache.invalidate('u'); // the write was committed after the load read `u`
  await s.lastCall().answer({ u: doc('u-before-write'), v: doc('v1') });
  t.same(
    await p,
    new Map([
      ['u', doc('u-before-write')],
      ['v', doc('v1')],
    ]),
    'the caller still gets what was read',
  );
  t.notOk(s.cache.has('u'), 'u was not stored');
  t.ok(s.cache.has('v'), 'v was stored');

  const next = s.cache.get(['u', 'v']);
  t.equal(s.calls.length, 2, 'the next get loads again');
  t.same(s.lastCall().ids, ['u'], 'u only: v is a hit');
  await s.lastCall().answer({ u: doc('u-after-write') });
  t.same(
    await next,
    new Map([
      ['v', doc('v1')],
      ['u', doc('u-after-write')],
    ]),
  );
  t.ok(s.cache.has('u'), 'a load that began after the invalidation is stored');
});

t.test('two loads around an invalidation: only the one begun after it is stored, in either order of answers', async (t) => {
  for (const order of ['older answers first', 'newer answers first'] as const) {
    const s = setup();
    const older = s.cache.get(['u']);
    const olderCall = s.lastCall();
    s.cache.invalidate('u');
    const newer = s.cache.get(['u']);
    const newerCall = s.lastCall();
    t.equal(s.calls.length, 2, `${order}: two loads`);
    if (order === 'older answers first') {
      await olderCall.answer({ u: doc('old') });
      await newerCall.answer({ u: doc('new') });
    } else {
      await newerCall.answer({ u: doc('new') });
      await olderCall.answer({ u: doc('old') });
    }
    t.same(await older, new Map([['u', doc('old')]]), `${order}: the older caller gets its read`);
    t.same(await newer, new Map([['u', doc('new')]]), `${order}: the newer caller gets its read`);
    t.same(await s.cache.get(['u']), new Map([['u', doc('new')]]), `${order}: the newer read is cached`);
    t.equal(s.calls.length, 2, `${order}: a hit`);
  }
});

t.test('an invalidation while another user is loading still guards a later load of the invalidated user', async (t) => {
  const s = setup();
  const slow = s.cache.get(['v']); // keeps a load in flight
  const u = s.cache.get(['u']);
  const uCall = s.lastCall();
  s.cache.invalidate('u');
  await uCall.answer({ u: doc('u-before-write') });
  await u;
  t.notOk(s.cache.has('u'), 'u is not stored');
  await s.calls[0]!.answer({ v: doc('v') });
  await slow;
  t.ok(s.cache.has('v'));
});

t.test('clear() drops every entry, and a load begun before it stores nothing', async (t) => {
  const s = setup();
  await s.fetch(['a'], { a: doc('a') });
  const p = s.cache.get(['u', 'v']);
  s.cache.clear();
  t.equal(s.cache.size, 0, 'cleared');
  await s.lastCall().answer({ u: doc('u'), v: doc('v') });
  t.same(
    await p,
    new Map([
      ['u', doc('u')],
      ['v', doc('v')],
    ]),
    'the caller still gets what was read',
  );
  t.equal(s.cache.size, 0, 'nothing from that load is stored');

  const again = s.cache.get(['u', 'v', 'a']);
  t.same(s.lastCall().ids, ['u', 'v', 'a'], 'all loaded again');
  await s.lastCall().answer({ u: doc('u2'), v: doc('v2'), a: doc('a2') });
  await again;
  t.equal(s.cache.size, 3, 'a load begun after the clear is stored');
});

t.test('a load that fails: the stale entry if there is one, even past the TTL, else unavailable', async (t) => {
  const s = setup();
  await s.fetch(['u'], { u: doc('u1') });
  s.clock.advance(10 * TTL);
  const p = s.cache.get(['u', 'v']);
  t.same(s.lastCall().ids, ['u', 'v'], 'the expired entry is loaded again');
  await s.lastCall().fail(new Error('connection refused'));
  t.same(
    await p,
    new Map<string, PreferenceDoc | 'unavailable'>([
      ['u', doc('u1')],
      ['v', 'unavailable'],
    ]),
  );
  t.ok(s.cache.has('u'), 'the stale entry is kept for the next failure');

  s.cache.invalidate('u');
  const q = s.cache.get(['u']);
  await s.lastCall().fail(new Error('connection refused'));
  t.same(await q, new Map([['u', 'unavailable']]), 'an invalidated entry is never used as a fallback');

  const throwing = new PreferenceCache({
    ttlMs: TTL,
    maxEntries: 10,
    clock: s.clock,
    listening: () => true,
    load: () => {
      throw new Error('synchronous');
    },
  });
  t.same(await throwing.get(['w']), new Map([['w', 'unavailable']]), 'a loader throwing before its promise: unavailable');

  // The failed load left nothing in flight: a later invalidation and load behave normally.
  await s.fetch(['u'], { u: doc('u2') });
  t.same(await s.cache.get(['u']), new Map([['u', doc('u2')]]));
});

t.test('maxEntries: the oldest stored entry is evicted', async (t) => {
  const s = setup({ maxEntries: 2 });
  await s.fetch(['a'], { a: doc('a') });
  await s.fetch(['b'], { b: doc('b') });
  await s.fetch(['c'], { c: doc('c') });
  t.equal(s.cache.size, 2);
  t.notOk(s.cache.has('a'), 'the oldest went');
  t.ok(s.cache.has('b'));
  t.ok(s.cache.has('c'));

  // A re-stored entry counts as the newest.
  s.cache.invalidate('b');
  await s.fetch(['b'], { b: doc('b2') });
  await s.fetch(['d'], { d: doc('d') });
  t.notOk(s.cache.has('c'), 'c was the oldest after b was stored again');
  t.ok(s.cache.has('b'));
  t.ok(s.cache.has('d'));

  const one = setup({ maxEntries: 2 });
  await one.fetch(['x', 'y', 'z'], { x: doc('x'), y: doc('y'), z: doc('z') });
  t.equal(one.cache.size, 2, 'one load of three users keeps two');
  t.notOk(one.cache.has('x'));
});

t.test('get(ids, load) uses the loader given', async (t) => {
  const s = setup();
  const other = handLoader();
  const p = s.cache.get(['u', 'v'], other.load);
  t.equal(s.calls.length, 0, 'the default loader is not asked');
  t.equal(other.calls.length, 1);
  t.same(other.calls[0]!.ids, ['u', 'v']);
  await other.calls[0]!.answer({ u: doc('u'), v: doc('v') });
  t.same(
    await p,
    new Map([
      ['u', doc('u')],
      ['v', doc('v')],
    ]),
  );
  t.same(
    await s.cache.get(['u', 'v']),
    new Map([
      ['u', doc('u')],
      ['v', doc('v')],
    ]),
    'what it read is cached like any read',
  );
  t.equal(s.calls.length, 0);
  t.equal(other.calls.length, 1);
});

t.test('property: with every write notified, a cached entry is never older than its user’s last write', async (t) => {
  type Op =
    | { kind: 'get'; ids: string[] }
    | { kind: 'write'; u: string }
    | { kind: 'clear' }
    | { kind: 'answer'; pick: number; readAtAnswer: boolean }
    | { kind: 'fail'; pick: number };
  const user = fc.constantFrom('a', 'b', 'c');
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('get' as const), ids: fc.uniqueArray(user, { minLength: 1, maxLength: 3 }) }),
    fc.record({ kind: fc.constant('write' as const), u: user }),
    fc.record({ kind: fc.constant('clear' as const) }),
    fc.record({ kind: fc.constant('answer' as const), pick: fc.nat(), readAtAnswer: fc.boolean() }),
    fc.record({ kind: fc.constant('fail' as const), pick: fc.nat() }),
  );
  const version = (d: PreferenceDoc | 'unavailable' | undefined): number | string =>
    d === undefined || d === 'unavailable' ? String(d) : Number(Object.keys(d.types)[0]!.slice(1));

  await fc.assert(
    fc.asyncProperty(fc.array(op, { maxLength: 40 }), fc.integer({ min: 1, max: 3 }), async (ops, maxEntries) => {
      const db: Record<string, number> = { a: 0, b: 0, c: 0 };
      // The worst case for a load is to read when it begins; `readAtAnswer` reads at the end instead.
      const pending: { ids: readonly string[]; snapshot: Record<string, number>; answer: (fresh: boolean) => void; fail: () => void }[] =
        [];
      const load: PreferenceCacheOptions['load'] = (ids) =>
        new Promise((resolve, reject) => {
          const snapshot = { ...db };
          pending.push({
            ids,
            snapshot,
            answer: (fresh) => resolve(new Map(ids.map((id) => [id, doc(`v${(fresh ? db : snapshot)[id]!}`)]))),
            fail: () => reject(new Error('store down')),
          });
        });
      const cache = new PreferenceCache({ ttlMs: 1e12, maxEntries, clock: new FakeClock(START), listening: () => true, load });
      const gets: Promise<unknown>[] = [];
      for (const o of ops) {
        if (o.kind === 'get') gets.push(cache.get(o.ids));
        else if (o.kind === 'write') {
          db[o.u]!++;
          cache.invalidate(o.u); // the NOTIFY of the write
        } else if (o.kind === 'clear') cache.clear();
        else if (pending.length > 0) {
          const [p] = pending.splice(o.pick % pending.length, 1);
          if (o.kind === 'answer') p!.answer(o.readAtAnswer);
          else p!.fail();
          await settle();
        }
        for (const u of ['a', 'b', 'c']) {
          if (!cache.has(u)) continue;
          const before = pending.length;
          const got = (await cache.get([u])).get(u);
          if (pending.length !== before) throw new Error(`a held entry of ${u} was not a hit`);
          if (version(got) !== db[u])
            throw new Error(`${u}: cached v${String(version(got))}, stored v${db[u]!} (ops ${JSON.stringify(ops)})`);
        }
        if (cache.size > maxEntries) throw new Error(`size ${cache.size} over ${maxEntries}`);
      }
      for (const p of pending.splice(0)) p.answer(false);
      await Promise.all(gets);
      for (const u of ['a', 'b', 'c']) {
        if (cache.has(u) && version((await cache.get([u])).get(u)) !== db[u]) throw new Error(`${u}: stale after the last answers`);
      }
    }),
    { numRuns: 500 },
  );
  t.pass('500 random interleavings of gets, writes, clears, answers and failures');
});
