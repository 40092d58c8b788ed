/**
 * The pure core of the sign-in throttle: failures counted in fixed windows that open at the first
 * failure and last `windowMs`. A key (an account or a client address) with `limit` failures in
 * its open window is refused until the window closes. The clock is the caller's.
 */

export interface FailureWindow {
  readonly failures: number;
  /** Epoch ms of the first failure of the window. */
  readonly startMs: number;
}

/** Milliseconds until `w` lets a sign-in through again; 0 when it does now. */
export function blockedForMs(w: FailureWindow | undefined, limit: number, windowMs: number, nowMs: number): number {
  if (!w || w.failures < limit) return 0;
  const end = w.startMs + windowMs;
  return end > nowMs ? end - nowMs : 0;
}

/** The window after one more failure at `nowMs` (a closed window starts over). */
export function afterFailure(w: FailureWindow | undefined, windowMs: number, nowMs: number): FailureWindow {
  if (!w || w.startMs + windowMs <= nowMs) return { failures: 1, startMs: nowMs };
  return { failures: w.failures + 1, startMs: w.startMs };
}
