/**
 * Delivery states, the rules that move them, and the precedence that makes a channel's and a
 * notification's status (README, "Tracking" and "Delivery states"). Pure. This module owns the
 * full list; notifier/README.md draws it.
 *
 * Success states are ordered, and tracking only ever moves a delivery forward along them:
 * `queued` → `sending` (internal: a worker holds it and the provider call is under way; shown as
 * `queued`) → `sent` (the provider accepted it) → `delivered` (the provider or the app confirmed
 * it) → `opened` (pixel or app) → `read` (in-app only). A late signal never moves a delivery back:
 * a "sent" arriving after "delivered" changes nothing.
 *
 * Held: a `queued` delivery that a policy holds until a release time (`hold_reason`, shown in its
 * place): `quiet_hours` (until the user's quiet hours end), `digest` (a digest's send, until its
 * window ends or its cap frees a slot). A digest's items are `digested`: folded into the digest,
 * they show the digest send's state (`digest` while it waits, then `sent`, `delivered`, …).
 *
 * Suppressed, final: `opted_out` (the user turned the channel off for the type) and `capped` (over
 * the type's cap for the channel).
 *
 * Failure states end the send path: `failed` (it cannot be delivered on this channel: no address,
 * no device token, the provider refused it for good, or, for a transactional push, it failed over
 * to SMS) and `dead_lettered` (retries exhausted or the template could not render; it sits in its
 * channel's dead-letter queue). Two moves leave them, both deliberate: an operator's re-drive
 * (`dead_lettered` → `queued`), and a transactional push parked by failover resuming its own
 * retries when the SMS also fails (`failed` → `queued`). A retry after a transient failure goes
 * `sending` → `queued` (internal; still shown as `queued`).
 *
 * Campaigns (notifier/campaigns): `cancelled` (final, beside `capped`) is a campaign delivery the
 * kill switch stopped before a provider had it; `pending_approval` is not a delivery state but a
 * fan-out's, shown as the notification's status while an operator has not decided (after
 * `queued`: nothing is on its way yet).
 *
 * Provider feedback (notifier/feedback), final, beside `failed`: `bounced` (the receiving mail
 * system refused it for good: an SES Bounce of type Permanent), `complained` (the recipient marked
 * it as spam: an SES Complaint) and `undelivered` (the SMS carrier gave up: Twilio `undelivered`);
 * Twilio `failed` moves a `sent` SMS to `failed`. Which state a feedback event may leave
 * ({@link FEEDBACK_FROM}):
 * - `delivered` leaves `sent` only (a Delivery after a Bounce changes nothing);
 * - `bounced` leaves `sent` and `delivered`: a mail system can accept a message (SES Delivery) and
 *   bounce it later, and then the recipient never saw it, so the later, more specific word wins;
 *   never `opened` (someone fetched it);
 * - `complained` leaves `sent`, `delivered` and `opened` (a complaint follows reading);
 * - `undelivered` and `failed` leave `sent` only: a carrier's final statuses exclude each other,
 *   so whichever arrives first stands and a contradicting one is recorded, not applied.
 * Every event is recorded (provider_events) and counted whether or not it moved the delivery, so
 * duplicates and reordering are harmless: states only move forward.
 *
 * `suppressed` (final, beside `opted_out`): an e-mail not sent because its address is on the
 * suppression list (a permanent bounce or a complaint earlier); the reason is in its detail.
 */

export type DeliveryStatus =
  | 'queued'
  | 'sending'
  | 'sent'
  | 'delivered'
  | 'opened'
  | 'read'
  | 'failed'
  | 'dead_lettered'
  | 'opted_out'
  | 'capped'
  | 'digested'
  | 'cancelled'
  | 'bounced'
  | 'complained'
  | 'undelivered'
  | 'suppressed';

export type HoldState = 'quiet_hours' | 'digest';

