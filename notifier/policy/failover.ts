/**
 * Which channel a failing delivery fails over to (README, "Failover"): once, for the `high` and
 * `transactional` tiers, to the first channel of its type's `failover` list for the failing channel
 * (NOTIFIER_NOTIFICATION_TYPES, policy/types.ts) that
 * - the type × tier table allows (policy/table.ts: so never SMS for marketing, nor at `normal`/`low`),
 * - is configured on this notifier,
 * - and the recipient has an address on: a phone for `sms`, an e-mail address for `email` (push
 *   and in-app are taken as reachable: a push to a user without devices fails on its own).
 * The default lists are push → sms, then in_app; e-mail → in_app; sms → in_app (README). When
 * this returns a channel, workers/retry-policy.ts decides whether and when to use it. Pure.
 */
import type { ChannelName, Tier } from '../channels/channel.js';
import { policyFor, type PolicySettings } from './table.js';
import type { NotificationType } from './types.js';

/** The tiers that fail over to another channel (the seed's "high and transactional"). */
export const FAILOVER_TIERS: readonly Tier[] = ['transactional', 'high'];

export interface FailoverContext {
  settings: PolicySettings;
  /** Is this channel configured on this notifier? */
  configured: (channel: ChannelName) => boolean;
  /** The recipient's addresses; undefined when unknown (then neither SMS nor e-mail is chosen). */
  profile: { email?: string | undefined; phone?: string | undefined } | undefined;
}

export function failoverTarget(type: NotificationType, tier: Tier, from: ChannelName, ctx: FailoverContext): ChannelName | undefined {
  if (!FAILOVER_TIERS.includes(tier)) return undefined;
  const allowed = policyFor(type, tier, ctx.settings).allowed;
  for (const c of type.failover[from] ?? []) {
    if (c === from || !allowed.has(c) || !ctx.configured(c)) continue;
    if (c === 'sms' && !ctx.profile?.phone) continue;
    if (c === 'email' && !ctx.profile?.email) continue;
    return c;
  }
  return undefined;
}
