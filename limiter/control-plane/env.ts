/**
 * The environment variables read only by the quota control plane (limiter/control-plane/main.ts): default, meaning, parser. The README's
 * configuration table is generated from these declarations and shared/env.ts (bin/env-catalogue.ts)
 * and checked both ways by test/shared/config.test.ts. Add a variable here, then to the README.
 */
import { duration, int, port, v, type VarSpec } from '../../shared/config.js';

export const CONTROL_PLANE_ENV = {
  // ── ports ─────────────────────────────────────────────────────────────────
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
  // ── control plane ─────────────────────────────────────────────────────────
  ADMIN_TOKEN: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['control-plane', 'start', 'cli'],
    description:
      'Bearer token for the admin API (gRPC QuotaAdminService and /internal/quotas; also read by `npm run quota`); unset, only access tokens with role `admin` are accepted (`npm start` generates one into DATA_DIR/secrets.env, where the CLI finds it)',
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
} satisfies Record<string, VarSpec<unknown>>;
