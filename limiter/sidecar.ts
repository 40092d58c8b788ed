/**
 * Assembles the sidecar from its config: counter store, circuit breaker, quota cache, gate, route
 * table, upstream pools, token verifier; the data plane on LIMITER_PORT and the admin endpoints
 * (/metrics, /healthz, /readyz) on LIMITER_ADMIN_PORT; with LIMITER_RLS_PORT, Envoy's rate limit
 * service with gRPC health and reflection (limiter/rls/). Started in-process by main.ts and tests.
 *
 * /readyz is ready once listening and, when a quota source is configured, once a snapshot is
 * loaded. A Redis outage does not make the sidecar unready: it keeps serving under each quota's
 * fail mode, which is the point of having fail modes.
 */
import { readFile } from 'node:fs/promises';
import { App, closeApp, closeListenSocket, listen, requireNativeBuild, type ListenSocket } from '../shared/uws.js';
import { operationalRoutes, InFlight, type HealthCheck } from '../shared/http.js';
import type { Logger } from '../shared/log.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { LimitedLog } from '../shared/log-limit.js';
import { createRegistry, type Registry } from '../shared/metrics.js';
import { CircuitBreaker, breakerMetrics } from '../shared/breaker.js';
import { createVerifier, type Verifier, type JwksDocument } from '../shared/jwt/index.js';
import { create } from '@bufbuild/protobuf';
import { Algorithm, QuotaSchema } from '../proto/gen/quota/v1/quota_pb.js';
import { MemoryCounterStore } from './admission/counter-store.memory.js';
import { checkShardable, RedisCounterStore } from './admission/counter-store.redis.js';
import { MemoryReplayStore, RedisReplayStore, type DpopReplayStore } from '../shared/dpop/index.js';
import { createCounterStore } from './admission/index.js';
import type { SharedCounters } from './admission/shared-counters.js';
import { RefusalCache } from './admission/refusal-cache.js';
import { LeaseStore, RedisLessor } from './admission/lease.js';
import type { CounterStore, GlobalBucket } from './admission/counter-store.js';
import type { LimitParams } from './admission/limit.js';
import { Gate } from './gate.js';
import { QuotaCache, compileQuota, readSnapshotFile } from './quota-cache.js';
import { RouteTable, defaultRoutes, parseRoutes } from './routes.js';
import { Upstreams } from './proxy.js';
import { DataPlane } from './data-plane.js';
import { LimiterMetrics } from './metrics.js';
import { HotKeys } from './hot-keys.js';
import type { QuotaSync } from './quota-sync.js';
import type { QuotaLookup } from './quota-lookup.js';
import type { QuotaReplica } from './quota-replica.js';
import { startWorkingSet } from './working-set.js';
import { registerWorkingSetMetrics } from './quota-lookup-metrics.js';
import { registerRevocationMetrics } from './revocation-metrics.js';
import type { LimiterConfig } from './config.js';
import { ConfigError } from '../shared/config.js';
import { startRlsServer, type RlsServer } from './rls/server.js';

export interface SidecarDeps {
  clock?: Clock;
  /** A static key set instead of fetching IDENTITY_URL's JWKS (tests, standalone). */
  jwks?: JwksDocument;
  random?: () => number;
  /** How often open gRPC health Watch streams on the RLS port re-check readiness, ms (default 1 s). */
  healthPollMs?: number;
  /**
   * In-process counters shared with other threads (admission/shared-counters.ts): used instead of
   * a table of this sidecar's own when no Redis is configured (LIMITER_COUNTER_MAX_KEYS is then
   * the shared counters' bound).
   */
  sharedCounters?: SharedCounters;
  /** How long looked-up records wait before the snapshot file is rewritten, ms (QuotaSync default 10 s). */
  workingSetWriteDelayMs?: number;
  /**
   * The emergency in-process store (fail-open cap while Redis is down) over counters shared with
   * other threads, so N worker threads hold a subject to one emergency cap, not N.
   */
  emergencyCounters?: SharedCounters;
  /**
   * Set in a worker thread of `LIMITER_WORKERS` (limiter/workers.ts): the data plane only. No admin
   * port (the main thread serves it and reports the process), no RLS port, no default Node metrics
   * in this registry (process-wide figures are the main thread's).
   */
  worker?: boolean;
  /**
   * A worker thread of `LIMITER_WORKERS` with a control plane: the thread's copy of the process's
   * working set, kept by the main thread (quota-replica.ts), used instead of a stream and lookups
   * of its own. Its cache is the sidecar's quota cache.
   */
  replica?: QuotaReplica;
}

