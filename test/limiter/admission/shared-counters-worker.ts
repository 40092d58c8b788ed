/**
 * A worker thread of test/limiter/admission/shared-counters.test.ts (run from dist/, built by
 * `tsc -b` before the suite): it attaches a `MemoryCounterStore` to the shared counters and the
 * shared clock it is handed, and on each burst waits at the shared gate, then decides its share of
 * the requests as fast as it can, so the threads contend for the same buckets at once. The last
 * thread to arm for a burst opens the gate itself: the others spin only while a sibling is yet to
 * receive its share, not while the test's thread goes round its event loop (on two cores, three
 * spinning threads kept that thread off the CPU until their spins ran out).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { SharedClock } from '../../../shared/clock.js';
import { MemoryCounterStore } from '../../../limiter/admission/counter-store.memory.js';
import type { SharedCounters } from '../../../limiter/admission/shared-counters.js';
import type { AdmitRequest } from '../../../limiter/admission/counter-store.js';

export interface WorkerInit {
  shared: SharedCounters;
  clock: SharedArrayBuffer;
  /** Int32 [0]: the burst the threads may start; [1]: how many threads are armed for the next one. */
  gate: SharedArrayBuffer;
  /** How many threads take part in each burst (the last to arm opens the gate). */
  threads: number;
}

export type WorkerMessage = { op: 'burst'; burst: number; reqs: AdmitRequest[] } | { op: 'throw' };

/** Per request: allowed (1/0), remaining, binding global (1/0). */
export interface BurstResult {
  burst: number;
  out: number[];
}

const init = workerData as WorkerInit;
const store = new MemoryCounterStore({ clock: new SharedClock(init.clock), shared: init.shared });
const gate = new Int32Array(init.gate);

parentPort!.on('message', (m: WorkerMessage) => {
  if (m.op === 'throw') {
    // Uncaught, outside any decision: the thread dies; the counters must not.
    setImmediate(() => {
      throw new Error('worker failed on purpose');
    });
    return;
  }
  if (Atomics.add(gate, 1, 1) + 1 === init.threads) {
    // The last one armed: every other thread is at the gate (or on its way to it); open it.
    Atomics.store(gate, 1, 0);
    Atomics.store(gate, 0, m.burst);
    Atomics.notify(gate, 0);
  }
  // Spin at the gate (so the threads start within moments of each other, not a wake-up apart),
  // then sleep if a sibling is slow to arm. The sleep waits on the value the check read: reading
  // it again for the wait could read the burst the opener stored in between, and sleep on it with
  // no notify to come (the test hung so once, on a loaded machine).
  const until = performance.now() + 20;
  while (Atomics.load(gate, 0) < m.burst && performance.now() < until);
  for (let seen = Atomics.load(gate, 0); seen < m.burst; seen = Atomics.load(gate, 0)) Atomics.wait(gate, 0, seen);
  const out: number[] = [];
  for (const r of m.reqs) {
    const a = store.admit(r);
    out.push(a.allowed ? 1 : 0, a.remaining, a.binding === 'global' ? 1 : 0);
  }
  parentPort!.postMessage({ burst: m.burst, out } satisfies BurstResult);
});
