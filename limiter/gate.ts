/**
 * The gate: one admission decision for one request, from the subject's quota, the route's cost,
 * the counter store, and — when the store cannot answer — the quota's fail mode.
 *
 * Normal path: the route rule (longest prefix) gives the cost and possibly a bucket of its own;
 * the store charges the key bucket and the global bucket atomically (both or neither).
 *
 * When the store fails, its circuit breaker counts the failure; once it opens, no call reaches the
 * store until its half-open probes succeed (no restart needed). Meanwhile each request gets its
 * quota's fail mode, or its route class's when the quota sets none:
 *   - `open` (default for most routes): admitted under a local emergency cap of
 *     LIMITER_EMERGENCY_FACTOR × the limit, counted in this process;
 *   - `closed` (default for the `auth`, `payment` and `sms` route classes): denied with
 *     LIMITER_FAIL_CLOSED_STATUS (503 by default, problem+json `limiter_unavailable`).
 * A single failed call before the breaker opens is handled the same way, so the sidecar never
 * answers 500 because it is unsure. Headers during a failure use the subject's last known
 * remaining (kept 30 s) when there is one.
 *
 * Shadow (global or per quota): the quota decision is made, counted and logged and its headers
 * are set, but a denial is not enforced. Shadow mode is about quota only: who the caller is (an
 * unknown API key, a bad token, a route the caller does not own) is decided before the gate and
 * the same with or without it, and an unknown key gets its decoy denial in shadow mode too.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../shared/clock.js';
import type { CircuitBreaker } from '../shared/breaker.js';
import type { Logger } from '../shared/log.js';
import { hashSubject } from '../shared/log.js';
import {
  isCounterStoreError,
  isPending,
  type AdmitRequest,
  type AdmitResult,
  type CounterStore,
  type GlobalBucket,
} from './admission/counter-store.js';
import type { Decision, LimitParams } from './admission/limit.js';
import type { MemoryCounterStore } from './admission/counter-store.memory.js';
import { matchRule, type CompiledQuota, type FailModeName } from './quota-cache.js';
import type { RouteClass } from './routes.js';
import type { DecisionResult, LimiterMetrics } from './metrics.js';

export interface Outcome {
  /** Forward the request upstream. */
  forward: boolean;
  /** Status of the refusal when not forwarded: 429 (quota) or 503 (store down, fail closed). */
  status: number;
  result: DecisionResult;
  figures: Decision;
  policy: string;
  windowSec: number;
}

export interface GateOptions {
  store: CounterStore;
  /** In-process store for the emergency cap while failing open. */
  emergency: MemoryCounterStore;
  emergencyFactor: number;
  breaker: CircuitBreaker;
  clock: Clock;
  global: GlobalBucket | undefined;
  failClosedStatus: number;
  shadow: boolean;
  metrics: LimiterMetrics;
  log: Logger;
  /** Fraction of decisions logged as sampled decision events. */
  sampleRate: number;
  random?: () => number;
}

/** Fail mode when the quota names none: closed for credentials, payments and SMS, else open. */
export function defaultFailMode(cls: RouteClass): FailModeName {
  return cls === 'auth' || cls === 'payment' || cls === 'sms' ? 'closed' : 'open';
}

interface LastKnown {
  limit: number;
  remaining: number;
  resetAtMs: number;
}

const LAST_KNOWN_TTL_MS = 30_000;
/** The largest cost a counter store takes (admission/limit.ts, checkCost). */
const MAX_COST = 2 ** 31;

/**
 * The `X-RateLimit-Limit` of a quota when no store has answered: what the store would report, the
 * bucket's capacity for bucket algorithms and the rate per window for window algorithms.
 */
export function quotaLimit(l: LimitParams): number {
  return l.algorithm === 'token_bucket' || l.algorithm === 'leaky_bucket' ? l.burst : l.rate;
}

export class Gate {
  private readonly lastKnown = new LRUCache<string, LastKnown>({ max: 100_000, ttl: LAST_KNOWN_TTL_MS, ttlAutopurge: false });
  private readonly emergencyLimits = new WeakMap<LimitParams, LimitParams>();
  private readonly random: () => number;
  private readonly remote: boolean;

  constructor(private readonly o: GateOptions) {
    this.random = o.random ?? Math.random;
    this.remote = o.store.kind !== 'memory';
  }

  /** True when `admit` always answers synchronously (the in-process counter store). */
  get synchronous(): boolean {
    return !this.remote;
  }

  /**
   * Decides `key` (the bucket's subject) under `quota` for one request. Synchronous with the
   * in-memory store; a promise with a remote one. `hits` multiplies the request's cost (Envoy's
   * `hits_addend` on the RLS port, limiter/rls/; 0 only reads the figures), capped at 2^31.
   */
  admit(
    key: string,
    quota: CompiledQuota,
    limit: LimitParams,
    cls: RouteClass,
    route: string,
    method: string,
    path: string,
    hits = 1,
  ): Outcome | Promise<Outcome> {
    let cost = quota.cost;
    let bucketKey = key;
    let bucketLimit = limit;
    if (quota.rules.length > 0) {
      const rule = matchRule(quota.rules, method, path);
      if (rule) {
        cost = rule.cost;
        if (rule.limit) {
          bucketKey = key + rule.bucketSuffix;
          bucketLimit = rule.limit;
        }
      }
    }
    if (hits !== 1) cost = Math.min(cost * hits, MAX_COST);
    const req: AdmitRequest = { key: bucketKey, limit: bucketLimit, global: this.o.global, cost, accuracy: quota.accuracy };
    const failMode = quota.failMode ?? defaultFailMode(cls);
    if (!this.o.breaker.allow()) return this.failed(req, quota, failMode, route);
    if (!this.remote) {
      const r = this.o.store.admit(req) as AdmitResult;
      this.o.breaker.success();
      return this.finish(req.key, r, quota, route);
    }
    const started = performance.now();
    let pending: AdmitResult | Promise<AdmitResult>;
    try {
      pending = this.o.store.admit(req);
    } catch (err) {
      return this.storeFailed(err, req, quota, failMode, route);
    }
    // Answered locally (a certain refusal, or a leased token): no round trip to time or report.
    if (!isPending(pending)) return this.finish(req.key, pending, quota, route);
    return pending.then(
      (r) => this.remoteDone(r, started, req, quota, route),
      (err: unknown) => this.storeFailed(err, req, quota, failMode, route),
    );
  }

