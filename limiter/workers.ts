/**
 * `LIMITER_WORKERS` ≥ 2: one sidecar process serving its data port from N worker threads
 * (limiter/worker.ts), called by main.ts instead of `startSidecar`. The main thread:
 *
 * - creates the in-process counters once in shared memory (admission/shared-counters.ts), so every
 *   worker decides on one table, exactly; with Redis (REDIS_URL, REDIS_CLUSTER_NODES) each worker
 *   opens its own connections instead. The emergency store (fail-open cap while Redis is down) is
 *   shared the same way;
 * - picks the data port: LIMITER_PORT, or when it is 0 a free port it binds and releases (uSockets
 *   sets SO_REUSEPORT only on an explicit port, so the workers must all be given the same number);
 * - starts the workers, each listening on that port (the kernel spreads connections among them);
 * - serves the admin port: /healthz, /readyz (every worker serving and, with a quota source, each
 *   holding a snapshot), /metrics for the process: every worker's series summed (prom-client's
 *   `AggregatorRegistry.aggregate` over each worker's `getMetricsAsJSON()`, fetched over its
 *   `parentPort`), the process's default Node metrics from this thread, and
 *   `ratelimit_worker_requests{worker}`, the requests each worker slot has taken;
 * - replaces a worker that exits (an uncaught exception: worker.ts closes its uWS app first) with a
 *   new thread in the same slot, on the same counters, which lose nothing; counters of the thread
 *   that died are kept (as of the last scrape) so the process's totals never go down;
 * - on close (SIGTERM), tells every worker to drain (close its listen socket, finish what is in
 *   flight within the grace, exit) and waits for all of them before it closes the admin port.
 *
 * With a control plane (LIMITER_CONTROL_PLANE_URL) the main thread also holds the process's one
 * working set (working-set.ts): one Watch stream and sidecar id, the lookups (one batch per turn for
 * every worker, one negative cache, one unknown-key budget), the quota cache bounded by
 * LIMITER_QUOTA_CACHE_MAX, and the one last-known-good file. Each worker holds a copy of the records
 * it uses, at most LIMITER_QUOTA_CACHE_MAX / N, kept by what this thread relays (quota-relay.ts,
 * quota-replica.ts); an ack waits until every worker has applied the version. Standalone
 * (LIMITER_QUOTA_FILE) each worker reads the file itself, as one thread does.
 */
import { Worker } from 'node:worker_threads';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../shared/paths.js';
import type { Logger } from '../shared/log.js';
import { ConfigError } from '../shared/config.js';
import { App, closeApp, closeListenSocket, listen } from '../shared/uws.js';
import { operationalRoutes, type HealthCheck } from '../shared/http.js';
import { AggregatorRegistry, Counter, Registry, createRegistry } from '../shared/metrics.js';
import { systemClock, type SharedClock } from '../shared/clock.js';
import type { JwksDocument } from '../shared/jwt/index.js';
import { createSharedCounters, type SharedCounters } from './admission/shared-counters.js';
import type { LimiterConfig } from './config.js';
import { QuotaCache } from './quota-cache.js';
import { QuotaRelay } from './quota-relay.js';
import { registerWorkingSetMetrics } from './quota-lookup-metrics.js';
import { startWorkingSet, type WorkingSet } from './working-set.js';
import type { FromWorker, ToWorker, WorkerInit } from './worker.js';

export interface WorkersDeps {
  /** Tests: one clock for every worker. */
  clock?: SharedClock;
  /** Tests: a static key set instead of fetching IDENTITY_URL's JWKS. */
  jwks?: JwksDocument;
  /**
   * Tests only: the URL of a module each worker imports once it serves (e.g. one that makes the
   * thread throw on a message). Only a caller in this process can set it; nothing in the
   * environment or on the network reaches it.
   */
  preload?: string;
  /**
   * Node options of the worker threads; default the process's own (`process.execArgv`). Tests pass
   * `[]`: the test runner's TypeScript and coverage hooks double a thread's start and are not
   * needed by the compiled worker.
   */
  execArgv?: string[];
  /** How long a scrape or readiness check waits for a worker's answer, ms (default 1.5 s). */
  answerMs?: number;
  /** How long looked-up records wait before the snapshot file is rewritten, ms (QuotaSync default 10 s). */
  workingSetWriteDelayMs?: number;
}