export interface Sidecar {
  port: number;
  adminPort: number;
  /** The Envoy rate limit service's gRPC port (LIMITER_RLS_PORT); undefined when not served. */
  rlsPort: number | undefined;
  quotas: QuotaCache;
  sync: QuotaSync | undefined;
  /** Lookups of keys not held (with a control plane only). */
  lookup: QuotaLookup | undefined;
  store: CounterStore;
  /** Local refusals and leases over a Redis store (undefined with in-process counters). */
  local: RefusalCache | undefined;
  leases: LeaseStore | undefined;
  breaker: CircuitBreaker;
  urls: Record<string, string>;
  /** This sidecar's metrics (in a worker thread: the thread's, summed by the main thread). */
  registry: Registry;
  /** Requests the data plane has taken since start (each counted once, as it arrives). */
  requests(): number;
  /** What /readyz checks besides listening: a quota snapshot is loaded when a source is configured. */
  quotasReady(): boolean;
  close(graceMs?: number): Promise<void>;
  /**
   * Closes the data app and every connection on it at once (uWS `App.close()`), nothing drained: a
   * worker thread's last act before it exits. A thread that ends with an open uWS app aborts the
   * whole process (`uv_loop_close() while having open handles`, exit 134).
   */
  abort(): void;
}

function planQuota(name: string, algorithm: Algorithm, rate: number, burst: number, intervalMs: number) {
  return compileQuota(create(QuotaSchema, { subjectId: `plan:${name}`, algorithm, rate, burst, intervalMs, plan: name }));
}

