/**
 * The sidecar's metrics (names and labels as in README, "Observability"), served on the admin port.
 *
 * Decision counts are kept in plain numbers on the request path and handed to prom-client when
 * scraped, so a decision costs a map lookup, not a label hash. Labels: `result` (allow, deny,
 * shadow_deny, fail_open, fail_closed, decoy), `tenant` (the plan name — never a subject, which
 * would be unbounded and would leak keys), `route` (the route prefix).
 */
import { Counter, Gauge, Histogram, type MetricValueWithName, type Registry } from 'prom-client';
import type { HotKeys } from './hot-keys.js';

export type DecisionResult = 'allow' | 'deny' | 'shadow_deny' | 'fail_open' | 'fail_closed' | 'decoy';
const RESULTS: readonly DecisionResult[] = ['allow', 'deny', 'shadow_deny', 'fail_open', 'fail_closed', 'decoy'];
const RESULT_INDEX: Record<DecisionResult, number> = { allow: 0, deny: 1, shadow_deny: 2, fail_open: 3, fail_closed: 4, decoy: 5 };

/**
 * Who answered a decision, the `store` label of `ratelimit_decision_duration_seconds`: the
 * in-process counters (`memory`), a Redis round trip (`redis`), the sidecar itself over a Redis
 * store without a round trip (`local`: a certain refusal or a leased token), the fail mode while
 * the store cannot answer (`fallback`), or nothing (`none`: an unknown API key's decoy).
 */
export type DecisionStore = 'memory' | 'redis' | 'local' | 'fallback' | 'none';
const STORES: readonly DecisionStore[] = ['memory', 'redis', 'local', 'fallback', 'none'];
const STORE_INDEX: Record<DecisionStore, number> = { memory: 0, redis: 1, local: 2, fallback: 3, none: 4 };
/** Upper bounds, seconds: fine below 2 ms (the seed's decision budget), coarse above. */
export const DECISION_BUCKETS: readonly number[] = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.00125, 0.0015, 0.00175, 0.002, 0.0025, 0.003, 0.005, 0.01, 0.025,
  0.05, 0.1, 0.25, 1,
];

/**
 * A histogram observed on the request path: counts in plain typed arrays (a bucket scan and two
 * additions, no label hashing, no allocation), handed to the registry in the Prometheus histogram
 * form when scraped. prom-client's own `observe` costs about five times as much
 * (bench/decision-histogram.ts). One optional label with a fixed set of values; a labelled series
 * that was never observed is not exposed, an unlabelled one always is (as prom-client does).
 */
class TypedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  /** Bucket bounds in the observed unit. */
  private readonly bounds: Float64Array;
  /** Per label value: a count per bucket (not cumulative), the last one +Inf. */
  private readonly counts: Float64Array[];
  private readonly sums: Float64Array;

  /**
   * `buckets` are in the exposed unit; an observed value times `scale` is in that unit (e.g.
   * observed ms, exposed seconds: 0.001).
   */
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
    private readonly scale = 1,
    private readonly label?: { name: string; values: readonly string[] },
  ) {
    this.bounds = Float64Array.from(buckets, (b) => b / scale);
    const n = label ? label.values.length : 1;
    this.counts = Array.from({ length: n }, () => new Float64Array(buckets.length + 1));
    this.sums = new Float64Array(n);
  }

  /** One observation under the label value at index `i` (0 when unlabelled). */
  observeAt(i: number, v: number): void {
    const bounds = this.bounds;
    let b = 0;
    while (b < bounds.length && v > bounds[b]!) b++;
    this.counts[i]![b]!++;
    this.sums[i]! += v;
  }

  observe(v: number): void {
    this.observeAt(0, v);
  }

  get(): Promise<{ name: string; help: string; type: string; aggregator: 'sum'; values: MetricValueWithName<string>[] }> {
    const values: MetricValueWithName<string>[] = [];
    for (let i = 0; i < this.counts.length; i++) {
      const c = this.counts[i]!;
      let total = 0;
      for (let b = 0; b < c.length; b++) total += c[b]!;
      if (total === 0 && this.label) continue;
      const labels: Record<string, string> = this.label ? { [this.label.name]: this.label.values[i]! } : {};
      let cumulative = 0;
      for (let b = 0; b < c.length; b++) {
        cumulative += c[b]!;
        const le = b < this.buckets.length ? this.buckets[b]! : '+Inf';
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le }, value: cumulative });
      }
      values.push({ metricName: `${this.name}_sum`, labels, value: this.sums[i]! * this.scale });
      values.push({ metricName: `${this.name}_count`, labels, value: total });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: 'sum', values });
  }

  reset(): void {
    for (const c of this.counts) c.fill(0);
    this.sums.fill(0);
  }

  register(registry: Registry): this {
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
    return this;
  }
}

