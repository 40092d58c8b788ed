/**
 * Reconnect delays for the quota sync stream: exponential, capped, with "equal jitter" (half the
 * step fixed, half random) so a fleet of sidecars that lost the control plane together does not
 * come back in lockstep, while none retries sooner than half the step.
 */

export interface BackoffOptions {
  /** The first step, ms. */
  baseMs: number;
  /** The largest step, ms. */
  maxMs: number;
}

/**
 * The delay before reconnect attempt `attempt` (0 for the first retry): a step of
 * `min(maxMs, baseMs × 2^attempt)`, of which half is fixed and half is `random` (in [0, 1)) times
 * the other half.
 */
export function backoffDelay(attempt: number, random: number, opts: BackoffOptions): number {
  const step = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.min(Math.max(0, attempt), 30));
  return Math.round(step / 2 + (Math.min(Math.max(random, 0), 1) * step) / 2);
}
