/** The environment variables the quota control plane reads (declared in env.ts beside this file, or shared/env.ts when another process reads them too; all in the README). */
import { pick } from '../../shared/config.js';
import { SHARED_ENV } from '../../shared/env.js';
import { CONTROL_PLANE_ENV } from './env.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...CONTROL_PLANE_ENV };

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
