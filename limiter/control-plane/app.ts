/**
 * The quota control plane's core, started in-process by main.ts and by tests. At this stage it owns
 * its database schema and answers /healthz, /readyz and /metrics on its HTTP port; the quota store,
 * the gRPC admin and sync services and the internal HTTP API are built on this.
 */
import type { ConfigOf } from '../../shared/config.js';
import type { Logger } from '../../shared/log.js';
import { createRegistry } from '../../shared/metrics.js';
import { startPgService } from '../../shared/pg-service.js';
import type { Started } from '../../shared/main.js';
import type { controlPlaneConfig } from './config.js';

export async function startControlPlane(config: ConfigOf<typeof controlPlaneConfig>, log: Logger): Promise<Started & { port: number }> {
  const svc = await startPgService({
    name: 'control-plane',
    dir: 'limiter/control-plane',
    databaseUrl: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    host: config.HOST,
    port: config.CONTROL_PLANE_HTTP_PORT,
    maxBodyBytes: config.MAX_BODY_BYTES,
    log,
    registry: createRegistry('control-plane'),
  });
  return {
    port: svc.http.port,
    urls: { http: `http://${config.HOST}:${svc.http.port}` },
    close: () => svc.close(config.SHUTDOWN_GRACE),
  };
}
