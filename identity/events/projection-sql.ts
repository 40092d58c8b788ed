/** SQL of the projector bookkeeping: generations, checkpoints, dead letters, locks, lag. */
import { createHash } from 'node:crypto';

export const GET_PROJECTION = {
  name: 'projections_get',
  text: `SELECT live_generation, live_code_version, building_generation, building_code_version
  FROM projections WHERE projector = $1`,
};

export interface ProjectionRow {
  live_generation: number;
  live_code_version: number;
  building_generation: number | null;
  building_code_version: number | null;
}

export const INSERT_PROJECTION = `INSERT INTO projections (projector, live_generation, live_code_version) VALUES ($1, $2, $3)`;

export const START_BUILDING = `UPDATE projections SET building_generation = $2, building_code_version = $3 WHERE projector = $1`;

export const SWITCH_LIVE = `UPDATE projections
   SET live_generation = building_generation, live_code_version = building_code_version,
       building_generation = NULL, building_code_version = NULL, switched_at = now()
 WHERE projector = $1 AND building_generation = $2`;

export const CREATE_CHECKPOINT = `INSERT INTO projection_checkpoints (consumer) VALUES ($1) ON CONFLICT (consumer) DO NOTHING`;

export const GET_CHECKPOINT = {
  name: 'checkpoints_get',
  text: 'SELECT tx::text AS tx, position FROM projection_checkpoints WHERE consumer = $1',
};

export const SET_CHECKPOINT = {
  name: 'checkpoints_set',
  text: `UPDATE projection_checkpoints SET tx = $2::xid8, position = $3, events_applied = events_applied + $4, updated_at = now()
 WHERE consumer = $1`,
};

export const DEAD_LETTER = {
  name: 'dead_letters_put',
  text: `INSERT INTO projection_dead_letters (projector, generation, position, event_id, event_type, attempts, error)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (projector, generation, event_id) DO UPDATE
  SET attempts = projection_dead_letters.attempts + EXCLUDED.attempts, error = EXCLUDED.error, failed_at = now(),
      status = 'open', resolved_at = NULL`,
};

/** Dead letters of a generation that has been replaced: its rebuild met the event again. */
export const SUPERSEDE_DEAD_LETTERS = `UPDATE projection_dead_letters SET status = 'superseded', resolved_at = now()
 WHERE projector = $1 AND generation < $2 AND status = 'open'`;

/**
 * $1 consumer names. For each, the age in seconds of the first committed event after its checkpoint
 * (0 when none). Committed events still behind a long transaction's horizon count: they are lag.
 */
export const LAG = `SELECT c.consumer,
       COALESCE(EXTRACT(EPOCH FROM (clock_timestamp() - e.recorded_at))::float8, 0) AS lag
  FROM projection_checkpoints c
  LEFT JOIN LATERAL (
    SELECT recorded_at FROM events
     WHERE (tx, position) > (c.tx, c.position)
     ORDER BY tx, position LIMIT 1
  ) e ON true
 WHERE c.consumer = ANY ($1::text[])`;

// Advisory locks in their own two-int key space ('proj'), one key per projector and role: the live
// consumer and the rebuilding one of a projector run concurrently; a switch holds both.
const LOCK_NAMESPACE = 0x70726f6a;

export type ConsumerRole = 'live' | 'build';

export function lockKey(projector: string, role: ConsumerRole): number {
  return createHash('sha256').update(`projection:${projector}:${role}`).digest().readInt32BE(0);
}

export const TRY_LOCK = { name: 'projection_try_lock', text: 'SELECT pg_try_advisory_xact_lock($1, $2) AS ok' };
export const LOCK = { name: 'projection_lock', text: 'SELECT pg_advisory_xact_lock($1, $2)' };
export const LOCK_NS = LOCK_NAMESPACE;
