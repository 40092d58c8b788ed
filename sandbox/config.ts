/** The environment variables the sandbox reads (declared in env.ts beside this file, or shared/env.ts when another process reads them too; all in the README). */
import { pick } from '../shared/config.js';
import { SHARED_ENV } from '../shared/env.js';
import { SANDBOX_ENV } from './env.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...SANDBOX_ENV };

export const sandboxConfig = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'SHUTDOWN_GRACE',
  'SANDBOX_PORT',
  'SANDBOX_SMTP_PORT',
  'SANDBOX_SEED',
  'SANDBOX_FAULTS',
  'SANDBOX_MAX_MESSAGES',
  'SANDBOX_SNS_ENDPOINT',
  'FCM_ACCESS_TOKEN',
  'FCM_SERVICE_ACCOUNT_FILE',
  'SMS_ACCOUNT_SID',
  'SMS_AUTH_TOKEN',
]);
