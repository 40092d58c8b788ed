/**
 * Reading a provider's `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Pure:
 * the current time is passed in.
 */

/** The longest wait we take from a provider; a larger value is capped (a typo must not park a send for a year). */
export const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

/**
 * Milliseconds to wait before retrying, or `undefined` when the header is absent or unreadable.
 * A date in the past gives 0.
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!raw) return undefined;
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(raw)) ms = Math.round(Number(raw) * 1000);
  else {
    const at = Date.parse(raw);
    if (Number.isNaN(at)) return undefined;
    ms = Math.max(0, at - nowMs);
  }
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}
