/**
 * The revocation list's gauges on the sidecar's /metrics (README, "Revocation and the edge"), read
 * from the verifier when scraped (nothing on the request path). Alert on
 * `ratelimit_revocation_list_age_seconds` well above REVOCATION_REFRESH_INTERVAL: identity's
 * revocations are not reaching this sidecar (it still refuses every token it already holds).
 */
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../shared/clock.js';
import type { Verifier } from '../shared/jwt/index.js';

/** Registers the revocation-list gauges of `verifier` on `registry`. */
export function registerRevocationMetrics(registry: Registry, verifier: Verifier, clock: Clock): void {
  // Each worker thread (LIMITER_WORKERS) fetches its own copy: the process reports the largest.
  const gauge = (name: string, help: string, read: () => number): void => {
    new Gauge({
      name,
      help,
      aggregator: 'max',
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  };
  gauge('ratelimit_revocation_list_entries', 'Revoked token families and access tokens held (each until its expiry)', () => {
    return verifier.stats().revocations?.entries ?? 0;
  });
  gauge('ratelimit_revocation_list_age_seconds', 'Seconds since the last successful revocation list fetch (-1 never or no list)', () => {
    const at = verifier.stats().revocations?.loadedAtMs;
    return at === undefined ? -1 : Math.max(0, (clock.now() - at) / 1000);
  });
  gauge('ratelimit_revocation_list_fetch_failures', 'Failed revocation list fetches since start', () => {
    return verifier.stats().revocations?.fetchFailures ?? 0;
  });
}
