/**
 * The working set's metrics on the sidecar's /metrics, read when scraped (nothing on the request
 * path): `ratelimit_quota_records_held` (key records held, plans not counted; bounded by
 * LIMITER_QUOTA_CACHE_MAX), and with a control plane `ratelimit_quota_lookups_total{result}`
 * (found, unknown, failed, negative: answered by the negative cache, budget: refused for an
 * address past LIMITER_UNKNOWN_KEY_BUDGET), `ratelimit_quota_lookup_batches_total` and
 * `ratelimit_quota_negative_cached`.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { QuotaCache } from './quota-cache.js';
import type { LookupCounts, QuotaLookup } from './quota-lookup.js';

export function registerWorkingSetMetrics(registry: Registry, cache: QuotaCache, lookup: QuotaLookup | undefined): void {
  new Gauge({
    name: 'ratelimit_quota_records_held',
    help: 'Key quota records the sidecar holds in its working set (plans not counted)',
    registers: [registry],
    collect() {
      this.set(cache.held);
    },
  });
  if (!lookup) return;
  new Gauge({
    name: 'ratelimit_quota_negative_cached',
    help: 'Subjects remembered as unknown to the control plane (LIMITER_NEGATIVE_CACHE_MAX)',
    registers: [registry],
    collect() {
      this.set(lookup.negativeSize);
    },
  });
  const results: (keyof LookupCounts)[] = ['found', 'unknown', 'failed', 'negative', 'budget'];
  new Counter({
    name: 'ratelimit_quota_lookups_total',
    help: 'Subjects not held, by how their lookup ended (found, unknown, failed; negative and budget: answered without a call)',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of results) this.labels(r).inc(lookup.counts[r]);
    },
  });
  new Counter({
    name: 'ratelimit_quota_lookup_batches_total',
    help: 'Lookup calls made to the control plane (each carries every subject first seen in one event-loop turn)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(lookup.counts.batches);
    },
  });
}
