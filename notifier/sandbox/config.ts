/** The environment variables the sandbox reads (documented in shared/env.ts and the README). */
import { pick } from '../../shared/config.js';
import { ENV } from '../../shared/env.js';

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
