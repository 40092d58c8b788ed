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
  'MAX_BODY_BYTES',
]);
