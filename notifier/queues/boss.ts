/**
 * pg-boss (10.x) on the notifier's own pool, with its queues created at start.
 *
 * pg-boss runs every statement through a `db` object (`{ executeSql(text, values) }`); we give it
 * the service's pool, so it needs no connection string and no pool of its own, and we give each
 * `send` the client of our own transaction ({@link txDb}) so that a job and the rows it is about
 * commit or roll back together (no job for a notification that was never stored, no stored
 * notification without its job).
 *
 * Jobs are retried by pg-boss only when a worker died holding one (the job expires after
 * `jobExpireMs` and maintenance puts it back) or when a handler threw unexpectedly (database
 * trouble). Provider failures are never pg-boss retries: the delivery worker re-enqueues a new job
 * with `startAfter` on the notifier's own schedule (workers/retry-policy.ts).
 */
import PgBoss from 'pg-boss';
import type { Pool, PoolClient } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { allQueues } from './names.js';

export type Boss = PgBoss;
export type BossDb = PgBoss.Db;
export type Job<T> = PgBoss.Job<T>;

export interface BossOptions {
  pool: Pool;
  log: Logger;
  /** A job held longer than this by a worker that never finishes it is handed out again. */
  jobExpireMs: number;
  /** How often pg-boss maintenance (expiry, archiving) runs. */
  maintenanceMs: number;
  /** Run pg-boss's cron scheduler in this process (the retention job). */
  schedule: boolean;
}

/** pg-boss's `db` over a pool (each statement on any free connection). */
export function poolDb(pool: Pool): BossDb {
  return { executeSql: (text, values) => pool.query(text, values) };
}

/** pg-boss's `db` over one client: statements join the transaction open on it. */
export function txDb(client: PoolClient): BossDb {
  return { executeSql: (text, values) => client.query(text, values) };
}

/** Unexpected handler failures and expired jobs are retried this many times by pg-boss, with backoff. */
const CRASH_RETRY_LIMIT = 25;

/** Starts pg-boss (installing or migrating its schema under its own lock) and creates every queue. */
export async function startBoss(opts: BossOptions): Promise<Boss> {
  const boss = new PgBoss({
    db: poolDb(opts.pool),
    schema: 'pgboss',
    migrate: true,
    supervise: true,
    schedule: opts.schedule,
    maintenanceIntervalSeconds: Math.max(1, Math.round(opts.maintenanceMs / 1000)),
    // Keep finished jobs briefly: the delivery records are the history, not the job table.
    archiveCompletedAfterSeconds: 3600,
    deleteAfterDays: 2,
  });
  boss.on('error', (err) => opts.log.warn({ err }, 'pg-boss error'));
  await boss.start();
  const queue = {
    policy: 'standard' as const,
    retryLimit: CRASH_RETRY_LIMIT,
    retryDelay: 1,
    retryBackoff: true,
    expireInSeconds: Math.max(1, Math.round(opts.jobExpireMs / 1000)),
  };
  for (const name of allQueues()) {
    await boss.createQueue(name, { name, ...queue });
    // A queue created by an earlier start keeps its old options unless told.
    await boss.updateQueue(name, { name, ...queue });
  }
  return boss;
}

/**
 * Completes several jobs of one queue in one statement, inside the transaction of `db`. (pg-boss
 * takes an id array in the same call; its typings only declare that form without the `db` option.)
 */
export async function completeJobs(boss: Boss, queue: string, ids: readonly string[], db: BossDb): Promise<void> {
  const complete = boss.complete.bind(boss) as unknown as (
    name: string,
    ids: string[],
    data: object,
    options: { db: BossDb },
  ) => Promise<unknown>;
  await complete(queue, [...ids], {}, { db });
}
