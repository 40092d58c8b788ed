/**
 * Dispatch from a limit's algorithm to its pure decision function. Each function has the same
 * shape: `(params, state, nowMs, cost, out?) => Step`; see the algorithm's own module for its exact
 * semantics and bounds.
 */
import { fixedWindow } from './fixed-window.js';
import { leakyBucket } from './leaky-bucket.js';
import type { Algorithm, BucketState, LimitParams, RateParams, Step } from './limit.js';
import { slidingWindow } from './sliding-window.js';
import { tokenBucket } from './token-bucket.js';

export type AlgorithmFn = (p: RateParams, state: BucketState | undefined, nowMs: number, cost: number, out?: Step) => Step;

/** The decision function of each algorithm. */
export const ALGORITHM_FNS: Readonly<Record<Algorithm, AlgorithmFn>> = {
  token_bucket: tokenBucket,
  sliding_window: slidingWindow,
  leaky_bucket: leakyBucket,
  fixed_window: fixedWindow,
};

/**
 * Decides one request against one bucket with the algorithm its limit names. Pure: never mutates
 * `state`; writes into and returns `out` (a fresh step when omitted).
 */
export function step(p: LimitParams, state: BucketState | undefined, nowMs: number, cost: number, out?: Step): Step {
  switch (p.algorithm) {
    case 'token_bucket':
      return tokenBucket(p, state, nowMs, cost, out);
    case 'sliding_window':
      return slidingWindow(p, state, nowMs, cost, out);
    case 'leaky_bucket':
      return leakyBucket(p, state, nowMs, cost, out);
    case 'fixed_window':
      return fixedWindow(p, state, nowMs, cost, out);
  }
}
