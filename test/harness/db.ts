/**
 * A fresh PostgreSQL database per test file, created on the run's server (DATABASE_URL), so test
 * files never see each other's rows and can run in parallel.
 *
 * Migrated: under `npm test` it is a copy of the run's template (test/harness/template-db.ts:
 * every service's migrations and pg-boss's schema already applied, so a service started on it has
 * nothing to migrate). `{ empty: true }` gives an empty database instead, for tests of a fresh one
 * (the migration runner, a service migrating at its start); so does a run by hand without
 * TEST_DATABASE_TEMPLATE set.
 *
 * Policy: a database is dropped when its test passed and kept when it failed, so the failure can
 * be inspected (its name is printed). `useTestDatabase(t, label)` applies this with tap's `t`;
 * `createTestDatabase` is the building block, with no teardown of its own. Names start with `t_`,
 * so leftovers on a long-lived server are easy to find and drop.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createPool } from '../../shared/db.js';
import { testDatabaseUrl } from './env.js';
import { testLogger } from './log.js';
import { TEMPLATE_ENV } from './template-db.js';

export interface TestDatabase {
  /** The database's name, e.g. `t_migrate_1a2b3c4d`. */
  readonly name: string;
  /** DATABASE_URL with the database replaced by this one. */
  readonly url: string;
  /** A pool on it (shared/db.ts createPool), ended by drop(). */
  readonly pool: pg.Pool;
  /** Ends the pool and drops the database (disconnecting any other session). Idempotent. */
  drop(): Promise<void>;
  /** Ends the pool only, keeping the database. */
  keep(): Promise<void>;
}

/** The minimum of tap's `t` these helpers use. */
export interface TestContext {
  teardown(fn: () => unknown): void;
  passing(): boolean;
}

/** A database name from a label: lowercase [a-z0-9_], plus 8 random hex digits. */
export function testDatabaseName(label: string): string {
  const clean = label
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 40);
  return `t_${clean || 'db'}_${randomBytes(4).toString('hex')}`;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: testDatabaseUrl(), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export interface TestDatabaseOptions {
  /** The pool's size (default 5). */
  poolMax?: number;
  /** An empty database, not a copy of the migrated template. */
  empty?: boolean;
}

/** Creates a fresh database named after `label`, with a pool on it. Registers nothing. */
export async function createTestDatabase(label: string, opts: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const name = testDatabaseName(label);
  const template = opts.empty ? undefined : process.env[TEMPLATE_ENV];
  await admin((c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}${template ? ` TEMPLATE ${c.escapeIdentifier(template)}` : ''}`));
  const url = withDatabase(testDatabaseUrl(), name);
  const pool = createPool(url, { applicationName: `test:${label}`, max: opts.poolMax ?? 5, log: testLogger('test-db') });
  let ended: Promise<void> | undefined;
  const endPool = (): Promise<void> => (ended ??= pool.end().catch(() => {}));
  let dropped: Promise<void> | undefined;
  return {
    name,
    url,
    pool,
    keep: endPool,
    drop() {
      dropped ??= (async () => {
        await endPool();
        await admin((c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
      })();
      return dropped;
    },
  };
}

/**
 * A fresh database for this test (usually the file's root `t`): dropped at teardown when the test
 * passed, kept (and its name printed to stderr) when it failed.
 */
export async function useTestDatabase(
  t: TestContext,
  label: string,
  opts: TestDatabaseOptions & { onKept?: (line: string) => void } = {},
): Promise<TestDatabase> {
  const db = await createTestDatabase(label, opts);
  const report = opts.onKept ?? ((line: string) => void process.stderr.write(`# ${line}\n`));
  t.teardown(async () => {
    if (t.passing()) {
      await db.drop();
    } else {
      await db.keep();
      report(`kept test database ${db.name} for inspection (on the DATABASE_URL server)`);
    }
  });
  return db;
}
