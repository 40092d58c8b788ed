/**
 * The quota control plane's core, started in-process by main.ts and by tests.
 *
 * One process serves, over one PostgreSQL database (migrations/ applied at start):
 * - HTTP (CONTROL_PLANE_HTTP_PORT): the internal API `/internal/quotas/{api_key}`, `/healthz`,
 *   `/readyz`, `/metrics`;
 * - gRPC (CONTROL_PLANE_GRPC_PORT): quota.v1.QuotaAdminService (admin-only) and
 *   quota.v1.QuotaSyncService (Watch / Snapshot / Ack, for sidecars), with grpc.health.v1.Health
 *   and server reflection (shared/grpc-health.ts, shared/grpc-reflection.ts).
 *
 * Several replicas may share the database: each keeps its own in-memory copy of the table, woken by
 * LISTEN/NOTIFY and kept honest by polling the version (CONTROL_PLANE_POLL_INTERVAL), and they share
 * which sidecars stream from each and their acks (presence.ts), so a write on any replica waits for
 * every connected sidecar.
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { QuotaAdminService, QuotaSyncService } from '../../proto/gen/quota/v1/quota_pb.js';
import { systemClock, type Clock } from '../../shared/clock.js';
import type { ConfigOf } from '../../shared/config.js';
import { addGrpcService } from '../../shared/grpc.js';
import { addGrpcHealth, GrpcHealth } from '../../shared/grpc-health.js';
import { addGrpcReflection } from '../../shared/grpc-reflection.js';
import { createVerifier } from '../../shared/jwt/index.js';
import type { Logger } from '../../shared/log.js';
import type { Started } from '../../shared/main.js';
import { createRegistry } from '../../shared/metrics.js';
import { openDatabase, postgresCheck, requireDatabaseUrl } from '../../shared/pg-service.js';
import { startHttpService, type HttpService } from '../../shared/service.js';
import { QuotaAdmin } from './admin.js';
import { Authenticator } from './auth.js';
import type { controlPlaneConfig } from './config.js';
import { grpcAdminService } from './grpc-admin.js';
import { SyncService } from './grpc-sync.js';
import { registerHttpApi } from './http-api.js';
import { PgListener } from '../../shared/pg-listener.js';
import { createControlPlaneMetrics } from './metrics.js';
import { QuotaMirror } from './mirror.js';
import { Presence, PRESENCE_CHANNEL } from './presence.js';
import { QuotaTable } from './quota-table.js';
import { SidecarRegistry } from './sidecars.js';
import { CHANGES_CHANNEL, QuotaStore } from './store.js';

export type ControlPlaneConfig = ConfigOf<typeof controlPlaneConfig>;

export interface ControlPlaneDeps {
  /** Default: the system clock. */
  clock?: Clock;
  /** How often open gRPC health Watch streams re-check readiness, ms (default 1 s). */
  healthPollMs?: number;
}

/** A running control plane. */
export interface ControlPlane extends Started {
  /** The HTTP port (internal API, health, metrics). */
  port: number;
  /** The gRPC port (admin and sync services). */
  grpcPort: number;
  /**
   * Ends every Watch stream, stops the gRPC server (graceful, then forced after SHUTDOWN_GRACE),
   * drains HTTP, and closes the LISTEN connection and the pool.
   */
  close(): Promise<void>;
}

