/**
 * When lookups stop asking (limiter/quota-lookup.ts): one call that outlasts its deadline fails
 * only its own keys; {@link FAIL_FAST_AFTER} failed calls in a row make new lookups fail at once
 * for `failFastMs`, after which keys are asked for again; an answer in between starts the count
 * over. The control plane's side is the `call` the sidecar injects (QuotaSync.lookup in
 * production), here a function that answers or fails as each case needs, on a fake clock.
 */
import t from 'tap';
import { FakeClock } from '../../shared/clock.js';
import { QuotaCache } from '../../limiter/quota-cache.js';
import { FAIL_FAST_AFTER, QuotaLookup, type LookupAnswer } from '../../limiter/quota-lookup.js';
import { testLogger } from '../harness/log.js';
import { quota } from './sync/fake-control-plane.js';

const FAIL_FAST_MS = 1000;

/** A lookup whose every batch runs when the test says (`flush`), over a call that fails on demand. */
function setUp() {
  const clock = new FakeClock(Date.parse('2026-11-28T08:00:00Z'));
  const cache = new QuotaCache(100);
  let pending: (() => void)[] = [];
  let failNext = 0;
  const calls: string[][] = [];
  const call = async (subjects: string[]): Promise<LookupAnswer> => {
    calls.push(subjects);
    if (failNext > 0) {
      failNext--;
      throw new Error('4 DEADLINE_EXCEEDED: Deadline exceeded after 1.012s');
    }
    return { quotas: subjects.map((s) => quota(s, 10)), unknown: [], version: 1 };
  };
  const lookup = new QuotaLookup({
    cache,
    call,
    clock,
    log: testLogger(),
    negativeMax: 100,
    negativeTtlMs: 60_000,
    budget: 0,
    budgetWindowMs: 60_000,
    failFastMs: FAIL_FAST_MS,
    defer: (fn) => pending.push(fn),
  });
  /** Sends what was asked since the last flush, one batch, and settles it. */
  const flush = async (): Promise<void> => {
    const run = pending;
    pending = [];
    for (const fn of run) fn();
    // The call is async: let its answer (or its failure) be applied.
    await new Promise((r) => setImmediate(r));
  };
  /** One key asked for and its batch sent: whether a record came back. */
  const ask = async (subject: string): Promise<boolean> => {
    const found = lookup.find(subject);
    await flush();
    return (await found) !== undefined;
  };
  return {
    clock,
    calls,
    lookup,
    ask,
    failing: (n: number) => (failNext = n),
  };
}

t.test('one call that fails does not stop the next lookup', async (t) => {
  const s = setUp();
  t.ok(await s.ask('key:a'), 'a first key is found');
  s.failing(1);
  t.notOk(await s.ask('key:b'), "the failed call's key gets no record (the decoy 429)");
  t.ok(await s.ask('key:c'), 'the very next key is asked for, and found');
  t.equal(s.calls.length, 3, 'each key was a call');
  t.equal(s.lookup.counts.failed, 1, 'one failed lookup counted');
  t.ok(await s.ask('key:b'), 'the failed key is asked for again (nothing was cached about it)');
});

t.test(`${FAIL_FAST_AFTER} failed calls in a row: lookups fail at once until failFastMs has passed`, async (t) => {
  const s = setUp();
  s.failing(FAIL_FAST_AFTER);
  for (let i = 0; i < FAIL_FAST_AFTER; i++) t.notOk(await s.ask(`key:down${i}`), `failed call ${i + 1}`);
  const callsBefore = s.calls.length;
  t.equal(s.lookup.find('key:x'), undefined, 'the next key is refused at once, without a promise');
  t.equal(s.calls.length, callsBefore, 'and without a call');
  s.clock.advance(FAIL_FAST_MS - 1);
  t.equal(s.lookup.find('key:x'), undefined, 'still refused just before failFastMs ends');
  s.clock.advance(1);
  t.ok(await s.ask('key:x'), 'asked for again once it ended, and found');
  t.equal(s.lookup.counts.failed, FAIL_FAST_AFTER + 2, 'the refusals without a call are counted as failed');
});

t.test('an answer between failures starts the count over', async (t) => {
  const s = setUp();
  s.failing(FAIL_FAST_AFTER - 1);
  for (let i = 0; i < FAIL_FAST_AFTER - 1; i++) t.notOk(await s.ask(`key:f${i}`));
  t.ok(await s.ask('key:ok'), 'an answered call');
  s.failing(FAIL_FAST_AFTER - 1);
  for (let i = 0; i < FAIL_FAST_AFTER - 1; i++) t.notOk(await s.ask(`key:g${i}`));
  t.ok(
    await s.ask('key:still'),
    `${2 * (FAIL_FAST_AFTER - 1)} failures, never ${FAIL_FAST_AFTER} in a row: the next key is still asked for`,
  );
});
