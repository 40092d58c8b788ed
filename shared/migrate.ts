/**
 * The migration runner. Each service keeps plain SQL files in `<service>/migrations/NNN_name.sql`;
 * `migrate` applies the ones not yet applied, in version order, each in its own transaction, and
 * records them in `schema_migrations(service, version, name, checksum, applied_at)`.
 *
 * Safe when several processes start at once: the whole run holds a session-level advisory lock
 * keyed by the service name, on one dedicated connection, so a second runner waits and then finds
 * nothing left to do. The primary key on (service, version) is the second net.
 *
 * An applied file must never change: a different checksum stops the run with an error naming the
 * file. A file that is gone but recorded as applied only logs a warning (an older build starting
 * against a newer schema during a rolling deploy). Files are hashed with line endings normalised,
 * so a CRLF checkout does not count as a change.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type pg from 'pg';
import { InternalError } from './errors.js';
import type { Logger } from './log.js';

export type MigrationErrorCode =
  'migration_invalid_name' | 'migration_duplicate_version' | 'migration_checksum_mismatch' | 'migration_failed' | 'migration_dir_missing';

/** A migration problem; the message is one line naming the file. Startup fails on it. */
export class MigrationError extends InternalError<MigrationErrorCode> {
  readonly file: string | undefined;
  constructor(code: MigrationErrorCode, message: string, opts: { file?: string; cause?: unknown } = {}) {
    super(code, message, opts);
    this.name = 'MigrationError';
    this.file = opts.file;
  }
}

export interface Migration {
  version: number;
  /** The part after `NNN_`, without `.sql`. */
  name: string;
  /** The file name, e.g. `001_quotas.sql`. */
  file: string;
  sql: string;
  /** sha256 hex of the file with CRLF normalised to LF. */
  checksum: string;
}

export interface AppliedMigration {
  version: number;
  name: string;
  checksum: string;
}

export interface MigrateOptions {
  /** Whose migrations these are; the key of the lock and of the rows in schema_migrations. */
  service: string;
  /** The folder holding `NNN_name.sql` files. */
  dir: string;
  log?: Pick<Logger, 'info' | 'warn'>;
}

export interface MigrateResult {
  /** The migrations this run applied, in order (empty when already up to date). */
  applied: Migration[];
  /** The highest version now recorded for the service (0 when none). */
  version: number;
}

const FILE_RE = /^(\d+)_([A-Za-z0-9_-]+)\.sql$/;

export function checksumOf(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

/** Reads and validates the migration files of `dir`, sorted by version. Other files are ignored. */
export async function loadMigrations(dir: string): Promise<Migration[]> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (err) {
    throw new MigrationError('migration_dir_missing', `migrations: cannot read ${dir}: ${(err as Error).message}`, { cause: err });
  }
  const out: Migration[] = [];
  const seen = new Map<number, string>();
  for (const file of entries.sort()) {
    if (!file.endsWith('.sql')) continue;
    const m = FILE_RE.exec(file);
    if (!m) {
      throw new MigrationError('migration_invalid_name', `migrations: ${join(dir, file)} is not named NNN_name.sql`, { file });
    }
    const version = Number(m[1]);
    const other = seen.get(version);
    if (other !== undefined) {
      throw new MigrationError('migration_duplicate_version', `migrations: ${file} and ${other} in ${dir} share version ${version}`, {
        file,
      });
    }
    seen.set(version, file);
    const sql = await readFile(join(dir, file), 'utf8');
    out.push({ version, name: m[2] ?? '', file, sql, checksum: checksumOf(sql) });
  }
  return out.sort((a, b) => a.version - b.version);
}

export interface MigrationPlan {
  pending: Migration[];
  /** Recorded as applied but no longer on disk. */
  missing: AppliedMigration[];
}

/**
 * Decides what to run: every file not recorded yet, in order. Throws when a recorded file has
 * changed (checksum or name). Pure.
 */
