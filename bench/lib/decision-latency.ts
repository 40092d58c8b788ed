/**
 * The sidecar's decision-latency histogram (`ratelimit_decision_duration_seconds`, limiter/metrics.ts)
 * as the bench reads it: scraped from the admin port before and after a measurement, the
 * percentiles of the decisions counted in between, from the bucket deltas.
 */
export const DECISION_METRIC = 'ratelimit_decision_duration_seconds';

/** Cumulative bucket counts per `store` label, by upper bound in seconds (`+Inf` as Infinity). */
export type DecisionBuckets = Map<string, Map<number, number>>;

/** A percentile pair of the decisions between two scrapes. */
export interface DecisionLatency {
  store: string;
  /** Decisions observed during the measurement. */
  count: number;
  /** Upper bound of the histogram bucket holding the 50th / 99th percentile, ms. */
  p50Ms: number;
  p99Ms: number;
}

/** The histogram's buckets from a Prometheus text exposition. */
export function parseDecisionBuckets(text: string): DecisionBuckets {
  const out: DecisionBuckets = new Map();
  const re = new RegExp(`^${DECISION_METRIC}_bucket\\{([^}]*)\\} (\\S+)$`, 'gm');
  for (const m of text.matchAll(re)) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]));
    const le = labels.le === '+Inf' ? Infinity : Number(labels.le);
    const store = labels.store ?? '';
    let b = out.get(store);
    if (!b) out.set(store, (b = new Map()));
    b.set(le, Number(m[2]));
  }
  return out;
}

/**
 * p50 and p99 (as bucket upper bounds, ms) of the decisions of `store` counted between two scrapes;
 * undefined when there were none. A percentile in the +Inf bucket is Infinity.
 */
export function decisionLatency(store: string, before: DecisionBuckets, after: DecisionBuckets): DecisionLatency | undefined {
  const a = after.get(store);
  if (!a) return undefined;
  const b = before.get(store);
  const les = [...a.keys()].sort((x, y) => x - y);
  const delta = les.map((le) => (a.get(le) ?? 0) - (b?.get(le) ?? 0));
  const count = delta[delta.length - 1] ?? 0;
  if (count <= 0) return undefined;
  const at = (p: number): number => les[delta.findIndex((c) => c >= p * count)]! * 1000;
  return { store, count, p50Ms: at(0.5), p99Ms: at(0.99) };
}
