/** The environment variables the identity reads (documented in shared/env.ts and the README). */
import { pick } from '../shared/config.js';
import { ENV } from '../shared/env.js';

export const identityConfig = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'SHUTDOWN_GRACE',
  'DATABASE_URL',
  'DATABASE_POOL_MAX',
  'IDENTITY_PORT',
  'MAX_BODY_BYTES',
]);
