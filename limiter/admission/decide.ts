/**
 * Multi-bucket atomic admission: a request is charged to its key's bucket and to a global bucket,
 * both or neither. It is never consumed from one and denied by the other.
 *
 * `decide` is pure: it evaluates both buckets at the same instant and reports, leaving the commit to
 * the caller (the memory store, or the Redis script that mirrors it), which stores
 * `out.key.newState` and `out.global.newState` only when `out.allowed`. A denied request leaves both
 * buckets as they were.
 *
 * What the figures report (they feed the caller's own `X-RateLimit-*` headers, so they are only
 * ever the key bucket's, never the global bucket's, which is every other subject's traffic):
 * - admitted: the key bucket's figures after the charge; `binding` is `key`;
 * - denied by the key bucket: its figures; `retryAfterMs` is the later of the two buckets' waits
 *   when the global bucket would have denied too; `binding` is `key`;
 * - admitted by the key bucket but denied by the global one: the key bucket's `limit`, `remaining`
 *   0 (this request cannot pass now), `retryAfterMs` the global bucket's wait, and `resetAtMs` the
 *   later of the key bucket's reset and that wait; `binding` is `global`.
 */
import { step } from './algorithms.js';
import { newStep, type BucketState, type Decision, type LimitParams, type Step } from './limit.js';

/** One bucket to decide against. Reuse these holders on a hot path rather than allocate per call. */
export interface Bucket {
  params: LimitParams;
  state: BucketState | undefined;
  /**
   * Multiplies the cost charged to this bucket (default 1). A global bucket sharded S ways on Redis
   * Cluster is S buckets with the full limit each charged `cost × S`: exactly a bucket of `1/S`
   * of the limit, in whole numbers.
   */
  costScale?: number;
}

/** Which bucket the reported decision is bound by. */
export type Binding = 'key' | 'global';

/** A decision over a key bucket and an optional global bucket. */
export interface Admission extends Decision {
  binding: Binding;
  /** The key bucket's own step (its `newState` is what to store when `allowed`). */
  readonly key: Step;
  /** The global bucket's step; meaningful only when a global bucket was given. */
  readonly global: Step;
}

/** A fresh admission to reuse across calls. */
export function newAdmission(): Admission {
  return { allowed: false, limit: 0, remaining: 0, resetAtMs: 0, retryAfterMs: 0, binding: 'key', key: newStep(), global: newStep() };
}

/**
 * Decides a request of `cost` against `key` and, when given, `global`, at `nowMs`. Pure: never
 * mutates the buckets' states; writes into and returns `out` (a fresh admission when omitted).
 */
export function decide(key: Bucket, global: Bucket | undefined, nowMs: number, cost: number, out: Admission = newAdmission()): Admission {
  const k = step(key.params, key.state, nowMs, cost * (key.costScale ?? 1), out.key);
  out.limit = k.limit;
  out.binding = 'key';
  if (global === undefined) {
    out.allowed = k.allowed;
    out.remaining = k.remaining;
    out.resetAtMs = k.resetAtMs;
    out.retryAfterMs = k.retryAfterMs;
    return out;
  }
  const g = step(global.params, global.state, nowMs, cost * (global.costScale ?? 1), out.global);
  out.allowed = k.allowed && g.allowed;
  if (!k.allowed) {
    const wait = g.allowed || g.retryAfterMs < k.retryAfterMs ? k.retryAfterMs : g.retryAfterMs;
    out.remaining = k.remaining;
    out.retryAfterMs = wait;
    out.resetAtMs = k.resetAtMs > nowMs + wait ? k.resetAtMs : nowMs + wait;
  } else if (!g.allowed) {
    out.binding = 'global';
    out.remaining = 0;
    out.retryAfterMs = g.retryAfterMs;
    out.resetAtMs = k.resetAtMs > nowMs + g.retryAfterMs ? k.resetAtMs : nowMs + g.retryAfterMs;
  } else {
    out.remaining = k.remaining;
    out.resetAtMs = k.resetAtMs;
    out.retryAfterMs = 0;
  }
  return out;
}

/** Copies a step's new state into a stored state object (the commit of an admitted request). */
export function commit(into: BucketState, from: Step): void {
  const s = from.newState;
  into.alg = s.alg;
  into.a = s.a;
  into.b = s.b;
  into.c = s.c;
}
