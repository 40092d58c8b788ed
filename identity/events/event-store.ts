/**
 * The append-only event store on PostgreSQL: append with an expected stream version (optimistic
 * concurrency), read one stream, and read the whole log in commit-safe order for projectors.
 * SQL and the reasoning behind the global read are in store-sql.ts.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { JsonRecord } from '../../shared/proto-json.js';
import { EVENT_CATALOG, type EventCatalog } from './catalog.js';
import { encodeEvent, upcast, type EncodedEvent } from './codec.js';
import { ConcurrencyError } from './errors.js';
import type { DomainEvent } from './event-data.js';
import { APPEND, READ_ALL, READ_POSITIONS, READ_STREAM, STREAM_VERSION, type EventRow } from './store-sql.js';

/** Anything that runs a query: the pool, or a client inside the caller's transaction. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/** An event read back from the store, upcast to its type's current schema version. */
export interface RecordedEvent {
  /** Global position (allocation order; see store-sql.ts for why readers order by (tx, position)). */
  readonly position: number;
  /** The writing transaction's id (xid8, as text). */
  readonly tx: string;
  readonly streamId: string;
  /** 1 for a stream's first event. */
  readonly streamVersion: number;
  readonly type: string;
  readonly schemaVersion: number;
  readonly eventId: string;
  readonly data: JsonRecord;
  readonly metadata: JsonRecord;
  /** When it was recorded (its transaction's start), epoch ms. */
  readonly recordedAt: number;
  /**
   * The stored payload was not a JSON object (JSON null, an array, a scalar): `data` is then `{}`
   * and readers must not trust it; no projector is given such an event (payload-check.ts).
   */
  readonly malformed?: true;
}

/** Where a reader of the whole log is: the (tx, position) of the last event it passed. */
export interface Checkpoint {
  readonly tx: string;
  readonly position: number;
}

/** Before the first event. */
export const START: Checkpoint = Object.freeze({ tx: '0', position: 0 });

/** An event to append. */
export interface NewEvent extends EncodedEvent {
  /** Default: a fresh UUID. */
  readonly eventId?: string;
  readonly metadata?: JsonRecord;
}

export interface AppendResult {
  readonly streamId: string;
  /** The stream's version after the append. */
  readonly version: number;
  readonly positions: readonly number[];
  readonly eventIds: readonly string[];
  readonly types: readonly string[];
}

export interface AppendOptions {
  /** Append inside this client's transaction; the caller commits (and then calls `appended()`). */
  client?: Queryable;
  /** Metadata for every event of this append (actor, request id); never secrets. */
  metadata?: JsonRecord;
}

export interface ReadAllResult {
  /** The events of the requested types (all types when none were given), in (tx, position) order. */
  readonly events: RecordedEvent[];
  /** The checkpoint after every row passed, matching or not; equal to `after` when nothing was read. */
  readonly next: Checkpoint;
  /** Rows passed, matching or not. */
  readonly scanned: number;
}

export interface EventStoreOptions {
  /** Called after an append outside a caller's transaction has committed (wake the projectors). */
  onAppended?: (result: AppendResult) => void;
  /**
   * The upcasters events are read through, and the contracts their payloads are checked against
   * before projection. Default: this build's {@link EVENT_CATALOG}.
   */
  catalog?: EventCatalog;
}

export class EventStore {
  /** What this store reads with (see {@link EventStoreOptions.catalog}). */
  readonly catalog: EventCatalog;

  constructor(
    readonly pool: pg.Pool,
    private readonly opts: EventStoreOptions = {},
  ) {
    this.catalog = opts.catalog ?? EVENT_CATALOG;
  }

