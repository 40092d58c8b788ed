/**
 * Which provider of a channel takes a delivery, and whether it is shadowed. Pure: a function of
 * the delivery id and the channel's ramp settings, so every replica and every attempt of a
 * delivery computes the same answer while the settings stand.
 *
 * A delivery's bucket is a number from 0 to 9,999 drawn from a hash of its id; it goes to the new
 * provider when its bucket is below the new provider's weight (in hundredths of a percent). Raising
 * the weight only moves deliveries from the old provider to the new one, lowering it only moves
 * them back: a retry stays on the provider it was sent with unless an operator moved the weight
 * across its bucket, and then it deliberately follows the operator (turning a failing new provider
 * down also takes its retries off it). The shadow share uses a second, independent bucket.
 */
import { createHash } from 'node:crypto';

/** Buckets per channel: weights and shares are in hundredths of a percent. */
export const BUCKETS = 10_000;

/** The ramp settings of one channel, as stored (provider_ramps) and served by the operator API. */
export interface RampSettings {
  /** Share of live deliveries sent with the new provider, 0 to 10,000 (hundredths of a percent). */
  weight: number;
  /** Share of the old provider's deliveries also sent to the new one as a shadow, 0 to 10,000. */
  shadow: number;
}

/** The settings before an operator sets any: everything on the old provider, no shadow. */
export const NO_RAMP: RampSettings = { weight: 0, shadow: 0 };

/** The bucket of an id under a salt, 0 to {@link BUCKETS} − 1. */
export function bucket(id: string, salt: string): number {
  return createHash('sha256').update(salt).update('\0').update(id).digest().readUInt32BE(0) % BUCKETS;
}

/** Does this delivery go to the new provider? */
export function onNewProvider(deliveryId: string, s: RampSettings): boolean {
  return bucket(deliveryId, 'weight') < s.weight;
}

/** Is this delivery (sent with the old provider) also shadow-sent to the new one? */
export function shadowed(deliveryId: string, s: RampSettings): boolean {
  return !onNewProvider(deliveryId, s) && bucket(deliveryId, 'shadow') < s.shadow;
}

/** The test recipient a shadow copy of this delivery goes to: spread over the list by the delivery id. */
export function testRecipient(deliveryId: string, recipients: readonly string[]): string | undefined {
  if (recipients.length === 0) return undefined;
  return recipients[bucket(deliveryId, 'recipient') % recipients.length];
}

/** A percentage as given to the operator API (0 to 100, two decimals at most) in buckets. */
export function percentToBuckets(p: number): number {
  return Math.round(p * 100);
}

/** Buckets as a percentage, for the operator API. */
export function bucketsToPercent(b: number): number {
  return b / 100;
}
