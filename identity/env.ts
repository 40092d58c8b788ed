/**
 * The environment variables read only by identity (identity/main.ts): default, meaning, parser. The README's
 * configuration table is generated from these declarations and shared/env.ts (bin/env-catalogue.ts)
 * and checked both ways by test/shared/config.test.ts. Add a variable here, then to the README.
 */
import { bool, duration, durationIn, int, nonEmpty, num, oneOf, port, url, v, type VarSpec } from '../shared/config.js';

export const IDENTITY_ENV = {
  // ── ports ─────────────────────────────────────────────────────────────────
  IDENTITY_PORT: v({
    default: '8083',
    services: ['identity', 'start'],
    description: 'Identity HTTP API and /metrics, /healthz, /readyz',
    parse: port,
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
    description:
      'Bearer token for /auth/admin/clients (client registration) and /auth/admin/keys (`npm run keys`); unset, only access tokens with role admin are accepted (`npm start` generates one into DATA_DIR/secrets.env, where the CLI finds it)',
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
} satisfies Record<string, VarSpec<unknown>>;
