/** The environment variables the notifier reads (declared in env.ts beside this file, or shared/env.ts when another process reads them too; all in the README). */
import { pick, type ConfigOf } from '../shared/config.js';
import { SHARED_ENV } from '../shared/env.js';
import { NOTIFIER_ENV } from './env.js';
import { CHANNEL_ENV_NAMES } from './channels/config.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...NOTIFIER_ENV };

export const notifierConfig = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'SHUTDOWN_GRACE',
  'DATABASE_URL',
  'DATABASE_POOL_MAX',
  'NOTIFIER_PORT',
  'MAX_BODY_BYTES',
  // who is calling (notifier/caller.ts)
  'SERVICE_SECRET',
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'JWKS_URL',
  'IDENTITY_URL',
  'JWT_CLOCK_SKEW',
  'JWKS_REFETCH_COOLDOWN',
  // the core
  'NOTIFIER_WORKERS',
  'NOTIFIER_IDEMPOTENCY_TTL',
  'NOTIFIER_RETRY_SCHEDULE',
  'NOTIFIER_CONCURRENCY',
  'NOTIFIER_IDLE_POLL',
  'NOTIFIER_SEND_TIMEOUT',
  'NOTIFIER_JOB_EXPIRE',
  'NOTIFIER_QUEUE_MAINTENANCE',
  'NOTIFIER_BACKPRESSURE_THRESHOLD',
  'NOTIFIER_RECONCILE_INTERVAL',
  'NOTIFIER_RECONCILE_GRACE',
  'NOTIFIER_RETENTION',
  'NOTIFIER_RETENTION_SCHEDULE',
  'NOTIFIER_TRACKING_SECRET',
  'NOTIFIER_PUBLIC_URL',
  'NOTIFIER_ADMIN_ROLES',
  'NOTIFIER_SERVICE_ROLES',
  'NOTIFIER_INBOX_PAGE_SIZE',
  // provider webhooks and suppression (notifier/feedback)
  'NOTIFIER_SNS_CERT_HOSTS',
  'NOTIFIER_SNS_CERT_HTTP_HOSTS',
  'NOTIFIER_SNS_CERT_TTL',
  'NOTIFIER_SES_TOPIC_ARNS',
  'NOTIFIER_SNS_MAX_AGE',
  // segments (notifier/segments)
  'NOTIFIER_SEGMENT_MAX_BYTES',
  // campaigns (notifier/campaigns)
  'NOTIFIER_CAMPAIGN_SHARD_SIZE',
  'NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD',
  'NOTIFIER_CAMPAIGN_CONCURRENCY',
  'NOTIFIER_CAMPAIGN_QUEUE_DEPTH',
  'NOTIFIER_CAMPAIGN_PUMP_IDLE',
  'NOTIFIER_CAMPAIGN_STOP_WAIT',
  'NOTIFIER_REPLICA_HEARTBEAT',
  // the policies (notifier/policy, notifier/preferences)
  'NOTIFIER_NOTIFICATION_TYPES',
  'NOTIFIER_QUIET_HOURS_TIERS',
  'NOTIFIER_PREFERENCES_TTL',
  'NOTIFIER_PREFERENCES_TIMEOUT',
  // the provider ramp (notifier/ramp)
  'NOTIFIER_RAMP_TEST_EMAILS',
  'NOTIFIER_RAMP_TEST_PHONES',
  'NOTIFIER_RAMP_POLL',
  // the provider clients (notifier/channels)
  ...CHANNEL_ENV_NAMES,
]);

export type NotifierConfig = ConfigOf<typeof notifierConfig>;
