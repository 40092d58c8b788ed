/**
 * Server-provided DPoP nonces (RFC 9449 §8), stateless: a nonce is the number of the time window
 * it was issued in and an HMAC of that number under a secret every replica shares, so any replica
 * checks any replica's nonce without a lookup. A nonce is valid in its window and the next one
 * (so from `windowMs` to twice that long); a fresh one is sent with every answer.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';

const MAC_BYTES = 16;

export interface DpopNonces {
  /** The nonce of the current window. */
  current(): string;
  /** Whether a nonce a client sent is one of ours, of the current or the previous window. */
  isValid(nonce: unknown): boolean;
}

export function createNonceSource(secret: Buffer, clock: Clock, windowMs = 5 * 60_000): DpopNonces {
  if (secret.length < 16) throw new RangeError('dpop nonce secret must be at least 16 bytes');
  const mac = (n: number): Buffer => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(n));
    return createHmac('sha256', secret).update(b).digest().subarray(0, MAC_BYTES);
  };
  const make = (n: number): string => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(n));
    return Buffer.concat([b, mac(n)]).toString('base64url');
  };
  let cached: { n: number; nonce: string } | undefined;
  return {
    current() {
      const n = Math.floor(clock.now() / windowMs);
      if (cached?.n !== n) cached = { n, nonce: make(n) };
      return cached.nonce;
    },
    isValid(nonce) {
      if (typeof nonce !== 'string' || nonce.length !== 32) return false;
      const raw = Buffer.from(nonce, 'base64url');
      if (raw.length !== 8 + MAC_BYTES) return false;
      const n = Number(raw.readBigUInt64BE(0));
      const now = Math.floor(clock.now() / windowMs);
      if (n !== now && n !== now - 1) return false;
      return timingSafeEqual(raw.subarray(8), mac(n));
    },
  };
}
