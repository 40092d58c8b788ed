/**
 * The variables more than one process reads (the database, logging, the service secret, the URLs by which
 * the services reach each other). Each process declares its own beside its composition root
 * (limiter/env.ts, notifier/env.ts, …); bin/env-catalogue.ts gathers them all for the README table,
 * which test/shared/config.test.ts checks in both directions. Shared parsers live in shared/config.ts.
 */
import { bytes, duration, durationIn, int, nonEmpty, oneOf, url, v, type VarSpec } from './config.js';
import { readServiceAccountKey } from './service-account.js';

export const SHARED_ENV = {
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
  // ── control plane ─────────────────────────────────────────────────────────
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
  // ── notifier: providers ───────────────────────────────────────────────────
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
} satisfies Record<string, VarSpec<unknown>>;
