/**
 * The database half of a PostgreSQL-backed service (control plane, notifier, identity): a pool with
 * its migrations applied (under an advisory lock, safe with several replicas), and the /readyz
 * check that goes with it. Each service opens its database first, builds its domain on the pool,
 * and only then serves routes that receive finished objects (see limiter/control-plane/app.ts,
 * notifier/app.ts, identity/app.ts).
 */
import { existsSync } from 'node:fs';
import type { HealthCheck } from './http.js';
import type { Logger } from './log.js';
import { checkDatabase, createPool, type Pool } from './db.js';
import { migrate } from './migrate.js';
import { migrationsDir } from './paths.js';
import { ConfigError } from './config.js';

export interface DatabaseOptions {
  name: string;
  /** Folder under the project root holding `migrations/` (e.g. `limiter/control-plane`). */
  dir: string;
  databaseUrl: string | undefined;
  poolMax: number;
  log: Logger;
}

/** DATABASE_URL, which every PostgreSQL-backed service requires: a config error naming the service when unset. */
export function requireDatabaseUrl(url: string | undefined, service: string): string {
  if (!url) throw new ConfigError('DATABASE_URL', `is required by ${service} (npm start provides an embedded PostgreSQL)`);
  return url;
}

/** A pool on DATABASE_URL with the service's migrations applied; the pool is ended if they fail. */
export async function openDatabase(opts: DatabaseOptions): Promise<Pool> {
  const url = requireDatabaseUrl(opts.databaseUrl, opts.name);
  const pool = createPool(url, { applicationName: opts.name, max: opts.poolMax, log: opts.log });
  try {
    const dir = migrationsDir(opts.dir);
    if (existsSync(dir)) {
      const { applied, version } = await migrate(pool, { service: opts.name, dir, log: opts.log });
      opts.log.info({ applied: applied.length, version }, 'migrations up to date');
    }
    return pool;
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
}

/** /readyz: the database answers. */
export function postgresCheck(pool: Pool): HealthCheck {
  return { name: 'postgres', check: () => checkDatabase(pool) };
}
