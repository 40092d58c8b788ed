// @tier: pure
/**
 * limiter/quota-cache.ts as a working set: a lookup that races deltas never installs the older
 * record (property over every interleaving of one key's history, the lookup's read and the
 * deltas the sidecar applies meanwhile), deltas for keys not held are dropped, and a held record
 * is never replaced by an older one.
 */
import t from 'tap';
import fc from 'fast-check';
import { create } from '@bufbuild/protobuf';
import { SnapshotSchema, type Snapshot } from '../../../proto/gen/quota/v1/quota_pb.js';
import { QuotaCache } from '../../../limiter/quota-cache.js';
import { deltaOf, keyHistory, plansOnly, rec } from './versioned-records.js';

const K = 'key:' + 'a'.repeat(64);

/** The delta of version v: K written with `rate`, or deleted (null). */
const delta = (v: number, rate: number | null): Snapshot => deltaOf(K, v, rate);

t.test('a lookup racing deltas installs the newer of its answer and what the deltas brought', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.option(fc.integer({ min: 1, max: 100 }), { nil: null }), { minLength: 1, maxLength: 24 }),
      fc.nat(),
      fc.nat(),
      fc.nat(),
      (ops, bSeed, lSeed, dSeed) => {
        const { n, state, written, b, L, d } = keyHistory(ops, bSeed, lSeed, dSeed);
        const cache = new QuotaCache(10);
        cache.apply(plansOnly(0), 0);
        for (let v = 1; v <= b; v++) cache.apply(delta(v, state[v]!), 0);
        if (cache.has(K)) return false; // never looked up: deltas for it were dropped
        cache.beginLookup(K);
        for (let v = b + 1; v <= d; v++) cache.apply(delta(v, state[v]!), 0);
        const found = state[L] === null ? undefined : rec(K, state[L]!, written[L]!);
        const got = cache.finishLookup(K, found, L);
        const truth = state[Math.max(L, d)];
        if ((got?.limit?.rate ?? null) !== truth) return false;
        // Installed: kept current by every later change (deltas up to the read are already in it)
        // until one deletes it; not held (never installed, or deleted since), later creations are
        // dropped: the next request looks it up.
        let expected = truth;
        for (let v = d + 1; v <= n; v++) {
          cache.apply(delta(v, state[v]!), 0);
          if (expected !== null && v > L) expected = state[v]!;
        }
        const held = cache.has(K) ? cache.record(K)!.limit!.rate : null;
        return held === expected;
      },
    ),
    { numRuns: 2000 },
  );
  t.pass('2000 interleavings');
});

t.test('a held record is replaced only by one at least as new; a delete older than it is ignored', async (t) => {
  const cache = new QuotaCache(10);
  cache.apply(plansOnly(1), 0);
  cache.beginLookup(K);
  // The lookup read version 5 (the record written at 5); the sidecar is still at 1.
  t.equal(cache.finishLookup(K, rec(K, 50, 5), 5)?.limit?.rate, 50);
  cache.apply(delta(2, 20), 0);
  t.equal(cache.record(K)?.limit?.rate, 50, 'the delta of version 2 is older than the record held');
  cache.apply(delta(3, null), 0);
  t.equal(cache.record(K)?.limit?.rate, 50, 'so is the delete at 3');
  cache.apply(create(SnapshotSchema, { version: 5n, delta: true, baseVersion: 3n, quotas: [rec(K, 50, 5)] }), 0);
  cache.apply(delta(6, null), 0);
  t.notOk(cache.has(K), 'a delete after it removes it');
});

t.test('deltas for keys not held are dropped; a creation is reported (the negative cache forgets it)', async (t) => {
  const cache = new QuotaCache(10);
  const unheld: string[] = [];
  cache.onUnheld = (s, created) => unheld.push(`${s}:${created}`);
  cache.apply(plansOnly(1), 0);
  cache.apply(delta(2, 7), 0);
  t.notOk(cache.has(K), 'not held');
  cache.apply(delta(3, null), 0);
  t.strictSame(unheld, [`${K}:true`, `${K}:false`]);
  t.equal(cache.held, 0);
  t.equal(cache.size, 1, 'the plan');
});

t.test('a full snapshot during a lookup: its answer serves the request but is not kept', async (t) => {
  const cache = new QuotaCache(10);
  cache.apply(plansOnly(1), 0);
  cache.beginLookup(K);
  cache.apply(plansOnly(9), 0);
  t.equal(cache.finishLookup(K, rec(K, 4, 3), 3)?.limit?.rate, 4);
  t.notOk(cache.has(K), 'changes to it may have been missed: looked up again next time');
});

t.test('the bound: least recently used records are evicted; plans are never', async (t) => {
  const cache = new QuotaCache(3);
  cache.apply(plansOnly(1), 0);
  for (let i = 0; i < 5; i++) {
    const s = `key:${String(i).repeat(64)}`;
    cache.beginLookup(s);
    cache.finishLookup(s, rec(s, i + 1, 1), 1);
  }
  t.equal(cache.held, 3);
  t.equal(cache.evictions, 2);
  t.ok(cache.plan('free'));
  t.notOk(cache.has(`key:${'0'.repeat(64)}`), 'the oldest went first');
});
