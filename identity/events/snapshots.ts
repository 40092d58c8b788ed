/**
 * Snapshots of aggregate state: the latest one per stream, written every N events so that loading a
 * long stream reads the snapshot and only the events after it. A snapshot is an optimisation, never
 * a source of truth: one of an unknown format is ignored and the stream replayed in full.
 */
import type { JsonRecord } from '../../shared/proto-json.js';
import type { Queryable } from './event-store.js';

export interface Snapshot {
  readonly streamId: string;
  readonly aggregate: string;
  /** The stream version the state includes. */
  readonly version: number;
  readonly format: number;
  readonly state: JsonRecord;
}

const GET = {
  name: 'snapshots_get',
  text: 'SELECT aggregate, stream_version, format, state FROM snapshots WHERE stream_id = $1',
};

// Only ever moves forward: a slow writer cannot replace a newer snapshot with an older one.
const PUT = {
  name: 'snapshots_put',
  text: `INSERT INTO snapshots (stream_id, aggregate, stream_version, format, state) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (stream_id) DO UPDATE SET aggregate = EXCLUDED.aggregate, stream_version = EXCLUDED.stream_version,
  format = EXCLUDED.format, state = EXCLUDED.state, taken_at = now()
 WHERE snapshots.stream_version < EXCLUDED.stream_version OR snapshots.format <> EXCLUDED.format`,
};

export async function getSnapshot(db: Queryable, streamId: string): Promise<Snapshot | undefined> {
  const { rows } = await db.query<{ aggregate: string; stream_version: number; format: number; state: JsonRecord }>({
    ...GET,
    values: [streamId],
  });
  const r = rows[0];
  return r ? { streamId, aggregate: r.aggregate, version: r.stream_version, format: r.format, state: r.state } : undefined;
}

export async function putSnapshot(db: Queryable, s: Snapshot): Promise<void> {
  await db.query({ ...PUT, values: [s.streamId, s.aggregate, s.version, s.format, JSON.stringify(s.state)] });
}

/** True when appending took the stream across a multiple of `every` (so a snapshot is due). */
export function snapshotDue(fromVersion: number, toVersion: number, every: number): boolean {
  return every > 0 && Math.floor(toVersion / every) > Math.floor(fromVersion / every);
}