export interface Workers {
  port: number;
  adminPort: number;
  urls: Record<string, string>;
  /** The thread id serving each slot now (undefined while a slot is being restarted). */
  threadIds(): (number | undefined)[];
  /** Posts a message to the worker in `slot` (tests: to a module given as `preload`). */
  post(slot: number, message: unknown): void;
  /** With a control plane: the process's one stream, lookups and quota cache (held by the main thread). */
  workingSet: (WorkingSet & { cache: QuotaCache }) | undefined;
  close(graceMs?: number): Promise<void>;
}

type MetricsReply = Extract<FromWorker, { op: 'metrics' }>;

interface Slot {
  index: number;
  worker: Worker | undefined;
  threadId: number | undefined;
  startedAt: number;
  /** Restarts in a row of threads that lived less than a second (each waits longer). */
  quickDeaths: number;
  /** Requests of the slot's earlier threads, and the current thread's as of its last answer. */
  base: number;
  last: MetricsReply | undefined;
  pending: Map<number, (r: MetricsReply | undefined) => void>;
  /** The question being asked of the current thread, shared by the scrapes and probes that come meanwhile. */
  asking: { worker: Worker; answer: Promise<MetricsReply | undefined> } | undefined;
}

// Compiled, the worker is beside this file. Loaded from source (tests, through the runner's
// TypeScript hook, which worker threads started with `execArgv: []` do not have): its compiled copy.
const WORKER_URL = import.meta.url.endsWith('.ts')
  ? pathToFileURL(join(PROJECT_ROOT, 'dist/limiter/worker.js'))
  : new URL('./worker.js', import.meta.url);

/** A free port on `host` (bound to 0 and released), for workers that must all name the same one. */
function freePort(host: string): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on('error', rej);
    s.listen(0, host, () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => res(port));
    });
  });
}

/** Series that only go up (a dead thread's are kept so the process's totals never go down). */
function cumulative(json: unknown[]): unknown[] {
  return json.filter((m) => {
    const type = (m as { type?: string }).type;
    return type === 'counter' || type === 'histogram';
  });
}

/**
 * The config one worker thread runs with: the process's, on the picked port, with its share of
 * what is bounded per process.
 */
export function workerConfig(config: LimiterConfig, w: { port: number }): LimiterConfig {
  const n = config.LIMITER_WORKERS;
  return {
    ...config,
    LIMITER_PORT: w.port,
    // The records a worker holds: its copy of the process's working set (the main thread's, bounded
    // by LIMITER_QUOTA_CACHE_MAX) holds at most an equal share, so the copies together hold at most
    // the bound too. Standalone each worker holds the whole file (sidecar.ts).
    LIMITER_QUOTA_CACHE_MAX: Math.max(1, Math.floor(config.LIMITER_QUOTA_CACHE_MAX / n)),
    // Each thread has its own upstream pools: the process's cap shared among them (at least one
    // each, so a cap below N lets N through).
    UPSTREAM_CONNECTIONS: Math.max(1, Math.floor(config.UPSTREAM_CONNECTIONS / n)),
  };
}

