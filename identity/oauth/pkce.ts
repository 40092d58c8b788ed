/**
 * PKCE (RFC 7636), S256 only: `code_challenge` = base64url(SHA-256(`code_verifier`)), the verifier
 * 43–128 characters of `A–Z a–z 0–9 - . _ ~`. `plain` and a missing method are refused: without
 * S256 a stolen code is as good as a token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

const VERIFIER_RE = /^[A-Za-z0-9._~-]{43,128}$/;
const CHALLENGE_RE = /^[A-Za-z0-9_-]{43}$/;

export function isValidCodeVerifier(v: string): boolean {
  return VERIFIER_RE.test(v);
}

/** An S256 challenge is the base64url of 32 bytes: 43 characters, no padding. */
export function isValidCodeChallenge(c: string): boolean {
  return CHALLENGE_RE.test(c);
}

export function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** Recomputes the challenge from the verifier and compares in constant time. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  if (!isValidCodeVerifier(verifier)) return false;
  const a = Buffer.from(s256(verifier));
  const b = Buffer.from(challenge);
  return a.length === b.length && timingSafeEqual(a, b);
}
