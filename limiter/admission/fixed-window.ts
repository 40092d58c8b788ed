/**
 * Fixed window (README, "Algorithms and counters"), a pure function of (limit, state, now, cost):
 * the cheap, coarse limit
 * for things like login attempts per hour.
 *
 * - Time is cut into windows of `intervalMs`, aligned to the epoch (`floor(now / interval)`) when a
 *   subject is first seen. Each window admits requests while `count + cost ≤ rate`; `burst` is
 *   ignored, and `limit` is `rate`.
 * - `remaining` is `rate − count`; `resetAtMs` is the end of the current window; a denial's
 *   `retryAfterMs` is the time to the window's end, at least 1 s (a cost above `rate` never passes).
 *
 * Bound: each window admits at most `rate` (exact). A burst straddling a boundary can admit up to
 * `2 × rate` within any span shorter than one interval, however short: the window's known weakness,
 * and why the sliding window is the default for API quotas.
 *
 * If `intervalMs` changes, the stored window start keeps its phase and later windows have the new
 * length. A clock that steps back stays in the current window.
 */
import { ALGORITHM_CODE, MIN_RETRY_AFTER_MS, newStep, type BucketState, type RateParams, type Step } from './limit.js';

const ALG = ALGORITHM_CODE.fixed_window;

/**
 * Decides one request. Never mutates `state`; writes into and returns `out` (a fresh step when
 * omitted). `out.newState` must not be `state` itself.
 */
export function fixedWindow(p: RateParams, state: BucketState | undefined, nowMs: number, cost: number, out: Step = newStep()): Step {
  const iv = p.intervalMs;
  let start: number;
  let count: number;
  if (state === undefined || state.alg !== ALG) {
    start = Math.floor(nowMs / iv) * iv;
    count = 0;
  } else {
    start = state.a;
    count = state.b;
    if (nowMs >= start + iv) {
      start += Math.floor((nowMs - start) / iv) * iv;
      count = 0;
    }
  }
  const allowed = count + cost <= p.rate;
  if (allowed) count += cost;
  const end = start + iv;
  out.allowed = allowed;
  out.limit = p.rate;
  out.remaining = count < p.rate ? p.rate - count : 0;
  out.resetAtMs = end;
  if (allowed) out.retryAfterMs = 0;
  else {
    const wait = end - nowMs;
    out.retryAfterMs = wait > MIN_RETRY_AFTER_MS ? wait : MIN_RETRY_AFTER_MS;
  }
  const s = out.newState;
  s.alg = ALG;
  s.a = start;
  s.b = count;
  s.c = 0;
  return out;
}
