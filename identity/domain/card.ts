/**
 * Payment cards. The service stores and returns only a provider token and the last four digits;
 * a card number that reaches it (a client that does not tokenise) is tokenised at once and dropped,
 * never stored, logged or echoed. Validation messages never contain the number.
 */
import { randomBytes } from 'node:crypto';

/** Turns a card number into the provider's opaque token. */
export type CardTokenizer = (cardNumber: string) => Promise<string> | string;

/**
 * The stand-in tokenizer until a payment provider is wired in: a random opaque token. It keeps no
 * mapping back to the number (nothing here can charge the card again), which is the point.
 */
export const randomCardToken: CardTokenizer = () => `tok_${randomBytes(18).toString('base64url')}`;

/** Digits only, or undefined when `raw` is not 12 to 19 digits (spaces and dashes allowed between). */
export function cardDigits(raw: string): string | undefined {
  if (!/^\d(?:[ -]?\d){11,18}$/.test(raw)) return undefined;
  return raw.replace(/[ -]/g, '');
}

export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** True when a string looks like a card number (12 to 19 digits): never acceptable as a token. */
export function looksLikeCardNumber(raw: string): boolean {
  return cardDigits(raw.trim()) !== undefined;
}
