/** The environment variables the notifier reads (documented in shared/env.ts and the README). */
import { pick } from '../shared/config.js';
import { ENV } from '../shared/env.js';

export const notifierConfig = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'SHUTDOWN_GRACE',
  'DATABASE_URL',
  'DATABASE_POOL_MAX',
  'NOTIFIER_PORT',
  'MAX_BODY_BYTES',
]);