/**
 * What callers see for a channel: `sending` is shown as `queued`, a hold by its reason, `digested`
 * by its digest's state; `pending_approval` for a fan-out an operator has not decided.
 */
export type VisibleStatus = Exclude<DeliveryStatus, 'sending' | 'digested'> | HoldState | 'pending_approval';

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
  'opted_out',
  'capped',
  'digested',
  'cancelled',
  'bounced',
  'complained',
  'undelivered',
  'suppressed',
];

const RANK: Readonly<Partial<Record<DeliveryStatus, number>>> = {
  queued: 0,
  sending: 1,
  sent: 2,
  delivered: 3,
  opened: 4,
  read: 5,
};

/**
 * Which shown state wins when a channel has several deliveries, and which channel's state is the
 * notification's: the first in this list. Progress beats waiting, waiting beats failure, and a
 * failure (which an operator may act on) beats a suppression (which the user asked for).
 */
export const PRECEDENCE: readonly VisibleStatus[] = [
  'read',
  'opened',
  'delivered',
  'sent',
  'queued',
  'pending_approval',
  'quiet_hours',
  'digest',
  'dead_lettered',
  'failed',
  'undelivered',
  'bounced',
  'complained',
  'suppressed',
  'capped',
  'cancelled',
  'opted_out',
];

export function isFailure(s: DeliveryStatus): s is 'failed' | 'dead_lettered' {
  return s === 'failed' || s === 'dead_lettered';
}

/** The states provider feedback moves a delivery into. */
export type FeedbackState = 'delivered' | 'bounced' | 'complained' | 'undelivered' | 'failed';

/** The states each feedback state may leave (see the module comment). */
export const FEEDBACK_FROM: Readonly<Record<FeedbackState, readonly DeliveryStatus[]>> = {
  delivered: ['sent'],
  bounced: ['sent', 'delivered'],
  complained: ['sent', 'delivered', 'opened'],
  undelivered: ['sent'],
  failed: ['sent'],
};

/** May feedback move a delivery in `from` to `to`? Pure; the feedback writer applies it in order of arrival. */
export function canApplyFeedback(from: DeliveryStatus, to: FeedbackState): boolean {
  return FEEDBACK_FROM[to].includes(from);
}

/** A delivery's state as shown: `sending` as `queued`, a held one by its hold (`digested` is resolved by the caller). */
export function visible(s: DeliveryStatus, hold?: string | null): VisibleStatus {
  if (s === 'sending') return 'queued';
  if (s === 'queued' && (hold === 'quiet_hours' || hold === 'digest')) return hold;
  if (s === 'digested') return 'digest';
  return s;
}

/** May `signal` move a delivery in `from` forward? Only along the success states, never backward or sideways. */
export function canAdvance(from: DeliveryStatus, signal: Signal): boolean {
  const r = RANK[from];
  return r !== undefined && r < RANK[signal]!;
}

/** The states `signal` may move a delivery out of (for a conditional UPDATE). */
export function advanceableFrom(signal: Signal): DeliveryStatus[] {
  return DELIVERY_STATUSES.filter((s) => canAdvance(s, signal));
}

/** The state that wins among several (see {@link PRECEDENCE}); `queued` for none. */
export function highest(states: readonly VisibleStatus[]): VisibleStatus {
  let best: VisibleStatus | undefined;
  for (const s of states) if (best === undefined || PRECEDENCE.indexOf(s) < PRECEDENCE.indexOf(best)) best = s;
  return best ?? 'queued';
}

/** One channel's status from its deliveries' states (one per recipient). */
export function channelStatus(statuses: readonly DeliveryStatus[]): VisibleStatus {
  return highest(statuses.map((s) => visible(s)));
}

/** The overall status of a notification from its channels' statuses (`read` counts as `opened`). */
export function overallStatus(channels: readonly VisibleStatus[]): OverallStatus {
  const s = highest(channels);
  return s === 'read' ? 'opened' : s;
}
