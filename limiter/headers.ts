/**
 * Rate-limit response headers, on every response, admitted or denied:
 *
 * - `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds; README, "Headers");
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

/**
 * The headers as flat [name, value] pairs for uWS `writeHeader`. For speed they come as ONE pair
 * whose value carries the other header lines (`\r\n`-separated): one native call per response
 * instead of six, which is a fifth of the cost of a 429. Safe because every value here is a number
 * or a plan name limited to `[A-Za-z0-9_.-]` when quotas load (limiter/quota-cache.ts).
 */
export function rateLimitHeaders(f: HeaderFigures, policy: PolicyInfo, nowMs: number, refused = !f.allowed): string[] {
  const remaining = f.remaining > 0 ? Math.floor(f.remaining) : 0;
  const resetSec = Math.max(0, Math.ceil((f.resetAtMs - nowMs) / 1000));
  let block =
    `${f.limit}\r\nx-ratelimit-remaining: ${remaining}\r\nx-ratelimit-reset: ${Math.ceil(f.resetAtMs / 1000)}` +
    `\r\nratelimit-policy: "${policy.name}";q=${f.limit};w=${policy.windowSec}` +
    `\r\nratelimit: "${policy.name}";r=${remaining};t=${resetSec}`;
  if (refused) block += `\r\nretry-after: ${retryAfterSeconds(f.retryAfterMs)}`;
  return ['x-ratelimit-limit', block];
}

/** Whole seconds, never 0: a client told "now" would retry into the same denial. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
