/**
 * CPU per decision of the in-process counter store, one thread: the plain store (one process's
 * own table) beside the same store over shared memory (`createSharedCounters`: the table in a
 * `SharedArrayBuffer`, a lock taken around each admission, uncontended here), and, with
 * `--threads N`, N worker threads deciding on the one shared table at once (the lock contended).
 *
 *   npm run build && node dist/bench/counter-admit.js [--subjects 100000] [--calls 2000000]
 *     [--rounds 5] [--threads 2]
 *
 * Each round admits `calls` requests over `subjects` API-key subjects (`key:<64 hex>`, read as
 * they are, no hashing) plus a global bucket, limits high enough that every call is admitted
 * (the path that writes). Rounds alternate between the stores; the figure is the best round's
 * ns per call (the least disturbed by the other work on a shared machine). Prints a table; writes
 * nothing.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../shared/clock.js';
import { MemoryCounterStore } from '../limiter/admission/counter-store.memory.js';
import { createSharedCounters, type SharedCounters } from '../limiter/admission/shared-counters.js';
import type { AdmitRequest } from '../limiter/admission/counter-store.js';
import type { LimitParams } from '../limiter/admission/limit.js';

const LIMIT: LimitParams = { algorithm: 'token_bucket', rate: 1e9, burst: 1e9, intervalMs: 1000 };
const GLOBAL = { name: 'global', limit: { algorithm: 'token_bucket', rate: 1e12, burst: 1e12, intervalMs: 1 } as LimitParams };

function keys(n: number, salt: string): string[] {
  return Array.from({ length: n }, (_, i) => 'key:' + createHash('sha256').update(`${salt}${i}`).digest('hex'));
}

/** ns per admission over `calls` calls. */
function run(store: MemoryCounterStore, ks: readonly string[], calls: number): number {
  const req = { key: '', limit: LIMIT, global: GLOBAL, cost: 1 } as { -readonly [K in keyof AdmitRequest]: AdmitRequest[K] };
  let admitted = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    req.key = ks[i % ks.length]!;
    if (store.admit(req).allowed) admitted++;
  }
  const ns = Number(process.hrtime.bigint() - t0);
  if (admitted !== calls) throw new Error(`only ${admitted} of ${calls} admitted`);
  return ns / calls;
}

interface Job {
  shared: SharedCounters;
  subjects: number;
  calls: number;
  salt: string;
}

if (!isMainThread) {
  const job = workerData as Job;
  const store = new MemoryCounterStore({ clock: systemClock, shared: job.shared });
  const ks = keys(job.subjects, job.salt);
  parentPort!.once('message', () => parentPort!.postMessage(run(store, ks, job.calls)));
} else {
  const { values } = parseArgs({
    options: {
      subjects: { type: 'string', default: '100000' },
      calls: { type: 'string', default: '2000000' },
      rounds: { type: 'string', default: '5' },
      threads: { type: 'string', default: '2' },
    },
  });
  const subjects = Number(values.subjects);
  const calls = Number(values.calls);
  const rounds = Number(values.rounds);
  const threads = Number(values.threads);
  const ks = keys(subjects, 's');
  const best = { plain: Infinity, shared: Infinity, threads: Infinity };
  for (let r = 0; r < rounds; r++) {
    const plain = new MemoryCounterStore({ clock: systemClock, maxKeys: subjects * 2 });
    best.plain = Math.min(best.plain, run(plain, ks, calls));
    const sharedStore = new MemoryCounterStore({ clock: systemClock, shared: createSharedCounters({ maxKeys: subjects * 2 }) });
    best.shared = Math.min(best.shared, run(sharedStore, ks, calls));
    if (threads > 1) {
      // N threads on one table, the same subjects (the worst case: every call contends for one lock).
      const shared = createSharedCounters({ maxKeys: subjects * 2 });
      const workers = Array.from(
        { length: threads },
        () => new Worker(fileURLToPath(import.meta.url), { workerData: { shared, subjects, calls, salt: 's' } satisfies Job }),
      );
      await Promise.all(workers.map((w) => new Promise((res) => w.once('online', res))));
      const t0 = process.hrtime.bigint();
      await Promise.all(
        workers.map(
          (w) =>
            new Promise<number>((res) => {
              w.once('message', res);
              w.postMessage('go');
            }),
        ),
      );
      const wall = Number(process.hrtime.bigint() - t0) / (threads * calls);
      best.threads = Math.min(best.threads, wall);
      await Promise.all(workers.map((w) => w.terminate()));
    }
  }
  console.log(`| store | ns per admission (best of ${rounds}) | admissions/s |`);
  console.log('|---|---:|---:|');
  const row = (name: string, ns: number) => console.log(`| ${name} | ${ns.toFixed(1)} | ${Math.round(1e9 / ns).toLocaleString('en')} |`);
  row('memory, own table', best.plain);
  row('memory, shared table, one thread', best.shared);
  if (threads > 1) row(`memory, shared table, ${threads} threads at once (wall time / calls)`, best.threads);
}
