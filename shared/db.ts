/**
 * PostgreSQL access: one pool factory every service uses, a transaction helper, and the readiness
 * check behind /readyz.
 *
 * A broken connection must never take the process down: pg emits `error` on an idle pooled client
 * (on the pool) and on a checked-out client that is not running a query (on the client itself), and
 * an `error` event without a listener crashes Node. Both are logged here instead; the pool discards
 * the broken client and the next query opens a fresh connection.
 */
import pg from 'pg';
import type { Logger } from './log.js';

export type { Pool, PoolClient } from 'pg';

/** The subset of a pino logger this module writes to. */
export type DbLog = Pick<Logger, 'warn' | 'error' | 'info'>;

export interface PoolOptions {
  /** Maximum connections in the pool (DATABASE_POOL_MAX). Default 10. */
  max?: number;
  /** Shown in pg_stat_activity, so a DBA can tell the services apart. */
  applicationName: string;
  log: DbLog;
  /** Server-side statement_timeout in ms for every connection; 0 = none. Default 30 000. */
  statementTimeoutMs?: number;
  /** Ends a session that sits idle inside a transaction this long (ms); 0 = never. Default 60 000. */
  idleInTransactionTimeoutMs?: number;
  /** How long `connect()` waits for a connection before failing (ms). Default 5 000. */
  connectionTimeoutMs?: number;
  /** How long an idle connection stays open (ms). Default 30 000. */
  idleTimeoutMs?: number;
}

/** A pg Pool that logs connection errors instead of crashing the process. */
export function createPool(url: string, opts: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    application_name: opts.applicationName,
    statement_timeout: opts.statementTimeoutMs ?? 30_000,
    idle_in_transaction_session_timeout: opts.idleInTransactionTimeoutMs ?? 60_000,
    connectionTimeoutMillis: opts.connectionTimeoutMs ?? 5_000,
    idleTimeoutMillis: opts.idleTimeoutMs ?? 30_000,
  });
  const onClientError = (err: Error): void => {
    opts.log.warn({ err, application: opts.applicationName }, 'postgres connection error; the connection is discarded');
  };
  pool.on('connect', (client) => {
    // Permanent listener: covers the checked-out-but-idle case that the pool does not.
    client.on('error', onClientError);
  });
  // The pool re-emits idle-client errors here; the client listener above has logged them already.
  pool.on('error', () => {});
  return pool;
}

/**
 * Runs `fn` inside BEGIN … COMMIT on one pooled client; rolls back and rethrows if `fn` throws.
 * A client whose ROLLBACK fails is destroyed rather than returned to the pool.
 */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch (rollbackErr) {
      broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
    }
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * The /readyz check for a service that needs PostgreSQL: resolves when a round trip succeeds
 * within `timeoutMs`, else rejects with a short message (shown in the /readyz body).
 */
export async function checkDatabase(pool: pg.Pool, timeoutMs = 2_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`postgres did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([pool.query('SELECT 1'), timeout]);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(why.startsWith('postgres') ? why : `postgres: ${why}`);
  } finally {
    clearTimeout(timer);
  }
}