  private remoteDone(r: AdmitResult, started: number, req: AdmitRequest, quota: CompiledQuota, route: string): Outcome {
    this.o.metrics.redisRtt.observe(performance.now() - started);
    this.o.breaker.success();
    this.lastKnown.set(req.key, { limit: r.limit, remaining: r.remaining, resetAtMs: r.resetAtMs });
    return this.finish(req.key, r, quota, route);
  }

  private storeFailed(err: unknown, req: AdmitRequest, quota: CompiledQuota, failMode: FailModeName, route: string): Outcome {
    this.o.breaker.failure();
    if (!isCounterStoreError(err)) this.o.log.error({ err }, 'counter store failed unexpectedly');
    return this.failed(req, quota, failMode, route);
  }

  /** The store cannot be used: apply the fail mode. */
  private failed(req: AdmitRequest, quota: CompiledQuota, failMode: FailModeName, route: string): Outcome {
    const now = this.o.clock.now();
    const known = this.lastKnown.get(req.key);
    if (failMode === 'closed') {
      const figures: Decision = {
        allowed: false,
        limit: known?.limit ?? quotaLimit(req.limit),
        remaining: known?.remaining ?? 0,
        resetAtMs: known?.resetAtMs ?? now + this.o.breaker.retryAfterMs(),
        retryAfterMs: Math.max(1000, this.o.breaker.retryAfterMs()),
      };
      return this.outcome(req.key, figures, quota, route, 'fail_closed', this.o.failClosedStatus);
    }
    const r = this.o.emergency.admit({ key: req.key, limit: this.emergencyLimit(req.limit), global: undefined, cost: req.cost });
    const limit = known?.limit ?? quotaLimit(req.limit);
    const figures: Decision = {
      allowed: r.allowed,
      limit,
      // The emergency bucket is LIMITER_EMERGENCY_FACTOR × the quota: its remaining is reported
      // only once it is the smaller figure, never above the quota's limit.
      remaining: Math.min(limit, known ? Math.min(known.remaining, r.remaining) : r.remaining),
      resetAtMs: known?.resetAtMs ?? r.resetAtMs,
      retryAfterMs: r.retryAfterMs,
    };
    return this.outcome(req.key, figures, quota, route, r.allowed ? 'fail_open' : 'deny', 429);
  }

  private emergencyLimit(l: LimitParams): LimitParams {
    let e = this.emergencyLimits.get(l);
    if (!e) {
      const f = this.o.emergencyFactor;
      e = { algorithm: l.algorithm, rate: Math.ceil(l.rate * f), burst: Math.ceil(l.burst * f), intervalMs: l.intervalMs };
      this.emergencyLimits.set(l, e);
    }
    return e;
  }

  private finish(key: string, r: AdmitResult, quota: CompiledQuota, route: string): Outcome {
    return this.outcome(key, r, quota, route, r.allowed ? 'allow' : 'deny', 429);
  }

  private outcome(key: string, d: Decision, quota: CompiledQuota, route: string, result: DecisionResult, status: number): Outcome {
    const shadow = this.o.shadow || quota.shadow;
    let res = result;
    let forward = d.allowed;
    if (!forward && shadow) {
      res = 'shadow_deny';
      forward = true;
    }
    this.o.metrics.decision(res, quota.policy, route, d.remaining);
    if (this.o.sampleRate > 0 && this.random() < this.o.sampleRate) {
      this.o.log.info(
        {
          event: 'decision',
          subject_id: hashSubject(key),
          route,
          allowed: d.allowed,
          remaining: d.remaining,
          ts: this.o.clock.now() / 1000,
          result: res,
        },
        'sampled decision',
      );
    }
    // The store may reuse its result object: copy what the response needs.
    return {
      forward,
      status,
      result: res,
      figures: { allowed: d.allowed, limit: d.limit, remaining: d.remaining, resetAtMs: d.resetAtMs, retryAfterMs: d.retryAfterMs },
      policy: quota.policy,
      windowSec: quota.windowSec,
    };
  }

  /**
   * An unknown API key, evaluated against a decoy: the default plan, fully spent. The answer has
   * the same status, headers and body shape as a known key's denial, and touches no store.
   */
  decoy(plan: CompiledQuota, limit: LimitParams, route: string): Outcome {
    const now = this.o.clock.now();
    const perTokenMs = Math.ceil(limit.intervalMs / limit.rate);
    const figures: Decision = {
      allowed: false,
      limit: quotaLimit(limit),
      remaining: 0,
      resetAtMs: now + Math.ceil((limit.burst * limit.intervalMs) / limit.rate),
      retryAfterMs: Math.max(1000, Math.ceil(perTokenMs / 1000) * 1000),
    };
    // Never forwarded, whatever the shadow settings: shadow mode relaxes quotas, not authentication
    // (an unknown key let through under shadow would reach the upstream as a service caller).
    this.o.metrics.decision('decoy', plan.policy, route, 0);
    return { forward: false, status: 429, result: 'decoy', figures, policy: plan.policy, windowSec: plan.windowSec };
  }
}
