/**
 * The headers every console answer carries. Pages are never cached (they show live state and carry
 * the session's CSRF token); the Content-Security-Policy allows scripts and styles from this origin
 * only (no inline script, no eval), images from here or data: URLs, forms posting here or to
 * identity (a form whose session expired is redirected there), and no framing at all
 * (clickjacking: frame-ancestors 'none', and X-Frame-Options for older browsers).
 */
export function pageHeaders(identityOrigin: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data:",
      "connect-src 'self'",
      `form-action 'self' ${identityOrigin}`,
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
    'cross-origin-opener-policy': 'same-origin',
  };
}
