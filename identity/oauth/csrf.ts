/**
 * Login CSRF defences of the sign-in page (`POST /authorize`) and the device page
 * (`POST /auth/device`), the pure part: which form posts come from another site, the browser's
 * form cookie, and what an anti-forgery token is bound to. form-guard.ts issues and checks the
 * tokens.
 *
 * **Cross-site posts.** Only identity's own pages post these forms, so a browser that says where
 * the post came from must say `Sec-Fetch-Site: same-origin` (or `none`: a navigation the person
 * started, which no other page can cause). `cross-site` is refused, and so is `same-site`: a
 * sibling subdomain (another app, user content) is not identity and must not sign a person in.
 * Without `Sec-Fetch-Site` (older browsers), an `Origin` that is present and is not identity's
 * public origin (the origin of `JWT_ISSUER`) is refused, `Origin: null` included. With neither
 * header (a non-browser client, a very old browser) the post goes on to the token check.
 */
import { timingSafeEqual } from 'node:crypto';
import { looksLikeOpaqueToken, sha256 } from '../tokens/opaque.js';

/** Why a form post is refused as cross-site; undefined when it may go on. */
export function crossSiteRefusal(headers: Readonly<Record<string, string>>, publicOrigin: string): string | undefined {
  const site = headers['sec-fetch-site'];
  if (site !== undefined) {
    const s = site.trim().toLowerCase();
    return s === 'same-origin' || s === 'none' ? undefined : 'the form was posted from another site (Sec-Fetch-Site)';
  }
  const origin = headers.origin;
  if (origin === undefined) return undefined;
  let posted: string | undefined;
  try {
    posted = origin.trim() === 'null' ? undefined : new URL(origin.trim()).origin;
  } catch {
    posted = undefined;
  }
  return posted === publicOrigin ? undefined : 'the form was posted from another origin (Origin)';
}

/**
 * The cookie that ties a form to the browser it was shown to. `__Host-` (https only: no Domain,
 * Path=/, Secure, so a sibling subdomain cannot plant its own) when the issuer is https.
 */
export function formCookieName(issuer: string): string {
  return issuer.startsWith('https:') ? '__Host-identity-form' : 'identity-form';
}

/** The value of cookie `name` in a `Cookie` header, when it is one of ours (43 base64url). */
export function readFormCookie(cookieHeader: string | undefined, name: string): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(/[;,]/)) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    if (looksLikeOpaqueToken(value)) return value;
  }
  return undefined;
}

/** The `Set-Cookie` value: HttpOnly, SameSite=Strict (never sent on another site's post). */
export function formCookie(name: string, value: string, opts: { secure: boolean; maxAgeMs: number }): string {
  const attrs = [`${name}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${Math.floor(opts.maxAgeMs / 1000)}`];
  if (opts.secure) attrs.push('Secure');
  return attrs.join('; ');
}

/**
 * What the sign-in page's token is bound to: the authorization request, as its validated
 * parameters (any change to the client, redirect URI, PKCE challenge, state, nonce or scope makes
 * another subject).
 */
export function authorizationSubject(params: ReadonlyMap<string, string>): Buffer {
  const canonical = [...params]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  return sha256(`authorize\n${canonical}`);
}

/** What the device page's token is bound to: the device authorization, by its user code (normal form). */
export function deviceSubject(userCode: string): Buffer {
  return sha256(`device\n${userCode}`);
}

/** Constant-time equality of two digests. */
export function sameDigest(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
