/**
 * The environment variables read only by the operator console (console/main.ts): default, meaning, parser. The README's
 * configuration table is generated from these declarations and shared/env.ts (bin/env-catalogue.ts)
 * and checked both ways by test/shared/config.test.ts. Add a variable here, then to the README.
 */
import { durationIn, nonEmpty, port, url, v, type VarSpec } from '../shared/config.js';

export const CONSOLE_ENV = {
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
  CONSOLE_SCRAPE_INTERVAL: v({
    default: '15s',
    services: ['console'],
    description:
      "How often the console scrapes each service's /metrics (and each sidecar's) for its overview page; it keeps the last hour in memory",
    parse: (raw) => durationIn(raw, 1_000, 300_000, '1s', '5m'),
  }),
  CONSOLE_SIDECAR_METRICS_URL: v({
    default: 'http://127.0.0.1:9090/metrics',
    services: ['console'],
    description:
      "A sidecar's /metrics URL for the console's overview; `{sidecar}` in it is replaced by each sidecar id the control plane lists (e.g. `http://{sidecar}:9090/metrics` when ids are host names); without it, the one URL is scraped; `npm start` sets it to its own sidecar's admin port",
    parse: (raw) => {
      const probe = new URL(raw.replaceAll('{sidecar}', 'sidecar'));
      if (probe.protocol !== 'http:' && probe.protocol !== 'https:') throw new Error('must be an http(s) URL');
      return raw;
    },
  }),
} satisfies Record<string, VarSpec<unknown>>;
