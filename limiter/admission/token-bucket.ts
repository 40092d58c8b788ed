/**
 * Token bucket (README, "Algorithms and counters"), a pure function of (limit, state, now, cost).
 *
 * - A new subject starts full: `burst` tokens.
 * - Tokens refill continuously at `rate` per `intervalMs`, capped at `burst`.
 * - A request costing `cost` is admitted only when at least `cost` tokens are there; then `cost` is
 *   deducted. A denied request takes nothing.
 * - `remaining` is the floor of the tokens left; `limit` is `burst`.
 * - `resetAtMs` is when the bucket is full again; a denial's `retryAfterMs` is the exact wait until
 *   `cost` tokens are there, rounded up to a whole ms and to at least 1 s. A cost above `burst` can
 *   never pass: it is told to wait until the bucket is full.
 *
 * Exactness: the level is kept in token-ms (tokens × interval), refilled by `rate` per elapsed ms,
 * so admit counts are exact: over any span of `t` ms after a full bucket, at most
 * `burst + floor(rate × t / intervalMs)` tokens are admitted, and exactly that many when demand is
 * continuous. If `intervalMs` changes, the stored level is rescaled (rounded down). A clock that
 * steps back is treated as no time passing.
 */
import { ALGORITHM_CODE, MIN_RETRY_AFTER_MS, newStep, type BucketState, type RateParams, type Step } from './limit.js';

const ALG = ALGORITHM_CODE.token_bucket;

/**
 * Decides one request. Never mutates `state`; writes into and returns `out` (a fresh step when
 * omitted). `out.newState` must not be `state` itself.
 */
export function tokenBucket(p: RateParams, state: BucketState | undefined, nowMs: number, cost: number, out: Step = newStep()): Step {
  const iv = p.intervalMs;
  const cap = p.burst * iv;
  let level: number;
  let last: number;
  if (state === undefined || state.alg !== ALG) {
    level = cap;
    last = nowMs;
  } else {
    level = state.c === iv ? state.a : Math.floor((state.a / state.c) * iv);
    last = state.b;
    if (nowMs > last) {
      level += (nowMs - last) * p.rate;
      last = nowMs;
    }
    if (level > cap) level = cap;
  }
  const need = cost * iv;
  const allowed = level >= need;
  if (allowed) level -= need;
  out.allowed = allowed;
  out.limit = p.burst;
  out.remaining = Math.floor(level / iv);
  // `last` is now, or later when the clock stepped back: waits count from it.
  const lead = last - nowMs;
  out.resetAtMs = last + Math.ceil((cap - level) / p.rate);
  if (allowed) out.retryAfterMs = 0;
  else {
    const wait = lead + Math.ceil(((need > cap ? cap : need) - level) / p.rate);
    out.retryAfterMs = wait > MIN_RETRY_AFTER_MS ? wait : MIN_RETRY_AFTER_MS;
  }
  const s = out.newState;
  s.alg = ALG;
  s.a = level;
  s.b = last;
  s.c = iv;
  return out;
}
