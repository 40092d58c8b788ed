/** The environment variables the identity reads (declared in env.ts beside this file, or shared/env.ts when another process reads them too; all in the README). */
import { pick } from '../shared/config.js';
import { SHARED_ENV } from '../shared/env.js';
import { IDENTITY_ENV } from './env.js';
import { DPOP_CONFIG_VARS } from './oauth/dpop.js';
import { OAUTH_CONFIG_VARS } from './oauth/settings.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...IDENTITY_ENV };

export const identityConfig = pick(ENV, [
  ...OAUTH_CONFIG_VARS,
  ...DPOP_CONFIG_VARS,
  'LOG_LEVEL',
  'HOST',
  'SHUTDOWN_GRACE',
  'DATABASE_URL',
  'DATABASE_POOL_MAX',
  'IDENTITY_PORT',
  'MAX_BODY_BYTES',
  // tokens on identity's own resource endpoints
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'JWT_CLOCK_SKEW',
  // events: event store, projections, orders API (identity/events, identity/domain, identity/http)
  'IDENTITY_JWKS_URL',
  'IDENTITY_SNAPSHOT_EVERY',
  'IDENTITY_PROJECTIONS',
  'IDENTITY_PROJECTION_POLL_INTERVAL',
  'IDENTITY_PROJECTION_BATCH',
  'IDENTITY_PROJECTION_MAX_ATTEMPTS',
  'IDENTITY_WAREHOUSE_WINDOW',
  'IDENTITY_ORDER_SELF_DELETE_MAX_TOTAL',
  // accounts: signup, login throttling (identity/accounts); SERVICE_SECRET to trust the sidecar's X-Subject-Address
  'SERVICE_SECRET',
  'IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT',
  'IDENTITY_LOGIN_MAX_FAILURES_PER_IP',
  'IDENTITY_LOGIN_FAILURE_WINDOW',
  // the first admin (identity/accounts/bootstrap-admin.ts)
  'IDENTITY_BOOTSTRAP_ADMIN',
  // the notification relay (identity/notify)
  'IDENTITY_NOTIFY_RELAY',
  'IDENTITY_NOTIFY_URL',
  'IDENTITY_NOTIFY_API_KEY',
  'IDENTITY_NOTIFY_POLL_INTERVAL',
  'IDENTITY_NOTIFY_RETRY_MIN',
  'IDENTITY_NOTIFY_RETRY_MAX',
  'IDENTITY_NOTIFY_TIMEOUT',
]);