export async function startWorkers(config: LimiterConfig, log: Logger, deps: WorkersDeps = {}): Promise<Workers> {
  const n = config.LIMITER_WORKERS;
  if (n < 2) throw new Error('startWorkers: LIMITER_WORKERS must be at least 2 (one thread is startSidecar)');
  if (config.LIMITER_RLS_PORT !== undefined)
    throw new ConfigError('LIMITER_WORKERS', 'cannot be combined with LIMITER_RLS_PORT yet (run the RLS on LIMITER_WORKERS=1)');
  const redis = config.REDIS_URL !== undefined || (config.REDIS_CLUSTER_NODES?.length ?? 0) > 0;
  if (!redis && config.LIMITER_PUBLIC_ORIGIN !== undefined)
    throw new ConfigError(
      'LIMITER_WORKERS',
      'with LIMITER_PUBLIC_ORIGIN (DPoP) needs REDIS_URL: without Redis each thread would remember only its own DPoP proofs, so a proof could be replayed once per thread',
    );
  // Under /readyz's own 2 s bound on a check (shared/http.ts), so that its answer names the worker
  // that did not answer rather than the check timing out.
  const answerMs = deps.answerMs ?? 1_500;

  // In-process counters: one table for the process. With Redis each worker has its own store.
  const counters: SharedCounters | undefined = redis ? undefined : createSharedCounters({ maxKeys: config.LIMITER_COUNTER_MAX_KEYS });
  const emergency = redis ? createSharedCounters({ maxKeys: Math.min(config.LIMITER_COUNTER_MAX_KEYS, 1_000_000) }) : undefined;
  const port = config.LIMITER_PORT !== 0 ? config.LIMITER_PORT : await freePort(config.HOST);
  const registry = createRegistry('limiter');

  // With a control plane, the process's one working set, here (a quota file with it is refused by
  // each worker's startSidecar, as by one thread).
  let workingSet: (WorkingSet & { cache: QuotaCache }) | undefined;
  let relay: QuotaRelay | undefined;
  if (config.LIMITER_CONTROL_PLANE_URL && !config.LIMITER_QUOTA_FILE) {
    const cache = new QuotaCache(config.LIMITER_QUOTA_CACHE_MAX);
    relay = new QuotaRelay({
      cache,
      log,
      recordsPerReplica: workerConfig(config, { port }).LIMITER_QUOTA_CACHE_MAX,
      maxAgeMs: config.LIMITER_QUOTA_MAX_AGE,
    });
    const ws = await startWorkingSet(config, {
      controlPlaneUrl: config.LIMITER_CONTROL_PLANE_URL,
      cache,
      clock: deps.clock ?? systemClock,
      log,
      registry,
      workingSetWriteDelayMs: deps.workingSetWriteDelayMs,
      relay: relay.hooks(),
    });
    relay.serve(ws.lookup);
    registerWorkingSetMetrics(registry, cache, ws.lookup);
    workingSet = { ...ws, cache };
  }
  const closeWorkingSet = async (): Promise<void> => {
    relay?.close();
    await workingSet?.sync.close();
  };
  const slots: Slot[] = Array.from({ length: n }, (_, index) => ({
    index,
    worker: undefined,
    threadId: undefined,
    startedAt: 0,
    quickDeaths: 0,
    base: 0,
    last: undefined,
    pending: new Map(),
    asking: undefined,
  }));
  /**
   * Counter and histogram series of threads that have exited, folded into one set as they come
   * (a slot that keeps failing must not make this list, and each scrape's sum, grow without end).
   */
  const retired: unknown[][] = [];
  let folding = false;
  const fold = async (): Promise<void> => {
    if (folding || retired.length < 2) return;
    folding = true;
    try {
      const take = retired.length;
      const merged = await AggregatorRegistry.aggregate(retired.slice(0, take)).getMetricsAsJSON();
      // Entries pushed meanwhile are after `take`: kept.
      retired.splice(0, take, merged);
    } catch (err) {
      log.error({ err }, 'folding the metrics of exited worker threads failed');
    } finally {
      folding = false;
    }
    if (retired.length > 1) void fold();
  };
  const pushed = new Array<number>(n).fill(0);
  new Counter({
    name: 'ratelimit_worker_requests',
    help: 'Requests taken by each worker thread slot (LIMITER_WORKERS); a replacement thread continues its slot',
    labelNames: ['worker'],
    registers: [registry],
    collect() {
      for (const s of slots) {
        const total = s.base + (s.last?.requests ?? 0);
        if (total > pushed[s.index]!) this.labels(String(s.index)).inc(total - pushed[s.index]!);
        else if (pushed[s.index] === 0) this.labels(String(s.index)).inc(0);
        pushed[s.index] = Math.max(total, pushed[s.index]!);
      }
    },
  });

  let nextId = 0;
  const ask = (s: Slot): Promise<MetricsReply | undefined> => {
    const w = s.worker;
    if (!w) return Promise.resolve(undefined);
    // One question at a time per thread: scrapes and /readyz probes that arrive while it is asked
    // share its answer, so a flood of them neither piles messages on a slow thread nor makes a
    // thread serialise its registry once per request (a thread that does not answer is asked again
    // at most every `answerMs`).
    if (s.asking?.worker === w) return s.asking.answer;
    const id = ++nextId;
    const answer = new Promise<MetricsReply | undefined>((res) => {
      const timer = setTimeout(() => {
        s.pending.delete(id);
        res(undefined);
      }, answerMs);
      s.pending.set(id, (r) => {
        clearTimeout(timer);
        s.pending.delete(id);
        if (r) s.last = r;
        res(r);
      });
      w.postMessage({ op: 'metrics', id } satisfies ToWorker);
    });
    s.asking = { worker: w, answer };
    void answer.then(() => {
      if (s.asking?.answer === answer) s.asking = undefined;
    });
    return answer;
  };

  let closing = false;
  let started = false;
  const spawn = (s: Slot): Promise<void> =>
    new Promise((resolve, reject) => {
      // A new thread's channel to the working set, with its current state (quota-relay.ts).
      const replica = relay?.attach();
      const init: WorkerInit = {
        slot: s.index,
        config: workerConfig(config, { port }),
        ...(replica ? { replica: replica.init } : {}),
        counters,
        emergency,
        ...(deps.clock ? { clock: deps.clock.buffer } : {}),
        ...(deps.jwks ? { jwks: deps.jwks } : {}),
        ...(deps.preload ? { preload: deps.preload } : {}),
      };
      let w: Worker;
      try {
        w = new Worker(WORKER_URL, {
          workerData: init,
          ...(replica ? { transferList: [replica.init.port] } : {}),
          ...(deps.execArgv ? { execArgv: deps.execArgv } : {}),
        });
      } catch (err) {
        // No thread: acks must not wait for it.
        replica?.detach();
        throw err;
      }
      s.worker = w;
      s.threadId = w.threadId;
      s.startedAt = Date.now();
      s.last = undefined;
      let listening = false;
      w.on('message', (m: FromWorker) => {
        if (m.op === 'listening') {
          listening = true;
          resolve();
        } else if (m.op === 'failed') {
          // A configuration error stays one (shared/lifecycle.ts: its own line, exit 78, not retried).
          if (m.variable !== undefined) reject(new ConfigError(m.variable, m.message.replace(`config: ${m.variable} `, '')));
          else reject(Object.assign(new Error(m.message), { code: m.code }));
        } else if (m.op === 'metrics') s.pending.get(m.id)?.(m);
      });
      w.on('error', (err) => {
        log.error({ err, worker: s.index }, 'worker thread error');
        if (!listening) reject(err);
      });
      w.on('exit', (code) => {
        // Acks stop waiting for it; its replacement starts from the working set as it is then.
        replica?.detach();
        if (s.worker === w) {
          s.worker = undefined;
          s.threadId = undefined;
        }
        for (const done of [...s.pending.values()]) done(undefined);
        if (!listening) {
          reject(new Error(`worker ${s.index} exited with code ${code} before it listened`));
          if (closing || !started) return;
        }
        if (closing) return;
        // Keep what the thread counted (as of its last answer) so the process's totals never go down.
        s.base += s.last?.requests ?? 0;
        if (s.last) {
          retired.push(cumulative(s.last.json));
          void fold();
        }
        s.last = undefined;
        const quick = Date.now() - s.startedAt < 1_000;
        s.quickDeaths = quick ? s.quickDeaths + 1 : 0;
        const delay = quick ? Math.min(5_000, 100 * 2 ** (s.quickDeaths - 1)) : 0;
        log.error({ worker: s.index, code, restartInMs: delay }, 'worker thread exited: starting a replacement on the same counters');
        setTimeout(() => {
          if (closing) return;
          spawn(s).then(
            () => log.info({ worker: s.index, thread: s.threadId }, 'replacement worker thread serving'),
            (err: unknown) => log.error({ err, worker: s.index }, 'replacement worker thread did not start'),
          );
        }, delay);
      });
    });

  const drain = async (graceMs: number): Promise<void> => {
    const live = slots.flatMap((s) => (s.worker ? [s.worker] : []));
    // The process exits when SHUTDOWN_GRACE ends (shared/lifecycle.ts), and a process that exits,
    // or a thread terminated from here, while a thread still holds an open uWS app aborts (exit 134,
    // measured). So each thread finishes its requests within most of the grace and, whatever is
    // left (an upstream or Redis close that hangs), closes its app and exits by itself before the
    // grace ends.
    const margin = Math.min(2_000, Math.floor(graceMs / 5));
    const drainMs = graceMs - margin;
    const exitMs = graceMs - Math.floor(margin / 2);
    await Promise.all(
      live.map(
        (w) =>
          new Promise<void>((res) => {
            // Past the grace and a margin, a thread that has not gone (its event loop blocked) is
            // stopped from outside: that aborts the process if the thread still holds its uWS app.
            const timer = setTimeout(() => {
              log.error({ thread: w.threadId }, 'worker thread did not drain in time: terminating it');
              void w.terminate();
            }, graceMs + 2_000);
            w.once('exit', () => {
              clearTimeout(timer);
              res();
            });
            w.postMessage({ op: 'drain', graceMs: drainMs, exitMs } satisfies ToWorker);
          }),
      ),
    );
  };

  try {
    await Promise.all(slots.map(spawn));
  } catch (err) {
    closing = true;
    await drain(0);
    await closeWorkingSet();
    throw err;
  }
  started = true;

  const processRegistry = new (class extends Registry {
    override async metrics(): Promise<string> {
      const answers = await Promise.all(slots.map(ask));
      const json = answers.flatMap((a, i) => {
        const last = a ?? slots[i]!.last;
        return last ? [last.json] : [];
      });
      const own = await registry.getMetricsAsJSON();
      return AggregatorRegistry.aggregate([own, ...json, ...retired] as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
    }
  })();
  const checks: HealthCheck[] = [
    {
      name: 'workers',
      check: async () => {
        const answers = await Promise.all(slots.map(ask));
        const down = answers.flatMap((a, i) => (a ? [] : [i]));
        if (down.length > 0) throw new Error(`worker ${down.join(', ')} not serving`);
        if (workingSet && !workingSet.sync.ready()) throw new Error('no quota snapshot loaded');
        const cold = answers.flatMap((a, i) => (a!.ready ? [] : [i]));
        if (cold.length > 0) throw new Error(`worker ${cold.join(', ')}: no quota snapshot loaded`);
      },
    },
  ];
  const admin = App();
  operationalRoutes(admin, { log, maxBodyBytes: 1024, registry: processRegistry, draining: () => closing, checks });
  let adminSock;
  try {
    adminSock = await listen(admin, config.HOST, config.LIMITER_ADMIN_PORT);
  } catch (err) {
    closing = true;
    await drain(0);
    await closeWorkingSet();
    throw Object.assign(new Error(`port ${config.LIMITER_ADMIN_PORT} is in use or not available`), { cause: err, code: 'EADDRINUSE' });
  }
  log.info(
    {
      port,
      admin: adminSock.port,
      workers: n,
      store: redis ? 'redis' : 'memory (shared by the workers)',
      ...(workingSet ? { sidecar_id: workingSet.sync.status().sidecarId } : {}),
    },
    'sidecar listening',
  );

  return {
    port,
    adminPort: adminSock.port,
    urls: { data: `http://${config.HOST}:${port}`, admin: `http://${config.HOST}:${adminSock.port}` },
    threadIds: () => slots.map((s) => s.threadId),
    post(slot, message) {
      slots[slot]?.worker?.postMessage(message);
    },
    workingSet,
    async close(graceMs = 10_000) {
      if (closing) return;
      closing = true;
      await drain(graceMs);
      // After the workers: the last-known-good file is written once more, with the last sync time.
      await closeWorkingSet();
      closeListenSocket(adminSock.socket);
      closeApp(admin);
    },
  };
}
