// @tier: pure
/**
 * Shared counters across worker threads are exact: N threads (3 here) deciding on the same
 * buckets at once admit exactly what one thread deciding the same requests one after another
 * would, for every algorithm, with costs and bursts drawn by fast-check, a global bucket too. The
 * threads' time is a `SharedClock` the test moves between bursts; within a burst it stands still,
 * so the threads race only with each other.
 *
 * How a concurrent burst is judged exact. At one instant a bucket's figures move only by the
 * costs it is charged, and every algorithm admits a request exactly when its cost ≤ the bucket's
 * `remaining` (floor of what is left). So the admitted requests of a serial order, sorted by the
 * `remaining` they report, form a chain from the bucket's remaining before the burst, each link
 * down by its cost; and each refused request reports a remaining on that chain, below its cost.
 * That is checked for every request, then the burst's total is charged to a single-threaded
 * reference store (the same algorithms, unshared), which must land on the chain's last link: the
 * shared counters never admit one request more, nor refuse one the limit had room for.
 *
 * Also: a thread that dies (an uncaught exception) loses nothing of the counters, and a thread
 * attached after it sees them.
 */
import t from 'tap';
import fc from 'fast-check';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { FakeClock, SharedClock } from '../../../shared/clock.js';
import { PROJECT_ROOT } from '../../../shared/paths.js';
import { MemoryCounterStore } from '../../../limiter/admission/counter-store.memory.js';
import { createSharedCounters } from '../../../limiter/admission/shared-counters.js';
import type { AdmitRequest, GlobalBucket } from '../../../limiter/admission/counter-store.js';
import { ALGORITHMS, type LimitParams } from '../../../limiter/admission/limit.js';
import type { BurstResult, WorkerInit, WorkerMessage } from './shared-counters-worker.js';
import { costArb, gapArb, limitArb, START_MS } from './models.js';

const WORKER = join(PROJECT_ROOT, 'dist/test/limiter/admission/shared-counters-worker.js');
const THREADS = 3;

const shared = createSharedCounters({ maxKeys: 100_000 });
const clock = new SharedClock(START_MS);
const gateBuf = new SharedArrayBuffer(8);
let bursts = 0;

function spawn(): Worker {
  // The worker is plain JavaScript from dist/: it needs none of the test process's preloads (tap's
  // TypeScript loader among them, whose start in each thread cost more than the thread's work).
  return new Worker(WORKER, {
    execArgv: ['--enable-source-maps'],
    workerData: { shared, clock: clock.buffer, gate: gateBuf, threads: THREADS } satisfies WorkerInit,
  });
}

const workers = Array.from({ length: THREADS }, spawn);
t.teardown(() => Promise.all(workers.map((w) => w.terminate())));

function next(w: Worker): Promise<unknown> {
  return new Promise((res, rej) => {
    const onError = (e: unknown): void => rej(e instanceof Error ? e : new Error(String(e)));
    w.once('message', (m) => {
      w.off('error', onError);
      res(m);
    });
    w.once('error', onError);
  });
}

interface Decided {
  req: AdmitRequest;
  allowed: boolean;
  remaining: number;
  global: boolean;
  thread: number;
  /** Its place in its thread's list. */
  seq: number;
}

/**
 * Runs one burst: `reqs` dealt round-robin to the threads, which wait at the gate until all are
 * armed (the last one opens it), then decide at once. Returns every decision.
 */
async function burst(reqs: readonly AdmitRequest[]): Promise<Decided[]> {
  const n = ++bursts;
  const share = workers.map((_, i) => reqs.filter((_, j) => j % workers.length === i));
  const done = workers.map((w) => next(w) as Promise<BurstResult>);
  workers.forEach((w, i) => w.postMessage({ op: 'burst', burst: n, reqs: share[i]! } satisfies WorkerMessage));
  const results = await Promise.all(done);
  return results.flatMap((r, i) =>
    share[i]!.map((req, seq) => ({
      req,
      allowed: r.out[seq * 3] === 1,
      remaining: r.out[seq * 3 + 1]!,
      global: r.out[seq * 3 + 2] === 1,
      thread: i,
      seq,
    })),
  );
}

