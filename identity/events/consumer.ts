/**
 * One batch of one consumer (a projector's generation), inside a transaction the caller holds with
 * the consumer's lock: read the checkpoint, read the next events after it (commit-safe order, see
 * store-sql.ts), apply them, advance the checkpoint. The read models and the checkpoint commit
 * together, so each event is applied once per generation.
 *
 * An event whose stored payload does not fit its type (payload-check.ts: not a JSON object, or a
 * field of the wrong type) is dead-lettered at once, before the projector sees it: retrying cannot
 * change a stored fact.
 *
 * A failing batch is retried event by event, each inside a savepoint, up to `maxAttempts` times;
 * an event that still fails is dead-lettered (logged, counted) and passed, and the batch goes on.
 * The savepoints also undo whatever a failed apply had written, so a dead-lettered event leaves
 * nothing in any read model.
 * Only failures that can be the event's fault are dead-lettered: an exception thrown by the handler
 * or a data/constraint error from PostgreSQL (SQLSTATE classes 22, 23). Anything else (a lost
 * connection, a missing table, a deadlock, a timeout) aborts the whole batch, which is retried on
 * the next tick: dead-lettering every event because the database is down would be a disaster.
 */
import type pg from 'pg';
import type { Logger } from '../../shared/log.js';
import type { EventStore, RecordedEvent } from './event-store.js';
import type { EventMetrics } from './metrics.js';
import { payloadProblem } from './payload-check.js';
import { DEAD_LETTER, GET_CHECKPOINT, SET_CHECKPOINT } from './projection-sql.js';
import { consumerName, projectionContext, type Projector } from './projector.js';

export interface BatchOptions {
  store: EventStore;
  batchSize: number;
  maxAttempts: number;
  /** Clock time, epoch ms. */
  now: number;
  log: Logger;
  /** Counted only for the live generation. */
  metrics?: EventMetrics;
  live: boolean;
}

export interface BatchResult {
  /** Rows passed (any type). */
  readonly scanned: number;
  /** Events handed to the projector. */
  readonly applied: number;
  readonly deadLettered: number;
  /** The batch was full: there may be more right away. */
  readonly full: boolean;
  readonly position: number;
}

/** True when an error thrown while applying one event may be that event's fault (see the module comment). */
export function isPoisonError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code.startsWith('22') || code.startsWith('23');
  // pg's own client errors (connection ended, query timeout) have no SQLSTATE.
  if (err instanceof Error && /connection|terminated|timeout|Client has/i.test(err.message)) return false;
  return true;
}

/** Processes one batch for `projector` generation `generation`. `client` is in a transaction holding the lock. */
export async function consumeBatch(
  client: pg.PoolClient,
  projector: Projector,
  generation: number,
  opts: BatchOptions,
): Promise<BatchResult> {
  const consumer = consumerName(projector.name, generation);
  const { rows } = await client.query<{ tx: string; position: string }>({ ...GET_CHECKPOINT, values: [consumer] });
  const cp = rows[0];
  if (!cp) throw new Error(`no checkpoint for ${consumer}`);
  const after = { tx: cp.tx, position: Number(cp.position) };
  const batch = await opts.store.readAll(after, opts.batchSize, { client, types: projector.eventTypes });
  if (batch.scanned === 0) return { scanned: 0, applied: 0, deadLettered: 0, full: false, position: after.position };

  const ctx = projectionContext(generation, opts.now, opts.log);
  let deadLettered = 0;
  // A payload that does not fit its type (JSON null, a string total) cannot be projected:
  // dead-letter it at once, log and count it, and go on with the rest.
  const events: RecordedEvent[] = [];
  for (const event of batch.events) {
    const problem = payloadProblem(event, opts.store.catalog);
    if (problem === undefined) events.push(event);
    else {
      await deadLetter(client, projector, event, generation, 1, problem, opts);
      deadLettered++;
    }
  }
  if (events.length > 0) {
    await client.query('SAVEPOINT projector_batch');
    try {
      await projector.apply(client, events, ctx);
      await client.query('RELEASE SAVEPOINT projector_batch');
    } catch (err) {
      await client.query('ROLLBACK TO SAVEPOINT projector_batch');
      if (!isPoisonError(err)) throw err;
      for (const event of events) {
        if (!(await applyOne(client, projector, event, ctx, generation, opts))) deadLettered++;
      }
    }
  }
  await client.query({ ...SET_CHECKPOINT, values: [consumer, batch.next.tx, batch.next.position, batch.events.length - deadLettered] });
  if (opts.live && opts.metrics) {
    opts.metrics.applied.inc({ projector: projector.name }, batch.events.length - deadLettered);
    opts.metrics.batches.inc({ projector: projector.name });
    opts.metrics.position.set({ projector: projector.name }, batch.next.position);
  }
  return {
    scanned: batch.scanned,
    applied: batch.events.length - deadLettered,
    deadLettered,
    full: batch.scanned >= opts.batchSize,
    position: batch.next.position,
  };
}

/** Applies one event with retries; dead-letters it and returns false when every attempt failed. */
async function applyOne(
  client: pg.PoolClient,
  projector: Projector,
  event: RecordedEvent,
  ctx: ReturnType<typeof projectionContext>,
  generation: number,
  opts: BatchOptions,
): Promise<boolean> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= opts.maxAttempts; attempt++) {
    await client.query('SAVEPOINT projector_event');
    try {
      await projector.apply(client, [event], ctx);
      await client.query('RELEASE SAVEPOINT projector_event');
      return true;
    } catch (err) {
      await client.query('ROLLBACK TO SAVEPOINT projector_event');
      if (!isPoisonError(err)) throw err;
      lastError = err;
    }
  }
  const message = lastError instanceof Error ? lastError.message : String(lastError);
  await deadLetter(client, projector, event, generation, opts.maxAttempts, message, opts, lastError);
  return false;
}

/** Records a dead letter, logs it as an error and counts it. */
async function deadLetter(
  client: pg.PoolClient,
  projector: Projector,
  event: RecordedEvent,
  generation: number,
  attempts: number,
  message: string,
  opts: BatchOptions,
  err?: unknown,
): Promise<void> {
  await client.query({
    ...DEAD_LETTER,
    values: [projector.name, generation, event.position, event.eventId, event.type, attempts, message.slice(0, 2000)],
  });
  opts.log.error(
    {
      err: err ?? message,
      projector: projector.name,
      generation,
      position: event.position,
      event_id: event.eventId,
      event_type: event.type,
    },
    'projector failed on an event; dead-lettered it and continued',
  );
  if (opts.metrics) opts.metrics.deadLettered.inc({ projector: projector.name });
}
