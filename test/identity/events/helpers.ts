/**
 * Shared set-up for the identity event tests: a fresh database with identity's migrations, an
 * event store on it, and small builders for events.
 */
import { Writable } from 'node:stream';
import type pg from 'pg';
import { FakeClock } from '../../../shared/clock.js';
import { createLogger, type Logger } from '../../../shared/log.js';
import { migrate } from '../../../shared/migrate.js';
import { migrationsDir } from '../../../shared/paths.js';
import type { JsonRecord } from '../../../shared/proto-json.js';
import { encodeEvent } from '../../../identity/events/codec.js';
import type { DomainEvent } from '../../../identity/events/event-data.js';
import { EventStore, type Checkpoint, type NewEvent, type RecordedEvent } from '../../../identity/events/event-store.js';
import { ProjectionRunner, type RunnerOptions } from '../../../identity/events/projection-runner.js';
import type { Projector } from '../../../identity/events/projector.js';
import { useTestDatabase, type TestContext, type TestDatabase } from '../../harness/db.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';

export interface EventsDb {
  db: TestDatabase;
  pool: pg.Pool;
  store: EventStore;
}

/** A migrated identity database for this test file. */
export async function useEventsDb(t: TestContext, label: string, opts: { poolMax?: number } = {}): Promise<EventsDb> {
  const db = await useTestDatabase(t, label, { poolMax: opts.poolMax ?? 10 });
  await migrate(db.pool, { service: 'identity', dir: migrationsDir('identity') });
  return { db, pool: db.pool, store: new EventStore(db.pool) };
}

/** A raw event (any type, any payload) for store-level tests. */
export function raw(type: string, data: JsonRecord = {}, schemaVersion = 1): NewEvent {
  return { type, schemaVersion, data };
}

export function encoded(e: DomainEvent): NewEvent {
  return encodeEvent(e);
}

/** A runner over `projectors` that the test drives with `drain()` (no loops unless started). */
export function testRunner(pool: pg.Pool, store: EventStore, projectors: Projector[], opts: Partial<RunnerOptions> = {}): ProjectionRunner {
  return new ProjectionRunner({
    pool,
    store,
    projectors,
    clock: opts.clock ?? new FakeClock(Date.UTC(2026, 0, 1)),
    log: opts.log ?? testLogger('projections'),
    batchSize: opts.batchSize ?? 100,
    maxAttempts: opts.maxAttempts ?? 3,
    pollIntervalMs: opts.pollIntervalMs ?? 50,
    metrics: opts.metrics,
  });
}

/** A logger at debug level whose lines are kept, for asserting on what was (and was not) logged. */
export function captureLogger(service = 'identity'): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') lines.push(line);
      done();
    },
  });
  return { log: createLogger({ service, level: 'debug', destination }), lines };
}

/**
 * Reads the log from `from` until no committed event is left after the checkpoint. An empty read
 * alone does not mean that: another test's open transaction holds the read horizon back.
 */
export async function readToHead(
  store: EventStore,
  from: Checkpoint,
  limit = 1000,
  timeoutMs = 10_000,
): Promise<{ events: RecordedEvent[]; next: Checkpoint }> {
  const events: RecordedEvent[] = [];
  let cp = from;
  return waitFor(
    async () => {
      for (;;) {
        const r = await store.readAll(cp, limit);
        events.push(...r.events);
        cp = r.next;
        if (r.scanned < limit) break;
      }
      const { rows } = await store.pool.query('SELECT 1 FROM events WHERE (tx, position) > ($1::xid8, $2::bigint) LIMIT 1', [
        cp.tx,
        cp.position,
      ]);
      return rows.length === 0 && { events, next: cp };
    },
    { timeoutMs, intervalMs: 5, what: 'the log to become readable to its head' },
  );
}
