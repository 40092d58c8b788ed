/**
 * The catalogue of every environment variable the platform reads: default, meaning, parser, and
 * which processes read it. The README's configuration table is checked against this list by
 * test/shared/config.test.ts, in both directions. Add a variable here, then to the README.
 */
import { bool, bytes, duration, int, list, nonEmpty, num, oneOf, port, url, type VarSpec } from './config.js';

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
  // ── limiter (sidecar) ─────────────────────────────────────────────────────
  NOTIFIER_URL: v({
    default: 'http://127.0.0.1:8082',
    services: ['limiter'],
    description: 'Origin of the notifier; the sidecar routes /api/v1 there',
    parse: url(['http', 'https']),
  }),
  IDENTITY_URL: v({
    default: 'http://127.0.0.1:8083',
    services: ['limiter', 'control-plane'],
    description: "Origin of the identity service; the sidecar routes identity's paths there and fetches its JWKS",
    parse: url(['http', 'https']),
  }),
  LIMITER_ROUTES: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description:
      'Extra routes: comma-separated `/prefix=http://host:port`, each optionally `;auth=optional` and `;class=default|public_read|auth|payment|sms`; override the defaults on the same prefix',
    parse: (raw) => raw,
  }),
  LIMITER_QUOTA_FILE: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description: 'Path of a quota snapshot (JSON) to load at start, for standalone use without a control plane',
    parse: nonEmpty,
  }),
  LIMITER_QUOTA_CACHE_MAX: v({
    default: '1000000',
    services: ['limiter'],
    description: 'Most quota records the sidecar keeps in its local cache',
    parse: int(1, 100_000_000),
  }),
  LIMITER_DEFAULT_PLAN: v({
    default: 'default',
    services: ['limiter'],
    description: 'Plan applied to signed-in callers with no quota of their own and no plan claim (the quota record `plan:<name>`)',
    parse: nonEmpty,
  }),
  LIMITER_DEFAULT_RATE: v({
    default: '100',
    services: ['limiter'],
    description: 'Requests per interval of the built-in default plan, used when the snapshot has no `plan:<LIMITER_DEFAULT_PLAN>`',
    parse: int(1, 1_000_000_000),
  }),
  LIMITER_DEFAULT_BURST: v({
    default: '200',
    services: ['limiter'],
    description: 'Burst (bucket capacity) of the built-in default plan',
    parse: int(1, 1_000_000_000),
  }),
  LIMITER_DEFAULT_INTERVAL: v({
    default: '1s',
    services: ['limiter'],
    description: 'Interval of the built-in default plan',
    parse: duration,
  }),
  LIMITER_IP_RATE: v({
    default: '20',
    services: ['limiter'],
    description: 'Per-IP requests per second on routes that take no credentials (login, signup, token, authorize, well-known)',
    parse: int(1, 1_000_000_000),
  }),
  LIMITER_IP_BURST: v({
    default: '40',
    services: ['limiter'],
    description: 'Per-IP burst on routes that take no credentials',
    parse: int(1, 1_000_000_000),
  }),
  LIMITER_GLOBAL_RATE: v({
    default: '0',
    services: ['limiter'],
    description: 'Requests per second of the global bucket every request is also charged to; 0 disables it',
    parse: int(0, 1_000_000_000),
  }),
  LIMITER_GLOBAL_BURST: v({
    default: '0',
    services: ['limiter'],
    description: 'Burst of the global bucket (defaults to twice its rate when 0)',
    parse: int(0, 1_000_000_000),
  }),
  LIMITER_SHADOW: v({
    default: 'false',
    services: ['limiter'],
    description: 'Global shadow mode: decide, count, log and set headers, never deny',
    parse: bool,
  }),
  LIMITER_COUNTER_MAX_KEYS: v({
    default: '1000000',
    services: ['limiter'],
    description: 'Most buckets the in-memory counter store keeps (least recently used are evicted and start full again)',
    parse: int(1000, 100_000_000),
  }),
  LIMITER_REDIS_TIMEOUT: v({
    default: '50ms',
    services: ['limiter'],
    description: 'Deadline of one counter-store call to Redis; past it the call counts as a failure',
    parse: duration,
  }),
  LIMITER_REDIS_PREFIX: v({
    default: 'rl',
    services: ['limiter'],
    description: 'First part of every Redis key the sidecar writes (`<prefix>:v1:{s<shard>}:…`); sidecars sharing quotas share it',
    parse: (raw) => {
      if (!/^[A-Za-z0-9_.-]{1,32}$/.test(raw)) throw new Error('must be 1–32 characters of letters, digits, _ . -');
      return raw;
    },
  }),
  LIMITER_CANDIDATE_SCRIPT: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description:
      'Path of a candidate admission Lua script to dual-run in shadow beside the enforcing one (Redis only); disagreements are counted in ratelimit_shadow_script_disagreements',
    parse: nonEmpty,
  }),
  LIMITER_CANDIDATE_LAYOUT: v({
    default: 'v2',
    services: ['limiter'],
    description: 'Key layout version the candidate script writes under (never the enforcing `v1`)',
    parse: (raw) => {
      if (!/^v[0-9]{1,4}$/.test(raw) || raw === 'v1') throw new Error('must be a layout version like v2, other than v1');
      return raw;
    },
  }),
  LIMITER_REDIS_CONNECT_TIMEOUT: v({
    default: '2s',
    services: ['limiter'],
    description: 'Connect timeout to Redis (separate from the per-call deadline)',
    parse: duration,
  }),
  LIMITER_GLOBAL_SHARDS: v({
    default: '16',
    services: ['limiter'],
    description: 'Shards of the global bucket on Redis Cluster (each holds rate/shards); 1 on a standalone Redis',
    parse: int(1, 1024),
  }),
  LIMITER_BREAKER_THRESHOLD: v({
    default: '0.5',
    services: ['limiter'],
    description: 'Error rate of counter-store calls (0..1) that opens the circuit',
    parse: num(0.01, 1),
  }),
  LIMITER_BREAKER_MIN_VOLUME: v({
    default: '20',
    services: ['limiter'],
    description: 'Calls in the window before the error rate can open the circuit',
    parse: int(1, 1_000_000),
  }),
  LIMITER_BREAKER_WINDOW: v({
    default: '10s',
    services: ['limiter'],
    description: 'Rolling window over which the counter-store error rate is measured',
    parse: duration,
  }),
  LIMITER_BREAKER_COOLDOWN: v({
    default: '5s',
    services: ['limiter'],
    description: 'How long the circuit stays open before half-open probes try the store again',
    parse: duration,
  }),
  LIMITER_EMERGENCY_FACTOR: v({
    default: '5',
    services: ['limiter'],
    description: 'While failing open, each subject is held to this many times its plan limit, counted in process',
    parse: num(1, 1000),
  }),
  LIMITER_FAIL_CLOSED_STATUS: v({
    default: '503',
    services: ['limiter'],
    description: 'Status of a request denied because the store is down and the route fails closed: 503 or 429',
    parse: (raw) => Number(oneOf(['429', '503'])(raw)),
  }),
  LIMITER_DECISION_SAMPLE_RATE: v({
    default: '0.01',
    services: ['limiter'],
    description: 'Fraction of decisions logged as sampled decision events (hashed subject, route, allowed, remaining, ts)',
    parse: num(0, 1),
  }),
  LIMITER_MAX_BODY: v({
    default: '10mb',
    services: ['limiter'],
    description: 'Largest request body the sidecar forwards (413 above it)',
    parse: bytes,
  }),
  LIMITER_BUFFER_BODY: v({
    default: '64kb',
    services: ['limiter'],
    description: 'Request bodies up to this size are buffered before forwarding; larger ones stream',
    parse: bytes,
  }),
  LIMITER_MAX_HEADERS_SIZE: v({
    default: '16kb',
    services: ['limiter'],
    description: 'Largest request header block (names and values) the sidecar accepts (431 above it)',
    parse: bytes,
  }),
  LIMITER_TRUST_PROXY: v({
    default: 'false',
    services: ['limiter'],
    description: 'Take the client address from X-Forwarded-For (only behind a trusted load balancer)',
    parse: bool,
  }),
  LIMITER_SERVICE_ROLES: v({
    default: 'service,admin',
    services: ['limiter'],
    description: 'Roles that may call /api/v1/users/{user_id}/... for any user',
    parse: list(nonEmpty),
  }),
  UPSTREAM_TIMEOUT: v({
    default: '30s',
    services: ['limiter'],
    description: 'Time an upstream has to send its response headers, and the longest gap between body chunks (504)',
    parse: duration,
  }),
  UPSTREAM_CONNECT_TIMEOUT: v({ default: '5s', services: ['limiter'], description: 'Connect timeout to an upstream', parse: duration }),
  UPSTREAM_CONNECTIONS: v({
    default: '128',
    services: ['limiter'],
    description: 'Keep-alive connections per upstream',
    parse: int(1, 10_000),
  }),
  UPSTREAM_PIPELINING: v({
    default: '1',
    services: ['limiter'],
    description: 'HTTP/1.1 pipelining depth per upstream connection',
    parse: int(1, 128),
  }),
  // ── quota sync (sidecar) ──────────────────────────────────────────────────
  LIMITER_CONTROL_PLANE_URL: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description:
      "host:port of the control plane's gRPC sync service the sidecar watches and polls; unset, the sidecar does not sync (standalone, LIMITER_QUOTA_FILE)",
    parse: (raw) => {
      const target = raw.trim();
      if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$/.test(target)) throw new Error('must be host:port');
      return target;
    },
  }),
  SIDECAR_ID: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description:
      "Id of this sidecar in the control plane's acked and lagging sidecar lists (e.g. the pod name); default `<hostname>-<pid>`",
    parse: (raw) => {
      if (!/^[\x21-\x7e]{1,128}$/.test(raw)) throw new Error('must be 1 to 128 printable ASCII characters without spaces');
      return raw;
    },
  }),
  LIMITER_SNAPSHOT_FILE: v({
    default: '.data/limiter-snapshot.json',
    services: ['limiter'],
    description:
      'Where a syncing sidecar keeps its last-known-good quota snapshot (relative to the project root), loaded at start so it serves quotas while the control plane is down',
    parse: nonEmpty,
  }),
  LIMITER_QUOTA_MAX_AGE: v({
    default: '5m',
    services: ['limiter'],
    description:
      'Past this long since the last successful sync, every synced quota is held to the built-in default plan (LIMITER_DEFAULT_*) until the sync succeeds again; 0 never',
    parse: duration,
  }),
  LIMITER_SYNC_POLL_INTERVAL: v({
    default: '5s',
    services: ['limiter'],
    description: 'How often a syncing sidecar also polls the control plane for a newer snapshot (a missed push is then harmless)',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 100) throw new Error('must be at least 100ms');
      return ms;
    },
  }),
  // ── control plane ─────────────────────────────────────────────────────────
  ADMIN_TOKEN: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['control-plane'],
    description:
      'Bearer token for the admin API (gRPC QuotaAdminService and /internal/quotas; also read by `npm run quota`); unset, only access tokens with role `admin` are accepted',
    // A short shared secret is guessable; 16 characters is the floor, not the recommendation.
    parse: (raw) => {
      if (raw.trim().length < 16) throw new Error('must be at least 16 characters');
      return raw;
    },
  }),
  CONTROL_PLANE_SYNC_TOKEN: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['control-plane', 'limiter'],
    description:
      'Bearer token of the sync service (Watch, Snapshot, Ack): the control plane requires it, sidecars send it; unset, the sync service is open (a private network only)',
    // A short shared secret is guessable; 16 characters is the floor, not the recommendation.
    parse: (raw) => {
      if (raw.trim().length < 16) throw new Error('must be at least 16 characters');
      return raw;
    },
  }),
  CONTROL_PLANE_ACK_TIMEOUT: v({
    default: '2s',
    services: ['control-plane'],
    description:
      'How long a quota write waits for every connected sidecar to ack the new version before answering with the laggards (gRPC ack_timeout_ms 0 takes this)',
    parse: duration,
  }),
  CONTROL_PLANE_CHANGELOG_KEEP: v({
    default: '10000',
    services: ['control-plane'],
    description: 'Versions kept in the change log; a sidecar further behind than this gets a full snapshot instead of deltas',
    parse: int(1, 10_000_000),
  }),
  CONTROL_PLANE_POLL_INTERVAL: v({
    default: '1s',
    services: ['control-plane'],
    description: 'How often each replica polls the table version, so a missed LISTEN/NOTIFY wake-up costs at most this delay',
    parse: duration,
  }),
  CONTROL_PLANE_HEARTBEAT: v({
    default: '10s',
    services: ['control-plane'],
    description: 'An idle Watch stream gets an empty delta at the current version this often (keeps it alive, dates the sidecar copy)',
    parse: duration,
  }),
  CONTROL_PLANE_GRPC_URL: v({
    default: '127.0.0.1:50051',
    services: ['control-plane'],
    description: 'host:port of the control-plane gRPC server, for the admin CLI (`npm run quota`)',
    parse: nonEmpty,
  }),
  // ── tokens (verified at the edge and by identity) ─────────────────────────
  JWT_ISSUER: v({
    default: 'http://127.0.0.1:8083',
    services: ['limiter', 'identity', 'control-plane'],
    description: "Expected `iss` of access tokens (identity's issuer URL)",
    parse: nonEmpty,
  }),
  JWT_AUDIENCE: v({
    default: 'edge-api',
    services: ['limiter', 'identity', 'control-plane'],
    description: 'Expected `aud` of access tokens: the API audience',
    parse: nonEmpty,
  }),
  JWKS_URL: v({
    default: undefined,
    optional: true,
    services: ['limiter', 'control-plane'],
    description: 'Where the sidecar and the control plane fetch signing keys; default IDENTITY_URL + /.well-known/jwks.json',
    parse: url(['http', 'https']),
  }),
  JWT_CLOCK_SKEW: v({
    default: '60s',
    services: ['limiter', 'identity', 'control-plane'],
    description: 'Clock skew tolerated on exp, nbf and iat',
    parse: duration,
  }),
  JWKS_REFETCH_COOLDOWN: v({
    default: '30s',
    services: ['limiter', 'control-plane'],
    description: 'An unknown kid refetches the key set at most once per this period',
    parse: duration,
  }),
  // ── test harness (npm test) ───────────────────────────────────────────────
  TEST_REDIS_CLUSTER_NODES: v({
    default: undefined,
    optional: true,
    services: ['test'],
    description: 'Comma-separated host:port of a 3-master Redis Cluster for the tests; unset, `npm test` starts one from redis-server',
    parse: list(nonEmpty),
  }),
} satisfies Record<string, VarSpec<unknown>>;

export type EnvCatalog = typeof ENV;
