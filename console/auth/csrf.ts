/**
 * CSRF protection for every POST (OWASP's synchronizer-token pattern plus an origin check):
 *
 * 1. the form's `_csrf` field must equal the session's token, compared in constant time (through
 *    SHA-256 digests, so lengths leak nothing either);
 * 2. the request's `Origin` must be the console's own origin (CONSOLE_PUBLIC_URL). Browsers send
 *    Origin on every form POST; a POST without one falls back to the `Referer`'s origin, and is
 *    refused with neither. `Origin: null` (sandboxed frames, some redirects) is refused.
 *
 * The session cookie being SameSite=Lax is a third net, not the defence: it does not help
 * against a sibling subdomain (same site) or an old browser.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A fresh token: 256 random bits, base64url. */
export function newCsrfToken(): string {
  return randomBytes(32).toString('base64url');
}

export function csrfTokensEqual(expected: string, given: string | null | undefined): boolean {
  if (typeof given !== 'string' || given === '' || expected === '') return false;
  const a = createHash('sha256').update(expected).digest();
  const b = createHash('sha256').update(given).digest();
  return timingSafeEqual(a, b);
}

/** True when the request comes from a page of `origin` (the console's own). */
export function sameOrigin(headers: Readonly<Record<string, string>>, origin: string): boolean {
  const o = headers['origin'];
  if (o !== undefined) return o === origin;
  const referer = headers['referer'];
  if (referer === undefined) return false;
  try {
    return new URL(referer).origin === origin;
  } catch {
    return false;
  }
}
