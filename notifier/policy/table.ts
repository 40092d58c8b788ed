/**
 * The one table of notification type × tier → which channels may be used and which policies apply
 * (README, "Notification types, preferences and policies"). Ingestion, routing and failover all
 * ask {@link policyFor}; nothing else decides. Pure.
 *
 * | | transactional tier, or a `mandatory` type | `high` | `normal` | `low` |
 * |---|---|---|---|---|
 * | sms allowed | yes, unless the type says `sms: false` | yes, unless `sms: false` | no | no |
 * | the user's "off" wins | no | yes | yes | yes |
 * | caps | no | no | yes | yes |
 * | quiet hours | no | if NOTIFIER_QUIET_HOURS_TIERS has `high` (default no) | if it has `normal` (default yes) | always |
 * | digest (types with one) | no | no | yes | yes |
 *
 * `marketing` is `sms: false` whatever the configuration says (policy/types.ts refuses otherwise),
 * so marketing never goes out by SMS: not named in a request (422), not by a preference (400), not
 * by failover. `high` is the seed's "order shipped, payment failed", with a 30 s guarantee: holding
 * or folding it would break that, so only quiet hours may apply, and only when the operator says.
 */
import { CHANNEL_NAMES, type ChannelName, type Tier } from '../channels/channel.js';
import type { NotificationType } from './types.js';

export interface Policy {
  /** Channels this type may use at this tier. */
  allowed: ReadonlySet<ChannelName>;
  /** The user's preferences can turn a channel off. */
  optOut: boolean;
  caps: boolean;
  quietHours: boolean;
  digest: boolean;
}

export interface PolicySettings {
  /** Tiers besides `low` that honour quiet hours (NOTIFIER_QUIET_HOURS_TIERS). */
  quietHoursTiers: readonly Tier[];
}

const SMS_TIERS: readonly Tier[] = ['transactional', 'high'];
const CAPPED_TIERS: readonly Tier[] = ['normal', 'low'];

/** Exempt from every user-side policy: the transactional tier and mandatory types. */
export function isExempt(type: NotificationType, tier: Tier): boolean {
  return tier === 'transactional' || type.mandatory;
}

export function policyFor(type: NotificationType, tier: Tier, settings: PolicySettings): Policy {
  const exempt = isExempt(type, tier);
  const smsOk = type.sms && (SMS_TIERS.includes(tier) || type.mandatory);
  const allowed = new Set<ChannelName>(CHANNEL_NAMES.filter((c) => c !== 'sms' || smsOk));
  return {
    allowed,
    optOut: !exempt,
    caps: !exempt && CAPPED_TIERS.includes(tier),
    quietHours: !exempt && (tier === 'low' || settings.quietHoursTiers.includes(tier)),
    digest: !exempt && CAPPED_TIERS.includes(tier) && type.digest !== undefined,
  };
}
