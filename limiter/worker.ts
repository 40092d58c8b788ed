/**
 * One worker thread of a sidecar run with `LIMITER_WORKERS` ≥ 2 (started by limiter/workers.ts,
 * never on its own): the data plane (`startSidecar` with `worker: true`) on the port the main
 * thread picked, over the counters it created. It talks to the main thread through its
 * `parentPort`, in the messages typed below, and with a control plane through a channel of its own
 * to the process's working set, which the main thread holds (quota-replica.ts, quota-relay.ts).
 *
 * Its failure path: an uncaught exception (or an unhandled rejection, which Node raises as one)
 * closes the thread's uWS app (`Sidecar.abort`) and exits the thread with code 1; the main thread
 * logs it and starts a replacement on the same counters. The app must be closed first: a thread
 * that ends with an open uWS app aborts the whole process (exit 134). The handler never runs while
 * this thread holds the counters' lock: a decision takes and releases it synchronously (released
 * in `finally` even when it throws), so by the time an exception reaches the top of the event
 * loop the lock is free.
 */
import { parentPort, workerData, threadId } from 'node:worker_threads';
import { createLogger } from '../shared/log.js';
import { SharedClock, systemClock } from '../shared/clock.js';
import { ConfigError } from '../shared/config.js';
import type { JwksDocument } from '../shared/jwt/index.js';
import type { SharedCounters } from './admission/shared-counters.js';
import type { LimiterConfig } from './config.js';
import { startSidecar, type Sidecar } from './sidecar.js';
import { QuotaReplica } from './quota-replica.js';
import type { ReplicaInit } from './quota-relay.js';

/** What the main thread hands a worker (structured-cloned; the counters' buffers are shared). */
export interface WorkerInit {
  /** The slot this thread fills (0 … N−1); a replacement takes the slot of the thread it replaces. */
  slot: number;
  /** The process's config with this worker's LIMITER_PORT and its shares of the quota cache and upstream connections. */
  config: LimiterConfig;
  /**
   * With a control plane: this thread's channel to the main thread, which holds the process's one
   * stream and lookups, and the working set when the thread was started (quota-relay.ts).
   */
  replica?: ReplicaInit;
  counters: SharedCounters | undefined;
  /** With Redis: the emergency store's counters (without Redis it is never used, so each thread has its own). */
  emergency: SharedCounters | undefined;
  /** Tests only (set by callers of `startWorkers`, never from the environment): a shared clock, a static key set. */
  clock?: SharedArrayBuffer;
  jwks?: JwksDocument;
  /** Tests only: a module imported in the thread once it serves (limiter/workers.ts `WorkersDeps.preload`). */
  preload?: string;
}

/** Main thread → worker. */
export type ToWorker =
  | { op: 'metrics'; id: number }
  /** Finish requests in flight within `graceMs`; whatever is not done by `exitMs`, close the app and exit. */
  | { op: 'drain'; graceMs: number; exitMs: number };

/** Worker → main thread. */
export type FromWorker =
  | { op: 'listening'; port: number }
  /** `variable`: set when the thread's start failed on a ConfigError (the main thread rethrows one: exit 78). */
  | { op: 'failed'; message: string; code: string | undefined; variable?: string }
  | { op: 'metrics'; id: number; json: unknown[]; requests: number; ready: boolean };

const init = workerData as WorkerInit;
const port = parentPort!;
const post = (m: FromWorker): void => port.postMessage(m);
const log = createLogger({ service: 'limiter', level: init.config.LOG_LEVEL }).child({ worker: init.slot, thread: threadId });

const clock = init.clock ? new SharedClock(init.clock) : undefined;
let sidecar: Sidecar | undefined;
process.on('uncaughtException', (err) => {
  log.error({ err }, 'worker thread failed: closing its connections and exiting (the main thread starts a replacement)');
  try {
    sidecar?.abort();
  } finally {
    process.exit(1);
  }
});

try {
  // Started first: it takes the state, then what was relayed since, from its channel.
  const replica = init.replica
    ? new QuotaReplica(init.replica, { maxRecords: init.config.LIMITER_QUOTA_CACHE_MAX, clock: clock ?? systemClock, log })
    : undefined;
  // The working set arrives in parts on the replica's channel (quota-relay.ts): held whole before
  // the thread listens.
  await replica?.started;
  sidecar = await startSidecar(init.config, log, {
    worker: true,
    sharedCounters: init.counters,
    emergencyCounters: init.emergency,
    ...(replica ? { replica } : {}),
    ...(clock ? { clock } : {}),
    ...(init.jwks ? { jwks: init.jwks } : {}),
  });
} catch (err) {
  const e = err as NodeJS.ErrnoException;
  post({
    op: 'failed',
    message: e instanceof Error ? e.message : String(err),
    code: e?.code,
    ...(err instanceof ConfigError ? { variable: err.variable } : {}),
  });
  process.exit(1);
}
const s = sidecar;

port.on('message', (m: ToWorker) => {
  if (m.op === 'metrics') {
    void s.registry
      .getMetricsAsJSON()
      .then((json) => post({ op: 'metrics', id: m.id, json, requests: s.requests(), ready: s.quotasReady() }));
  } else if (m.op === 'drain') {
    // Stop listening, finish what is in flight (within the grace), then close what is left and go.
    // A close that hangs past `exitMs` (an upstream or Redis connection) does not keep the thread:
    // the main thread's process must not exit while this thread's uWS app is open.
    setTimeout(() => {
      log.error({ exitMs: m.exitMs }, 'worker drain did not finish in time: closing its connections and exiting');
      s.abort();
      process.exit(0);
    }, m.exitMs).unref();
    void s
      .close(m.graceMs)
      .catch((err: unknown) => log.error({ err }, 'worker drain failed'))
      .finally(() => {
        s.abort();
        process.exit(0);
      });
  }
});
if (init.preload) await import(init.preload);
post({ op: 'listening', port: s.port });
