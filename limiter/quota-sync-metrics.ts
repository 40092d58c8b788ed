/**
 * The quota sync's gauges on the sidecar's /metrics, read from {@link QuotaSync.status} when
 * scraped (nothing on the request path). Alert on `ratelimit_quota_stale` 1 (quotas held to the
 * default plan) and on `ratelimit_quota_sync_age_seconds` approaching LIMITER_QUOTA_MAX_AGE.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../shared/clock.js';
import type { QuotaSync } from './quota-sync.js';

/** Registers the sync gauges for `sync` on `registry`. */
export function registerQuotaSyncMetrics(registry: Registry, sync: QuotaSync, clock: Clock): void {
  // `aggregator`: how the main thread folds worker threads' values into one (LIMITER_WORKERS).
  const gauge = (name: string, help: string, read: () => number, aggregator: 'min' | 'max'): void => {
    new Gauge({
      name,
      help,
      aggregator,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  };
  gauge('ratelimit_quota_version', 'Quota table version the sidecar has applied', () => sync.status().version, 'min');
  gauge(
    'ratelimit_quota_sync_age_seconds',
    'Seconds since the last successful quota sync (-1 never)',
    () => {
      const at = sync.status().lastSyncAtMs;
      return at === 0 ? -1 : Math.max(0, (clock.now() - at) / 1000);
    },
    'max',
  );
  gauge(
    'ratelimit_quota_sync_connected',
    '1 while the Watch stream to the control plane is open',
    () => (sync.status().connected ? 1 : 0),
    'min',
  );
  gauge(
    'ratelimit_quota_sync_consecutive_failures',
    'Failed sync calls since the last successful sync',
    () => sync.status().consecutiveFailures,
    'max',
  );
  gauge(
    'ratelimit_quota_stale',
    '1 while quotas are past LIMITER_QUOTA_MAX_AGE and held to the default plan',
    () => (sync.stale() ? 1 : 0),
    'max',
  );
}
