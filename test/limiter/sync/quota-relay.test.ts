// @tier: pure
/**
 * limiter/quota-relay.ts and limiter/quota-replica.ts in one thread, over a real MessageChannel:
 * the main thread's working set (a QuotaCache, a QuotaLookup whose control-plane call the test
 * answers) and one worker's copy.
 *
 * - a worker's first-seen lookup racing deltas (before the main thread's call, between its call and
 *   the answer, after the answer reached the worker) never leaves the worker with an older record
 *   than the main thread's: property over every interleaving of one key's history (the model of
 *   test/limiter/sync/working-set-versions.test.ts, one thread further);
 * - `settled` resolves only once the worker has applied everything relayed;
 * - a worker attached later starts from the current state, and a record the main thread holds is
 *   answered without a call;
 * - a worker's starting state is sent in parts, and what is relayed meanwhile applies after it;
 * - an answer the main thread does not keep (its lookup voided by a full snapshot) serves the
 *   requests waiting for it on every worker but is installed by none, a worker that asked after
 *   the full snapshot included.
 */
import t from 'tap';
import fc from 'fast-check';
import { create } from '@bufbuild/protobuf';
import { SnapshotSchema, type Snapshot } from '../../../proto/gen/quota/v1/quota_pb.js';
import { FakeClock } from '../../../shared/clock.js';
import { createLogger } from '../../../shared/log.js';
import { QuotaCache } from '../../../limiter/quota-cache.js';
import { deltaOf, keyHistory, plansOnly, rec } from './versioned-records.js';
import { QuotaLookup, type LookupAnswer } from '../../../limiter/quota-lookup.js';
import { QuotaRelay, STATE_PART, type ToReplica } from '../../../limiter/quota-relay.js';
import { QuotaReplica } from '../../../limiter/quota-replica.js';
import { waitFor } from '../../harness/wait.js';

const K = 'key:' + 'b'.repeat(64);
const log = createLogger({ service: 'limiter', level: 'silent' });

/** The delta of version v: K written with `rate`, or deleted (null). */
const delta = (v: number, rate: number | null): Snapshot => deltaOf(K, v, rate);

/** The main thread's side as workers.ts builds it, with the control plane's Lookup answered by hand. */
function mainThread(held = 100, recordsPerReplica = 10) {
  // Not 0: a cache applied at time 0 counts as holding nothing yet (QuotaCache.appliedAt).
  const clock = new FakeClock(1000);
  const cache = new QuotaCache(held);
  const relay = new QuotaRelay({ cache, log, recordsPerReplica, maxAgeMs: 0 });
  const calls: { subjects: string[]; answer: (a: LookupAnswer) => void }[] = [];
  const lookup = new QuotaLookup({
    cache,
    call: (subjects) => new Promise((answer) => calls.push({ subjects, answer })),
    clock,
    log,
    negativeMax: 100,
    negativeTtlMs: 60_000,
    budget: 0,
    budgetWindowMs: 60_000,
    failFastMs: 1000,
  });
  // Counts the questions that reach the main thread's lookups (the relay's side of `serve`).
  let asked = 0;
  relay.serve({
    find: (subject, address) => {
      asked++;
      return lookup.find(subject, address);
    },
  });
  const hooks = relay.hooks();
  // What QuotaSync does with each snapshot it applies.
  const apply = (s: Snapshot): void => {
    if (cache.apply(s, clock.now()).applied) hooks.onApplied!(s, false);
  };
  /** A worker's side, once it holds the state it was sent (a worker thread listens only then). */
  const worker = async (maxRecords = 10) => {
    const { init, detach } = relay.attach();
    const replica = new QuotaReplica(init, { maxRecords, clock, log });
    await replica.started;
    return { replica, detach };
  };
  return { cache, relay, calls, apply, worker, asked: () => asked };
}