export class LimiterMetrics {
  /** `ratelimit_redis_rtt_ms`, observed in ms. */
  readonly redisRtt: TypedHistogram;
  readonly failmodeTrips: Counter;
  readonly evictions: Counter;
  /** `ratelimit_upstream_responses{route,status}`; counted through `upstreamResponse` / `upstreamFailed`. */
  readonly proxied: Counter;
  /** route → the children of `proxied` for 1xx…5xx (index status / 100), resolved once per route. */
  private readonly proxiedByClass = new Map<string, Counter.Internal[]>();
  readonly scriptDisagreements: Counter;
  private readonly lateReplies: Histogram;
  /** route → tenant → counts per result (index in RESULTS). */
  private readonly counts = new Map<string, Map<string, Float64Array>>();
  private readonly remaining: Histogram;
  private sampleEvery = 0;
  /**
   * `ratelimit_decision_duration_seconds`: from the request's arrival in the uWS callback to its
   * admission decision, by who answered; observed in ms.
   */
  private readonly decisionDurations = new TypedHistogram(
    'ratelimit_decision_duration_seconds',
    "Time from a request's arrival in the sidecar's callback to its admission decision, by who answered (store)",
    DECISION_BUCKETS,
    0.001,
    { name: 'store', values: STORES },
  );

  /**
   * Answers given without a Redis round trip over shared counters (refusal-cache.ts, lease.ts),
   * kept as plain numbers on the request path and read when scraped.
   */
  readonly local = { refusals: 0, leaseAdmits: 0, leasesGranted: 0, leasesDenied: 0, tokensTaken: 0, tokensReturned: 0 };