  /**
   * Appends `events` to `streamId` if the stream is at `expectedVersion` (0: the stream must not
   * exist). All or nothing.
   *
   * @throws ConcurrencyError when the stream is at another version, or another writer appended at
   *   the same version concurrently.
   */
  async append(streamId: string, expectedVersion: number, events: readonly NewEvent[], opts: AppendOptions = {}): Promise<AppendResult> {
    if (!Number.isInteger(expectedVersion) || expectedVersion < 0)
      throw new RangeError(`expectedVersion must be >= 0, got ${expectedVersion}`);
    if (events.length === 0) return { streamId, version: expectedVersion, positions: [], eventIds: [], types: [] };
    const ids = events.map((e) => e.eventId ?? randomUUID());
    const meta = opts.metadata ?? {};
    const db = opts.client ?? this.pool;
    let rows: { position: string; stream_version: number }[];
    try {
      ({ rows } = await db.query<{ position: string; stream_version: number }>({
        ...APPEND,
        values: [
          streamId,
          expectedVersion,
          events.map((e) => e.type),
          events.map((e) => e.schemaVersion),
          ids,
          JSON.stringify(events.map((e) => e.data)),
          JSON.stringify(events.map((e) => (e.metadata ? { ...opts.metadata, ...e.metadata } : meta))),
        ],
      }));
    } catch (err) {
      const pgErr = err as { code?: string; constraint?: string };
      if (pgErr.code === '23505' && pgErr.constraint === 'events_stream_version_key') {
        throw new ConcurrencyError(streamId, expectedVersion, undefined, { cause: err });
      }
      throw err;
    }
    if (rows.length === 0) {
      const actual = await this.streamVersion(streamId, opts.client);
      throw new ConcurrencyError(streamId, expectedVersion, actual);
    }
    rows.sort((a, b) => a.stream_version - b.stream_version);
    const result: AppendResult = {
      streamId,
      version: expectedVersion + events.length,
      positions: rows.map((r) => Number(r.position)),
      eventIds: ids,
      types: events.map((e) => e.type),
    };
    if (!opts.client) this.opts.onAppended?.(result);
    return result;
  }

  /** Encodes domain events through their proto contract, then appends them. */
  appendEvents(streamId: string, expectedVersion: number, events: readonly DomainEvent[], opts: AppendOptions = {}): Promise<AppendResult> {
    return this.append(streamId, expectedVersion, events.map(encodeEvent), opts);
  }

  /** Tells the projectors that a transaction with appends in it has committed. */
  appended(result: AppendResult): void {
    this.opts.onAppended?.(result);
  }

  /** The stream's current version (0 when it has no events). */
  async streamVersion(streamId: string, client?: Queryable): Promise<number> {
    const { rows } = await (client ?? this.pool).query<{ version: number }>({ ...STREAM_VERSION, values: [streamId] });
    return rows[0]?.version ?? 0;
  }

  /** The stream's events after `afterVersion` (default: all), in stream order, upcast. */
  async readStream(streamId: string, opts: { afterVersion?: number; client?: Queryable } = {}): Promise<RecordedEvent[]> {
    const { rows } = await (opts.client ?? this.pool).query<EventRow>({ ...READ_STREAM, values: [streamId, opts.afterVersion ?? 0] });
    return rows.map((r) => toRecorded(r, this.catalog));
  }

  /** The events at the given global positions, upcast, in position order. */
  async readPositions(positions: readonly number[], client?: Queryable): Promise<RecordedEvent[]> {
    if (positions.length === 0) return [];
    const { rows } = await (client ?? this.pool).query<EventRow>({ ...READ_POSITIONS, values: [positions] });
    return rows.map((r) => toRecorded(r, this.catalog));
  }

  /**
   * Up to `limit` events after `after`, in (tx, position) order, only from transactions that have
   * ended (see store-sql.ts). With `types`, other events are passed over without being decoded.
   * Run it outside any transaction that has written (its own transaction id would hold the horizon).
   */
  async readAll(after: Checkpoint, limit: number, opts: { types?: ReadonlySet<string>; client?: Queryable } = {}): Promise<ReadAllResult> {
    const types = opts.types ? [...opts.types] : null;
    const { rows } = await (opts.client ?? this.pool).query<EventRow>({ ...READ_ALL, values: [after.tx, after.position, limit, types] });
    const last = rows[rows.length - 1];
    const events: RecordedEvent[] = [];
    // Rows of other types come without their payload; `wanted` tells them from a stored JSON null.
    for (const r of rows) if (r.wanted) events.push(toRecorded(r, this.catalog));
    return { events, next: last ? { tx: last.tx, position: Number(last.position) } : after, scanned: rows.length };
  }
}

function isObject(v: unknown): v is JsonRecord {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function toRecorded(r: EventRow, catalog: EventCatalog): RecordedEvent {
  const stored = isObject(r.data) ? r.data : undefined;
  const { schemaVersion, data } = stored
    ? upcast(r.event_type, r.schema_version, stored, catalog)
    : { schemaVersion: r.schema_version, data: {} };
  return {
    ...(stored ? {} : { malformed: true as const }),
    position: Number(r.position),
    tx: r.tx,
    streamId: r.stream_id,
    streamVersion: r.stream_version,
    type: r.event_type,
    schemaVersion,
    eventId: r.event_id,
    data,
    metadata: r.metadata ?? {},
    recordedAt: r.recorded_ms,
  };
}
