/**
 * The common skeleton of a PostgreSQL-backed HTTP service (control plane, notifier, identity): a
 * pool, its migrations applied at start (under an advisory lock, safe with several replicas),
 * and an HTTP service whose /readyz checks the database.
 */
import { existsSync } from 'node:fs';
import type { Registry } from 'prom-client';
import type { TemplatedApp } from './uws.js';
import type { EdgeOptions, HealthCheck } from './http.js';
import type { Logger } from './log.js';
import { checkDatabase, createPool, type Pool } from './db.js';
import { migrate } from './migrate.js';
import { migrationsDir } from './paths.js';
import { startHttpService, type HttpService } from './service.js';
import { ConfigError } from './config.js';

export interface PgServiceOptions {
  name: string;
  /** Folder under the project root holding `migrations/` (e.g. `limiter/control-plane`). */
  dir: string;
  databaseUrl: string | undefined;
  poolMax: number;
  host: string;
  port: number;
  maxBodyBytes: number;
  log: Logger;
  registry: Registry;
  checks?: HealthCheck[];
  routes?: (app: TemplatedApp, edge: EdgeOptions, pool: Pool) => void;
}

export interface PgService {
  pool: Pool;
  http: HttpService;
  close(graceMs?: number): Promise<void>;
}

export async function startPgService(opts: PgServiceOptions): Promise<PgService> {
  if (!opts.databaseUrl) {
    throw new ConfigError('DATABASE_URL', `is required by ${opts.name} (npm start provides an embedded PostgreSQL)`);
  }
  const pool = createPool(opts.databaseUrl, { applicationName: opts.name, max: opts.poolMax, log: opts.log });
  try {
    const dir = migrationsDir(opts.dir);
    if (existsSync(dir)) {
      const { applied, version } = await migrate(pool, { service: opts.name, dir, log: opts.log });
      opts.log.info({ applied: applied.length, version }, 'migrations up to date');
    }
    const http = await startHttpService({
      name: opts.name,
      host: opts.host,
      port: opts.port,
      log: opts.log,
      registry: opts.registry,
      maxBodyBytes: opts.maxBodyBytes,
      checks: [{ name: 'postgres', check: () => checkDatabase(pool) }, ...(opts.checks ?? [])],
      routes: opts.routes ? (app, edge) => opts.routes!(app, edge, pool) : undefined,
    });
    return {
      pool,
      http,
      async close(graceMs) {
        await http.close(graceMs);
        await pool.end();
      },
    };
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
}
