/**
 * The max-age rule for synced quotas (README, "The sidecar's side"): with versioned snapshots, it
 * keeps a plan downgraded while the sidecar was cut off from being served as if still current.
 *
 * Past `LIMITER_QUOTA_MAX_AGE` since the last successful sync, the sidecar no longer knows whether
 * a cached quota is still the subject's quota: a key downgraded from a paid plan would otherwise keep
 * its paid limits for as long as the control plane stays out of reach. So a stale quota is served
 * no more generously than the floor plan: the sidecar's built-in default plan (LIMITER_DEFAULT_RATE,
 * _BURST, _INTERVAL), which comes from its own configuration and so cannot be stale itself:
 *
 * - `rate` is capped at the floor's rate, rescaled to the quota's own interval (so the algorithm,
 *   the interval and therefore the bucket state stay the same; only the numbers shrink);
 * - `burst` is capped at the floor's burst;
 * - route rules with limits of their own are capped the same way;
 * - a quota already at or below the floor is returned unchanged (a free key stays free; a stale
 *   cache never raises anyone's limit);
 * - a capped quota reports the floor's policy name in `RateLimit-Policy`, since that is what it is
 *   held to.
 *
 * Unknown keys stay unknown (denied through the decoy) and the cost, fail mode and shadow flag
 * are kept. The cap is computed once per (compiled quota, floor) pair and memoised, so the per-request
 * cost while stale is one WeakMap lookup.
 */
import type { LimitParams } from './admission/limit.js';
import type { CompiledQuota, CompiledRule } from './quota-cache.js';

/**
 * `limit` held to at most `floor`: the rate per unit of time and the burst. Returns `limit`
 * itself when it is already within the floor.
 */
export function capLimit(limit: LimitParams, floor: LimitParams): LimitParams {
  const scaledRate = Math.floor((floor.rate * limit.intervalMs) / floor.intervalMs);
  // A quota counted over a much shorter interval than the floor: the floor's rate rounds to zero
  // there, so hold it to the floor's own limit instead.
  if (scaledRate < 1) return limit.rate * floor.intervalMs <= floor.rate * limit.intervalMs && limit.burst <= floor.burst ? limit : floor;
  const rate = Math.min(limit.rate, scaledRate);
  const burst = Math.min(limit.burst, floor.burst);
  if (rate === limit.rate && burst === limit.burst) return limit;
  return { algorithm: limit.algorithm, rate, burst, intervalMs: limit.intervalMs };
}

const memo = new WeakMap<CompiledQuota, { floor: CompiledQuota; capped: CompiledQuota }>();

/**
 * `quota` held to the floor plan's limits (see the module comment). `floor.limit` must be set (a
 * plan record, not a reference); when it is not, `quota` is returned unchanged. `quota.limit` null
 * (an unresolved plan reference) is capped as the floor itself.
 */
export function capToFloor(quota: CompiledQuota, floor: CompiledQuota): CompiledQuota {
  const floorLimit = floor.limit;
  if (floorLimit === null || quota === floor) return quota;
  const hit = memo.get(quota);
  if (hit !== undefined && hit.floor === floor) return hit.capped;
  const limit = quota.limit === null ? floorLimit : capLimit(quota.limit, floorLimit);
  let rulesChanged = false;
  const rules: CompiledRule[] = quota.rules.map((r) => {
    if (r.limit === null) return r;
    const capped = capLimit(r.limit, floorLimit);
    if (capped === r.limit) return r;
    rulesChanged = true;
    return { ...r, limit: capped };
  });
  const capped =
    limit === quota.limit && !rulesChanged
      ? quota
      : { ...quota, limit, rules, policy: floor.policy, windowSec: Math.max(1, Math.round(limit.intervalMs / 1000)) };
  memo.set(quota, { floor, capped });
  return capped;
}
