/**
 * The environment variables read only by the sandbox providers (sandbox/main.ts): default, meaning, parser. The README's
 * configuration table is generated from these declarations and shared/env.ts (bin/env-catalogue.ts)
 * and checked both ways by test/shared/config.test.ts. Add a variable here, then to the README.
 */
import { int, port, url, v, type VarSpec } from '../shared/config.js';

export const SANDBOX_ENV = {
  // ── ports ─────────────────────────────────────────────────────────────────
  SANDBOX_PORT: v({
    default: '8089',
    services: ['sandbox', 'start'],
    description: 'Sandbox provider server (FCM-, SMTP- and Twilio-shaped) for npm start and tests',
    parse: port,
  }),
  // ── notifier: providers ───────────────────────────────────────────────────
  SANDBOX_SMTP_PORT: v({
    default: undefined,
    optional: true,
    services: ['sandbox', 'start'],
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
} satisfies Record<string, VarSpec<unknown>>;
