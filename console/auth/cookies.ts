/**
 * Reading the Cookie header and writing Set-Cookie (RFC 6265). The console sets two cookies, both
 * HttpOnly (no script of any page can read them) and Path=/:
 *
 * - the session cookie, SameSite=Lax: a request another site starts never carries it on a POST,
 *   an image, a frame or a fetch; a top-level GET from another site (a link) does, which only ever
 *   shows a page, since every change is a POST with a CSRF token. Not Strict: the browser arrives
 *   from identity's redirect, and when identity is on another site (its own domain in production)
 *   that is a cross-site navigation, after which a browser withholds a Strict cookie on the
 *   redirect to the page asked for: the operator would be sent to sign in again, in a loop;
 * - the sign-in cookie, SameSite=Lax and 10 minutes: it ties identity's redirect back to the
 *   browser that started the sign-in (that redirect is a top-level GET from identity's site).
 *
 * Behind https (CONSOLE_PUBLIC_URL) both are Secure and take the `__Host-` prefix, which browsers
 * accept only for a Secure cookie with Path=/ and no Domain: no other host or path can set it.
 */

export interface CookieNames {
  session: string;
  signIn: string;
}

export function cookieNames(secure: boolean): CookieNames {
  return secure
    ? { session: '__Host-console_session', signIn: '__Host-console_signin' }
    : { session: 'console_session', signIn: 'console_signin' };
}

/** Every `name=value` of a Cookie header; the first wins for a repeated name (the most specific path, RFC 6265 §5.4). */
export function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (!header) return out;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    if (!out.has(name)) out.set(name, value);
  }
  return out;
}

export interface CookieOptions {
  sameSite: 'Strict' | 'Lax';
  secure: boolean;
  /** Seconds; 0 deletes the cookie. Undefined: a session cookie (gone when the browser closes). */
  maxAge?: number;
}

/** A Set-Cookie value. `value` must be a cookie-octet string (the console's are base64url). */
export function serializeCookie(name: string, value: string, o: CookieOptions): string {
  if (!/^[A-Za-z0-9_-]*$/.test(value)) throw new Error('cookie value must be base64url');
  const parts = [`${name}=${value}`, 'Path=/', 'HttpOnly', `SameSite=${o.sameSite}`];
  if (o.secure) parts.push('Secure');
  if (o.maxAge !== undefined) parts.push(`Max-Age=${Math.max(0, Math.floor(o.maxAge))}`);
  return parts.join('; ');
}