export function planMigrations(dir: string, files: readonly Migration[], applied: readonly AppliedMigration[]): MigrationPlan {
  const byVersion = new Map(applied.map((a) => [a.version, a]));
  const pending: Migration[] = [];
  for (const f of files) {
    const done = byVersion.get(f.version);
    if (!done) {
      pending.push(f);
      continue;
    }
    byVersion.delete(f.version);
    if (done.checksum !== f.checksum || done.name !== f.name) {
      const renamed = done.name !== f.name ? ` (applied as ${String(done.version).padStart(3, '0')}_${done.name}.sql)` : '';
      throw new MigrationError(
        'migration_checksum_mismatch',
        `migrations: ${join(dir, f.file)} was changed after it was applied${renamed}; add a new migration instead of editing an applied one`,
        { file: f.file },
      );
    }
  }
  return { pending, missing: [...byVersion.values()].sort((a, b) => a.version - b.version) };
}

// The two-int form of the advisory lock lives in its own key space, apart from the bigint keys
// other libraries (pg-boss) use. The namespace is 'migr'; the object is a hash of the service.
const LOCK_NAMESPACE = 0x6d696772;
const BOOTSTRAP_OBJECT = 0;

function lockKey(service: string): number {
  return createHash('sha256').update(`schema_migrations:${service}`).digest().readInt32BE(0);
}

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  service    text        NOT NULL,
  version    integer     NOT NULL,
  name       text        NOT NULL,
  checksum   text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (service, version)
)`;

/**
 * Applies `service`'s pending migrations from `dir`. Idempotent; waits for a concurrent runner of
 * the same service; throws `MigrationError` (one line, naming the file) on a changed file or a
 * failing migration, whose transaction is rolled back and nothing recorded.
 */
export async function migrate(pool: pg.Pool, opts: MigrateOptions): Promise<MigrateResult> {
  const files = await loadMigrations(opts.dir);
  const key = lockKey(opts.service);
  const client = await pool.connect();
  let locked = false;
  try {
    // Waiting for another runner, and a schema change itself, may legitimately take longer than
    // the pool's request-path statement timeout. This connection is destroyed at the end, so the
    // setting never leaks back into the pool.
    await client.query('SET statement_timeout = 0');
    // Two services migrating at once may both try to create the table; CREATE TABLE IF NOT EXISTS
    // is not safe against that race, so creation is serialised by a lock of its own.
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1, $2)', [LOCK_NAMESPACE, BOOTSTRAP_OBJECT]);
    await client.query(CREATE_TABLE);
    await client.query('COMMIT');

    const { rows: tryRows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [LOCK_NAMESPACE, key]);
    if (!tryRows[0]?.ok) {
      opts.log?.info({ service: opts.service }, 'another process is migrating this service; waiting for it');
      await client.query('SELECT pg_advisory_lock($1, $2)', [LOCK_NAMESPACE, key]);
    }
    locked = true;

    const { rows } = await client.query<AppliedMigration>(
      'SELECT version, name, checksum FROM schema_migrations WHERE service = $1 ORDER BY version',
      [opts.service],
    );
    const plan = planMigrations(opts.dir, files, rows);
    for (const m of plan.missing) {
      opts.log?.warn({ service: opts.service, version: m.version, name: m.name }, 'an applied migration is no longer on disk');
    }
    const newest = rows.reduce((max, r) => Math.max(max, r.version), 0);

    for (const m of plan.pending) {
      if (m.version < newest) {
        opts.log?.warn({ service: opts.service, file: m.file, newest }, 'applying a migration older than the newest applied one');
      }
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (service, version, name, checksum) VALUES ($1, $2, $3, $4)', [
          opts.service,
          m.version,
          m.name,
          m.checksum,
        ]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw new MigrationError('migration_failed', `migrations: ${join(opts.dir, m.file)} failed: ${describe(err, m.sql)}`, {
          file: m.file,
          cause: err,
        });
      }
      opts.log?.info({ service: opts.service, version: m.version, name: m.name }, 'migration applied');
    }
    const version = Math.max(newest, ...plan.pending.map((m) => m.version));
    return { applied: plan.pending, version };
  } finally {
    if (locked) await client.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_NAMESPACE, key]).catch(() => {});
    // Destroyed, not returned: it carries a session setting, and after an error it may be
    // mid-transaction or dead. Closing it also releases the session lock if the unlock failed.
    client.release(true);
  }
}

/** The server's message, with the line of the file it points at when it gives a position. */
function describe(err: unknown, sql: string): string {
  if (!(err instanceof Error)) return String(err);
  const position = Number((err as { position?: unknown }).position);
  if (Number.isInteger(position) && position > 0) {
    const line = sql.slice(0, position - 1).split('\n').length;
    return `${err.message} (line ${line})`;
  }
  return err.message;
}
