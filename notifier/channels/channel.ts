/**
 * The one interface every delivery channel implements, whatever the provider behind it.
 *
 * A worker hands a channel one rendered message for one address (a device token, an e-mail
 * address, a phone number, a user's inbox) and gets back a {@link SendResult}. A channel never
 * throws for a provider's answer, a timeout, a refused connection or an open circuit breaker: it
 * classifies them, so the worker only decides what to do with the result (record `sent`, schedule a
 * retry, dead-letter, prune a token, fail over). A channel never retries inline either: a `retry`
 * result goes back to the worker's retry schedule.
 *
 * Failure reasons are stable codes ({@link SendFailureReason}): they are stored on delivery records
 * and in the dead-letter queue, and are never renamed.
 */

/** The four delivery channels (README, "Channels"). */
export type ChannelName = 'push' | 'email' | 'sms' | 'in_app';

export const CHANNEL_NAMES: readonly ChannelName[] = ['push', 'email', 'sms', 'in_app'];

/**
 * Priority tiers, the `priority` values of the ingestion body (push uses it for the platform
 * delivery priority).
 */
export type Tier = 'transactional' | 'high' | 'normal' | 'low';

/**
 * One message for one address, already rendered. Which fields a channel reads:
 * - push: `to` (the device token), `title`, `body`, `data`, `tier`;
 * - email: `to` (the address), `subject`, `text`, `html` (at least one of text/html; `body` is the
 *   text fallback);
 * - sms: `to` (the phone number, E.164), `body` (plain text);
 * - in_app: `to` (the user id), everything else is handed to `writeInbox` as it is.
 */
export interface OutboundMessage {
  /** The address on this channel: device token, e-mail address, phone number or user id. */
  to: string;
  /** The recipient's user id (never sent to a provider except in_app). */
  recipientId: string;
  notificationId: string;
  templateId?: string;
  locale?: string;
  tier?: Tier;
  title?: string;
  /** Push and in-app body; SMS text; the plain-text fallback of an e-mail. */
  body: string;
  subject?: string;
  text?: string;
  html?: string;
  /** Extra key/value pairs for the app (push `data`); string values only, as FCM requires. */
  data?: Readonly<Record<string, string>>;
}

/** What the worker tells a channel about this attempt. */
export interface SendContext {
  /**
   * The delivery record's id; travels to the provider (FCM `data.delivery_id` and the replace
   * identifiers of push-replace.ts, SMTP `Message-ID`, `References` and `X-Delivery-Id`, SMS
   * `X-Delivery-Id`). The same on every attempt of a delivery.
   */
  deliveryId: string;
  /**
   * The key the provider de-duplicates on where its protocol allows (the Twilio-style
   * `Idempotency-Key` header). Must be the same on every attempt of the same send: the delivery id
   * for one-address channels; for push fan-out to several tokens of one delivery, one key per token
   * (e.g. `<delivery id>:<token hash>`).
   */
  idempotencyKey: string;
  /**
   * Time budget for this call in milliseconds, from now (a duration, not a timestamp). The channel
   * uses the smaller of this and its configured provider timeout; at or below 0 it answers
   * `retry`/`timeout` without calling the provider.
   */
  deadlineMs: number;
  /**
   * Validate only, deliver nothing: push sends FCM's `validate_only: true` (a provider ramp's
   * shadow copy, notifier/ramp). Other channels have no dry run and ignore it.
   */
  dryRun?: boolean;
}

/**
 * Why a send did not succeed. Stable codes: stored on delivery records and in the dead-letter
 * queue.
 *
 * Retry (`kind: 'retry'`): `circuit_open`, `timeout`, `connection_failed`, `provider_unavailable`,
 * `provider_quota_exceeded`, `provider_internal`, `provider_error`, `inbox_write_failed`.
 * Permanent (`kind: 'permanent'`): `provider_rejected`, `invalid_recipient`, `invalid_message`,
 * `provider_auth_failed`, `missing_address`.
 */
export type SendFailureReason =
  /** This provider's circuit breaker is open: the provider was not called. */
  | 'circuit_open'
  /** No answer within the deadline (the provider may still have accepted the message). */
  | 'timeout'
  /** The connection could not be made or broke before an answer. */
  | 'connection_failed'
  /** The provider said it is unavailable (FCM `UNAVAILABLE`, HTTP 503, SMTP 421). */
  | 'provider_unavailable'
  /** The provider throttled us (FCM `QUOTA_EXCEEDED`, HTTP 429, SMTP 452). */
  | 'provider_quota_exceeded'
  /** The provider failed internally (FCM `INTERNAL`, HTTP 500, SMTP 451). */
  | 'provider_internal'
  /** Any other transient provider failure: other 5xx, SMTP 4xx, an unreadable answer. */
  | 'provider_error'
  /** The in-app inbox write failed (database). */
  | 'inbox_write_failed'
  /** The provider refused this message for a reason retrying cannot fix (other 4xx, SMTP 5xx). */
  | 'provider_rejected'
  /** The address is not valid for the provider (bad phone number, mailbox unavailable). */
  | 'invalid_recipient'
  /** The message itself is invalid (FCM `INVALID_ARGUMENT` not about the token, too large). */
  | 'invalid_message'
  /** Our credentials were refused (HTTP 401/403, SMTP 535): a configuration problem. */
  | 'provider_auth_failed'
  /** The message has no address for this channel (empty `to`). */
  | 'missing_address';