/**
 * Checks one bucket's decisions in a burst against the chain from `start` (its remaining before
 * the burst); returns the chain's last link (its remaining after). A refusal bound by the global
 * bucket is judged against the global bucket by the caller.
 */
function chain(start: number, ds: readonly Decided[], what: string): number {
  const charged = ds.filter((d) => d.allowed && d.req.cost > 0).sort((x, y) => y.remaining - x.remaining);
  const links = new Set([start]);
  let cur = start;
  for (const d of charged) {
    if (d.remaining !== cur - d.req.cost)
      throw new Error(`${what}: admitted cost ${d.req.cost} reported ${d.remaining}, the chain is at ${cur}`);
    cur = d.remaining;
    links.add(cur);
  }
  for (const d of ds) {
    if (d.allowed && d.req.cost === 0 && !links.has(d.remaining))
      throw new Error(`${what}: a free request reported ${d.remaining}, not on the chain`);
    if (!d.allowed && !d.global) {
      if (!links.has(d.remaining))
        throw new Error(`${what}: refused cost ${d.req.cost} reported ${d.remaining}, not on the chain ${[...links].join()}`);
      if (d.remaining >= d.req.cost) throw new Error(`${what}: refused cost ${d.req.cost} with ${d.remaining} remaining`);
    }
  }
  return cur;
}

let run = 0;

for (const algorithm of ALGORITHMS) {
  t.test(`${algorithm}: ${THREADS} threads admit exactly what the limit allows, over costs and bursts`, async (t) => {
    const first = bursts;
    await fc.assert(
      fc.asyncProperty(
        limitArb([algorithm]).chain((limit) =>
          fc.tuple(
            fc.constant(limit),
            fc.array(
              fc.record({
                dt: gapArb(limit.intervalMs),
                costs: fc.array(costArb(limit.burst + 2), { minLength: 1, maxLength: 3 * limit.burst + 6 }),
              }),
              { minLength: 1, maxLength: 5 },
            ),
          ),
        ),
        async ([limit, phases]) => {
          const key = `user:${algorithm}-${++run}`;
          const refClock = new FakeClock(0);
          const refStore = new MemoryCounterStore({ clock: refClock, maxKeys: 16 });
          for (const ph of phases) {
            const now = clock.advance(ph.dt);
            refClock.set(now);
            const start = refStore.admit({ key, limit, cost: 0 }).remaining;
            const ds = await burst(ph.costs.map((cost) => ({ key, limit, cost })));
            const end = chain(start, ds, `${key} at +${now - START_MS} ms`);
            const total = ds.reduce((s, d) => s + (d.allowed ? d.req.cost : 0), 0);
            const r = refStore.admit({ key, limit, cost: total });
            if (!r.allowed || r.remaining !== end)
              throw new Error(`${key}: the reference charged ${total} gives ${r.remaining} (${r.allowed}), the threads ${end}`);
          }
        },
      ),
      { numRuns: 25 },
    );
    t.ok(bursts - first >= 25, `every one of ${bursts - first} bursts was a serial order of the same decisions`);
  });
}

