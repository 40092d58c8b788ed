/**
 * The physical queues (README, "Notifications": one queue and worker pool per priority tier, not a
 * priority field
 * on a shared queue; channels isolated from each other):
 *
 * - `notify-route-<tier>`: one routing job per accepted notification (recipient → deliveries);
 * - `notify-deliver-<channel>-<tier>`: one job per delivery attempt, 16 queues in all;
 * - `notify-campaign-<tier>`: a campaign's fan-out (notifier/campaigns): its planning job, one job
 *   per shard, and the sweep after a stop; `high`, `normal` and `low` only (an audience request
 *   is never transactional);
 * - `notify-retention`: the scheduled clean-up of old records.
 *
 * Each is its own pg-boss queue (its own partition of pg-boss's job table), drained by its own
 * worker loop with its own concurrency (queues/runner.ts).
 */
import { CHANNEL_NAMES, type ChannelName, type Tier } from '../channels/channel.js';

export type { ChannelName, Tier } from '../channels/channel.js';
export { CHANNEL_NAMES } from '../channels/channel.js';

/** The tiers, most urgent first. */
export const TIERS: readonly Tier[] = ['transactional', 'high', 'normal', 'low'];

export const RETENTION_QUEUE = 'notify-retention';

/** The tiers an audience request may have: a transactional message has one recipient. */
export const CAMPAIGN_TIERS: readonly Tier[] = ['high', 'normal', 'low'];

export function campaignQueue(tier: Tier): string {
  return `notify-campaign-${tier}`;
}

export function routeQueue(tier: Tier): string {
  return `notify-route-${tier}`;
}

export function deliverQueue(channel: ChannelName, tier: Tier): string {
  return `notify-deliver-${channel}-${tier}`;
}

export function isTier(s: string): s is Tier {
  return (TIERS as readonly string[]).includes(s);
}

export function isChannel(s: string): s is ChannelName {
  return (CHANNEL_NAMES as readonly string[]).includes(s);
}

/** Every queue the notifier uses, retention last. */
export function allQueues(): string[] {
  const out: string[] = [];
  for (const tier of TIERS) out.push(routeQueue(tier));
  for (const tier of TIERS) for (const channel of CHANNEL_NAMES) out.push(deliverQueue(channel, tier));
  for (const tier of CAMPAIGN_TIERS) out.push(campaignQueue(tier));
  out.push(RETENTION_QUEUE);
  return out;
}
