/**
 * What a provider told us about one message, whichever webhook brought it, and the state it asks
 * for (tracking/states.ts decides whether the delivery may move there). Pure.
 */
import type { FeedbackState } from '../tracking/states.js';

/**
 * - `delivered`: SES Delivery, Twilio `delivered`;
 * - `bounce_permanent` (→ `bounced`, and the address is suppressed), `bounce_transient` (SES Bounce
 *   of type Transient or Undetermined: recorded and counted, no state change);
 * - `complaint` (→ `complained`, and the address is suppressed);
 * - `undelivered`, `failed`: Twilio's final failures;
 * - `progress`: Twilio `queued`, `accepted`, `sending`, `sent`, `scheduled` (never past `sent`);
 * - `other`: any other event type (SES Send, Open, Click, DeliveryDelay, Reject, …): tolerated,
 *   recorded and counted.
 */
export type FeedbackKind =
  'delivered' | 'bounce_permanent' | 'bounce_transient' | 'complaint' | 'undelivered' | 'failed' | 'progress' | 'other';

export type FeedbackProvider = 'ses' | 'twilio';

export interface Suppress {
  /** Lower-cased. */
  address: string;
  reason: 'bounce' | 'complaint';
}

export interface FeedbackEvent {
  provider: FeedbackProvider;
  channel: 'email' | 'sms';
  /** Unique per event at this provider: a replay carries the same key. */
  eventKey: string;
  providerMessageId: string;
  kind: FeedbackKind;
  /** The provider's own name for the event (SES eventType, Twilio MessageStatus). */
  providerType: string;
  /** The provider's error code (Twilio ErrorCode, the SMTP status of a bounce). */
  errorCode?: string;
  /** A short reason for the status view (no address). */
  detail?: string;
  /** Addresses the event puts on the suppression list. */
  suppress: Suppress[];
}

/** The delivery state an event asks for; undefined: record and count only. */
export function targetState(kind: FeedbackKind): FeedbackState | undefined {
  switch (kind) {
    case 'delivered':
      return 'delivered';
    case 'bounce_permanent':
      return 'bounced';
    case 'complaint':
      return 'complained';
    case 'undelivered':
      return 'undelivered';
    case 'failed':
      return 'failed';
    default:
      return undefined;
  }
}
