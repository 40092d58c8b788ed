/**
 * Client secrets: 256 random bits made by the server (base64url, 43 characters), stored only as
 * their SHA-256. A secret has full entropy, so a fast hash is enough (argon2 is for passwords,
 * which do not), and checking one costs a microsecond on the token endpoint's hot path.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export function generateClientSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function hashClientSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function clientSecretMatches(presented: string, storedSha256: Buffer): boolean {
  const h = hashClientSecret(presented);
  return h.length === storedSha256.length && timingSafeEqual(h, storedSha256);
}
