/**
 * The device authorization grant's rules (RFC 8628), pure: user codes, and what a poll gets.
 *
 * User codes are 8 letters from a 20-letter alphabet without vowels (no words, no 0/O or 1/I
 * confusion; §6.1), shown as `BCDF-GHJK`, about 34 bits; typing is forgiving (case, dashes and
 * spaces are ignored). A poll sooner than the interval since the previous one gets `slow_down`
 * and the interval grows by 5 s for the rest of the grant (§3.5).
 */
import { randomInt } from 'node:crypto';
import type { DeviceRecord } from './device-store.js';

const ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const LENGTH = 8;

export function newUserCode(): string {
  let s = '';
  for (let i = 0; i < LENGTH; i++) s += ALPHABET[randomInt(ALPHABET.length)];
  return s;
}

/** `BCDF-GHJK` for display. */
export function formatUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/** The stored form of what a person typed, or undefined when it cannot be a user code. */
export function normalizeUserCode(typed: string): string | undefined {
  const s = typed.toUpperCase().replace(/[\s-]/g, '');
  if (s.length !== LENGTH) return undefined;
  for (const c of s) if (!ALPHABET.includes(c)) return undefined;
  return s;
}

export type PollDecision =
  | { readonly kind: 'issue' }
  | { readonly kind: 'pending' }
  | { readonly kind: 'slow_down'; readonly intervalS: number }
  | { readonly kind: 'error'; readonly error: 'invalid_grant' | 'expired_token' | 'access_denied'; readonly description: string };

export const SLOW_DOWN_STEP_S = 5;

/** What a token-endpoint poll with this device code gets at `nowMs`. */
export function decidePoll(d: DeviceRecord | undefined, clientId: string, nowMs: number): PollDecision {
  if (!d || d.clientId !== clientId) return { kind: 'error', error: 'invalid_grant', description: 'the device code is invalid' };
  if (d.status === 'consumed') return { kind: 'error', error: 'invalid_grant', description: 'the device code was already used' };
  if (d.expiresAt <= nowMs) return { kind: 'error', error: 'expired_token', description: 'the device code has expired; start again' };
  if (d.status === 'denied') return { kind: 'error', error: 'access_denied', description: 'the user denied the request' };
  if (d.status === 'approved') return { kind: 'issue' };
  if (d.lastPolledAt !== undefined && nowMs - d.lastPolledAt < d.intervalS * 1000) {
    return { kind: 'slow_down', intervalS: d.intervalS + SLOW_DOWN_STEP_S };
  }
  return { kind: 'pending' };
}
