/**
 * The variables the scripts in bin/ read, one pick list per script, kept apart from the scripts
 * so that test/shared/config.test.ts can check the catalogue's "read by" labels without running
 * them.
 */
import { pick } from '../shared/config.js';
import { ENV } from './env-catalogue.js';

/** `npm start` (bin/start.ts). */
export const startConfig = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'DATABASE_URL',
  'DATA_DIR',
  'EMBEDDED_PG_DIR',
  'EMBEDDED_PG_PORT',
  'START_SERVICES',
  'START_READY_TIMEOUT',
  'LIMITER_PORT',
  'LIMITER_ADMIN_PORT',
  'CONTROL_PLANE_HTTP_PORT',
  'CONTROL_PLANE_GRPC_PORT',
  'NOTIFIER_PORT',
  'IDENTITY_PORT',
  'SANDBOX_PORT',
  'SANDBOX_SMTP_PORT',
  'CONSOLE_PORT',
  'CONSOLE_PUBLIC_URL',
  'CONSOLE_CLIENT_ID',
  // handed to the services it starts (generated when unset)
  'ADMIN_TOKEN',
  'IDENTITY_ADMIN_TOKEN',
  'SERVICE_SECRET',
  'NOTIFIER_TRACKING_SECRET',
  'LIMITER_CONTROL_PLANE_URL',
  'LIMITER_QUOTA_FILE',
]);

/** The quota admin CLI (bin/quota.ts, `npm run quota`). */
export const quotaCliConfig = pick(ENV, ['CONTROL_PLANE_GRPC_URL', 'ADMIN_TOKEN', 'DATA_DIR']);

/** The signing-key admin CLI (bin/keys.ts, `npm run keys`). */
export const keysCliConfig = pick(ENV, ['IDENTITY_URL', 'IDENTITY_ADMIN_TOKEN', 'DATA_DIR']);

/** The account admin CLI (bin/admin.ts, `npm run admin`): identity's database, else `npm start`'s embedded one. */
export const adminCliConfig = pick(ENV, ['DATABASE_URL', 'DATA_DIR', 'EMBEDDED_PG_DIR']);

/** The Docker HEALTHCHECK (bin/healthcheck.ts). */
export const healthcheckConfig = pick(ENV, ['HEALTHCHECK_HOST']);