t.test('a global bucket: both or neither across subjects and threads, exact', async (t) => {
  const first = bursts;
  await fc.assert(
    fc.asyncProperty(
      limitArb(ALGORITHMS),
      fc.array(limitArb(ALGORITHMS), { minLength: 1, maxLength: 4 }),
      fc.array(
        fc.record({
          dt: gapArb(1000),
          reqs: fc.array(fc.record({ k: fc.nat(3), cost: costArb(6) }), { minLength: 1, maxLength: 60 }),
        }),
        { minLength: 1, maxLength: 4 },
      ),
      async (gLimit, keyLimits, phases) => {
        const id = ++run;
        const global: GlobalBucket = { name: `g${id}`, limit: gLimit };
        const refClock = new FakeClock(0);
        // The reference: each bucket on its own (the global as a key of its own).
        const ref = new MemoryCounterStore({ clock: refClock, maxKeys: 16 });
        const keyOf = (k: number): string => `user:g${id}-${k % keyLimits.length}`;
        const limitOf = (k: number): LimitParams => keyLimits[k % keyLimits.length]!;
        for (const ph of phases) {
          const now = clock.advance(ph.dt);
          refClock.set(now);
          const gStart = ref.admit({ key: global.name, limit: gLimit, cost: 0 }).remaining;
          const ds = await burst(ph.reqs.map((r) => ({ key: keyOf(r.k), limit: limitOf(r.k), cost: r.cost, global })));
          let gTotal = 0;
          for (let k = 0; k < keyLimits.length; k++) {
            const mine = ds.filter((d) => d.req.key === keyOf(k));
            const start = ref.admit({ key: keyOf(k), limit: limitOf(k), cost: 0 }).remaining;
            const end = chain(start, mine, keyOf(k));
            const total = mine.reduce((s, d) => s + (d.allowed ? d.req.cost : 0), 0);
            gTotal += total;
            const r = ref.admit({ key: keyOf(k), limit: limitOf(k), cost: total });
            if (!r.allowed || r.remaining !== end) throw new Error(`${keyOf(k)}: reference ${r.remaining}, threads ${end}`);
          }
          const g = ref.admit({ key: global.name, limit: gLimit, cost: gTotal });
          if (!g.allowed) throw new Error(`global over-admitted: ${gTotal} charged with ${gStart} remaining`);
          for (const d of ds) {
            // Refused by the global bucket: it had no room for this cost even at the end.
            if (!d.allowed && d.global && d.req.cost <= g.remaining)
              throw new Error(`refused by the global bucket with ${g.remaining} left for cost ${d.req.cost}`);
          }
        }
      },
    ),
    { numRuns: 40 },
  );
  t.ok(
    bursts - first >= 40,
    `${bursts - first} bursts: the global bucket was charged exactly the admitted costs, never over its limit, refusing only what did not fit`,
  );
});

t.test('threads really contend: one bucket, many requests each, exact count and interleaved order', async (t) => {
  const limit: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 30_000, intervalMs: 3_600_000 };
  const key = `user:contend-${++run}`;
  const ds = await burst(Array.from({ length: 45_000 }, () => ({ key, limit, cost: 1 })));
  const admitted = ds.filter((d) => d.allowed);
  t.equal(admitted.length, 30_000, 'exactly the burst admitted');
  t.equal(chain(30_000, ds, key), 0);
  // In the serial order (remaining descending) how often does the thread change? Never, if the
  // threads had run one after another.
  const order = admitted.sort((x, y) => y.remaining - x.remaining);
  let switches = 0;
  for (let i = 1; i < order.length; i++) if (order[i]!.thread !== order[i - 1]!.thread) switches++;
  t.ok(switches >= THREADS, `the threads' decisions interleave (${switches} switches between threads in the serial order)`);
});

t.test('a thread that dies loses nothing: a new thread sees the same counters', async (t) => {
  const limit: LimitParams = { algorithm: 'fixed_window', rate: 50, burst: 50, intervalMs: 3_600_000 };
  const key = `user:dies-${++run}`;
  const before = await burst(Array.from({ length: 40 }, () => ({ key, limit, cost: 1 })));
  t.equal(before.filter((d) => d.allowed).length, 40);
  const dying = workers[0]!;
  const exited = new Promise<number>((res) => dying.once('exit', res));
  const failed = new Promise<Error>((res) => dying.once('error', res));
  dying.postMessage({ op: 'throw' } satisfies WorkerMessage);
  t.match((await failed).message, /failed on purpose/);
  t.equal(await exited, 1, 'the thread exited');
  workers[0] = spawn();
  const after = await burst(Array.from({ length: 30 }, () => ({ key, limit, cost: 1 })));
  t.equal(after.filter((d) => d.allowed).length, 10, 'the replacement and the others admit only the 10 left');
  t.equal(chain(10, after, key), 0);
});