t.test("a worker's lookup racing deltas ends with the newest record, as the main thread's", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.option(fc.integer({ min: 1, max: 100 }), { nil: null }), { minLength: 1, maxLength: 12 }),
      fc.nat(),
      fc.nat(),
      fc.nat(),
      async (ops, bSeed, lSeed, dSeed) => {
        const { n, state, written, b, L, d } = keyHistory(ops, bSeed, lSeed, dSeed);
        const m = mainThread();
        m.apply(plansOnly(0));
        const { replica, detach } = await m.worker();
        try {
          for (let v = 1; v <= b; v++) m.apply(delta(v, state[v]!));
          await m.relay.settled();
          const asked = replica.find(K);
          await waitFor(() => m.calls.length === 1, { intervalMs: 1, what: "the main thread's call" });
          // Relayed to the worker before the answer: it applies them while its lookup is in flight.
          for (let v = b + 1; v <= d; v++) m.apply(delta(v, state[v]!));
          m.calls[0]!.answer({
            quotas: state[L] === null ? [] : [rec(K, state[L]!, written[L]!)],
            unknown: state[L] === null ? [K] : [],
            version: L,
          });
          const got = await asked;
          const truth = state[Math.max(L, d)];
          if ((got?.limit?.rate ?? null) !== truth) return false;
          for (let v = d + 1; v <= n; v++) m.apply(delta(v, state[v]!));
          await m.relay.settled();
          const main = m.cache.has(K) ? m.cache.record(K)!.limit!.rate : null;
          const copy = replica.cache.has(K) ? replica.cache.record(K)!.limit!.rate : null;
          // The worker holds what the main thread holds (both installed the answer and took every
          // later delta), and a record it holds is the newest.
          return copy === main && (copy === null || copy === state[n]);
        } finally {
          detach();
        }
      },
    ),
    { numRuns: 300 },
  );
  t.pass('300 interleavings');
});

t.test('settled waits for the worker to apply what was relayed; a worker attached later starts from the state', async (t) => {
  const m = mainThread();
  m.apply(plansOnly(0));
  m.cache.beginLookup(K);
  m.cache.finishLookup(K, rec(K, 7, 0), 0);
  const first = await m.worker();
  t.teardown(first.detach);
  t.equal(first.replica.cache.record(K)?.limit?.rate, 7, 'started with the record the main thread held');
  m.apply(delta(1, 8));
  // What the worker holds at the moment `settled` resolves (a `settled` that did not wait would see 7).
  t.equal(await m.relay.settled().then(() => first.replica.cache.record(K)?.limit?.rate), 8, 'settled once the worker applied it');

  // A worker whose thread has not started yet (attached, its channel not listened to) holds
  // `settled` back until it applies what was relayed meanwhile; detaching releases it.
  const late = m.relay.attach();
  t.teardown(late.detach);
  const started: { replica?: QuotaReplica } = {};
  m.apply(delta(2, 9));
  const waited = m.relay.settled().then(() => started.replica?.cache.record(K)?.limit?.rate);
  await waitFor(() => first.replica.cache.version === 2, { intervalMs: 1, what: 'the first worker applied delta 2' });
  // One round trip on the first worker's channel: the main thread has handled its `applied` (same
  // channel, in order) before it answers this.
  await first.replica.find(K);
  started.replica = new QuotaReplica(late.init, { maxRecords: 10, clock: new FakeClock(1000), log });
  t.equal(await waited, 9, 'settled once the worker started late applied it too');

  const second = await m.worker();
  t.teardown(second.detach);
  t.equal(second.replica.cache.version, 2, 'a later worker starts at the current version');
  t.equal(second.replica.cache.record(K)?.limit?.rate, 9, 'with the current record');
  second.replica.cache.apply(plansOnly(2), 0, { force: true }); // drops what it held
  t.equal((await second.replica.find(K))?.limit?.rate, 9, 'a record the main thread holds is answered');
  t.equal(m.calls.length, 0, 'without a call to the control plane');
});

