/**
 * The catalogue of every environment variable the platform reads: default, meaning, parser, and
 * which processes read it. The README's configuration table is checked against this list by
 * test/shared/config.test.ts, in both directions. Add a variable here, then to the README.
 */
import { bool, bytes, duration, int, list, nonEmpty, num, oneOf, port, url, type VarSpec } from './config.js';
import { readServiceAccountKey } from './service-account.js';
import { DEFAULT_NOTIFICATION_TYPES, parseTypeCatalog } from '../notifier/policy/types.js';

/** A provider's name (the `*_RAMP_NAME`s): it labels metrics and delivery records. */
function providerName(raw: string): string {
  if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(raw)) throw new Error('must be a provider name: lower-case letters, digits, - and _, at most 32');
  return raw;
}

const v = <T>(spec: VarSpec<T>): VarSpec<T> => spec;

/** `transactional=32,high=64,normal=32,low=16`: a value per notifier priority tier, every tier named once. */
function tierMap<T>(raw: string, item: (s: string) => T): Record<'transactional' | 'high' | 'normal' | 'low', T> {
  const out: Partial<Record<string, T>> = {};
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '')) {
    const m = /^(transactional|high|normal|low)=(.+)$/.exec(part);
    if (!m) throw new Error(`"${part}" is not tier=value (tiers: transactional, high, normal, low)`);
    if (m[1]! in out) throw new Error(`${m[1]} is given twice`);
    try {
      out[m[1]!] = item(m[2]!.trim());
    } catch (err) {
      throw new Error(`${m[1]}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  for (const t of ['transactional', 'high', 'normal', 'low']) if (!(t in out)) throw new Error(`must give a value for ${t}`);
  return out as Record<'transactional' | 'high' | 'normal' | 'low', T>;
}

/** A duration between `min` and `max` ms, the bounds named in the message as written. */
function durationIn(raw: string, min: number, max: number, minText: string, maxText: string): number {
  const ms = duration(raw);
  if (ms < min || ms > max) throw new Error(`must be between ${minText} and ${maxText}`);
  return ms;
}

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
    services: ['control-plane', 'notifier', 'identity', 'start', 'cli', 'test'],
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
  LIMITER_PORT: v({
    default: '8080',
    services: ['limiter', 'start'],
    description: 'Sidecar data-plane port (all proxied traffic)',
    parse: port,
  }),
  LIMITER_ADMIN_PORT: v({
    default: '9090',
    services: ['limiter', 'start'],
    description: 'Sidecar admin port: /metrics, /healthz, /readyz',
    parse: port,
  }),
  LIMITER_RLS_PORT: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description:
      "Sidecar gRPC port for Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit), with gRPC health and reflection; unset: not served (limiter/rls/README.md)",
    parse: port,
  }),
  CONTROL_PLANE_HTTP_PORT: v({
    default: '8081',
    services: ['control-plane', 'start'],
    description: 'Control-plane internal HTTP API and /metrics, /healthz, /readyz',
    parse: port,
  }),
  CONTROL_PLANE_GRPC_PORT: v({
    default: '50051',
    services: ['control-plane', 'start'],
    description: 'Control-plane gRPC port (admin and sync services)',
    parse: port,
  }),
  NOTIFIER_PORT: v({
    default: '8082',
    services: ['notifier', 'start'],
    description: 'Notifier HTTP API and /metrics, /healthz, /readyz',
    parse: port,
  }),
  IDENTITY_PORT: v({
    default: '8083',
    services: ['identity', 'start'],
    description: 'Identity HTTP API and /metrics, /healthz, /readyz',
    parse: port,
  }),
  SANDBOX_PORT: v({
    default: '8089',
    services: ['sandbox', 'start'],
    description: 'Sandbox provider server (FCM-, SMTP- and Twilio-shaped) for npm start and tests',
    parse: port,
  }),
  // ── supervisor (npm start) ────────────────────────────────────────────────
  START_SERVICES: v({
    default: 'control-plane,limiter,notifier,identity,sandbox,console',
    services: ['start'],
    description: 'Which services `npm start` runs',
    parse: list(oneOf(['control-plane', 'limiter', 'notifier', 'identity', 'sandbox', 'console'])),
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
    services: ['notifier', 'identity', 'control-plane', 'console'],
    description: 'Largest request body a service reads',
    parse: bytes,
  }),
  // ── trust between the sidecar and its upstreams ───────────────────────────
  SERVICE_SECRET: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['limiter', 'notifier', 'identity', 'start'],
    description:
      'Shared secret the sidecar sends upstream in X-Subject-Secret; upstreams trust X-Subject, X-Subject-Role and X-Subject-Address (the client address) only with it',
    parse: nonEmpty,
  }),
  // ── limiter (sidecar) ─────────────────────────────────────────────────────
  NOTIFIER_URL: v({
    default: 'http://127.0.0.1:8082',
    services: ['limiter', 'console'],
    description: 'Origin of the notifier; the sidecar routes /api/v1 there',
    parse: url(['http', 'https']),
  }),
  IDENTITY_URL: v({
    default: 'http://127.0.0.1:8083',
    services: ['limiter', 'control-plane', 'notifier', 'console', 'cli'],
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
    services: ['limiter', 'start'],
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
    description:
      'Global shadow mode: decide, count, log and set headers, never deny for quota (unknown keys, bad tokens and ownership are still refused)',
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
    description:
      "Deadline of one counter-store call to Redis, from the command's write (the sidecar's own event-loop delay not counted); past it the call counts as a failure",
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
  LIMITER_MAX_URL: v({
    default: '8kb',
    services: ['limiter'],
    description: 'Longest request target (path and query) the sidecar accepts (414 above it)',
    parse: bytes,
  }),
  LIMITER_RLS_MAX_DESCRIPTORS: v({
    default: '16',
    services: ['limiter'],
    description: 'Most descriptors one ShouldRateLimit request may carry (more: INVALID_ARGUMENT)',
    parse: int(1, 1000),
  }),
  LIMITER_RLS_MAX_ENTRIES: v({
    default: '16',
    services: ['limiter'],
    description: 'Most entries one rate limit descriptor may carry (more: INVALID_ARGUMENT)',
    parse: int(1, 1000),
  }),
  LIMITER_RLS_MAX_VALUE: v({
    default: '4kb',
    services: ['limiter'],
    description: 'Longest descriptor entry key or value, and the domain, in bytes (longer: INVALID_ARGUMENT)',
    parse: (raw) => {
      const n = bytes(raw);
      if (n < 64 || n > 1024 * 1024) throw new Error('must be between 64b and 1mb');
      return n;
    },
  }),
  LIMITER_TRUST_PROXY: v({
    default: 'false',
    services: ['limiter'],
    description:
      'One trusted proxy in front: limit by the address it appended to X-Forwarded-For (sent upstream as X-Subject-Address), and append to its X-Forwarded-*/Forwarded headers instead of replacing them',
    parse: bool,
  }),
  LIMITER_PUBLIC_ORIGIN: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description:
      'The origin(s) clients call the sidecar at (scheme://host[:port], comma-separated): the htu of a DPoP proof must be one of them plus the canonical path. Behind a load balancer or TLS terminator, the public https origin. Unset: DPoP-bound tokens are refused',
    parse: (raw) => {
      const out = raw
        .split(',')
        .map((o) => o.trim())
        .filter((o) => o !== '');
      if (out.length === 0) throw new Error('must name at least one origin');
      for (const o of out) {
        let u: URL;
        try {
          u = new URL(o);
        } catch {
          throw new Error(`"${o}" is not a URL`);
        }
        if (
          (u.protocol !== 'https:' && u.protocol !== 'http:') ||
          u.pathname !== '/' ||
          u.search !== '' ||
          u.hash !== '' ||
          o.endsWith('/')
        ) {
          throw new Error(`"${o}" must be an http(s) origin: scheme://host[:port], no path`);
        }
      }
      return Object.freeze(out.map((o) => new URL(o).origin));
    },
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
    services: ['limiter', 'start'],
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
    services: ['control-plane', 'start', 'cli'],
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
    services: ['cli'],
    description: 'host:port of the control-plane gRPC server, for the admin CLI (`npm run quota`)',
    parse: nonEmpty,
  }),
  HEALTHCHECK_HOST: v({
    default: '127.0.0.1',
    services: ['healthcheck'],
    description: 'Address the Docker HEALTHCHECK script (bin/healthcheck.ts) probes /healthz on',
    parse: nonEmpty,
  }),
  // ── tokens (verified at the edge and by identity) ─────────────────────────
  JWT_ISSUER: v({
    default: 'http://127.0.0.1:8083',
    services: ['limiter', 'identity', 'control-plane', 'notifier', 'console'],
    description: "Expected `iss` of access tokens (identity's issuer URL)",
    parse: nonEmpty,
  }),
  JWT_AUDIENCE: v({
    default: 'edge-api',
    services: ['limiter', 'identity', 'control-plane', 'notifier'],
    description: 'Expected `aud` of access tokens: the API audience',
    parse: nonEmpty,
  }),
  JWKS_URL: v({
    default: undefined,
    optional: true,
    services: ['limiter', 'control-plane', 'notifier'],
    description: 'Where the sidecar and the control plane fetch signing keys; default IDENTITY_URL + /.well-known/jwks.json',
    parse: url(['http', 'https']),
  }),
  JWT_CLOCK_SKEW: v({
    default: '60s',
    services: ['limiter', 'identity', 'control-plane', 'notifier'],
    description: 'Clock skew tolerated on exp, nbf and iat',
    parse: duration,
  }),
  DPOP_IAT_WINDOW: v({
    default: '60s',
    services: ['limiter', 'identity'],
    description:
      "A DPoP proof's iat may be this far from now, either way; its jti is remembered this long after its iat so it is used once (RFC 9449 §11.1)",
    parse: (raw) => durationIn(raw, 1000, 600_000, '1s', '10m'),
  }),
  JWKS_REFETCH_COOLDOWN: v({
    default: '30s',
    services: ['limiter', 'control-plane', 'notifier'],
    description: 'An unknown kid refetches the key set at most once per this period',
    parse: duration,
  }),
  JWKS_REFRESH_INTERVAL: v({
    default: '5s',
    services: ['limiter'],
    description:
      'How often the sidecar refetches the key set in the background (If-None-Match; a 304 keeps it): a key revoked at identity stops verifying within this plus one fetch',
    parse: (raw) => durationIn(raw, 1_000, 600_000, '1s', '10m'),
  }),
  REVOCATION_LIST_URL: v({
    default: undefined,
    optional: true,
    services: ['limiter'],
    description:
      "Where the sidecar fetches identity's revocation list (revoked token families and access tokens); default the origin of JWKS_URL (else IDENTITY_URL) + /.well-known/revoked-tokens.json",
    parse: url(['http', 'https']),
  }),
  REVOCATION_REFRESH_INTERVAL: v({
    default: '2s',
    services: ['limiter'],
    description:
      'How often the sidecar refetches the revocation list in the background (If-None-Match; a 304 keeps it): a revoked token is refused within this plus one fetch. 0 turns the list off (revoked access tokens then pass until they expire)',
    parse: (raw) => (duration(raw) === 0 ? 0 : durationIn(raw, 250, 600_000, '250ms', '10m')),
  }),
  // ── notifier (core: ingestion, queues, workers, tracking) ─────────────────
  NOTIFIER_WORKERS: v({
    default: 'true',
    services: ['notifier'],
    description: 'Run the routing and delivery workers in this process; false serves the HTTP API only (scale the two apart)',
    parse: bool,
  }),
  NOTIFIER_IDEMPOTENCY_TTL: v({
    default: '24h',
    services: ['notifier'],
    description: "How long a caller's `idempotency_key` is remembered: a repeat within it gets the original 202",
    parse: duration,
  }),
  NOTIFIER_RETRY_SCHEDULE: v({
    default: '1s,5s,30s,2m,10m',
    services: ['notifier'],
    description: 'Delays before each retry of a failed send; after the last, the delivery goes to the dead-letter queue of its channel',
    parse: (raw) => {
      const out = list(duration)(raw);
      if (out.length === 0 || out.length > 20) throw new Error('must list 1 to 20 durations');
      return out;
    },
  }),
  NOTIFIER_CONCURRENCY: v({
    default: 'transactional=32,high=64,normal=32,low=16',
    services: ['notifier'],
    description:
      'Sends in flight per queue (each channel × tier delivery queue, and the routing queue of each tier), by tier; with N in flight and a provider taking L seconds, one queue sends at most N / L per second',
    parse: (raw) => tierMap(raw, int(1, 1000)),
  }),
  NOTIFIER_IDLE_POLL: v({
    default: 'transactional=50ms,high=200ms,normal=1s,low=2s',
    services: ['notifier'],
    description: 'How long a worker waits before polling an empty queue again, by tier (work enqueued by this process wakes it at once)',
    parse: (raw) =>
      tierMap(raw, (s) => {
        const ms = duration(s);
        if (ms < 10 || ms > 60_000) throw new Error('must be between 10ms and 60s');
        return ms;
      }),
  }),
  NOTIFIER_SEND_TIMEOUT: v({
    default: '10s',
    services: ['notifier'],
    description: 'Deadline of one provider call; a delivery left `sending` for twice this (at most this plus 5 s) counts as a crashed send',
    parse: duration,
  }),
  NOTIFIER_JOB_EXPIRE: v({
    default: '60s',
    services: ['notifier'],
    description: 'A queue job held by a worker this long without completing (the worker died) is handed out again',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 1000) throw new Error('must be at least 1s');
      return ms;
    },
  }),
  NOTIFIER_QUEUE_MAINTENANCE: v({
    default: '30s',
    services: ['notifier'],
    description: 'How often pg-boss maintenance runs (re-queues expired jobs of crashed workers, archives finished ones)',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 1000) throw new Error('must be at least 1s');
      return ms;
    },
  }),
  NOTIFIER_RECONCILE_INTERVAL: v({
    default: '60s',
    services: ['notifier'],
    description: 'How often the reconciler looks for notifications and deliveries whose queue wake-up was lost, and sends another',
    parse: (raw) => durationIn(raw, 1000, 3_600_000, '1s', '1h'),
  }),
  NOTIFIER_RECONCILE_GRACE: v({
    default: '2m',
    services: ['notifier'],
    description: 'How long a delivery must have been due (or a notification unrouted) before the reconciler replaces a lost wake-up',
    parse: (raw) => durationIn(raw, 1000, 86_400_000, '1s', '1d'),
  }),
  NOTIFIER_BACKPRESSURE_THRESHOLD: v({
    default: '500',
    services: ['notifier'],
    description: 'Ready transactional and high jobs above which `low` sends are deferred (twice this defers `normal` too)',
    parse: int(1, 10_000_000),
  }),
  NOTIFIER_RETENTION: v({
    default: '90d',
    services: ['notifier'],
    description: 'Notifications, delivery records, dead letters and inbox items older than this are deleted',
    parse: duration,
  }),
  NOTIFIER_RETENTION_SCHEDULE: v({
    default: '17 3 * * *',
    services: ['notifier'],
    description: 'Cron schedule (UTC) of the retention job, a scheduled pg-boss job',
    parse: (raw) => {
      if (raw.trim().split(/\s+/).length !== 5) throw new Error('must be a 5-field cron expression');
      return raw.trim();
    },
  }),
  NOTIFIER_TRACKING_SECRET: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['notifier', 'start'],
    description: 'HMAC key that signs open-pixel URLs; unset, a random key per process (links from before a restart stop counting)',
    parse: (raw) => {
      if (raw.length < 16) throw new Error('must be at least 16 characters');
      return raw;
    },
  }),
  NOTIFIER_PUBLIC_URL: v({
    default: 'http://127.0.0.1:8080',
    services: ['notifier'],
    description: 'Public origin of the API (the sidecar) used in links the notifier sends, such as the e-mail open pixel',
    parse: url(['http', 'https']),
  }),
  NOTIFIER_ADMIN_ROLES: v({
    default: 'admin',
    services: ['notifier'],
    description: 'Roles that may use the operator API under /api/v1/admin (dead-letter queue, segments)',
    parse: list(nonEmpty),
  }),
  NOTIFIER_SERVICE_ROLES: v({
    default: 'service,admin',
    services: ['notifier'],
    description: 'Roles that may send notifications and act for any user (API keys through the sidecar are `service`)',
    parse: list(nonEmpty),
  }),
  NOTIFIER_INBOX_PAGE_SIZE: v({
    default: '20',
    services: ['notifier'],
    description: 'Inbox items per page when the request gives no `limit` (at most 100)',
    parse: int(1, 100),
  }),
  NOTIFIER_SEGMENT_MAX_BYTES: v({
    default: '128mb',
    services: ['notifier'],
    description:
      'Largest segment upload (PUT /api/v1/admin/segments/{id}/members, read as a stream; 413 above it); other routes keep MAX_BODY_BYTES',
    parse: bytes,
  }),
  // ── notifier: provider webhooks (notifier/feedback) ─────────────────────────
  NOTIFIER_SNS_CERT_HOSTS: v({
    default: '^sns\\.[a-z0-9-]+\\.amazonaws\\.com(\\.cn)?$',
    services: ['notifier'],
    description:
      'Pattern (a regular expression) of the hosts an SNS SigningCertURL or SubscribeURL may name, fetched over https only; any other is refused unfetched',
    parse: (raw) => {
      try {
        return new RegExp(raw);
      } catch {
        throw new Error('must be a regular expression');
      }
    },
  }),
  NOTIFIER_SNS_CERT_HTTP_HOSTS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'host:port list also allowed for SNS certificates and SubscribeURLs over plain http: the sandbox under npm start and tests; unset in production',
    parse: list(nonEmpty),
  }),
  NOTIFIER_SNS_CERT_TTL: v({
    default: '1h',
    services: ['notifier'],
    description: 'How long an SNS signing certificate is kept per URL before it is fetched again (never pinned: certificates rotate)',
    parse: duration,
  }),
  NOTIFIER_SES_TOPIC_ARNS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      "SNS topic ARNs the SES events webhook accepts (comma-separated); any other topic is refused (403) and only these topics' subscriptions are confirmed. Unset: the webhook refuses every SNS message (said at start and in /readyz); `npm start` sets the sandbox's topic",
    parse: list(nonEmpty),
  }),
  NOTIFIER_SNS_MAX_AGE: v({
    default: '65m',
    services: ['notifier'],
    description:
      'Oldest SNS `Timestamp` the SES events webhook accepts (SNS retries an HTTP/S delivery for at most 3,600 s; the default adds 5 minutes of clock skew); older, or more than 5 minutes ahead of our clock, is refused (403)',
    parse: (raw) => durationIn(raw, 60_000, 86_400_000, '1m', '24h'),
  }),
  // ── notifier: policies ────────────────────────────────────────────────────
  NOTIFIER_NOTIFICATION_TYPES: v({
    default: 'default',
    services: ['notifier'],
    description:
      'The notification types, as JSON (inline, or the path of a file): per type its `events` patterns, default `channels`, `mandatory`, `sms`, `caps`, `digest` and `failover` (per failing channel, the channels a `high` or `transactional` delivery may fail over to, or `false`; default push → sms, then in_app; e-mail and sms → in_app) (README, "Notification types, preferences and policies" and "Failover"); `default` is the built-in catalogue shown there',
    parse: (raw) => parseTypeCatalog(raw.trim() === 'default' ? DEFAULT_NOTIFICATION_TYPES : raw),
  }),
  NOTIFIER_QUIET_HOURS_TIERS: v({
    default: 'normal',
    services: ['notifier'],
    description:
      "Tiers besides `low` (which always does) that hold sends during the user's quiet hours: `normal`, `high`, both, or `none`; `transactional` never does",
    parse: (raw) => (raw.trim() === 'none' ? [] : list(oneOf(['normal', 'high'] as const))(raw)),
  }),
  NOTIFIER_PREFERENCES_TTL: v({
    default: '30s',
    services: ['notifier'],
    description:
      "How long a replica caches a user's preferences for routing; a write on any replica drops them everywhere at once (LISTEN/NOTIFY), so this is only the backstop",
    parse: (raw) => durationIn(raw, 0, 3_600_000, '0', '1h'),
  }),
  NOTIFIER_PREFERENCES_TIMEOUT: v({
    default: '250ms',
    services: ['notifier'],
    description:
      'How long routing and the check before a send wait for the preference store before applying the conservative default (push only; e-mail and SMS held and checked again)',
    parse: (raw) => durationIn(raw, 10, 10_000, '10ms', '10s'),
  }),
  // ── notifier: campaigns (notifier/campaigns) ─────────────────────────────
  NOTIFIER_CAMPAIGN_SHARD_SIZE: v({
    default: '1000',
    services: ['notifier'],
    description: 'Members per fan-out shard: one queued job, one INSERT and one checkpoint each',
    parse: int(10, 100_000),
  }),
  NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD: v({
    default: '100000',
    services: ['notifier'],
    description:
      'An audience request whose segment has more members than this waits in `pending_approval` until an operator approves or rejects it (0: every one waits)',
    parse: int(0, Number.MAX_SAFE_INTEGER),
  }),
  NOTIFIER_CAMPAIGN_CONCURRENCY: v({
    default: '4',
    services: ['notifier'],
    description:
      'Campaign jobs (planning, shards) each replica runs at once, per tier; a shard spends half its time waiting on round trips and its commit, so twice the cores keeps the database busy',
    parse: int(1, 64),
  }),
  NOTIFIER_CAMPAIGN_QUEUE_DEPTH: v({
    default: '2000',
    services: ['notifier'],
    description:
      "Wake-ups the campaign pump keeps waiting per delivery queue: a campaign's deliveries are put on the queues at delivery speed, never all at once",
    parse: int(10, 1_000_000),
  }),
  NOTIFIER_CAMPAIGN_PUMP_IDLE: v({
    default: '1s',
    services: ['notifier'],
    description:
      "How often the campaign pump looks for due campaign deliveries when it found none (quiet-hours holds falling due, other replicas' shards)",
    parse: (raw) => durationIn(raw, 10, 60_000, '10ms', '1m'),
  }),
  NOTIFIER_CAMPAIGN_STOP_WAIT: v({
    default: '5s',
    services: ['notifier'],
    description: "How long a stop call waits for every live replica's acknowledgement before it answers with those it has",
    parse: (raw) => durationIn(raw, 0, 60_000, '0', '1m'),
  }),
  NOTIFIER_REPLICA_HEARTBEAT: v({
    default: '2s',
    services: ['notifier'],
    description: "Between a notifier replica's heartbeats; a replica silent for three is no longer waited for by a stop",
    parse: (raw) => durationIn(raw, 50, 60_000, '50ms', '1m'),
  }),
  // ── notifier: providers ───────────────────────────────────────────────────
  FCM_URL: v({
    default: 'http://127.0.0.1:8089',
    services: ['notifier'],
    description: 'Base URL of the push provider, FCM HTTP v1 (`https://fcm.googleapis.com`); the default is the sandbox',
    parse: url(['http', 'https']),
  }),
  FCM_PROJECT_ID: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      "Firebase project id, in the FCM path /v1/projects/{id}/messages:send; unset, the service-account key's `project_id`, else `sandbox-project`",
    parse: nonEmpty,
  }),
  FCM_ACCESS_TOKEN: v({
    default: 'sandbox-fcm-token',
    secret: true,
    services: ['notifier', 'sandbox'],
    description: 'Static bearer token sent to FCM (the sandbox requires this value); real FCM needs FCM_SERVICE_ACCOUNT_FILE instead',
    parse: nonEmpty,
  }),
  FCM_SERVICE_ACCOUNT_FILE: v({
    default: undefined,
    optional: true,
    services: ['notifier', 'sandbox'],
    description:
      'A Google service-account key file (JSON); set, FCM gets OAuth 2.0 access tokens minted from it (JWT-bearer grant, refreshed before expiry) instead of FCM_ACCESS_TOKEN, and the sandbox takes only tokens it minted for that key',
    parse: (raw) => readServiceAccountKey(raw),
  }),
  FCM_TOKEN_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      "Where service-account assertions are exchanged for tokens; unset, the key file's `token_uri` (Google's); the sandbox's is `<sandbox>/token`",
    parse: url(['http', 'https']),
  }),
  FCM_SECONDARY_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description: 'Base URL of a secondary FCM v1 push provider for failover (same project and token); unset, none',
    parse: url(['http', 'https']),
  }),
  FCM_RAMP_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Base URL of a new FCM v1 push provider ramped in beside FCM_URL (same project and token), by the weights of the operator API (README, "Replacing a provider"); unset, none',
    parse: url(['http', 'https']),
  }),
  FCM_RAMP_NAME: v({
    default: 'fcm-ramp',
    services: ['notifier'],
    description: 'Name of the FCM_RAMP_URL provider in metrics, delivery records and the operator API',
    parse: providerName,
  }),
  SMTP_URL: v({
    default: 'smtp://127.0.0.1:8090',
    secret: true,
    services: ['notifier'],
    description: 'SMTP server for e-mail, `smtp://[user:password@]host:port` (`smtps://` for implicit TLS); the default is the sandbox',
    parse: url(['smtp', 'smtps']),
  }),
  SMTP_SECONDARY_URL: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['notifier'],
    description: 'A secondary SMTP server for failover, same form as SMTP_URL; unset, none',
    parse: url(['smtp', 'smtps']),
  }),
  SMTP_RAMP_URL: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['notifier'],
    description: 'A new SMTP server ramped in beside SMTP_URL, same form, by the weights of the operator API; unset, none',
    parse: url(['smtp', 'smtps']),
  }),
  SMTP_RAMP_NAME: v({
    default: 'smtp-ramp',
    services: ['notifier'],
    description: 'Name of the SMTP_RAMP_URL provider in metrics, delivery records and the operator API',
    parse: providerName,
  }),
  SMTP_FROM: v({
    default: 'Notifications <notifications@example.test>',
    services: ['notifier'],
    description: 'Sender of e-mails (From); its domain also ends every Message-ID (`<delivery id@domain>`)',
    parse: (raw) => {
      if (!/@[^@\s>]+/.test(raw)) throw new Error('must contain an e-mail address');
      return raw;
    },
  }),
  SMTP_POOL_SIZE: v({
    default: '16',
    services: ['notifier'],
    description:
      "Pooled SMTP connections per e-mail provider; each carries one message at a time, so this bounds the e-mail send rate (raise it with the e-mail queues' concurrency, within what the relay allows)",
    parse: int(1, 1000),
  }),
  SMS_URL: v({
    default: 'http://127.0.0.1:8089',
    services: ['notifier'],
    description: 'Base URL of the Twilio-style SMS API (`https://api.twilio.com`); the default is the sandbox',
    parse: url(['http', 'https']),
  }),
  SMS_SECONDARY_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description: 'Base URL of a secondary Twilio-style SMS provider for failover (same account); unset, none',
    parse: url(['http', 'https']),
  }),
  SMS_RAMP_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Base URL of a new Twilio-style SMS provider ramped in beside SMS_URL (same account), by the weights of the operator API; unset, none',
    parse: url(['http', 'https']),
  }),
  SMS_RAMP_NAME: v({
    default: 'twilio-ramp',
    services: ['notifier'],
    description: 'Name of the SMS_RAMP_URL provider in metrics, delivery records and the operator API',
    parse: providerName,
  }),
  SMS_ACCOUNT_SID: v({
    default: 'ACsandbox',
    services: ['notifier', 'sandbox'],
    description: 'SMS account id: in the API path and the Basic-auth user (the sandbox requires this value)',
    parse: nonEmpty,
  }),
  SMS_AUTH_TOKEN: v({
    default: 'sandbox-sms-token',
    secret: true,
    services: ['notifier', 'sandbox'],
    description: 'SMS auth token, the Basic-auth password (the sandbox requires this value)',
    parse: nonEmpty,
  }),
  SMS_FROM: v({
    default: '+15005550006',
    services: ['notifier'],
    description: 'Sender phone number (From) of SMS',
    parse: nonEmpty,
  }),
  PROVIDER_CONNECTIONS: v({
    default: '32',
    services: ['notifier'],
    description: 'Keep-alive connections per HTTP provider (push, SMS); each provider has its own pool',
    parse: int(1, 10_000),
  }),
  PROVIDER_COSTS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Cost of one accepted send per provider, `name=cost` comma-separated (e.g. `twilio=0.0079,twilio-ramp=0.0065`), counted in `provider_cost_total`; a provider not listed costs 0',
    parse: (raw) => {
      const out = new Map<string, number>();
      for (const [i, item] of raw
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '')
        .entries()) {
        const m = /^([a-z0-9][a-z0-9_-]{0,31})=(\d+(?:\.\d+)?)$/.exec(item);
        if (!m) throw new Error(`item ${i + 1}: must be name=cost, e.g. twilio=0.0079`);
        out.set(m[1]!, Number(m[2]));
      }
      return out;
    },
  }),
  NOTIFIER_RAMP_TEST_EMAILS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Test addresses the shadow copies of e-mail go to during a provider ramp (comma-separated; never the user); unset, no e-mail shadow',
    parse: list((raw) => {
      if (!/^[^@\s]+@[^@\s]+$/.test(raw)) throw new Error('must be an e-mail address');
      return raw;
    }),
  }),
  NOTIFIER_RAMP_TEST_PHONES: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Test numbers (E.164) the shadow copies of SMS go to during a provider ramp (comma-separated; never the user); unset, no SMS shadow',
    parse: list((raw) => {
      if (!/^\+[1-9]\d{6,14}$/.test(raw)) throw new Error('must be an E.164 phone number');
      return raw;
    }),
  }),
  NOTIFIER_RAMP_POLL: v({
    default: '30s',
    services: ['notifier'],
    description: 'How often each replica rereads the provider weights without a NOTIFY (a missed one is caught up within this)',
    parse: duration,
  }),
  PROVIDER_CONNECT_TIMEOUT: v({
    default: '3s',
    services: ['notifier'],
    description: 'Connect (and SMTP greeting) timeout to a provider; the whole call is bounded by the send deadline',
    parse: duration,
  }),
  PROVIDER_BREAKER_THRESHOLD: v({
    default: '0.5',
    services: ['notifier'],
    description: 'Failure share of calls to one provider (errors, timeouts, throttling) that opens its circuit breaker',
    parse: num(0.01, 1),
  }),
  PROVIDER_BREAKER_MIN_VOLUME: v({
    default: '20',
    services: ['notifier'],
    description: "Calls in the window before a provider's failure share can open its breaker",
    parse: int(1, 1_000_000),
  }),
  PROVIDER_BREAKER_WINDOW: v({
    default: '10s',
    services: ['notifier'],
    description: 'Rolling window over which each provider breaker measures failures',
    parse: duration,
  }),
  PROVIDER_BREAKER_COOLDOWN: v({
    default: '15s',
    services: ['notifier'],
    description: 'How long an open provider breaker sends its messages to the retry schedule before probing the provider again',
    parse: duration,
  }),
  SANDBOX_SMTP_PORT: v({
    default: undefined,
    optional: true,
    services: ['sandbox'],
    description: 'SMTP port of the sandbox; unset, SANDBOX_PORT + 1 (8090); 0 picks a free one',
    parse: port,
  }),
  SANDBOX_SEED: v({
    default: '1',
    services: ['sandbox'],
    description: "Seed of the sandbox's fault-injection randomness: the same seed and request order give the same faults",
    parse: int(0, 2 ** 32 - 1),
  }),
  SANDBOX_FAULTS: v({
    default: undefined,
    optional: true,
    services: ['sandbox'],
    description: 'Fault profiles set at start: a JSON array of bodies as POST /sandbox/faults takes them',
    parse: (raw) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        throw new Error('must be a JSON array');
      }
      if (!Array.isArray(parsed)) throw new Error('must be a JSON array');
      return parsed as unknown[];
    },
  }),
  SANDBOX_SNS_ENDPOINT: v({
    default: undefined,
    optional: true,
    services: ['sandbox'],
    description:
      "Where the sandbox posts SES events as SNS notifications (the notifier's /api/v1/webhooks/ses, through the sidecar); unset sends none",
    parse: url(['http', 'https']),
  }),
  SANDBOX_MAX_MESSAGES: v({
    default: '100000',
    services: ['sandbox'],
    description: 'Accepted messages the sandbox keeps for /sandbox/messages and its duplicate counts (oldest dropped first)',
    parse: int(1, 10_000_000),
  }),
  // ── identity: oauth (authorization server: identity/oauth, keys, clients, tokens) ──
  IDENTITY_ACCESS_TOKEN_TTL: v({
    default: '15m',
    services: ['identity'],
    description: 'Lifetime of access tokens issued by the OAuth flows (authorization code, refresh, device, client credentials)',
    parse: (raw) => durationIn(raw, 60_000, 86_400_000, '1m', '24h'),
  }),
  IDENTITY_ID_TOKEN_TTL: v({
    default: '15m',
    services: ['identity'],
    description: 'Lifetime of OpenID Connect id tokens',
    parse: (raw) => durationIn(raw, 60_000, 86_400_000, '1m', '24h'),
  }),
  IDENTITY_REFRESH_TOKEN_TTL: v({
    default: '14d',
    services: ['identity'],
    description: 'Lifetime of a refresh token; every rotation issues a successor with a fresh lifetime',
    parse: (raw) => durationIn(raw, 60_000, 365 * 86_400_000, '1m', '365d'),
  }),
  IDENTITY_REFRESH_GRACE: v({
    default: '30s',
    services: ['identity'],
    description:
      'A rotated-out refresh token presented again within this long gets the same successor (a retried request); later it revokes the whole family. 0 turns the grace off',
    parse: (raw) => durationIn(raw, 0, 300_000, '0', '5m'),
  }),
  IDENTITY_DPOP_NONCE: v({
    default: 'required',
    services: ['identity'],
    description:
      'required: /token and /userinfo accept a DPoP proof only with a current server nonce (use_dpop_nonce and a DPoP-Nonce header otherwise; RFC 9449 §8); off: no nonces',
    parse: oneOf(['required', 'off']),
  }),
  IDENTITY_AUTH_CODE_TTL: v({
    default: '60s',
    services: ['identity'],
    description: 'Lifetime of an authorization code (single use)',
    parse: (raw) => durationIn(raw, 1_000, 600_000, '1s', '10m'),
  }),
  IDENTITY_DEVICE_CODE_TTL: v({
    default: '10m',
    services: ['identity'],
    description: 'Lifetime of a device code and its user code (RFC 8628)',
    parse: (raw) => durationIn(raw, 60_000, 3_600_000, '1m', '1h'),
  }),
  IDENTITY_DEVICE_POLL_INTERVAL: v({
    default: '5s',
    services: ['identity'],
    description: 'Least time between two device-code token polls (whole seconds); a faster poll gets slow_down and 5 s more',
    parse: (raw) => {
      const ms = durationIn(raw, 1_000, 60_000, '1s', '60s');
      if (ms % 1000 !== 0) throw new Error('must be whole seconds');
      return ms;
    },
  }),
  IDENTITY_SIGNING_ALG: v({
    default: 'ES256',
    services: ['identity'],
    description: 'Algorithm of new signing keys: ES256 or RS256 (a change takes effect through the rotation schedule)',
    parse: oneOf(['ES256', 'RS256']),
  }),
  IDENTITY_KEY_ROTATION_INTERVAL: v({
    default: '30d',
    services: ['identity'],
    description: 'How long a signing key signs before the next one is published; 0 rotates only when IDENTITY_SIGNING_ALG changes',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms !== 0 && ms < 3_600_000) throw new Error('must be 0 or at least 1h');
      return ms;
    },
  }),
  IDENTITY_JWKS_MAX_AGE: v({
    default: '15m',
    services: ['identity'],
    description:
      'JWKS cache lifetime: the Cache-Control max-age of /.well-known/jwks.json, and how long a new key is published before it signs',
    parse: (raw) => durationIn(raw, 60_000, 86_400_000, '1m', '24h'),
  }),
  IDENTITY_ADMIN_TOKEN: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['identity', 'start', 'cli'],
    description: 'Bearer token for /auth/admin/clients (client registration); unset, only access tokens with role admin are accepted',
    parse: (raw) => {
      if (raw.length < 32) throw new Error('must be at least 32 characters');
      return raw;
    },
  }),
  // ── identity: events (event store, projections, orders API: identity/events) ──
  IDENTITY_JWKS_URL: v({
    default: undefined,
    optional: true,
    services: ['identity'],
    description:
      'Where identity fetches the keys that verify access tokens on its own resource endpoints (/checkout, /order, /orders, /auth/admin/projections); default JWT_ISSUER + /.well-known/jwks.json',
    parse: url(['http', 'https']),
  }),
  IDENTITY_SNAPSHOT_EVERY: v({
    default: '100',
    services: ['identity'],
    description:
      'A user or order stream gets a snapshot of its state every this many events; loading reads the snapshot and the events after it. 0 turns snapshots off',
    parse: int(0, 1_000_000),
  }),
  IDENTITY_PROJECTIONS: v({
    default: 'true',
    services: ['identity'],
    description: 'Run the projectors (read models, welcome notifications) in this process; false for a replica that only serves',
    parse: bool,
  }),
  IDENTITY_PROJECTION_POLL_INTERVAL: v({
    default: '1s',
    services: ['identity'],
    description:
      'How often each projector polls the event log besides being woken by LISTEN/NOTIFY (a lost notification costs at most this)',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 10 || ms > 600_000) throw new Error('must be between 10ms and 10m');
      return ms;
    },
  }),
  IDENTITY_PROJECTION_BATCH: v({
    default: '1000',
    services: ['identity'],
    description: 'Events a projector reads and applies per transaction',
    parse: int(1, 100_000),
  }),
  IDENTITY_PROJECTION_MAX_ATTEMPTS: v({
    default: '3',
    services: ['identity'],
    description: 'Attempts a projector makes on one failing event before it dead-letters it and moves on',
    parse: int(1, 100),
  }),
  IDENTITY_WAREHOUSE_WINDOW: v({
    default: '1h',
    services: ['identity'],
    description: 'The warehouse queue holds orders placed within this long',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 60_000) throw new Error('must be at least 1m');
      return ms;
    },
  }),
  IDENTITY_ORDER_SELF_DELETE_MAX_TOTAL: v({
    default: '100',
    services: ['identity'],
    description:
      'A customer may delete their own order (delete_own_order) only while it is placed and unpaid and its total is below this amount',
    parse: num(0, 1_000_000_000),
  }),
  // ── identity: accounts (signup, /auth/login throttling: identity/accounts) ──
  IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT: v({
    default: '5',
    services: ['identity'],
    description:
      'Failed sign-ins to one email address (known or not) within IDENTITY_LOGIN_FAILURE_WINDOW before sign-in answers 429 for it (/auth/login, the sign-in page and the device page share the counts)',
    parse: int(1, 1_000_000),
  }),
  IDENTITY_LOGIN_MAX_FAILURES_PER_IP: v({
    default: '20',
    services: ['identity'],
    description:
      'Failed sign-ins from one client address within IDENTITY_LOGIN_FAILURE_WINDOW before sign-in answers 429 for it (/auth/login, the sign-in page and the device page share the counts)',
    parse: int(1, 1_000_000),
  }),
  IDENTITY_LOGIN_FAILURE_WINDOW: v({
    default: '15m',
    services: ['identity'],
    description: 'The window the failed sign-ins are counted in (kept in Postgres, so every identity replica sees the same counts)',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 1000 || ms > 86_400_000) throw new Error('must be between 1s and 24h');
      return ms;
    },
  }),
  IDENTITY_BOOTSTRAP_ADMIN: v({
    default: undefined,
    optional: true,
    services: ['identity'],
    description:
      'E-mail of an account to make admin once (signup only creates customers): promoted at start, or as soon as it signs up; audited in role_changes, never repeated after a demotion. Or run `npm run admin -- promote <email>`',
    parse: (raw) => {
      const email = raw.trim().toLowerCase();
      if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email) || email.length > 254) throw new Error('must be an e-mail address');
      return email;
    },
  }),
  // ── identity: the notification relay (identity/notify) ──────────────────
  IDENTITY_NOTIFY_RELAY: v({
    default: 'true',
    services: ['identity'],
    description:
      "Run the notification relay in this process: it drains notification_outbox (welcome, security alerts) to the notifier and keeps the notifier's recipient profiles in step. Replicas share the work (SKIP LOCKED)",
    parse: bool,
  }),
  IDENTITY_NOTIFY_URL: v({
    default: 'http://127.0.0.1:8080',
    services: ['identity'],
    description: "Where the relay reaches the notifier's /api/v1: the sidecar (the default), which vouches for it as a service caller",
    parse: url(['http', 'https']),
  }),
  IDENTITY_NOTIFY_API_KEY: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['identity'],
    description:
      'API key the relay sends to the sidecar (X-API-Key, role service; give it a quota). Unset: a service access token identity signs for itself (sub identity-notify-relay)',
    parse: nonEmpty,
  }),
  IDENTITY_NOTIFY_POLL_INTERVAL: v({
    default: '1s',
    services: ['identity'],
    description: 'How often an idle relay looks for outbox rows and profiles to send',
    parse: (raw) => durationIn(raw, 10, 600_000, '10ms', '10m'),
  }),
  IDENTITY_NOTIFY_RETRY_MIN: v({
    default: '1s',
    services: ['identity'],
    description:
      "The relay's first retry delay after the notifier did not accept a row; doubles per attempt (with jitter) up to IDENTITY_NOTIFY_RETRY_MAX",
    parse: (raw) => durationIn(raw, 10, 3_600_000, '10ms', '1h'),
  }),
  IDENTITY_NOTIFY_RETRY_MAX: v({
    default: '5m',
    services: ['identity'],
    description:
      "The relay's longest retry delay; a row is retried at least this often until the notifier accepts it (or refuses it for good: parked)",
    parse: (raw) => durationIn(raw, 10, 86_400_000, '10ms', '24h'),
  }),
  IDENTITY_NOTIFY_TIMEOUT: v({
    default: '10s',
    services: ['identity'],
    description: 'How long the relay waits for one answer from the notifier (it holds the row lock meanwhile)',
    parse: (raw) => durationIn(raw, 100, 30_000, '100ms', '30s'),
  }),
  // ── operator console (console/) ───────────────────────────────────────────
  CONSOLE_PORT: v({
    default: '8084',
    services: ['console', 'start'],
    description: 'Operator console (web pages) and /metrics, /healthz, /readyz',
    parse: port,
  }),
  CONSOLE_PUBLIC_URL: v({
    default: 'http://127.0.0.1:8084',
    services: ['console', 'start'],
    description:
      "The console's origin as browsers reach it: the OAuth redirect URI is this + /auth/callback, a form post's Origin must equal it, and an https URL makes the cookies Secure (and __Host- named)",
    parse: url(['http', 'https']),
  }),
  CONSOLE_CLIENT_ID: v({
    default: 'console',
    services: ['console', 'start'],
    description: "The console's OAuth client id at identity (a confidential client with the code and refresh grants)",
    parse: nonEmpty,
  }),
  CONSOLE_CLIENT_SECRET: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['console'],
    description:
      "The console's client secret (required by the console); `npm start` registers the client and hands the secret to the console itself",
    parse: nonEmpty,
  }),
  CONSOLE_IDENTITY_PUBLIC_URL: v({
    default: undefined,
    optional: true,
    services: ['console'],
    description: "Identity's origin as browsers reach it (where the console sends them to sign in); default IDENTITY_URL",
    parse: url(['http', 'https']),
  }),
  CONSOLE_CONTROL_PLANE_URL: v({
    default: 'http://127.0.0.1:8081',
    services: ['console'],
    description: "Origin of the control plane's internal HTTP API (the quotas pages)",
    parse: url(['http', 'https']),
  }),
  CONSOLE_SESSION_IDLE: v({
    default: '30m',
    services: ['console'],
    description: 'An operator session unused this long ends (sign in again)',
    parse: (raw) => durationIn(raw, 60_000, 86_400_000, '1m', '24h'),
  }),
  CONSOLE_SESSION_MAX: v({
    default: '12h',
    services: ['console'],
    description: 'An operator session ends this long after sign-in, however busy',
    parse: (raw) => durationIn(raw, 60_000, 7 * 86_400_000, '1m', '7d'),
  }),
  CONSOLE_API_TIMEOUT: v({
    default: '10s',
    services: ['console'],
    description: "How long the console waits for one answer from a service's API before it shows the service as unavailable",
    parse: (raw) => durationIn(raw, 100, 120_000, '100ms', '2m'),
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