/** LIMITER_CANDIDATE_SCRIPT's source and layout version, when one is configured. */
async function readCandidate(config: LimiterConfig): Promise<{ source: string; version: string } | undefined> {
  if (!config.LIMITER_CANDIDATE_SCRIPT) return undefined;
  try {
    return { source: await readFile(config.LIMITER_CANDIDATE_SCRIPT, 'utf8'), version: config.LIMITER_CANDIDATE_LAYOUT };
  } catch (err) {
    throw new ConfigError('LIMITER_CANDIDATE_SCRIPT', `cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

export async function startSidecar(config: LimiterConfig, log: Logger, deps: SidecarDeps = {}): Promise<Sidecar> {
  const clock = deps.clock ?? systemClock;
  const registry = createRegistry('limiter', { defaults: !deps.worker });
  const hotKeys = new HotKeys(clock);
  const metrics = new LimiterMetrics(registry, hotKeys);

  const onBreaker = breakerMetrics(registry);
  const breaker = new CircuitBreaker({
    name: 'counter-store',
    windowMs: config.LIMITER_BREAKER_WINDOW,
    buckets: 10,
    errorThreshold: config.LIMITER_BREAKER_THRESHOLD,
    minVolume: config.LIMITER_BREAKER_MIN_VOLUME,
    coolDownMs: config.LIMITER_BREAKER_COOLDOWN,
    halfOpenProbes: 3,
    clock,
    onStateChange: (name, from, to) => {
      onBreaker(name, from, to);
      if (to === 'open') {
        metrics.failmodeTrips.inc();
        log.warn({ breaker: name }, 'counter store circuit opened: quotas fall back to their fail mode');
      } else if (from === 'open' || from === 'half-open') log.info({ breaker: name, state: to }, 'counter store circuit state changed');
    },
  });

  let global: GlobalBucket | undefined;
  if (config.LIMITER_GLOBAL_RATE > 0) {
    const limit: LimitParams = {
      algorithm: 'token_bucket',
      rate: config.LIMITER_GLOBAL_RATE,
      burst: config.LIMITER_GLOBAL_BURST > 0 ? config.LIMITER_GLOBAL_BURST : config.LIMITER_GLOBAL_RATE * 2,
      intervalMs: 1000,
    };
    global = { name: 'global', limit };
  }

  const clustered = (config.REDIS_CLUSTER_NODES?.length ?? 0) > 0;
  const shards = clustered ? config.LIMITER_GLOBAL_SHARDS : 1;
  if (global && (clustered || config.REDIS_URL)) {
    const why = checkShardable(global.limit, shards);
    if (why) throw new ConfigError('LIMITER_GLOBAL_BURST', why);
  }
  // The one place the store is chosen: limiter/admission/index.ts, createCounterStore.
  const store: CounterStore = createCounterStore({
    kind: 'auto',
    clock,
    url: config.REDIS_URL,
    clusterNodes: clustered ? config.REDIS_CLUSTER_NODES : undefined,
    redis: {
      candidate: await readCandidate(config),
      deadlineMs: config.LIMITER_REDIS_TIMEOUT,
      connectTimeoutMs: config.LIMITER_REDIS_CONNECT_TIMEOUT,
      shards,
      prefix: config.LIMITER_REDIS_PREFIX,
      onConnectionError: (err) => log.warn({ err: { message: err.message } }, 'redis connection error'),
      onShadowDisagreement: () => metrics.scriptDisagreements.inc(),
      onLateReply: (eventLoopMs, redisMs) => metrics.lateReply(eventLoopMs, redisMs),
    },
    memory: {
      maxKeys: config.LIMITER_COUNTER_MAX_KEYS,
      onEvict: (live) => metrics.evictions.labels(String(live)).inc(),
      shared: deps.sharedCounters,
    },
  });
  // Without an offline queue, calls before Redis is connected are refused: wait briefly, but start
  // anyway when it is down — the fail modes exist for exactly that. The memory store is ready at once.
  await store
    .ready(config.LIMITER_REDIS_CONNECT_TIMEOUT)
    .catch((err: unknown) =>
      log.warn(
        { err: { message: err instanceof Error ? err.message : String(err) } },
        'redis is not reachable at start; serving under fail modes until it is',
      ),
    );
  const emergency = new MemoryCounterStore({
    clock,
    maxKeys: Math.min(config.LIMITER_COUNTER_MAX_KEYS, 1_000_000),
    shared: deps.emergencyCounters,
  });
  // Over Redis, answers that need no round trip: certain refusals (refusal-cache.ts) and leased
  // tokens for approximate quotas (lease.ts); both stand aside while the breaker is not closed.
  let admission: CounterStore = store;
  let local: RefusalCache | undefined;
  let leases: LeaseStore | undefined;
  if (store instanceof RedisCounterStore) {
    const active = () => breaker.state === 'closed';
    const m = metrics.local;
    // A candidate script in shadow must see every request: local refusals stand aside then.
    const maxEntries = store.candidateVersion === undefined ? undefined : 0;
    // Leases of approximate quotas are given back to the global bucket too: while any quota is
    // approximate, refusals bound by the global bucket are Redis's to answer.
    const globalCredited = () => quotas.approximate;
    local = new RefusalCache(store, { active, maxEntries, globalCredited, onLocalRefusal: () => m.refusals++ });
    // One line a second while Redis is down, not one per lease given back (shared/log-limit.ts).
    const leaseErrors = new LimitedLog(log, 'lease call to redis failed', clock);
    leases = new LeaseStore(local, new RedisLessor(store), local, {
      active,
      onLease: (event, tokens) => {
        if (event === 'local_admit') m.leaseAdmits++;
        else if (event === 'denied') m.leasesDenied++;
        else {
          m.leasesGranted++;
          m.tokensTaken += tokens;
        }
      },
      onGiveBack: (tokens) => (m.tokensReturned += tokens),
      onError: (err) => leaseErrors.warn({ err: { message: err instanceof Error ? err.message : String(err) } }),
    });
    await leases.start();
    admission = leases;
  }

  const gate = new Gate({
    store: admission,
    emergency,
    emergencyFactor: config.LIMITER_EMERGENCY_FACTOR,
    breaker,
    clock,
    global,
    failClosedStatus: config.LIMITER_FAIL_CLOSED_STATUS,
    shadow: config.LIMITER_SHADOW,
    metrics,
    log,
    sampleRate: config.LIMITER_DECISION_SAMPLE_RATE,
    random: deps.random,
  });

  if (config.LIMITER_QUOTA_FILE && config.LIMITER_CONTROL_PLANE_URL) {
    // The two sources would fight over versions: a file at a higher version would mask the table.
    throw new ConfigError(
      'LIMITER_QUOTA_FILE',
      'cannot be used together with LIMITER_CONTROL_PLANE_URL (quotas come from the control plane)',
    );
  }
  let quotaFile;
  if (config.LIMITER_QUOTA_FILE) {
    try {
      quotaFile = await readSnapshotFile(config.LIMITER_QUOTA_FILE);
    } catch (err) {
      throw new ConfigError('LIMITER_QUOTA_FILE', err instanceof Error ? err.message : String(err));
    }
  }
  // Standalone there is nobody to look an evicted key up from: the whole file is held.
  const quotas = deps.replica?.cache ?? new QuotaCache(Math.max(config.LIMITER_QUOTA_CACHE_MAX, quotaFile?.quotas.length ?? 0));
  if (local) quotas.onChange = (subject) => local.forget(subject);
  if (quotaFile) {
    quotas.apply(quotaFile, clock.now());
    log.info({ version: quotas.version, records: quotas.size }, 'quota file loaded');
  }

  let sync: QuotaSync | undefined;
  // With a control plane the cache is a working set: keys not held are looked up (quota-lookup.ts).
  let lookup: QuotaLookup | undefined;
  // A worker thread of LIMITER_WORKERS has a replica instead: the main thread holds the stream and
  // the lookups, and reports their metrics (quota-relay.ts).
  if (!deps.replica && config.LIMITER_CONTROL_PLANE_URL) {
    ({ sync, lookup } = await startWorkingSet(config, {
      controlPlaneUrl: config.LIMITER_CONTROL_PLANE_URL,
      cache: quotas,
      clock,
      log,
      registry,
      workingSetWriteDelayMs: deps.workingSetWriteDelayMs,
      random: deps.random,
    }));
  }
  if (!deps.replica) registerWorkingSetMetrics(registry, quotas, lookup);

  const routes = new RouteTable([...defaultRoutes(config.NOTIFIER_URL, config.IDENTITY_URL), ...parseRoutes(config.LIMITER_ROUTES ?? '')]);
  const upstreams = new Upstreams(routes.upstreams, {
    connections: config.UPSTREAM_CONNECTIONS,
    pipelining: config.UPSTREAM_PIPELINING,
    headersTimeoutMs: config.UPSTREAM_TIMEOUT,
    bodyTimeoutMs: config.UPSTREAM_TIMEOUT,
    connectTimeoutMs: config.UPSTREAM_CONNECT_TIMEOUT,
    keepAliveTimeoutMs: 30_000,
    client: config.UPSTREAM_CLIENT,
  });

  const jwksUrl = config.JWKS_URL ?? `${config.IDENTITY_URL}/.well-known/jwks.json`;
  const verifier: Verifier = createVerifier({
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
    ...(deps.jwks ? { keys: deps.jwks } : { jwksUrl }),
    clockToleranceSec: Math.round(config.JWT_CLOCK_SKEW / 1000),
    jwksCooldownMs: config.JWKS_REFETCH_COOLDOWN,
    jwksRefreshIntervalMs: config.JWKS_REFRESH_INTERVAL,
    revocationListUrl: revocationListUrl(config, deps.jwks !== undefined),
    revocationRefreshIntervalMs: config.REVOCATION_REFRESH_INTERVAL || undefined,
    clock,
    log,
  });

  registerRevocationMetrics(registry, verifier, clock);

  // DPoP proofs are used once: in Redis (SET NX PX, shared by every sidecar on it, through the
  // counters' fail-fast client, under the decisions' loop-aware deadline) when there is one, else
  // in this process only.
  const redisStore = store instanceof RedisCounterStore ? store : undefined;
  const dpopReplay: DpopReplayStore =
    redisStore !== undefined
      ? new RedisReplayStore(
          { set: (key, value, px, ttlMs, nx) => redisStore.guard(redisStore.client.set(key, value, px, ttlMs, nx)) },
          `${config.LIMITER_REDIS_PREFIX}:dpop:`,
        )
      : // A proof is remembered until iat + window, at most two windows and a second from now.
        new MemoryReplayStore(clock, 3_000_000, 2 * config.DPOP_IAT_WINDOW + 1_000);
  const dpop = config.LIMITER_PUBLIC_ORIGIN
    ? { origins: config.LIMITER_PUBLIC_ORIGIN, iatWindowSec: Math.round(config.DPOP_IAT_WINDOW / 1000), replay: dpopReplay }
    : undefined;

  const inFlight = new InFlight();
  const builtinPlan = planQuota(
    config.LIMITER_DEFAULT_PLAN,
    Algorithm.TOKEN_BUCKET,
    config.LIMITER_DEFAULT_RATE,
    config.LIMITER_DEFAULT_BURST,
    config.LIMITER_DEFAULT_INTERVAL,
  );
  const ipQuota = planQuota('anonymous', Algorithm.TOKEN_BUCKET, config.LIMITER_IP_RATE, config.LIMITER_IP_BURST, 1000);
  const routeIpQuotas = new Map(
    routes.routes.flatMap((r) =>
      r.ipLimit ? [[r.prefix, planQuota('anonymous', Algorithm.TOKEN_BUCKET, r.ipLimit.rate, r.ipLimit.burst, 1000)] as const] : [],
    ),
  );
  const plane = new DataPlane({
    routes,
    upstreams,
    quotas,
    lookup: deps.replica ?? lookup,
    gate,
    verifier,
    dpop,
    clock,
    log,
    metrics,
    hotKeys,
    inFlight,
    defaultPlan: config.LIMITER_DEFAULT_PLAN,
    builtinPlan,
    ipQuota,
    routeIpQuotas,
    sync: deps.replica ?? sync,
    serviceRoles: config.LIMITER_SERVICE_ROLES,
    serviceSecret: config.SERVICE_SECRET,
    trustProxy: config.LIMITER_TRUST_PROXY,
    maxBodyBytes: config.LIMITER_MAX_BODY,
    bufferBodyBytes: config.LIMITER_BUFFER_BODY,
    maxHeaderBytes: config.LIMITER_MAX_HEADERS_SIZE,
    maxUrlBytes: config.LIMITER_MAX_URL,
  });

  const app = App();
  plane.register(app);
  let closing = false;
  const quotasReady = (): boolean =>
    deps.replica ? deps.replica.ready() : sync ? sync.ready() : !config.LIMITER_QUOTA_FILE || quotas.appliedAt !== 0;
  let dataClosed = false;
  /** Closes the data app once (close() and then abort() both may). */
  const closeData = (): void => {
    if (dataClosed) return;
    dataClosed = true;
    closeApp(app);
  };
  const readyChecks: HealthCheck[] =
    config.LIMITER_QUOTA_FILE || sync
      ? [
          {
            name: 'quotas',
            check: async () => {
              if (!quotasReady()) throw new Error('no quota snapshot loaded');
            },
          },
        ]
      : [];
  // A worker thread's admin port is the main thread's (limiter/workers.ts).
  const admin = deps.worker ? undefined : App();
  if (admin) operationalRoutes(admin, { log, maxBodyBytes: 1024, registry, draining: () => closing, checks: readyChecks });

  requireNativeBuild();
  if (deps.worker && config.LIMITER_RLS_PORT !== undefined) throw new ConfigError('LIMITER_RLS_PORT', 'is not served by worker threads');
  const data = await listen(app, config.HOST, config.LIMITER_PORT).catch((err: unknown) => {
    throw Object.assign(new Error(`port ${config.LIMITER_PORT} is in use or not available`), { cause: err, code: 'EADDRINUSE' });
  });
  plane.listenPort = data.port;
  let adminSock: { socket: ListenSocket; port: number } | undefined;
  if (admin) {
    try {
      adminSock = await listen(admin, config.HOST, config.LIMITER_ADMIN_PORT);
    } catch (err) {
      closeListenSocket(data.socket);
      throw Object.assign(new Error(`port ${config.LIMITER_ADMIN_PORT} is in use or not available`), { cause: err, code: 'EADDRINUSE' });
    }
  }
  // Envoy's rate limit service (limiter/rls/), when LIMITER_RLS_PORT is set: the same plane decides.
  let rls: RlsServer | undefined;
  if (config.LIMITER_RLS_PORT !== undefined) {
    try {
      rls = await startRlsServer({
        plane,
        routes,
        clock,
        log,
        registry,
        limits: {
          maxDescriptors: config.LIMITER_RLS_MAX_DESCRIPTORS,
          maxEntries: config.LIMITER_RLS_MAX_ENTRIES,
          maxValueBytes: config.LIMITER_RLS_MAX_VALUE,
        },
        host: config.HOST,
        port: config.LIMITER_RLS_PORT,
        checks: readyChecks,
        healthPollMs: deps.healthPollMs,
      });
    } catch (err) {
      closeListenSocket(data.socket);
      if (adminSock) closeListenSocket(adminSock.socket);
      throw err;
    }
  }
  log.info({ port: data.port, admin: adminSock?.port, store: store.kind, routes: routes.routes.map((r) => r.prefix) }, 'sidecar listening');

  return {
    port: data.port,
    adminPort: adminSock?.port ?? 0,
    rlsPort: rls?.port,
    quotas,
    sync,
    lookup,
    store,
    local,
    leases,
    breaker,
    urls: {
      data: `http://${config.HOST}:${data.port}`,
      ...(adminSock ? { admin: `http://${config.HOST}:${adminSock.port}` } : {}),
    },
    registry,
    requests: () => plane.requests,
    quotasReady,
    abort() {
      closing = true;
      closeData();
    },
    async close(graceMs = 10_000) {
      if (closing) return;
      closing = true;
      const deadline = Date.now() + graceMs;
      closeListenSocket(data.socket);
      // The RLS drains beside the data plane (its calls must be answered before the store closes).
      const rlsClosed = rls?.close(graceMs);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([inFlight.idle(), new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
      await rlsClosed;
      // Whatever is still in flight after the grace period is cut.
      await upstreams.close(Math.max(0, deadline - Date.now()));
      // Then every connection left (idle keep-alive ones, on both ports): open, a client could
      // still send a request after close() resolved, and each held the event loop of a process
      // embedding the sidecar (a test, a thread) until the client's keep-alive timeout ended it
      // (shared/service.ts says the same of the services).
      closeData();
      await sync?.close();
      if (adminSock) closeListenSocket(adminSock.socket);
      if (admin) closeApp(admin);
      verifier.close();
      await Promise.allSettled([admission.close(), emergency.close()]);
    },
  };
}

/**
 * Where the revocation list is fetched (README, "Revocation and the edge"): REVOCATION_LIST_URL,
 * else beside the key set (the origin of JWKS_URL, else IDENTITY_URL). None when
 * REVOCATION_REFRESH_INTERVAL is 0, or when the keys are static and no URL is given.
 */
export function revocationListUrl(config: LimiterConfig, staticKeys: boolean): string | undefined {
  if (config.REVOCATION_REFRESH_INTERVAL === 0) return undefined;
  if (config.REVOCATION_LIST_URL !== undefined) return config.REVOCATION_LIST_URL;
  if (staticKeys) return undefined;
  return new URL(REVOCATION_LIST_PATH, config.JWKS_URL ?? config.IDENTITY_URL).href;
}

/** identity's revocation list, beside its JWKS. */
export const REVOCATION_LIST_PATH = '/.well-known/revoked-tokens.json';
