/** The environment variables of the provider clients (declared in env.ts beside this file, or shared/env.ts when another process reads them too; all in the README). */
import { pick, type ConfigOf } from '../../shared/config.js';
import { SHARED_ENV } from '../../shared/env.js';
import { NOTIFIER_ENV } from '../env.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...NOTIFIER_ENV };

/** Names to add to the notifier's config (`notifierConfig`). */
export const CHANNEL_ENV_NAMES = [
  'FCM_URL',
  'FCM_PROJECT_ID',
  'FCM_ACCESS_TOKEN',
  'FCM_SERVICE_ACCOUNT_FILE',
  'FCM_TOKEN_URL',
  'FCM_SECONDARY_URL',
  'FCM_RAMP_URL',
  'FCM_RAMP_NAME',
  'SMTP_URL',
  'SMTP_SECONDARY_URL',
  'SMTP_RAMP_URL',
  'SMTP_RAMP_NAME',
  'SMTP_FROM',
  'SMTP_POOL_SIZE',
  'SMS_URL',
  'SMS_SECONDARY_URL',
  'SMS_RAMP_URL',
  'SMS_RAMP_NAME',
  'SMS_ACCOUNT_SID',
  'SMS_AUTH_TOKEN',
  'SMS_FROM',
  'PROVIDER_CONNECTIONS',
  'PROVIDER_COSTS',
  'PROVIDER_CONNECT_TIMEOUT',
  'PROVIDER_BREAKER_THRESHOLD',
  'PROVIDER_BREAKER_MIN_VOLUME',
  'PROVIDER_BREAKER_WINDOW',
  'PROVIDER_BREAKER_COOLDOWN',
] as const;

export const channelsConfig = pick(ENV, CHANNEL_ENV_NAMES);

export type ChannelsConfig = ConfigOf<typeof channelsConfig>;
