/**
 * The event store's SQL, as named (server-side prepared) statements.
 *
 * Appends are one statement: the rows are inserted only when the stream is at the expected version
 * (the guard sub-select), and the unique (stream_id, stream_version) constraint settles the race
 * between two writers that both passed the guard: the second blocks on the first's index entry and
 * then fails with a unique violation. Either way exactly one writer wins.
 *
 * Reading the whole log in order is the subtle part. `position` comes from a sequence, allocated
 * when a row is inserted, not when its transaction commits: a slow transaction can commit position
 * 10 after a fast one committed 11. A reader that remembers "I have seen up to 11" skips 10 forever.
 * So a reader (1) only reads rows whose writing transaction is older than every transaction still
 * running, `tx < pg_snapshot_xmin(pg_current_snapshot())` — such a transaction has ended, and no
 * transaction that starts later can get a smaller id — and (2) walks the log in (tx, position)
 * order and remembers the (tx, position) pair it reached. Every row a later read can see is then
 * strictly after the checkpoint. No lock serialises appends; the price is that one long-running
 * transaction anywhere on the server holds readers back until it ends (the lag metric shows it).
 */

const COLUMNS = `position, tx::text AS tx, stream_id, stream_version, event_type, schema_version, event_id,
  data, metadata, (extract(epoch FROM recorded_at) * 1000)::float8 AS recorded_ms`;

/**
 * $1 stream id, $2 expected version, $3 types, $4 schema versions, $5 event ids, $6 the payloads
 * and $7 the metadata, each as one JSON array (one document to parse instead of an array literal of
 * escaped documents: about a fifth less work per append). Returns one row per event inserted; none
 * when the guard failed.
 */
export const APPEND = {
  name: 'events_append',
  text: `INSERT INTO events (stream_id, stream_version, event_type, schema_version, event_id, data, metadata)
SELECT $1, $2::int + e.n::int, e.t, e.sv, e.id, e.d, e.m
  FROM ROWS FROM (unnest($3::text[]), unnest($4::smallint[]), unnest($5::uuid[]),
                  jsonb_array_elements($6::jsonb), jsonb_array_elements($7::jsonb)) WITH ORDINALITY AS e(t, sv, id, d, m, n)
 WHERE (SELECT COALESCE(max(stream_version), 0) FROM events WHERE stream_id = $1) = $2::int
RETURNING position, stream_version`,
};

/** $1 stream id. */
export const STREAM_VERSION = {
  name: 'events_stream_version',
  text: `SELECT COALESCE(max(stream_version), 0)::int AS version FROM events WHERE stream_id = $1`,
};

/** $1 stream id, $2 read events after this stream version. */
export const READ_STREAM = {
  name: 'events_read_stream',
  text: `SELECT ${COLUMNS} FROM events WHERE stream_id = $1 AND stream_version > $2 ORDER BY stream_version`,
};

/**
 * $1 checkpoint tx, $2 checkpoint position, $3 limit, $4 the event types whose payloads to return
 * (NULL: all). Rows of other types come back without `data` and `metadata`: the reader passes them
 * without decoding them. The columns are qualified on purpose: a bare `ORDER BY tx` would sort by
 * the output column `tx` (text: '10' < '9') instead of the xid8, and could not use the index.
 */
export const READ_ALL = {
  name: 'events_read_all',
  text: `SELECT position, tx::text AS tx, stream_id, stream_version, event_type, schema_version, event_id,
  ($4::text[] IS NULL OR event_type = ANY ($4::text[])) AS wanted,
  CASE WHEN $4::text[] IS NULL OR event_type = ANY ($4::text[]) THEN data END AS data,
  CASE WHEN $4::text[] IS NULL OR event_type = ANY ($4::text[]) THEN metadata END AS metadata,
  (extract(epoch FROM recorded_at) * 1000)::float8 AS recorded_ms
  FROM events
 WHERE (events.tx, events.position) > ($1::xid8, $2::bigint)
   AND events.tx < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
 ORDER BY events.tx, events.position
 LIMIT $3`,
};

/** $1 positions (bigint[]). */
export const READ_POSITIONS = {
  name: 'events_read_positions',
  text: `SELECT ${COLUMNS} FROM events WHERE position = ANY ($1::bigint[]) ORDER BY position`,
};

/** The row shape of the reads above. */
export interface EventRow {
  position: string;
  tx: string;
  stream_id: string;
  stream_version: number;
  event_type: string;
  schema_version: number;
  event_id: string;
  /** The payload as stored: an object for every event written through the codec, but a row written by other means may hold anything (JSON null). */
  data: unknown;
  metadata: Record<string, unknown> | null;
  recorded_ms: number;
  /** READ_ALL only: the row's type was asked for, so `data` is its payload (not a NULL left out). */
  wanted?: boolean;
}