export async function startControlPlane(config: ControlPlaneConfig, log: Logger, deps: ControlPlaneDeps = {}): Promise<ControlPlane> {
  const clock = deps.clock ?? systemClock;

  // 1. The database.
  const pool = await openDatabase({
    name: 'control-plane',
    dir: 'limiter/control-plane',
    databaseUrl: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    log,
  });
  const registry = createRegistry('control-plane');
  const metrics = createControlPlaneMetrics(registry);
  // 2. The domain: who may call, the durable store, its in-memory mirror, the sync and admin
  // services, presence.
  const auth = new Authenticator({
    adminToken: config.ADMIN_TOKEN,
    syncToken: config.CONTROL_PLANE_SYNC_TOKEN,
    verifier: () =>
      createVerifier({
        issuer: config.JWT_ISSUER,
        audience: config.JWT_AUDIENCE,
        jwksUrl: config.JWKS_URL ?? `${config.IDENTITY_URL}/.well-known/jwks.json`,
        clockToleranceSec: Math.round(config.JWT_CLOCK_SKEW / 1000),
        jwksCooldownMs: config.JWKS_REFETCH_COOLDOWN,
        log,
      }),
  });
  const sidecars = new SidecarRegistry(clock, metrics);

  const replica = randomUUID().slice(0, 8);

  const store = new QuotaStore(pool, { changelogKeep: config.CONTROL_PLANE_CHANGELOG_KEEP });
  const table = new QuotaTable(config.CONTROL_PLANE_CHANGELOG_KEEP);
  const mirror = new QuotaMirror({
    store,
    table,
    log,
    onAdvance: (version) => {
      metrics.tableVersion.set(version);
      // The mirror advances only once started, after `sync` exists.
      sync.advanced();
    },
  });
  const sync = new SyncService({ mirror, store, sidecars, auth, metrics, log, clock, heartbeatMs: config.CONTROL_PLANE_HEARTBEAT });
  const admin = new QuotaAdmin({ store, mirror, sidecars, log, defaultAckTimeoutMs: config.CONTROL_PLANE_ACK_TIMEOUT });
  const presence = new Presence({ pool, registry: sidecars, replica, announceMs: config.CONTROL_PLANE_HEARTBEAT, log, clock });
  sidecars.observe(presence);
  const listener = new PgListener({
    url: requireDatabaseUrl(config.DATABASE_URL, 'control-plane'),
    channels: [CHANGES_CHANNEL, PRESENCE_CHANNEL],
    applicationName: 'control-plane:listen',
    log,
    onNotification: (channel, payload) => (channel === CHANGES_CHANNEL ? mirror.notified(Number(payload)) : presence.received(payload)),
    // Whatever was committed while we were not listening is picked up now.
    onConnect: () => void mirror.refresh(),
  });
  const server = new grpc.Server({ 'grpc.keepalive_time_ms': 30_000, 'grpc.keepalive_timeout_ms': 10_000 });
  let poll: NodeJS.Timeout | undefined;
  let beat: NodeJS.Timeout | undefined;
  let http: HttpService | undefined;
  let grpcPort: number;
  let health: GrpcHealth | undefined;
  try {
    // The table is loaded before anything is served: no sidecar or admin sees an empty mirror.
    await mirror.start();
    await listener.start();
    presence.hello();
    poll = setInterval(() => void mirror.refresh(), config.CONTROL_PLANE_POLL_INTERVAL);
    let announced = clock.now();
    beat = setInterval(
      () => {
        sync.heartbeat();
        sidecars.sweep();
        if (clock.now() - announced >= config.CONTROL_PLANE_HEARTBEAT) {
          announced = clock.now();
          presence.announce();
        }
      },
      Math.min(config.CONTROL_PLANE_HEARTBEAT, 1000),
    );

    // 3. Serving: HTTP and gRPC, over finished objects.
    http = await startHttpService({
      name: 'control-plane',
      host: config.HOST,
      port: config.CONTROL_PLANE_HTTP_PORT,
      log,
      registry,
      maxBodyBytes: config.MAX_BODY_BYTES,
      checks: [postgresCheck(pool)],
      routes: (app, edge) => registerHttpApi(app, edge, { admin, auth, metrics }),
    });
    addGrpcService(server, QuotaAdminService, grpcAdminService({ admin, auth, metrics, log }));
    addGrpcService(server, QuotaSyncService, sync.implementation());
    // Kubernetes' grpc probe and grpcurl (README, "gRPC health and reflection"). The admin service
    // needs PostgreSQL; the sync service serves the in-memory table through an outage, so only its
    // being up counts for it; "" (the whole server) is every check.
    health = new GrpcHealth({
      services: { [QuotaAdminService.typeName]: [postgresCheck(pool)], [QuotaSyncService.typeName]: [] },
      pollMs: deps.healthPollMs,
    });
    addGrpcHealth(server, health);
    addGrpcReflection(server, [QuotaAdminService, QuotaSyncService]);
    const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
    grpcPort = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${host}:${config.CONTROL_PLANE_GRPC_PORT}`, grpc.ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(Object.assign(err, { port: config.CONTROL_PLANE_GRPC_PORT })) : resolve(port),
      ),
    );
  } catch (err) {
    clearInterval(poll);
    clearInterval(beat);
    presence.close();
    health?.close();
    server.forceShutdown();
    await http?.close(0);
    await listener.close();
    await pool.end().catch(() => {});
    auth.close();
    throw err;
  }
  log.info({ port: grpcPort, host: config.HOST }, 'control-plane gRPC listening');

  let closing: Promise<void> | undefined;
  return {
    port: http.port,
    grpcPort,
    urls: { http: `http://${config.HOST}:${http.port}`, grpc: `${config.HOST}:${grpcPort}` },
    close: () =>
      (closing ??= (async () => {
        clearInterval(poll);
        clearInterval(beat);
        // Health first: a balancer stops sending here before the server stops taking calls.
        health?.shutdown();
        health?.close();
        // Ending the streams tells the other replicas (presence) these sidecars are gone from here.
        sync.closeAll();
        sidecars.close();
        presence.close();
        await shutdownGrpc(server, config.SHUTDOWN_GRACE);
        await http.close(config.SHUTDOWN_GRACE);
        await listener.close();
        await pool.end();
        auth.close();
      })()),
  };
}

/** Stops taking calls and waits for those in flight, up to `graceMs`, then cuts the rest. */
function shutdownGrpc(server: grpc.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
