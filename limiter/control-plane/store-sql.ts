/**
 * The SQL of the quota store (schema: migrations/001_quotas.sql, 002_quota_accuracy.sql), kept apart from the code that
 * sequences it. Every statement is parameterised.
 */

/** The NOTIFY channel a committed write wakes every replica on; the payload is the new version. */
export const CHANGES_CHANNEL = 'quota_changes';

const COLUMNS = `subject_id, algorithm, rate, burst, interval_ms, cost, fail_mode, shadow, plan, routes, accuracy, version,
  extract(epoch FROM updated_at)::float8 AS updated_at`;

/** Takes the write lock (the version row) and the next version, with the transaction's time. */
export const NEXT_VERSION = `UPDATE quota_table_version SET version = version + 1
  RETURNING version, extract(epoch FROM now())::float8 AS now`;

export const CURRENT_VERSION = `SELECT version FROM quota_table_version`;

export const SUBJECT_EXISTS = `SELECT 1 FROM quotas WHERE subject_id = $1`;

export const COUNT_PLAN_REFERENCES = `SELECT count(*)::int AS n FROM quotas WHERE rate = 0 AND plan = $1`;

export const UPSERT_QUOTA = `INSERT INTO quotas
    (subject_id, algorithm, rate, burst, interval_ms, cost, fail_mode, shadow, plan, routes, version, updated_at, accuracy)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, to_timestamp($12), $13)
  ON CONFLICT (subject_id) DO UPDATE SET
    algorithm = EXCLUDED.algorithm, rate = EXCLUDED.rate, burst = EXCLUDED.burst,
    interval_ms = EXCLUDED.interval_ms, cost = EXCLUDED.cost, fail_mode = EXCLUDED.fail_mode,
    shadow = EXCLUDED.shadow, plan = EXCLUDED.plan, routes = EXCLUDED.routes, accuracy = EXCLUDED.accuracy,
    version = EXCLUDED.version, updated_at = EXCLUDED.updated_at`;

export const DELETE_QUOTA = `DELETE FROM quotas WHERE subject_id = $1`;

export const INSERT_CHANGE = `INSERT INTO quota_changes (version, subject_id, op, record) VALUES ($1, $2, $3, $4)`;

/** Keeps the newest versions only: deletes every change at or below $1. */
export const PRUNE_CHANGES = `DELETE FROM quota_changes WHERE version <= $1`;

export const NOTIFY = `SELECT pg_notify($1, $2)`;

export const GET_QUOTA = `SELECT ${COLUMNS} FROM quotas WHERE subject_id = $1`;

/** A page in subject_id order (C collation, so the order is bytewise and stable). */
export const LIST_QUOTAS = `SELECT ${COLUMNS} FROM quotas WHERE subject_id > $1 ORDER BY subject_id LIMIT $2`;

/**
 * A page of the subjects starting with a prefix ($2), in subject_id order: the range [$2, $3)
 * ($3 NULL: no upper bound), so the index is scanned only over the matching subjects.
 */
export const LIST_QUOTAS_WITH_PREFIX = `SELECT ${COLUMNS} FROM quotas
  WHERE subject_id > $1 AND subject_id >= $2 AND ($3::text IS NULL OR subject_id < $3) AND starts_with(subject_id, $2)
  ORDER BY subject_id LIMIT $4`;

/**
 * Every plan (subject_id in ['plan:', 'plan;'), a range of the primary key under C collation): the
 * part of the table the control plane holds in memory and sends whole. Key records are looked up.
 */
export const ALL_PLANS = `SELECT ${COLUMNS} FROM quotas WHERE subject_id >= 'plan:' AND subject_id < 'plan;' ORDER BY subject_id`;

/**
 * The records of the subjects in $1 (text[]) by the primary key, with the table version, in one
 * statement so both come from one snapshot: a subject absent from the rows had no record at that
 * version. One row with NULL record columns when none is found.
 */
export const LOOKUP_QUOTAS = `SELECT v.version AS table_version, q.subject_id, q.algorithm, q.rate, q.burst, q.interval_ms, q.cost,
  q.fail_mode, q.shadow, q.plan, q.routes, q.accuracy, q.version, extract(epoch FROM q.updated_at)::float8 AS updated_at
  FROM quota_table_version v LEFT JOIN quotas q ON q.subject_id = ANY($1::text[])`;

export const ALL_CHANGES = `SELECT version, subject_id, op, record FROM quota_changes ORDER BY version`;

/**
 * The current version and the changes after $1, in one statement so both come from one snapshot
 * (a reader never sees a version without the changes up to it). One row with NULL change columns
 * when there are none.
 */
export const CHANGES_SINCE = `SELECT v.version AS current, c.version, c.subject_id, c.op, c.record
  FROM quota_table_version v LEFT JOIN quota_changes c ON c.version > $1
  ORDER BY c.version`;
