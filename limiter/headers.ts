/**
 * Rate-limit response headers, on every response, admitted or denied:
 *
 * - `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds), as seed 001;
 * - `Retry-After` (integer seconds, at least 1) on a refusal (not on a shadow-mode denial, which is forwarded);
 * - the IETF fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy: "<name>";q=<limit>;w=<window s>`
 *   and `RateLimit: "<name>";r=<remaining>;t=<seconds to reset>`.
 *
 * The numbers are always the caller's own bucket's (never the global bucket's or another
 * subject's); the policy name is the plan name, never a subject.
 */

export interface HeaderFigures {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** When the bucket is full again (token/leaky) or the window resets (window algorithms), epoch ms. */
  resetAtMs: number;
  /** On a denial: how long until this request would be admitted, ms. */
  retryAfterMs: number;
}

export interface PolicyInfo {
  /** Plan name, shown in the IETF headers. Must be a plain token (validated when quotas load). */
  name: string;
  windowSec: number;
}

/** Flat [name, value, ...] pairs, ready for uWS `writeHeader` and problem replies. */
export function rateLimitHeaders(f: HeaderFigures, policy: PolicyInfo, nowMs: number, refused = !f.allowed): string[] {
  const remaining = f.remaining > 0 ? Math.floor(f.remaining) : 0;
  const resetSec = Math.max(0, Math.ceil((f.resetAtMs - nowMs) / 1000));
  const out = [
    'x-ratelimit-limit',
    String(f.limit),
    'x-ratelimit-remaining',
    String(remaining),
    'x-ratelimit-reset',
    String(Math.ceil(f.resetAtMs / 1000)),
    'ratelimit-policy',
    `"${policy.name}";q=${f.limit};w=${policy.windowSec}`,
    'ratelimit',
    `"${policy.name}";r=${remaining};t=${resetSec}`,
  ];
  if (refused) out.push('retry-after', String(retryAfterSeconds(f.retryAfterMs)));
  return out;
}

/** Whole seconds, never 0: a client told "now" would retry into the same denial. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
