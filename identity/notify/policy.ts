/**
 * What the relay does after a call to the notifier (pure): the row is done, tried again later, or
 * parked. The rule: retry what can succeed without touching the row (the notifier or the sidecar
 * down or busy, our credentials or a template not there yet: an operator fixes those, and parking
 * would strand every row in the meantime); park what the notifier refused because of the row
 * itself (400 invalid_field, 413, 422 other than unknown_template), which no retry can change.
 */

export type Verdict =
  | { readonly kind: 'done' }
  | { readonly kind: 'retry'; readonly reason: string; readonly retryAfterMs?: number | undefined }
  | { readonly kind: 'park'; readonly reason: string };

/** An HTTP answer: its status, the problem+json `code` when there is one, and `Retry-After` in ms. */
export interface Answer {
  readonly status: number;
  readonly code?: string | undefined;
  readonly retryAfterMs?: number | undefined;
  /** The problem+json `detail`, kept with the row for the operator. */
  readonly detail?: string | undefined;
}

/** Statuses about where or how we call, not about the row: retried. */
const RETRY_4XX = new Set([401, 403, 404, 408, 409, 425, 429]);
/** 422 codes an operator clears without changing the row. */
const RETRY_422_CODES = new Set(['unknown_template']);

export function verdictOf(a: Answer): Verdict {
  if (a.status >= 200 && a.status < 300) return { kind: 'done' };
  const reason = [String(a.status), a.code, a.detail?.slice(0, 200)].filter((x) => x !== undefined && x !== '').join(' ');
  if (a.status >= 500 || RETRY_4XX.has(a.status) || (a.status === 422 && a.code !== undefined && RETRY_422_CODES.has(a.code))) {
    return { kind: 'retry', reason, retryAfterMs: a.retryAfterMs };
  }
  if (a.status >= 400) return { kind: 'park', reason };
  // 1xx/3xx: nothing we asked for; try again later.
  return { kind: 'retry', reason };
}

/** A call that got no answer (refused, reset, timed out). */
export function failedCall(err: unknown): Verdict {
  const code = (err as { code?: unknown })?.code;
  const name = (err as { name?: unknown })?.name;
  return { kind: 'retry', reason: typeof code === 'string' ? code : typeof name === 'string' ? name : 'network_error' };
}

export interface Backoff {
  /** The first delay, ms. */
  readonly minMs: number;
  /** The longest delay, ms. */
  readonly maxMs: number;
}

/**
 * The delay before attempt `attempts + 1` after `attempts` failures: exponential from `minMs`,
 * capped at `maxMs`, with jitter (half to all of it, so replicas that failed together spread out);
 * a longer `Retry-After` wins, still capped.
 */
export function backoffMs(attempts: number, b: Backoff, random: () => number, retryAfterMs?: number): number {
  const exp = Math.min(b.maxMs, b.minMs * 2 ** Math.min(Math.max(attempts - 1, 0), 30));
  const jittered = Math.round(exp * (0.5 + random() / 2));
  return Math.min(b.maxMs, Math.max(jittered, retryAfterMs ?? 0));
}

/** `Retry-After` (seconds or an HTTP date) in ms from `nowMs`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}
