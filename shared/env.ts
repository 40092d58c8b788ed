/**
 * The catalogue of every environment variable the platform reads: default, meaning, parser, and
 * which processes read it. The README's configuration table is checked against this list by
 * test/shared/config.test.ts, in both directions. Add a variable here, then to the README.
 */
import { bytes, duration, int, list, nonEmpty, oneOf, port, url, type VarSpec } from './config.js';

const v = <T>(spec: VarSpec<T>): VarSpec<T> => spec;

export const ENV = {
  // ── every process ─────────────────────────────────────────────────────────
  LOG_LEVEL: v({
    default: 'info',
    services: ['all'],
    description: 'pino log level: fatal, error, warn, info, debug, trace or silent',
    parse: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  }),
  HOST: v({ default: '127.0.0.1', services: ['all'], description: 'Address every HTTP and gRPC listener binds to', parse: nonEmpty }),
  SHUTDOWN_GRACE: v({
    default: '10s',
    services: ['all'],
    description: 'How long a process drains in-flight work after SIGTERM before it exits',
    parse: duration,
  }),
  DATABASE_URL: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['control-plane', 'notifier', 'identity', 'start', 'test'],
    description: 'PostgreSQL connection string; unset under `npm start` and `npm test` starts an embedded PostgreSQL',
    parse: url(['postgres', 'postgresql']),
  }),
  DATABASE_POOL_MAX: v({
    default: '10',
    services: ['control-plane', 'notifier', 'identity'],
    description: "Maximum connections in each process's PostgreSQL pool",
    parse: int(1, 1000),
  }),
  REDIS_URL: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['limiter', 'test'],
    description: 'Redis URL for shared counters; unset keeps counters in process (exact for a single sidecar)',
    parse: url(['redis', 'rediss']),
  }),
  REDIS_CLUSTER_NODES: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description: 'Comma-separated host:port seed nodes of a Redis Cluster; takes precedence over REDIS_URL',
    parse: list(nonEmpty),
  }),
  EMBEDDED_PG_DIR: v({
    default: '.data/postgres',
    services: ['start'],
    description: 'Data directory of the embedded PostgreSQL started when DATABASE_URL is unset',
    parse: nonEmpty,
  }),
  EMBEDDED_PG_PORT: v({
    default: '0',
    services: ['start'],
    description: 'Port of the embedded PostgreSQL; 0 picks a free one (5432 is often a system PostgreSQL)',
    parse: port,
  }),
  // ── ports ─────────────────────────────────────────────────────────────────
  LIMITER_PORT: v({ default: '8080', services: ['limiter'], description: 'Sidecar data-plane port (all proxied traffic)', parse: port }),
  LIMITER_ADMIN_PORT: v({
    default: '9090',
    services: ['limiter'],
    description: 'Sidecar admin port: /metrics, /healthz, /readyz',
    parse: port,
  }),
  CONTROL_PLANE_HTTP_PORT: v({
    default: '8081',
    services: ['control-plane'],
    description: 'Control-plane internal HTTP API and /metrics, /healthz, /readyz',
    parse: port,
  }),
  CONTROL_PLANE_GRPC_PORT: v({
    default: '50051',
    services: ['control-plane'],
    description: 'Control-plane gRPC port (admin and sync services)',
    parse: port,
  }),
  NOTIFIER_PORT: v({
    default: '8082',
    services: ['notifier'],
    description: 'Notifier HTTP API and /metrics, /healthz, /readyz',
    parse: port,
  }),
  IDENTITY_PORT: v({
    default: '8083',
    services: ['identity'],
    description: 'Identity HTTP API and /metrics, /healthz, /readyz',
    parse: port,
  }),
  SANDBOX_PORT: v({
    default: '8089',
    services: ['sandbox'],
    description: 'Sandbox provider server (FCM-, SMTP- and Twilio-shaped) for npm start and tests',
    parse: port,
  }),
  // ── supervisor (npm start) ────────────────────────────────────────────────
  START_SERVICES: v({
    default: 'control-plane,limiter,notifier,identity',
    services: ['start'],
    description: 'Which services `npm start` runs',
    parse: list(oneOf(['control-plane', 'limiter', 'notifier', 'identity', 'sandbox'])),
  }),
  START_READY_TIMEOUT: v({
    default: '60s',
    services: ['start'],
    description: 'How long `npm start` waits for every service to be ready before it gives up',
    parse: duration,
  }),
  // ── limits on input ───────────────────────────────────────────────────────
  MAX_BODY_BYTES: v({
    default: '1mb',
    services: ['notifier', 'identity', 'control-plane'],
    description: 'Largest request body a service reads',
    parse: bytes,
  }),
  // ── trust between the sidecar and its upstreams ───────────────────────────
  SERVICE_SECRET: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['limiter', 'notifier', 'identity'],
    description: 'Shared secret the sidecar sends upstream in X-Subject-Secret; upstreams trust X-Subject only with it',
    parse: nonEmpty,
  }),
} satisfies Record<string, VarSpec<unknown>>;

export type EnvCatalog = typeof ENV;
