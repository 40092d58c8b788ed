/**
 * The run's migrated template database: every service's migrations and pg-boss's schema applied
 * once per `npm test` run (test/harness/global.ts), which each test file's database is then copied
 * from (`CREATE DATABASE … TEMPLATE …`, a copy of its files) instead of migrating a fresh one.
 *
 * Why: most server-tier files start a service on a fresh database, and each start ran the
 * service's migrations (the notifier's 15 files and pg-boss's schema and queues: about 1 s of
 * PostgreSQL's time per database, on a machine whose two cores the whole suite shares); a copy of
 * the migrated template takes about 75 ms. Each file still gets a database of its own, dropped
 * when it passes and kept when it fails (test/harness/db.ts): isolation is as before, only the
 * starting point differs.
 *
 * The template holds what one database shared by every service holds after each has started once
 * (the layout `npm start` runs: one DATABASE_URL for all): the control plane's, the notifier's and
 * identity's migrations recorded in schema_migrations, and pg-boss's schema with the notifier's
 * queues. A service started on a copy finds nothing to migrate. Tests of a fresh database (the
 * migration runner, a service migrating at start) ask for `{ empty: true }`.
 *
 * Nobody may connect to the template once built (a session on it would make every copy fail), so
 * it is closed to connections (ALLOW_CONNECTIONS false); copies are still made from it.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { createPool } from '../../shared/db.js';
import { migrate } from '../../shared/migrate.js';
import { migrationsDir, PROJECT_ROOT } from '../../shared/paths.js';
import { startBoss } from '../../notifier/queues/boss.js';
import { testLogger } from './log.js';

/** Names the template on DATABASE_URL's server for the test processes (set by the runner). */
export const TEMPLATE_ENV = 'TEST_DATABASE_TEMPLATE';

/**
 * The services whose migrations the template holds: `name` as each one's composition root passes
 * it to openDatabase (shared/pg-service.ts; it keys their rows in schema_migrations), `dir` the
 * folder holding its `migrations/`. A test checks that every such folder is listed.
 */
export const MIGRATED_SERVICES = [
  { name: 'control-plane', dir: 'limiter/control-plane' },
  { name: 'notifier', dir: 'notifier' },
  { name: 'identity', dir: 'identity' },
] as const;

/** Every folder of the tree holding a `migrations/` folder, relative to the root (for the test above). */
export function foldersWithMigrations(): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of readdirSync(join(PROJECT_ROOT, rel), { withFileTypes: true })) {
      if (!e.isDirectory() || e.name.startsWith('.') || ['node_modules', 'dist', 'test'].includes(e.name)) continue;
      const sub = rel ? `${rel}/${e.name}` : e.name;
      if (e.name === 'migrations') out.push(rel);
      else walk(sub);
    }
  };
  walk('');
  return out.sort();
}

export interface TemplateDatabase {
  readonly name: string;
  /** Drops it (a test database copied from it is unaffected). */
  drop(): Promise<void>;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function onServer<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Builds a migrated template on the server of `url` (a URL whose user may CREATE DATABASE). */
export async function buildTemplateDatabase(url: string): Promise<TemplateDatabase> {
  const name = `t_template_${randomBytes(4).toString('hex')}`;
  const drop = (): Promise<void> =>
    onServer(url, async (c) => void (await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`)));
  await onServer(url, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
  try {
    const log = testLogger('test-template');
    const pool = createPool(withDatabase(url, name), { applicationName: 'test:template', max: 2, log });
    try {
      for (const s of MIGRATED_SERVICES) {
        const dir = migrationsDir(s.dir);
        if (existsSync(dir)) await migrate(pool, { service: s.name, dir, log });
      }
      // pg-boss installs its schema and the notifier's queues as the notifier's start does; no
      // scheduling (that is the notifier's own, at its start) and nothing left running.
      const boss = await startBoss({ pool, log, jobExpireMs: 60_000, maintenanceMs: 60_000, schedule: false });
      await boss.stop({ graceful: false, wait: true });
    } finally {
      await pool.end();
    }
    await onServer(url, (c) => c.query(`ALTER DATABASE ${c.escapeIdentifier(name)} WITH ALLOW_CONNECTIONS false`));
  } catch (err) {
    await drop().catch(() => {});
    throw new Error(`the migrated template database could not be built: ${(err as Error).message}`, { cause: err });
  }
  return { name, drop };
}
