/**
 * Docker HEALTHCHECK: exits 0 when any of the given ports answers /healthz with 200.
 * One image runs either the sidecar (admin port) or the control plane (HTTP port), so it tries each.
 *   node dist/bin/healthcheck.js 9090 8081
 */
const ports = process.argv
  .slice(2)
  .map(Number)
  .filter((p) => p > 0);
const host = process.env.HEALTHCHECK_HOST ?? '127.0.0.1';
const results = await Promise.all(
  ports.map((p) =>
    fetch(`http://${host}:${p}/healthz`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    ),
  ),
);
process.exit(results.some(Boolean) ? 0 : 1);
