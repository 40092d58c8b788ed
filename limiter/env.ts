/**
 * The environment variables read only by the sidecar (limiter/main.ts): default, meaning, parser. The README's
 * configuration table is generated from these declarations and shared/env.ts (bin/env-catalogue.ts)
 * and checked both ways by test/shared/config.test.ts. Add a variable here, then to the README.
 */
import { bool, bytes, duration, durationIn, int, list, nonEmpty, num, oneOf, port, url, v, type VarSpec } from '../shared/config.js';

export const LIMITER_ENV = {
  // ── every process ─────────────────────────────────────────────────────────
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
  // ── limiter (sidecar) ─────────────────────────────────────────────────────
  LIMITER_WORKERS: v({
    default: '1',
    services: ['limiter'],
    description:
      'Worker threads serving the data port in one sidecar process, over one set of in-process counters shared exactly (or each with its own Redis connections) and, with a control plane, one stream and working set held by the main thread; 1 is one event loop, as before. limiter/README.md "Worker threads"',
    parse: int(1, 256),
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
    description:
      'Most key records the sidecar holds in its working set (plans are always held); a key beyond it is looked up again from the control plane, never refused as unknown. With LIMITER_WORKERS=N the working set of the process (held by the main thread), each worker holding a copy of at most this / N. Standalone (LIMITER_QUOTA_FILE) the whole file is held whatever this says',
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
    description:
      "Connections open to each upstream at most, by both clients together (the h1 pool and undici's for streamed request bodies), for the process: with LIMITER_WORKERS each worker gets an equal share (at least 1)",
    parse: int(1, 10_000),
  }),
  UPSTREAM_PIPELINING: v({
    default: '1',
    services: ['limiter'],
    description: 'HTTP/1.1 pipelining depth per upstream connection',
    parse: int(1, 128),
  }),
  UPSTREAM_CLIENT: v({
    default: 'h1',
    services: ['limiter'],
    description:
      "Upstream HTTP client: h1 (the sidecar's own keep-alive HTTP/1.1 pool for buffered requests; streamed bodies and pipelining go over undici) or undici (everything over undici)",
    parse: oneOf(['h1', 'undici'] as const),
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
      'Where a syncing sidecar keeps its last-known-good working set (plans and the key records it holds; relative to the project root), loaded at start so it starts warm and serves those keys while the control plane is down',
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
  LIMITER_LOOKUP_TIMEOUT: v({
    default: '1s',
    services: ['limiter'],
    description:
      'Deadline of a lookup of keys the sidecar does not hold (past it, the key gets the unknown-key 429); after three failed lookups in a row, new ones fail at once for this long',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 10) throw new Error('must be at least 10ms');
      return ms;
    },
  }),
  LIMITER_NEGATIVE_CACHE_MAX: v({
    default: '100000',
    services: ['limiter'],
    description: 'Most subjects the sidecar remembers the control plane does not know (no lookup again until LIMITER_NEGATIVE_CACHE_TTL)',
    parse: int(1, 10_000_000),
  }),
  LIMITER_NEGATIVE_CACHE_TTL: v({
    default: '30s',
    services: ['limiter'],
    description:
      'How long a subject the control plane did not know is answered as unknown without a lookup (forgotten at once when it is created)',
    parse: duration,
  }),
  LIMITER_UNKNOWN_KEY_BUDGET: v({
    default: '100',
    services: ['limiter'],
    description:
      'API keys a lookup found unknown that one client address may present per LIMITER_UNKNOWN_KEY_WINDOW; past it, that address gets the unknown-key 429 for keys not held, without a lookup; 0 no budget',
    parse: int(0, 100_000_000),
  }),
  LIMITER_UNKNOWN_KEY_WINDOW: v({
    default: '1m',
    services: ['limiter'],
    description: 'The window of LIMITER_UNKNOWN_KEY_BUDGET',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 1000) throw new Error('must be at least 1s');
      return ms;
    },
  }),
  // ── tokens (verified at the edge and by identity) ─────────────────────────
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
} satisfies Record<string, VarSpec<unknown>>;
