/**
 * The notifier's core, started in-process by main.ts and by tests. At this stage of the platform it
 * owns its database schema and answers /healthz, /readyz and /metrics; the ingestion API, queues
 * and workers are built on this.
 */
import type { ConfigOf } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import { createRegistry } from '../shared/metrics.js';
import { startPgService } from '../shared/pg-service.js';
import type { Started } from '../shared/main.js';
import type { notifierConfig } from './config.js';

export async function startNotifier(config: ConfigOf<typeof notifierConfig>, log: Logger): Promise<Started & { port: number }> {
  const svc = await startPgService({
    name: 'notifier',
    dir: 'notifier',
    databaseUrl: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    host: config.HOST,
    port: config.NOTIFIER_PORT,
    maxBodyBytes: config.MAX_BODY_BYTES,
    log,
    registry: createRegistry('notifier'),
  });
  return {
    port: svc.http.port,
    urls: { api: `http://${config.HOST}:${svc.http.port}` },
    close: () => svc.close(config.SHUTDOWN_GRACE),
  };
}
