/**
 * Delivery states and the rules that move them (README, "Tracking"). Pure.
 *
 * Success states are ordered, and tracking only ever moves a delivery forward along them:
 * `queued` → `sending` (internal: a worker holds it and the provider call is under way; shown as
 * `queued`) → `sent` (the provider accepted it) → `delivered` (the provider or the app confirmed
 * it) → `opened` (pixel or app) → `read` (in-app only). A late signal never moves a delivery back:
 * a "sent" arriving after "delivered" changes nothing.
 *
 * Failure states end the send path: `failed` (it cannot be delivered on this channel: no address,
 * no device token, the provider refused it for good, or, for a transactional push, it failed over
 * to SMS) and `dead_lettered` (retries exhausted or the template could not render; it sits in its
 * channel's dead-letter queue). Two moves leave them, both deliberate: an operator's re-drive
 * (`dead_lettered` → `queued`), and a transactional push parked by failover resuming its own
 * retries when the SMS also fails (`failed` → `queued`). A retry after a transient failure goes
 * `sending` → `queued` (internal; still shown as `queued`).
 */

export type DeliveryStatus = 'queued' | 'sending' | 'sent' | 'delivered' | 'opened' | 'read' | 'failed' | 'dead_lettered';

/** What callers see: `sending` is shown as `queued`. */
export type VisibleStatus = Exclude<DeliveryStatus, 'sending'>;

/** The overall status of a notification: `read` counts as `opened`. */
export type OverallStatus = Exclude<VisibleStatus, 'read'>;

/** Signals that move a delivery forward. */
export type Signal = 'sent' | 'delivered' | 'opened' | 'read';

export const DELIVERY_STATUSES: readonly DeliveryStatus[] = [
  'queued',
  'sending',
  'sent',
  'delivered',
  'opened',
  'read',
  'failed',
  'dead_lettered',
];

const RANK: Readonly<Record<Exclude<DeliveryStatus, 'failed' | 'dead_lettered'>, number>> = {
  queued: 0,
  sending: 1,
  sent: 2,
  delivered: 3,
  opened: 4,
  read: 5,
};

export function isFailure(s: DeliveryStatus): s is 'failed' | 'dead_lettered' {
  return s === 'failed' || s === 'dead_lettered';
}

export function visible(s: DeliveryStatus): VisibleStatus {
  return s === 'sending' ? 'queued' : s;
}

/** May `signal` move a delivery in `from` forward? Never out of a failure state, never backward or sideways. */
export function canAdvance(from: DeliveryStatus, signal: Signal): boolean {
  if (isFailure(from)) return false;
  return RANK[from] < RANK[signal];
}

/** The states `signal` may move a delivery out of (for a conditional UPDATE). */
export function advanceableFrom(signal: Signal): DeliveryStatus[] {
  return DELIVERY_STATUSES.filter((s) => canAdvance(s, signal));
}

/**
 * One channel's status from its deliveries (one per recipient): the most advanced success state;
 * a failure only when every delivery failed (`dead_lettered` if any is, since that one can be
 * re-driven).
 */
export function channelStatus(statuses: readonly DeliveryStatus[]): VisibleStatus {
  let best: VisibleStatus | undefined;
  let anyDead = false;
  for (const s of statuses) {
    if (isFailure(s)) {
      if (s === 'dead_lettered') anyDead = true;
      continue;
    }
    const v = visible(s);
    if (best === undefined || RANK[v as keyof typeof RANK] > RANK[best as keyof typeof RANK]) best = v;
  }
  if (best !== undefined) return best;
  if (statuses.length === 0) return 'queued';
  return anyDead ? 'dead_lettered' : 'failed';
}

/**
 * The overall status of a notification from its channels' statuses: the most advanced channel
 * (`read` counts as `opened`); `failed` or `dead_lettered` only when every channel is one of them.
 */
export function overallStatus(channels: readonly VisibleStatus[]): OverallStatus {
  const s = channelStatus(channels);
  return s === 'read' ? 'opened' : s;
}
