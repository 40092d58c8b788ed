/** The environment variables the quota control plane reads (documented in shared/env.ts and the README). */
import { pick } from '../../shared/config.js';
import { ENV } from '../../shared/env.js';

export const controlPlaneConfig = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'SHUTDOWN_GRACE',
  'DATABASE_URL',
  'DATABASE_POOL_MAX',
  'CONTROL_PLANE_HTTP_PORT',
  'CONTROL_PLANE_GRPC_PORT',
  'MAX_BODY_BYTES',
  'ADMIN_TOKEN',
  'CONTROL_PLANE_SYNC_TOKEN',
  'CONTROL_PLANE_ACK_TIMEOUT',
  'CONTROL_PLANE_CHANGELOG_KEEP',
  'CONTROL_PLANE_POLL_INTERVAL',
  'CONTROL_PLANE_HEARTBEAT',
  'IDENTITY_URL',
  'JWKS_URL',
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'JWT_CLOCK_SKEW',
  'JWKS_REFETCH_COOLDOWN',
]);