  constructor(registry: Registry, hot: HotKeys) {
    this.decisionDurations.register(registry);
    const counts = this.counts;
    const local = this.local;
    const read = (name: string, help: string, value: () => number, labels?: Record<string, () => number>, label = 'result') =>
      new Counter({
        name,
        help,
        labelNames: labels ? [label] : [],
        registers: [registry],
        collect() {
          this.reset();
          if (labels) for (const [k, f] of Object.entries(labels)) this.labels(k).inc(f());
          else this.inc(value());
        },
      });
    read(
      'ratelimit_local_refusals',
      'Requests refused by the sidecar itself because Redis certainly would (exact mode)',
      () => local.refusals,
    );
    read(
      'ratelimit_lease_local_admits',
      'Requests admitted from a lease of tokens held by this sidecar (approximate mode)',
      () => local.leaseAdmits,
    );
    read('ratelimit_lease_takes', 'Lease requests to Redis by result (granted, or denied: fewer tokens there than the cost)', () => 0, {
      granted: () => local.leasesGranted,
      denied: () => local.leasesDenied,
    });
    read(
      'ratelimit_lease_tokens',
      'Tokens taken from Redis in leases (taken) and given back unspent (returned)',
      () => 0,
      {
        taken: () => local.tokensTaken,
        returned: () => local.tokensReturned,
      },
      'op',
    );
    const pushed = new Map<Float64Array, Float64Array>();
    new Counter({
      name: 'ratelimit_decisions',
      help: 'Admission decisions by result, tenant (plan) and route',
      labelNames: ['result', 'tenant', 'route'],
      registers: [registry],
      collect() {
        for (const [route, byTenant] of counts) {
          for (const [tenant, c] of byTenant) {
            let p = pushed.get(c);
            if (!p) pushed.set(c, (p = new Float64Array(RESULTS.length)));
            for (let i = 0; i < RESULTS.length; i++) {
              if (c[i]! > p[i]!) {
                this.labels(RESULTS[i]!, tenant, route).inc(c[i]! - p[i]!);
                p[i] = c[i]!;
              }
            }
          }
        }
      },
    });
    this.redisRtt = new TypedHistogram(
      'ratelimit_redis_rtt_ms',
      'Counter-store (Redis) round trip per decision, ms',
      [0.1, 0.25, 0.5, 1, 2, 5, 10, 25, 50, 100],
    ).register(registry);
    this.lateReplies = new Histogram({
      name: 'ratelimit_redis_late_reply_seconds',
      help:
        'Redis replies read after their deadline (LIMITER_REDIS_TIMEOUT from the write), how late: part="event_loop" the ' +
        'sidecar’s own delay, part="redis" the time the reply was still missing after the loop had read the socket. ' +
        'A late reply is observed in each part it has (a count of part="redis" is a count of replies Redis was late with)',
      labelNames: ['part'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    });
    for (const part of ['event_loop', 'redis']) this.lateReplies.zero({ part });
    this.failmodeTrips = new Counter({
      name: 'ratelimit_failmode_trips',
      help: 'Times the counter-store circuit opened and quotas fell back to their fail mode',
      registers: [registry],
    });
    this.remaining = new Histogram({
      name: 'remaining_tokens',
      help: 'Remaining quota reported to callers (sampled 1 in 16 decisions)',
      labelNames: ['route'],
      buckets: [0, 1, 5, 10, 50, 100, 500, 1000, 10000],
      registers: [registry],
    });
    this.evictions = new Counter({
      name: 'ratelimit_counter_evictions',
      help: 'In-memory buckets evicted by the LRU bound; live ones had not refilled yet',
      labelNames: ['live'],
      registers: [registry],
    });
    // Both series from the start, at 0: the dashboard's panel shows "none" rather than no data, and
    // a rate over the first eviction has a sample before it (the same for the late replies below).
    for (const live of ['true', 'false']) this.evictions.labels(live).inc(0);
    this.proxied = new Counter({
      name: 'ratelimit_upstream_responses',
      help: 'Responses relayed from upstreams, by status class (or error code when the upstream failed)',
      labelNames: ['route', 'status'],
      registers: [registry],
    });
    this.scriptDisagreements = new Counter({
      name: 'ratelimit_shadow_script_disagreements',
      help: 'Decisions where the candidate (shadow) limiter script disagreed with the enforcing one',
      registers: [registry],
    });
    const opsGauge = new Gauge({
      name: 'ratelimit_hot_key_ops',
      help: 'Evaluations in the last window of the hottest subjects (hashed)',
      labelNames: ['subject'],
      registers: [registry],
      collect() {
        this.reset();
        for (const h of hot.top()) this.labels(h.subject).set(h.ops);
      },
    });
    new Gauge({
      name: 'ratelimit_hot_key_share',
      help: 'Share of all evaluations in the last window taken by each of the hottest subjects (hashed)',
      // Each worker thread's share of its own evaluations (LIMITER_WORKERS): their mean, not their sum.
      aggregator: 'average',
      labelNames: ['subject'],
      registers: [registry],
      collect() {
        this.reset();
        for (const h of hot.top()) this.labels(h.subject).set(h.share);
      },
    });
    void opsGauge;
  }

  /** A Redis reply read after its deadline: how late, ms, split by cause (reply-deadline.ts). Rare: prom-client's own observe. */
  lateReply(eventLoopMs: number, redisMs: number): void {
    if (eventLoopMs > 0) this.lateReplies.labels('event_loop').observe(eventLoopMs / 1000);
    if (redisMs > 0) this.lateReplies.labels('redis').observe(redisMs / 1000);
  }

  /**
   * An upstream's response relayed on `route`, by status class (`2xx` … `5xx`). The label children
   * are resolved once per route, so a response costs an array read and an increment.
   */
  upstreamResponse(route: string, status: number): void {
    let byClass = this.proxiedByClass.get(route);
    if (!byClass) {
      byClass = ['1xx', '2xx', '3xx', '4xx', '5xx'].map((c) => this.proxied.labels(route, c));
      this.proxiedByClass.set(route, byClass);
    }
    byClass[Math.min(Math.max(Math.trunc(status / 100), 1), 5) - 1]!.inc();
  }

  /** An upstream that failed before answering (answered 502/504): `status` is the error code. Rare. */
  upstreamFailed(route: string, code: string): void {
    this.proxied.labels(route, code).inc();
  }

  /** One decision's duration, ms from the request's arrival (`performance.now()` differences). */
  decided(store: DecisionStore, ms: number): void {
    this.decisionDurations.observeAt(STORE_INDEX[store], ms);
  }

  decision(result: DecisionResult, tenant: string, route: string, remaining: number): void {
    let byTenant = this.counts.get(route);
    if (!byTenant) this.counts.set(route, (byTenant = new Map()));
    let c = byTenant.get(tenant);
    if (!c) byTenant.set(tenant, (c = new Float64Array(RESULTS.length)));
    c[RESULT_INDEX[result]]!++;
    if ((++this.sampleEvery & 15) === 0) this.remaining.labels(route).observe(remaining);
  }
}
