/**
 * Sliding window (README, "Algorithms and counters"; the usual choice for API quotas), a pure
 * function of (limit, state, now, cost), in constant memory: two counts and a window start.
 *
 * - Time is cut into windows of `intervalMs` (aligned to the epoch when a subject is first seen).
 *   At `e` ms into the current window the estimate of the last interval's traffic is
 *   `previous × (interval − e) / interval + current`: the previous window's count weighted by the
 *   share of it the sliding interval still covers. A request costing `cost` is admitted while
 *   `estimate + cost ≤ rate`. `burst` is ignored; `limit` is `rate`.
 * - `remaining` is `floor(rate − estimate)`, never negative. `resetAtMs` is when both counts have
 *   aged out (two windows after the current one began when it has traffic, the end of the current
 *   one when only the previous had). A denial's `retryAfterMs` is the exact moment the weighted
 *   estimate lets `cost` through (later in this window as the previous count's weight falls, or in
 *   the next), rounded up to a whole ms and to at least 1 s; a cost above `rate` never passes and is
 *   told to wait until both counts have aged out.
 *
 * Bounds (what "slightly over-admits" means here, for a fixed limit):
 * - each aligned window admits at most `rate` (the estimate is never below the current count);
 * - any span of `d ≤ intervalMs` ms admits at most `rate × (1 + d / intervalMs)`. An exact sliding
 *   log would admit `rate`; the excess, at most `rate × d / intervalMs`, appears only when the
 *   previous window's traffic was bunched at its end (the estimate assumes it was spread evenly).
 *   Spans just under one interval can thus reach nearly `2 × rate` under adversarial timing, but a
 *   burst across a boundary cannot: right after a boundary the previous window weighs in fully,
 *   where a fixed window would admit `2 × rate` at once.
 *
 * Counts are kept as integers (weights are applied in count × ms units), so decisions are exact and
 * identical in TypeScript and in the Redis script. A clock that steps back stays in the current
 * window with no time elapsed.
 */
import { ALGORITHM_CODE, MIN_RETRY_AFTER_MS, newStep, type BucketState, type RateParams, type Step } from './limit.js';

const ALG = ALGORITHM_CODE.sliding_window;

/**
 * Decides one request. Never mutates `state`; writes into and returns `out` (a fresh step when
 * omitted). `out.newState` must not be `state` itself.
 */
export function slidingWindow(p: RateParams, state: BucketState | undefined, nowMs: number, cost: number, out: Step = newStep()): Step {
  const iv = p.intervalMs;
  const rate = p.rate;
  let start: number;
  let curr: number;
  let prev: number;
  if (state === undefined || state.alg !== ALG) {
    start = Math.floor(nowMs / iv) * iv;
    curr = 0;
    prev = 0;
  } else {
    start = state.a;
    curr = state.b;
    prev = state.c;
    if (nowMs >= start + iv) {
      const k = Math.floor((nowMs - start) / iv);
      prev = k === 1 ? curr : 0;
      curr = 0;
      start += k * iv;
    }
  }
  const e = nowMs > start ? nowMs - start : 0;
  const capacity = rate * iv;
  let used = prev * (iv - e) + curr * iv;
  const need = cost * iv;
  const allowed = used + need <= capacity;
  if (allowed) {
    curr += cost;
    used += need;
  }
  out.allowed = allowed;
  out.limit = rate;
  out.remaining = used < capacity ? Math.floor((capacity - used) / iv) : 0;
  const rest = curr > 0 ? start + 2 * iv : prev > 0 ? start + iv : nowMs;
  out.resetAtMs = rest;
  if (allowed) out.retryAfterMs = 0;
  else {
    let wait: number;
    if (cost > rate) wait = rest - nowMs;
    else if (curr + cost <= rate) {
      // Later in this window, once the previous count's weight has fallen enough (prev > 0 here).
      wait = start + iv - Math.floor(((rate - curr - cost) * iv) / prev) - nowMs;
    } else {
      // In the next window, where this window's count becomes the weighted previous (curr > 0 here).
      wait = start + 2 * iv - Math.floor(((rate - cost) * iv) / curr) - nowMs;
    }
    out.retryAfterMs = wait > MIN_RETRY_AFTER_MS ? wait : MIN_RETRY_AFTER_MS;
  }
  const s = out.newState;
  s.alg = ALG;
  s.a = start;
  s.b = curr;
  s.c = prev;
  return out;
}
