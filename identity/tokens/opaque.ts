/**
 * Opaque credentials (refresh tokens, authorization codes, device codes): 256 random bits,
 * base64url (43 characters), stored only as a SHA-256, so a copy of the database holds nothing
 * usable.
 *
 * A refresh token's successor is not random but `HMAC-SHA256(grant key, parent)` over the raw
 * 32 bytes: the server can compute the same successor again when a client retries a rotation
 * whose answer it lost, without ever storing a token in clear, and nobody without the parent in
 * hand (only its hash is stored) and the grant's key can compute it. The grant key is kept as
 * its two HMAC pads (RFC 2104: the key, zero-padded to the 64-byte block, XOR 0x36 and XOR 0x5c),
 * so PostgreSQL can compute the HMAC with its built-in `sha256()` inside the rotation statement.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';

const RAW_BYTES = 32;
const SHA256_BLOCK = 64;

export function newOpaqueToken(): string {
  return randomBytes(RAW_BYTES).toString('base64url');
}

/** SHA-256 of a string (codes and device codes are looked up by this). */
export function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

export function sha256Bytes(value: Buffer): Buffer {
  return createHash('sha256').update(value).digest();
}

/** A token we issued is 43 base64url characters; anything else is refused before any lookup. */
export function looksLikeOpaqueToken(value: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(value);
}

/**
 * The 32 raw bytes of a refresh token, or undefined when the string is not one in canonical form
 * (the 43rd character carries 4 unused bits; only the form we issue is accepted, so each token has
 * exactly one spelling).
 */
export function refreshTokenBytes(token: string): Buffer | undefined {
  if (!looksLikeOpaqueToken(token)) return undefined;
  const raw = Buffer.from(token, 'base64url');
  return raw.length === RAW_BYTES && raw.toString('base64url') === token ? raw : undefined;
}

/** The lookup key of a refresh token: SHA-256 of its raw bytes. */
export function refreshTokenHash(raw: Buffer): Buffer {
  return sha256Bytes(raw);
}

/** The HMAC pads of a new grant key (what `oauth_grants` stores). */
export function newRotationPads(): { ipad: Buffer; opad: Buffer } {
  return hmacPads(randomBytes(32));
}

export function hmacPads(key: Buffer): { ipad: Buffer; opad: Buffer } {
  const block = Buffer.alloc(SHA256_BLOCK);
  key.copy(block);
  const ipad = Buffer.alloc(SHA256_BLOCK);
  const opad = Buffer.alloc(SHA256_BLOCK);
  for (let i = 0; i < SHA256_BLOCK; i++) {
    ipad[i] = block[i]! ^ 0x36;
    opad[i] = block[i]! ^ 0x5c;
  }
  return { ipad, opad };
}

/** The successor of a refresh token under a grant key, as the database computes it (for tests). */
export function successorOf(key: Buffer, parentRaw: Buffer): Buffer {
  return createHmac('sha256', key).update(parentRaw).digest();
}
