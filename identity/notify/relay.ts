/**
 * The notification relay: drains `notification_outbox` to the notifier and keeps the notifier's
 * recipient profiles in step with identity (`notifier_profile_sync`). One durable path for
 * everything identity tells a user: welcome notifications (the welcome projector), security alerts
 * (queued by triggers in the transaction of the security event or of the password change,
 * migration 140).
 *
 * Each step, in this order: (1) profiles whose latest address the notifier has not accepted, then
 * (2) the oldest pending outbox row of each user whose profile is in step. Rows are claimed
 * `FOR UPDATE SKIP LOCKED` in a transaction held while the notifier is called, so replicas never
 * send one row at the same time, and a row is marked sent only after the 202, in that transaction.
 * A crash or a lost answer leaves the row pending; sent again, it carries the same idempotency key
 * (the row's id) and the notifier answers the original 202 without a second notification.
 *
 * Failures follow policy.ts: retried with exponential backoff (IDENTITY_NOTIFY_RETRY_MIN to
 * IDENTITY_NOTIFY_RETRY_MAX, honouring Retry-After) until accepted; a refusal of the row itself is
 * parked (`parked_at`, `last_error`), logged as an error and counted, never retried.
 *
 * Profiles: the notifier's PUT replaces the whole profile, and identity knows only the e-mail, so
 * the relay reads the stored profile first and carries its phone, locale and timezone over; a read
 * that fails is retried, never replaced by a blind PUT that would erase them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Counter, Gauge } from 'prom-client';
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import type { Registry } from '../../shared/metrics.js';
import { notificationFor, type OutboxRow } from './messages.js';
import { keptFields, type NotifierClient } from './notifier-client.js';
import { backoffMs, failedCall, verdictOf, type Backoff, type Verdict } from './policy.js';
import {
  CLAIM_OUTBOX,
  CLAIM_PROFILES,
  OUTBOX_PARK,
  OUTBOX_RETRY,
  OUTBOX_SENT,
  PROFILE_PARK,
  PROFILE_RETRY,
  PROFILE_SYNCED,
} from './relay-sql.js';

export interface RelayOptions {
  pool: pg.Pool;
  client: NotifierClient;
  log: Logger;
  clock: Clock;
  backoff: Backoff;
  /** How long an idle relay waits before it looks again, ms. */
  pollIntervalMs: number;
  /** Rows claimed per step (one per user). Default 20. */
  batchSize?: number;
  registry?: Registry | undefined;
  /** Jitter source. Default Math.random. */
  random?: () => number;
}

export interface StepResult {
  profiles: number;
  rows: number;
}

/** A gauge's query; undefined when the database does not answer (the gauge keeps its last value, /metrics still answers). */
async function readGauge<R extends pg.QueryResultRow>(pool: pg.Pool, text: string): Promise<R[] | undefined> {
  try {
    return (await pool.query<R>({ text, query_timeout: 2000 } as pg.QueryConfig)).rows;
  } catch {
    return undefined;
  }
}

export class NotifyRelay {
  private stopped = false;
  private closing: Promise<void> | undefined;
  private loop: Promise<void> | undefined;
  private readonly wake = new AbortController();
  private readonly outcomes: Counter;

  constructor(private readonly opts: RelayOptions) {
    this.outcomes = new Counter({
      name: 'identity_notify_relay_total',
      help: 'Calls the notification relay made to the notifier, by what (notification kind, or profile) and outcome (sent, retry, parked)',
      labelNames: ['what', 'outcome'],
      registers: opts.registry ? [opts.registry] : [],
    });
    // Read from the table at each scrape, so every replica reports the same figures.
    const pool = opts.pool;
    new Gauge({
      name: 'identity_notify_outbox_rows',
      help: 'Outbox rows not sent yet, by state: pending (to be sent or retried) or parked (refused for good, waiting for an operator)',
      labelNames: ['state'],
      registers: opts.registry ? [opts.registry] : [],
      async collect() {
        const rows = await readGauge<{ pending: string; parked: string }>(
          pool,
          `SELECT count(*) FILTER (WHERE parked_at IS NULL) AS pending, count(*) FILTER (WHERE parked_at IS NOT NULL) AS parked
             FROM notification_outbox WHERE sent_at IS NULL`,
        );
        if (!rows) return;
        this.set({ state: 'pending' }, Number(rows[0]?.pending ?? 0));
        this.set({ state: 'parked' }, Number(rows[0]?.parked ?? 0));
      },
    });
    new Gauge({
      name: 'identity_notify_outbox_oldest_pending_seconds',
      help: 'Age of the oldest outbox row not sent and not parked (0 when none): how far behind the notifications are',
      registers: opts.registry ? [opts.registry] : [],
      async collect() {
        const rows = await readGauge<{ age: number | null }>(
          pool,
          `SELECT extract(epoch FROM now() - min(created_at))::float8 AS age FROM notification_outbox
            WHERE sent_at IS NULL AND parked_at IS NULL`,
        );
        if (rows) this.set(Math.max(0, rows[0]?.age ?? 0));
      },
    });
  }

