/**
 * Leaky bucket as a meter (README, "Algorithms and counters"), a pure function of (limit, state, now, cost).
 *
 * - The bucket holds up to `burst` units of water and drains continuously at `rate` per
 *   `intervalMs`. A new subject's bucket is empty.
 * - A request costing `cost` pours `cost` units in if they fit (`level + cost ≤ burst`) and is
 *   admitted; otherwise it is denied at once with 429. Nothing is queued or delayed, so there is
 *   no queue to grow without bound.
 * - `remaining` is the floor of the free capacity (`burst − level`); `limit` is `burst`.
 * - `resetAtMs` is when the bucket is empty again; a denial's `retryAfterMs` is the exact wait until
 *   `cost` units fit, rounded up to a whole ms and to at least 1 s (a cost above `burst` never fits
 *   and is told to wait until the bucket is empty).
 *
 * As a meter, its admit decisions equal a token bucket's with the same rate and burst (free
 * capacity plays the role of tokens): it smooths a subject to the drain rate once the `burst`
 * headroom is used. It is a separate algorithm so quotas can name it, and its stored state is the
 * water level, tagged as its own. Exact like the token bucket (level kept in units × interval).
 */
import { ALGORITHM_CODE, MIN_RETRY_AFTER_MS, newStep, type BucketState, type RateParams, type Step } from './limit.js';

const ALG = ALGORITHM_CODE.leaky_bucket;

/**
 * Decides one request. Never mutates `state`; writes into and returns `out` (a fresh step when
 * omitted). `out.newState` must not be `state` itself.
 */
export function leakyBucket(p: RateParams, state: BucketState | undefined, nowMs: number, cost: number, out: Step = newStep()): Step {
  const iv = p.intervalMs;
  const cap = p.burst * iv;
  let level: number;
  let last: number;
  if (state === undefined || state.alg !== ALG) {
    level = 0;
    last = nowMs;
  } else {
    level = state.c === iv ? state.a : Math.ceil((state.a / state.c) * iv);
    last = state.b;
    if (nowMs > last) {
      level -= (nowMs - last) * p.rate;
      last = nowMs;
    }
    if (level < 0) level = 0;
  }
  const need = cost * iv;
  // Over capacity after a burst cut or a rescale counts as full (no negative free space).
  const free = level < cap ? cap - level : 0;
  const allowed = need <= free;
  if (allowed) level += need;
  out.allowed = allowed;
  out.limit = p.burst;
  out.remaining = allowed ? Math.floor((free - need) / iv) : Math.floor(free / iv);
  const lead = last - nowMs;
  out.resetAtMs = last + Math.ceil(level / p.rate);
  if (allowed) out.retryAfterMs = 0;
  else {
    const wait = lead + Math.ceil((need > cap ? level : level + need - cap) / p.rate);
    out.retryAfterMs = wait > MIN_RETRY_AFTER_MS ? wait : MIN_RETRY_AFTER_MS;
  }
  const s = out.newState;
  s.alg = ALG;
  s.a = level;
  s.b = last;
  s.c = iv;
  return out;
}
