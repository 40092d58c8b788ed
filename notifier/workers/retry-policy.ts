/**
 * What happens after a send attempt: the retry schedule, channel failover, the secondary provider
 * and the dead-letter queue (README, "Delivery, retries, failover, the dead-letter queue"). Pure.
 *
 * - A transient failure (`retry`: timeout, 5xx, throttling, an open breaker) is never retried
 *   inline: the delivery goes back on its queue after the next delay of the schedule (default 1 s,
 *   5 s, 30 s, 2 min, 10 min), or the provider's Retry-After when that is longer (capped at an
 *   hour). After the last delay has been used, the delivery is dead-lettered with
 *   `retries_exhausted`, unless a secondary applies.
 * - Channel failover (`failover`, once per delivery, never from a failover's own delivery) goes to the channel policy/failover.ts
 *   chose from the type's `failover` list (push → SMS when the user has a phone and the type allows
 *   SMS, else in-app, by default). A delivery whose own retries are spent (`after`) is dead-lettered
 *   as it fails over; one that fails over early (transactional push, refused credentials) ends
 *   `failed`, parked behind the new one, and resumes its own retries only if that one fails too
 *   (it then never fails over again).
 * - `transactional` push fails over at once, on the first failure of any kind (an open breaker
 *   included).
 * - `transactional` and `high`: once the retries on the primary provider are exhausted, one attempt
 *   on the channel's secondary provider, when one is configured; if there is none or it fails too,
 *   channel failover; if no channel applies, the dead-letter queue (`retries_exhausted`, or
 *   `secondary_failed`). The secondary is also tried at once when the primary refuses our
 *   credentials (`provider_auth_failed`), which no amount of retrying fixes; without one, such a
 *   refusal fails over at once.
 * - A provider being ramped in (notifier/ramp): for a delivery on it, the channel's old provider
 *   is the secondary, for every tier (the old integration stays the failover of the new one), and
 *   a transactional push tries it at once before failing over to another channel.
 * - Any other permanent failure (bad address, no device token, message refused) fails the
 *   delivery: there is nothing to retry and nothing to re-drive, and it is about this message or
 *   this recipient, not a failing provider, so it does not change channel.
 */
import type { ChannelName, PermanentReason, RetryReason, Tier } from '../channels/channel.js';

/** The result of one attempt, after push fan-out results are combined. */
export type AttemptOutcome =
  | { kind: 'sent'; providerMessageId: string }
  | { kind: 'retry'; reason: RetryReason; retryAfterMs?: number; detail?: string }
  | { kind: 'permanent'; reason: PermanentReason; detail?: string };

export interface AttemptContext {
  tier: Tier;
  channel: ChannelName;
  /** Attempts made, this one included. */
  attempts: number;
  /** Delays before retries 1, 2, …, ms. */
  scheduleMs: readonly number[];
  /** This attempt went to the secondary provider. */
  usedSecondary: boolean;
  /** The channel has a secondary provider configured (for an attempt on a ramped-in provider: its old provider). */
  hasSecondary: boolean;
  /**
   * This attempt went to a new provider being ramped in (notifier/ramp): its old provider is its
   * secondary whatever the tier, and a transactional push tries it before changing channel.
   */
  onNewProvider?: boolean;
  /** This delivery already failed over once. */
  failedOver: boolean;
  /** The channel a failover would go to (policy/failover.ts), undefined when none applies. */
  failoverTo: ChannelName | undefined;
}

/** Reason codes of the dead-letter queue. Stable: stored and matched on. */
export type DeadLetterReason = 'retries_exhausted' | 'secondary_failed' | 'render_failed' | 'unknown_template';

export type NextStep =
  | { do: 'sent'; providerMessageId: string }
  | { do: 'retry'; delayMs: number; reason: RetryReason }
  /** `after`: what ran out first, when it was not the first failure (the status view's reason says so). */
  | { do: 'failover'; to: ChannelName; reason: RetryReason | PermanentReason; after?: 'retries_exhausted' | 'secondary_failed' }
  | { do: 'secondary'; reason: RetryReason | PermanentReason }
  | { do: 'dead_letter'; reason: DeadLetterReason; last: RetryReason | PermanentReason }
  | { do: 'fail'; reason: PermanentReason };

/** The longest a provider's Retry-After may push a retry out. */
export const MAX_RETRY_AFTER_MS = 3_600_000;

const SECONDARY_TIERS: readonly Tier[] = ['transactional', 'high'];

