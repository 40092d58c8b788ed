/**
 * Docker HEALTHCHECK: exits 0 when any of the given ports answers /healthz with 200.
 * One image runs either the sidecar (admin port) or the control plane (HTTP port), so it tries each.
 *   node dist/bin/healthcheck.js 9090 8081
 */
import { loadConfig } from '../shared/config.js';
import { healthcheckConfig } from './config.js';

const ports = process.argv
  .slice(2)
  .map(Number)
  .filter((p) => p > 0);
const host = loadConfig(healthcheckConfig).HEALTHCHECK_HOST;
const results = await Promise.all(
  ports.map((p) =>
    fetch(`http://${host}:${p}/healthz`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    ),
  ),
);
process.exit(results.some(Boolean) ? 0 : 1);
