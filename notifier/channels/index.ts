/**
 * The notifier's delivery channels, built from configuration: push (FCM HTTP v1), email (SMTP),
 * sms (Twilio-style REST) and in_app (the inbox, through an injected writer), each provider behind
 * its own circuit breaker and connection pool, plus the configured secondary providers for
 * failover. See channel.ts for the interface every channel implements.
 */
import { systemClock, type Clock } from '../../shared/clock.js';
import { ConfigError } from '../../shared/config.js';
import type { Registry } from '../../shared/metrics.js';
import type { Channel, ChannelName } from './channel.js';
import type { GuardDeps } from './breaker.js';
import type { ChannelsConfig } from './config.js';
import { createFcmChannel, type TokenSource } from './push-fcm.js';
import { serviceAccountTokens } from './google-oauth.js';
import { createSmtpChannel } from './email-smtp.js';
import { createTwilioChannel } from './sms-twilio.js';
import { createInAppChannel, type WriteInbox } from './in-app.js';

export * from './channel.js';
export { CHANNEL_ENV_NAMES, channelsConfig, type ChannelsConfig } from './config.js';
export { createFcmChannel, type FcmChannelOptions, type TokenSource } from './push-fcm.js';
export { serviceAccountTokens, isTokenRefused, TokenRefused } from './google-oauth.js';
export { createSmtpChannel, type SmtpChannelOptions } from './email-smtp.js';
export { createTwilioChannel, type TwilioChannelOptions } from './sms-twilio.js';
export { createInAppChannel, type InAppChannelOptions, type WriteInbox } from './in-app.js';
export { isProviderFailure, type BreakerSettings, type GuardDeps } from './breaker.js';

export interface ChannelDeps {
  /** Writes an in-app item to the inbox (the notifier core owns the table). */
  writeInbox: WriteInbox;
  /** Upper bound of one provider call, ms (a send's `deadlineMs` can only shorten it). */
  sendTimeoutMs: number;
  clock?: Clock;
  /** Where breaker states and provider-call metrics are published. */
  registry?: Registry;
  /** The `StatusCallback` URL each SMS names (the public URL of notifier/feedback's Twilio webhook). */
  smsStatusCallback?: string;
}

/** The primary channel of each kind, and the secondaries that are configured. */
export interface ChannelSet {
  readonly primary: Readonly<Record<ChannelName, Channel>>;
  /** Secondary providers of the same channel (FCM_SECONDARY_URL, SMTP_SECONDARY_URL, SMS_SECONDARY_URL). */
  readonly secondary: Readonly<Partial<Record<'push' | 'email' | 'sms', Channel>>>;
  /**
   * New providers being ramped in beside the primaries (FCM_RAMP_URL, SMTP_RAMP_URL, SMS_RAMP_URL,
   * named by the `*_RAMP_NAME`s): which deliveries they take is notifier/ramp's.
   */
  readonly ramp: Readonly<Partial<Record<'push' | 'email' | 'sms', Channel>>>;
  /** Every channel, primaries first. */
  all(): Channel[];
  /** Closes every channel's connections. */
  close(): Promise<void>;
}

/** Builds every channel from configuration. */
export function createChannels(config: ChannelsConfig, deps: ChannelDeps): ChannelSet {
  const guard: GuardDeps = {
    clock: deps.clock ?? systemClock,
    registry: deps.registry,
    breaker: {
      errorThreshold: config.PROVIDER_BREAKER_THRESHOLD,
      minVolume: config.PROVIDER_BREAKER_MIN_VOLUME,
      windowMs: config.PROVIDER_BREAKER_WINDOW,
      coolDownMs: config.PROVIDER_BREAKER_COOLDOWN,
    },
  };
  const timeoutMs = deps.sendTimeoutMs;
  const http = { timeoutMs, connections: config.PROVIDER_CONNECTIONS, connectTimeoutMs: config.PROVIDER_CONNECT_TIMEOUT };
  // One token source for both push providers: they serve the same project.
  const key = config.FCM_SERVICE_ACCOUNT_FILE;
  const fcmToken: string | TokenSource = key
    ? serviceAccountTokens({ key, clock: guard.clock, timeoutMs, ...(config.FCM_TOKEN_URL && { tokenUri: config.FCM_TOKEN_URL }) })
    : config.FCM_ACCESS_TOKEN;
  const fcmProject = config.FCM_PROJECT_ID ?? key?.projectId ?? 'sandbox-project';
  const push = (provider: string, baseUrl: string) =>
    createFcmChannel({ provider, baseUrl, projectId: fcmProject, accessToken: fcmToken, ...http }, guard);
  const sms = (provider: string, baseUrl: string) =>
    createTwilioChannel(
      {
        provider,
        baseUrl,
        accountSid: config.SMS_ACCOUNT_SID,
        authToken: config.SMS_AUTH_TOKEN,
        from: config.SMS_FROM,
        ...(deps.smsStatusCallback !== undefined && { statusCallback: deps.smsStatusCallback }),
        ...http,
      },
      guard,
    );
  const email = (provider: string, url: string) =>
    createSmtpChannel(
      {
        provider,
        url,
        from: config.SMTP_FROM,
        poolSize: config.SMTP_POOL_SIZE,
        timeoutMs,
        connectTimeoutMs: config.PROVIDER_CONNECT_TIMEOUT,
      },
      guard,
    );

  const primary: Record<ChannelName, Channel> = {
    push: push('fcm', config.FCM_URL),
    email: email('smtp', config.SMTP_URL),
    sms: sms('twilio', config.SMS_URL),
    in_app: createInAppChannel({ writeInbox: deps.writeInbox, timeoutMs }, guard),
  };
  const secondary: Partial<Record<'push' | 'email' | 'sms', Channel>> = {};
  if (config.FCM_SECONDARY_URL) secondary.push = push('fcm-secondary', config.FCM_SECONDARY_URL);
  if (config.SMTP_SECONDARY_URL) secondary.email = email('smtp-secondary', config.SMTP_SECONDARY_URL);
  if (config.SMS_SECONDARY_URL) secondary.sms = sms('twilio-secondary', config.SMS_SECONDARY_URL);
  const ramp: Partial<Record<'push' | 'email' | 'sms', Channel>> = {};
  if (config.FCM_RAMP_URL) ramp.push = push(config.FCM_RAMP_NAME, config.FCM_RAMP_URL);
  if (config.SMTP_RAMP_URL) ramp.email = email(config.SMTP_RAMP_NAME, config.SMTP_RAMP_URL);
  if (config.SMS_RAMP_URL) ramp.sms = sms(config.SMS_RAMP_NAME, config.SMS_RAMP_URL);
  // A provider's name keys its breaker, its metrics and the delivery records: two of one channel
  // under one name would be indistinguishable.
  for (const c of ['push', 'email', 'sms'] as const) {
    const names = [primary[c], secondary[c], ramp[c]].flatMap((ch) => (ch ? [ch.provider] : []));
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) {
      const v = { push: 'FCM_RAMP_NAME', email: 'SMTP_RAMP_NAME', sms: 'SMS_RAMP_NAME' }[c];
      throw new ConfigError(v, `names ${twice}, already the name of another ${c} provider`);
    }
  }
  const all = (): Channel[] => [...Object.values(primary), ...Object.values(secondary), ...Object.values(ramp)];
  return {
    primary,
    secondary,
    ramp,
    all,
    async close() {
      await Promise.all(all().map((c) => c.close()));
    },
  };
}