t.test('an answer voided on the main thread by a full snapshot is installed by no worker', async (t) => {
  const m = mainThread();
  m.apply(plansOnly(100));
  const w1 = await m.worker();
  const w2 = await m.worker();
  t.teardown(() => {
    w1.detach();
    w2.detach();
  });
  const a1 = w1.replica.find(K);
  await waitFor(() => m.calls.length === 1, { intervalMs: 1, what: "the main thread's call for worker 1" });
  // A full snapshot (after a gap in the stream) without K: deleted meanwhile. It voids the main
  // thread's lookup and worker 1's.
  m.apply(plansOnly(120));
  await m.relay.settled();
  // Worker 2 first sees K after the full snapshot: its question joins the main thread's call in flight.
  const a2 = w2.replica.find(K);
  await waitFor(() => m.asked() === 2, { intervalMs: 1, what: "worker 2's question on the main thread" });
  t.equal(m.calls.length, 1, "worker 2's question shares the call in flight");
  // The control plane read K before the delete.
  m.calls[0]!.answer({ quotas: [rec(K, 5, 50)], unknown: [], version: 105 });
  t.strictSame([(await a1)?.limit?.rate, (await a2)?.limit?.rate], [5, 5], 'the answer serves the requests that waited for it');
  t.notOk(m.cache.has(K), 'the main thread does not keep it');
  t.notOk(w1.replica.cache.has(K), 'worker 1 (asked before the full snapshot) does not keep it');
  t.notOk(w2.replica.cache.has(K), 'worker 2 (asked after the full snapshot) does not keep it');
  t.equal(w2.replica.cache.lookupsInFlight, 0, "worker 2's lookup is over");

  // The next request for K on worker 2 asks again, and the control plane now says unknown.
  const again = w2.replica.find(K);
  await waitFor(() => m.calls.length === 2, { intervalMs: 1, what: 'a new call for K' });
  m.calls[1]!.answer({ quotas: [], unknown: [K], version: 120 });
  t.equal(await again, undefined, 'the deleted key is unknown');
  t.notOk(w2.replica.cache.has(K));
});

t.test('a worker is sent the state in parts; what is relayed meanwhile follows and applies on top', async (t) => {
  const N = 2 * STATE_PART + 500;
  const m = mainThread(N, N);
  const keyOf = (i: number): string => 'key:' + i.toString(16).padStart(64, '0');
  m.apply(
    create(SnapshotSchema, {
      version: 1n,
      quotas: [rec('plan:free', 1, 1), ...Array.from({ length: N }, (_, i) => rec(keyOf(i), 1, 1))],
    }),
  );
  const changes = (v: number, rate: number, ids: number[], deleted: number[] = []): Snapshot =>
    create(SnapshotSchema, {
      version: BigInt(v),
      delta: true,
      baseVersion: BigInt(v - 1),
      quotas: ids.map((i) => rec(keyOf(i), rate, v)),
      deletedSubjectIds: deleted.map(keyOf),
    });

  // The protocol as a thread sees it: parts, the last one flagged, then the deltas relayed meanwhile.
  const raw = m.relay.attach();
  t.teardown(raw.detach);
  const seen: ToReplica[] = [];
  raw.init.port.on('message', (msg: ToReplica) => seen.push(msg));
  // A worker's side too.
  const w = m.relay.attach();
  t.teardown(w.detach);
  const replica = new QuotaReplica(w.init, { maxRecords: N, clock: new FakeClock(1000), log });
  // Relayed while the parts are being sent: at once, and a turn later.
  m.apply(changes(2, 2, [0, N - 1], [1]));
  await new Promise((r) => setImmediate(r));
  m.apply(changes(3, 3, [N - 1]));
  await replica.started;
  // (Not `settled`: the raw channel never confirms.)
  await waitFor(() => replica.cache.version === 3, { intervalMs: 1, what: 'the worker at the current version' });
  t.equal(replica.cache.held, N - 1, 'holds every record sent, less the one deleted meanwhile');
  t.equal(replica.cache.record(keyOf(N - 1))?.limit?.rate, 3, 'a record in the last part carries the later deltas');
  t.equal(replica.cache.record(keyOf(0))?.limit?.rate, 2);
  t.notOk(replica.cache.has(keyOf(1)), 'the delete applied');

  await waitFor(() => seen.filter((x) => x.op === 'apply').length === 2, { intervalMs: 1, what: 'both deltas on the raw channel' });
  t.strictSame(
    seen.map((x) => (x.op === 'state' ? `state${x.last ? ' last' : ''}` : x.op)),
    ['state', 'state', 'state last', 'apply', 'apply'],
    `${N} records in parts of ${STATE_PART}, then the deltas`,
  );
});