export function nextStep(outcome: AttemptOutcome, ctx: AttemptContext): NextStep {
  if (outcome.kind === 'sent') return { do: 'sent', providerMessageId: outcome.providerMessageId };

  const to = SECONDARY_TIERS.includes(ctx.tier) && !ctx.failedOver ? ctx.failoverTo : undefined;
  type After = 'retries_exhausted' | 'secondary_failed';
  const failover =
    to === undefined
      ? undefined
      : (after?: After): NextStep =>
          after ? { do: 'failover', to, reason: outcome.reason, after } : { do: 'failover', to, reason: outcome.reason };
  const secondaryAllowed = (SECONDARY_TIERS.includes(ctx.tier) || ctx.onNewProvider === true) && ctx.hasSecondary && !ctx.usedSecondary;
  if (failover && ctx.tier === 'transactional' && ctx.channel === 'push') {
    // A new provider failing (not the message): its old provider first, at once.
    const providerFailed = outcome.kind === 'retry' || outcome.reason === 'provider_auth_failed';
    if (ctx.onNewProvider === true && secondaryAllowed && providerFailed) return { do: 'secondary', reason: outcome.reason };
    return failover();
  }

  if (outcome.kind === 'permanent') {
    if (outcome.reason === 'provider_auth_failed' && secondaryAllowed) return { do: 'secondary', reason: outcome.reason };
    if (outcome.reason === 'provider_auth_failed' && failover) return failover();
    return { do: 'fail', reason: outcome.reason };
  }
  if (ctx.usedSecondary) return failover?.('secondary_failed') ?? { do: 'dead_letter', reason: 'secondary_failed', last: outcome.reason };
  if (ctx.attempts <= ctx.scheduleMs.length) {
    return { do: 'retry', delayMs: retryDelay(ctx.scheduleMs, ctx.attempts, outcome.retryAfterMs), reason: outcome.reason };
  }
  if (secondaryAllowed) return { do: 'secondary', reason: outcome.reason };
  return failover?.('retries_exhausted') ?? { do: 'dead_letter', reason: 'retries_exhausted', last: outcome.reason };
}

/** The delay before the retry that follows attempt `attempts` (1-based): the schedule's, or a longer Retry-After. */
export function retryDelay(scheduleMs: readonly number[], attempts: number, retryAfterMs?: number): number {
  const i = Math.min(Math.max(attempts, 1), scheduleMs.length) - 1;
  const scheduled = scheduleMs[i] ?? 0;
  const asked = retryAfterMs !== undefined && Number.isFinite(retryAfterMs) ? Math.min(retryAfterMs, MAX_RETRY_AFTER_MS) : 0;
  return Math.max(scheduled, asked);
}

/** A push send to each of a user's devices, combined into one outcome (one delivery record per channel). */
export type TokenResult =
  | { ok: true; providerMessageId: string }
  | { ok: false; kind: 'retry'; reason: RetryReason; retryAfterMs?: number; detail?: string }
  | { ok: false; kind: 'permanent'; reason: PermanentReason; detail?: string }
  | { ok: false; kind: 'invalid_token'; token: string; detail?: string };

/**
 * Combines the results of one attempt's sends to several device tokens: sent when any device
 * accepted it (the user has it; devices that failed transiently are not retried, documented);
 * else a retry when any failed transiently; else the first permanent refusal; tokens the provider
 * called dead are listed for removal, and when every token was dead there is no address left.
 */
export function combineTokenResults(results: readonly TokenResult[]): { outcome: AttemptOutcome; deadTokens: string[] } {
  const deadTokens: string[] = [];
  let ok: string | undefined;
  let firstRetry: Extract<TokenResult, { kind: 'retry' }> | undefined;
  let maxRetryAfter: number | undefined;
  let firstPermanent: Extract<TokenResult, { kind: 'permanent' }> | undefined;
  for (const r of results) {
    if (r.ok) ok ??= r.providerMessageId;
    else if (r.kind === 'invalid_token') deadTokens.push(r.token);
    else if (r.kind === 'retry') {
      firstRetry ??= r;
      if (r.retryAfterMs !== undefined) maxRetryAfter = Math.max(maxRetryAfter ?? 0, r.retryAfterMs);
    } else firstPermanent ??= r;
  }
  if (ok !== undefined) return { outcome: { kind: 'sent', providerMessageId: ok }, deadTokens };
  if (firstRetry) {
    const outcome: AttemptOutcome = { kind: 'retry', reason: firstRetry.reason };
    if (maxRetryAfter !== undefined) outcome.retryAfterMs = maxRetryAfter;
    if (firstRetry.detail !== undefined) outcome.detail = firstRetry.detail;
    return { outcome, deadTokens };
  }
  if (firstPermanent) return { outcome: { kind: 'permanent', reason: firstPermanent.reason, detail: firstPermanent.detail }, deadTokens };
  const detail = results.length === 0 ? 'the user has no registered device' : 'every device token was unregistered';
  return { outcome: { kind: 'permanent', reason: 'missing_address', detail }, deadTokens };
}
