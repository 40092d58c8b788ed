/**
 * The vocabulary every admission algorithm shares: the limit a bucket enforces, the few numbers of
 * state it keeps, and the figures one decision reports.
 *
 * Units. Time is integer epoch milliseconds. The bucket algorithms keep their level in
 * "token-milliseconds" (tokens × `intervalMs`), so a refill of `rate` tokens per `intervalMs` is
 * exactly `rate` units per elapsed millisecond: every quantity stays an integer and the arithmetic
 * is exact (in TypeScript and in the Redis Lua script alike, both IEEE doubles) as long as
 * `burst × intervalMs` and `rate × intervalMs` stay below 2^50, which {@link checkLimit} enforces.
 */
import { PlatformError } from '../../shared/errors.js';

/**
 * The four algorithms (README, "Algorithms and counters"; the names are the quota record's JSON
 * enum values).
 */
export type Algorithm = 'token_bucket' | 'sliding_window' | 'leaky_bucket' | 'fixed_window';

/** Every algorithm, in the order of their numeric codes. */
export const ALGORITHMS: readonly Algorithm[] = ['token_bucket', 'sliding_window', 'leaky_bucket', 'fixed_window'];

/**
 * Numeric algorithm codes, equal to the `quota.v1.Algorithm` protobuf enum values. They tag stored
 * state (memory and Redis) so a subject whose algorithm changes starts fresh instead of having its
 * numbers misread.
 */
export const ALGORITHM_CODE = {
  token_bucket: 1,
  sliding_window: 2,
  leaky_bucket: 3,
  fixed_window: 4,
} as const satisfies Record<Algorithm, number>;

export type AlgorithmCode = (typeof ALGORITHM_CODE)[Algorithm];

/** The algorithm named by a protobuf enum value, or `undefined` for 0 and unknown values. */
export function algorithmFromCode(code: number): Algorithm | undefined {
  return ALGORITHMS[code - 1];
}

/** The numbers of a limit, whatever the algorithm. */
export interface RateParams {
  /** Tokens (requests) per interval: the sustained rate. Integer ≥ 1. */
  readonly rate: number;
  /**
   * Capacity of the token and leaky buckets: the most admitted at once after a quiet period, and the
   * reported limit. Integer ≥ 1. Ignored by the window algorithms, whose limit is `rate` per window.
   */
  readonly burst: number;
  /**
   * Length of the interval `rate` is counted over, ms. Integer ≥ 1 (a quota record that leaves it
   * unset gets 1000).
   */
  readonly intervalMs: number;
}

/**
 * A bucket's limit. Build one per quota when quotas load (never per request): the hot path reads
 * these fields and allocates nothing.
 */
export interface LimitParams extends RateParams {
  readonly algorithm: Algorithm;
}

/**
 * What a bucket remembers between requests: an algorithm tag and three numbers. Absent state
 * (`undefined`) is a subject never seen, or idle long enough to be back at rest; the algorithms
 * treat both the same (a bucket at rest is full, a window empty).
 *
 * | algorithm      | a                         | b             | c                       |
 * |----------------|---------------------------|---------------|-------------------------|
 * | token_bucket   | tokens × interval         | last update ms| interval the units use  |
 * | leaky_bucket   | water level × interval    | last update ms| interval the units use  |
 * | fixed_window   | window start ms           | count         | 0                       |
 * | sliding_window | current window start ms   | current count | previous window's count |
 */
export interface BucketState {
  alg: AlgorithmCode;
  a: number;
  b: number;
  c: number;
}

/** The figures one decision reports: what the `X-RateLimit-*` and `Retry-After` headers say. */
export interface Decision {
  allowed: boolean;
  /** X-RateLimit-Limit: `burst` for the token and leaky buckets, `rate` for the window algorithms. */
  limit: number;
  /** X-RateLimit-Remaining: an integer, never negative, never above `limit`. */
  remaining: number;
  /**
   * When the bucket is back at rest with no further traffic (token bucket full, leaky bucket empty,
   * window counts aged out), epoch ms. X-RateLimit-Reset is this in whole seconds, rounded up.
   */
  resetAtMs: number;
  /**
   * 0 when allowed. When denied: at least 1000, a whole number of ms, and never earlier than the
   * moment this same request would be admitted if nothing else arrived (so `Retry-After`, its
   * seconds rounded up, never says "now" to a request that would be denied now). A request that can
   * never pass (cost above the capacity) is told to wait until the bucket is at rest.
   */
  retryAfterMs: number;
}

/** One bucket's decision plus the state to store if the request is charged. */
export interface Step extends Decision {
  /**
   * The state after this request: charged when `allowed`, otherwise only brought forward to `now`
   * (equivalent to the input state, so a caller may store it or keep the old one). It is an object
   * owned by the step and overwritten by the next call that reuses the step.
   */
  readonly newState: BucketState;
}

/** A fresh, zeroed step (to reuse across calls on a hot path). */
export function newStep(): Step {
  return { allowed: false, limit: 0, remaining: 0, resetAtMs: 0, retryAfterMs: 0, newState: { alg: 1, a: 0, b: 0, c: 0 } };
}

/** The floor on a denial's retry-after, ms: `Retry-After` is whole seconds and never 0. */
export const MIN_RETRY_AFTER_MS = 1000;

/** Largest `burst × intervalMs` or `rate × intervalMs`: keeps every intermediate an exact integer. */
export const MAX_UNITS = 2 ** 50;

/**
 * Validates a limit where it enters (config or quota load), throwing `invalid_field` naming
 * `field`. The algorithms themselves trust their input.
 */
export function checkLimit(p: LimitParams, field = 'limit'): void {
  if (!(p.algorithm in ALGORITHM_CODE)) throw bad(field + '.algorithm', `must be one of ${ALGORITHMS.join(', ')}`);
  for (const k of ['rate', 'burst', 'intervalMs'] as const) {
    const v = p[k];
    if (!Number.isSafeInteger(v) || v < 1) throw bad(`${field}.${k}`, `must be an integer ≥ 1, got ${String(v)}`);
  }
  if (p.burst * p.intervalMs > MAX_UNITS || p.rate * p.intervalMs > MAX_UNITS) {
    throw bad(field, `rate × intervalMs and burst × intervalMs must not exceed 2^50`);
  }
}

/** Validates a request cost: an integer ≥ 0 (0 is a free request that only reads the figures). */
export function checkCost(cost: number, field = 'cost'): void {
  if (!Number.isSafeInteger(cost) || cost < 0 || cost > 2 ** 31) throw bad(field, `must be an integer between 0 and 2^31, got ${cost}`);
}

function bad(field: string, detail: string): PlatformError {
  return new PlatformError('invalid_field', { field, detail: `${field}: ${detail}` });
}