export const RETRY_REASONS = [
  'circuit_open',
  'timeout',
  'connection_failed',
  'provider_unavailable',
  'provider_quota_exceeded',
  'provider_internal',
  'provider_error',
  'inbox_write_failed',
] as const satisfies readonly SendFailureReason[];

export const PERMANENT_REASONS = [
  'provider_rejected',
  'invalid_recipient',
  'invalid_message',
  'provider_auth_failed',
  'missing_address',
] as const satisfies readonly SendFailureReason[];

export type RetryReason = (typeof RETRY_REASONS)[number];
export type PermanentReason = (typeof PERMANENT_REASONS)[number];

/** The outcome of one send. */
export type SendResult =
  /** The provider accepted the message (`sent`); its id for the message, for lookups and support. */
  | { ok: true; providerMessageId: string }
  /** Try again later, on the retry schedule; `retryAfterMs` is the provider's Retry-After when it gave one. */
  | { ok: false; kind: 'retry'; retryAfterMs?: number; reason: RetryReason; detail?: string }
  /** Do not retry this message on this provider (dead-letter it, or fail over). */
  | { ok: false; kind: 'permanent'; reason: PermanentReason; detail?: string }
  /** The push provider says this device token is dead: remove it, do not retry. */
  | { ok: false; kind: 'invalid_token'; token: string; detail?: string };

/** What a provider knows about an earlier send, found by its idempotency key. */
export type LookupResult =
  | { state: 'found'; providerMessageId: string; providerStatus: string }
  | { state: 'not_found' }
  /** The provider could not be asked (down, timeout, open breaker): try the lookup again later. */
  | { state: 'unknown'; reason: RetryReason };

/** A delivery channel: one provider behind one circuit breaker. */
export interface Channel {
  readonly name: ChannelName;
  /** Names the provider (`fcm`, `smtp`, `twilio`, `inbox`, or a secondary's name): metrics, breaker, records. */
  readonly provider: string;
  /** Sends one message to one address. Never throws for provider failures; see {@link SendResult}. */
  send(msg: OutboundMessage, ctx: SendContext): Promise<SendResult>;
  /**
   * Asks the provider whether a send with this idempotency key was accepted, to reconcile a
   * delivery left in `sending` by a crash. Only where the protocol allows it: FCM v1, SMTP and
   * Twilio's Messages API have no such query, so every shipped channel leaves it undefined; the
   * worker's reconciliation (workers/deliver.ts) is there for a provider that can be asked.
   */
  lookup?(idempotencyKey: string): Promise<LookupResult>;
  /** The breaker's current state, for metrics and routing (failover on an open breaker). */
  breakerState(): 'closed' | 'open' | 'half-open';
  /** Releases connections (keep-alive pools, SMTP pool). */
  close(): Promise<void>;
}

/**
 * Does this outcome say the provider (not the message) is failing? Retry results (timeouts,
 * refused connections, 5xx, throttling, an open breaker) and refused credentials do; a sent
 * message, a permanent refusal of one message, or a dead token show a working provider. This is
 * what each provider's circuit breaker counts as a failure.
 */
export function isProviderFailure(r: SendResult): boolean {
  if (r.ok) return false;
  if (r.kind === 'retry') return true;
  return r.kind === 'permanent' && r.reason === 'provider_auth_failed';
}

/** Shorthands for building results. */
export const sent = (providerMessageId: string): SendResult => ({ ok: true, providerMessageId });

export function retry(reason: RetryReason, opts: { retryAfterMs?: number; detail?: string } = {}): SendResult {
  const r: SendResult = { ok: false, kind: 'retry', reason };
  if (opts.retryAfterMs !== undefined) r.retryAfterMs = opts.retryAfterMs;
  if (opts.detail !== undefined) r.detail = opts.detail;
  return r;
}

export function permanent(reason: PermanentReason, detail?: string): SendResult {
  return detail === undefined ? { ok: false, kind: 'permanent', reason } : { ok: false, kind: 'permanent', reason, detail };
}

export function invalidToken(token: string, detail?: string): SendResult {
  return detail === undefined ? { ok: false, kind: 'invalid_token', token } : { ok: false, kind: 'invalid_token', token, detail };
}