  /** Runs steps until closed: at once while there is work, else every poll interval. */
  start(): void {
    this.loop ??= (async () => {
      let failures = 0;
      while (!this.stopped) {
        let busy = false;
        try {
          const r = await this.step();
          busy = r.rows + r.profiles > 0;
          failures = 0;
        } catch (err) {
          failures++;
          if (failures === 1 || failures % 20 === 0) this.opts.log.warn({ err, failures }, 'notify relay: a step failed');
        }
        if (!busy && !this.stopped) await sleep(this.opts.pollIntervalMs, undefined, { signal: this.wake.signal }).catch(() => {});
      }
    })();
  }

  /** One pass: a batch of profiles, then a batch of outbox rows. */
  async step(): Promise<StepResult> {
    const profiles = await this.syncProfiles();
    const rows = await this.sendOutbox();
    return { profiles, rows };
  }

  private delay(attempts: number, v: Verdict): number {
    return backoffMs(attempts, this.opts.backoff, this.opts.random ?? Math.random, v.kind === 'retry' ? v.retryAfterMs : undefined);
  }

  private async inClaim<R>(claim: { name: string; text: string }, each: (db: pg.PoolClient, row: R) => Promise<void>): Promise<number> {
    const db = await this.opts.pool.connect();
    let broken = false;
    try {
      await db.query('BEGIN');
      const { rows } = await db.query<R & pg.QueryResultRow>({ ...claim, values: [this.opts.batchSize ?? 20] });
      // One row per user (the claims say so), so the calls may run side by side; each records its
      // own outcome on the shared connection (pg queues the statements).
      // Every call settles before the transaction ends, so the connection is never released in use.
      const settled = await Promise.allSettled(rows.map((r) => each(db, r)));
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
      await db.query('COMMIT');
      return rows.length;
    } catch (err) {
      await db.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      db.release(broken);
    }
  }

  private async syncProfiles(): Promise<number> {
    type Row = { user_id: string; email: string; version: number; attempts: number };
    return this.inClaim<Row>(CLAIM_PROFILES, async (db, row) => {
      const v = await this.putProfile(row.user_id, row.email);
      await this.record('profile', v, row.attempts, {
        done: () => db.query({ ...PROFILE_SYNCED, values: [row.user_id, row.version] }),
        retry: (reason, ms) => db.query({ ...PROFILE_RETRY, values: [row.user_id, reason, ms] }),
        park: (reason) => db.query({ ...PROFILE_PARK, values: [row.user_id, reason, row.version] }),
        ids: { user_id: row.user_id, version: row.version },
      });
    });
  }

  /** GET the stored profile, then PUT it back with identity's e-mail (see the module comment). */
  private async putProfile(userId: string, email: string): Promise<Verdict> {
    try {
      const current = await this.opts.client.getProfile(userId);
      if (current.status !== 404) {
        const v = verdictOf(current);
        if (v.kind !== 'done') return v;
      }
      const kept = current.status === 404 ? {} : keptFields(current.body);
      return verdictOf(await this.opts.client.putProfile(userId, { ...kept, email }));
    } catch (err) {
      return failedCall(err);
    }
  }

  private async sendOutbox(): Promise<number> {
    type Row = { id: string; kind: string; user_id: string; payload: Record<string, unknown>; attempts: number };
    return this.inClaim<Row>(CLAIM_OUTBOX, async (db, row) => {
      const outbox: OutboxRow = { id: row.id, kind: row.kind, userId: row.user_id, payload: row.payload };
      const req = notificationFor(outbox);
      let v: Verdict;
      if (!req) v = { kind: 'park', reason: `unknown outbox kind ${row.kind}` };
      else {
        try {
          v = verdictOf(await this.opts.client.notify(req));
        } catch (err) {
          v = failedCall(err);
        }
      }
      await this.record(row.kind, v, row.attempts, {
        done: () => db.query({ ...OUTBOX_SENT, values: [row.id] }),
        retry: (reason, ms) => db.query({ ...OUTBOX_RETRY, values: [row.id, reason, ms] }),
        park: (reason) => db.query({ ...OUTBOX_PARK, values: [row.id, reason] }),
        ids: { outbox_id: row.id, kind: row.kind, user_id: row.user_id },
      });
    });
  }

  private async record(
    what: string,
    v: Verdict,
    attemptsBefore: number,
    on: {
      done: () => Promise<unknown>;
      retry: (reason: string, delayMs: number) => Promise<unknown>;
      park: (reason: string) => Promise<unknown>;
      ids: Record<string, unknown>;
    },
  ): Promise<void> {
    const attempts = attemptsBefore + 1;
    switch (v.kind) {
      case 'done':
        await on.done();
        this.outcomes.inc({ what, outcome: 'sent' });
        return;
      case 'retry': {
        const ms = this.delay(attempts, v);
        await on.retry(v.reason, ms);
        this.outcomes.inc({ what, outcome: 'retry' });
        if (attempts === 1 || attempts % 10 === 0) {
          this.opts.log.warn(
            { ...on.ids, attempts, reason: v.reason, retry_in_ms: ms },
            'notify relay: the notifier did not accept; retrying',
          );
        }
        return;
      }
      case 'park':
        await on.park(v.reason);
        this.outcomes.inc({ what, outcome: 'parked' });
        this.opts.log.error({ ...on.ids, attempts, reason: v.reason }, 'notify relay: the notifier refused for good; parked');
        return;
    }
  }

  /** Stops the loop after the step in progress (its calls are bounded by the request timeout). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopped = true;
      this.wake.abort();
      await this.loop;
      await this.opts.client.close();
    })();
    return this.closing;
  }
}
