/** Segments in PostgreSQL (migration 080): the SQL of reading a segment, putting a rule and the steps of an upload. */
import { PlatformError } from '../../shared/errors.js';
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import { ruleCondition, sameRule, type SegmentRule } from './rule.js';

export type Queryable = Pool | PoolClient;

export type SegmentKind = 'list' | 'rule';

/** A segment as the API and the campaign fan-out see it. */
export interface SegmentView {
  id: string;
  kind: SegmentKind;
  /** list: the live version; rule: bumped on every change of the rule. */
  version: number;
  /** list: the live version's members; rule: the profiles matching now (counted on every read). */
  size: number;
  rule?: SegmentRule;
  updatedAt: Date;
  updatedBy: string | null;
}

interface SegmentRow {
  id: string;
  kind: SegmentKind;
  rule: SegmentRule | null;
  version: number;
  size: string;
  updated_at: Date;
  updated_by: string | null;
}

const COLUMNS = 'id, kind, rule, version, size, updated_at, updated_by';

function toView(r: SegmentRow): SegmentView {
  const v: SegmentView = {
    id: r.id,
    kind: r.kind,
    version: r.version,
    size: Number(r.size),
    updatedAt: r.updated_at,
    updatedBy: r.updated_by,
  };
  if (r.rule !== null) v.rule = r.rule;
  return v;
}

/** The profiles a rule matches now. */
export async function countRule(db: Queryable, rule: SegmentRule): Promise<number> {
  const c = ruleCondition(rule, 1);
  const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM user_profiles WHERE ${c.sql}`, c.params);
  return Number(rows[0]!.n);
}

export interface LoadOptions {
  /**
   * Lock the segment's row `FOR SHARE` until the caller's transaction ends (pass a client inside a
   * transaction): an upload's switch waits for it, so a version pinned in that transaction is never
   * retired and cleaned up before the pin is visible (cleanup.ts).
   */
  lock?: boolean;
}

/** The segment, or undefined; a rule segment's size is counted now. */
export async function loadSegment(db: Queryable, id: string, opts: LoadOptions = {}): Promise<SegmentView | undefined> {
  const { rows } = await db.query<SegmentRow>(`SELECT ${COLUMNS} FROM segments WHERE id = $1${opts.lock ? ' FOR SHARE' : ''}`, [id]);
  const row = rows[0];
  if (!row) return undefined;
  const view = toView(row);
  if (view.kind === 'rule' && view.rule) view.size = await countRule(db, view.rule);
  return view;
}

function kindConflict(id: string, kind: SegmentKind): PlatformError {
  return new PlatformError('segment_kind_conflict', {
    detail: `segment ${id} is a ${kind} segment; a segment's kind never changes`,
    extra: { kind },
  });
}

/**
 * Creates or changes a rule segment: 201-style `created` for a new one; an unchanged rule changes
 * nothing (the version stays). @throws PlatformError segment_kind_conflict for a list segment
 */
export async function putRuleSegment(
  pool: Pool,
  id: string,
  rule: SegmentRule,
  by: string,
): Promise<{ created: boolean; view: SegmentView }> {
  const view = await withTransaction(pool, async (c) => {
    const ins = await c.query<SegmentRow>(
      `INSERT INTO segments (id, kind, rule, version, updated_by) VALUES ($1, 'rule', $2, 1, $3)
       ON CONFLICT (id) DO NOTHING RETURNING ${COLUMNS}`,
      [id, JSON.stringify(rule), by],
    );
    if (ins.rows[0]) return { created: true, row: ins.rows[0] };
    const { rows } = await c.query<SegmentRow>(`SELECT ${COLUMNS} FROM segments WHERE id = $1 FOR UPDATE`, [id]);
    const row = rows[0]!;
    if (row.kind !== 'rule') throw kindConflict(id, row.kind);
    if (row.rule && sameRule(row.rule, rule)) return { created: false, row };
    const upd = await c.query<SegmentRow>(
      `UPDATE segments SET rule = $2, version = version + 1, updated_at = now(), updated_by = $3 WHERE id = $1 RETURNING ${COLUMNS}`,
      [id, JSON.stringify(rule), by],
    );
    return { created: false, row: upd.rows[0]! };
  });
  const v = toView(view.row);
  v.size = await countRule(pool, rule);
  return { created: view.created, view: v };
}

/**
 * Starts an upload: a new `uploading` version of a list segment (the segment's row is written only
 * when the upload is switched in). An `uploading` version untouched for `staleMs` is abandoned
 * first (its writer died). @throws PlatformError segment_kind_conflict, segment_upload_in_progress
 */
export async function beginUpload(pool: Pool, id: string, by: string, staleMs: number): Promise<number> {
  return withTransaction(pool, async (c) => {
    const { rows } = await c.query<{ kind: SegmentKind }>('SELECT kind FROM segments WHERE id = $1', [id]);
    if (rows[0] && rows[0].kind !== 'list') throw kindConflict(id, rows[0].kind);
    await c.query(
      `UPDATE segment_versions SET state = 'abandoned'
        WHERE segment_id = $1 AND state = 'uploading' AND touched_at < now() - make_interval(secs => $2)`,
      [id, staleMs / 1000],
    );
    // The partial unique index allows one `uploading` row per segment; a concurrent begin loses there.
    const ins = await c.query<{ version: number }>(
      `INSERT INTO segment_versions (segment_id, version, state, created_by)
       SELECT $1, coalesce(max(version), 0) + 1, 'uploading', $2 FROM segment_versions WHERE segment_id = $1
       ON CONFLICT DO NOTHING RETURNING version`,
      [id, by],
    );
    if (!ins.rows[0]) {
      throw new PlatformError('segment_upload_in_progress', {
        detail: `another upload of segment ${id} is in progress`,
        headers: { 'retry-after': '5' },
        extra: { retryable: true },
      });
    }
    return ins.rows[0].version;
  });
}

/** Raised when an upload's version is no longer `uploading` (abandoned by a takeover). */
export class UploadLostError extends Error {
  constructor(id: string, version: number) {
    super(`the upload of segment ${id} version ${version} was abandoned while it ran`);
    this.name = 'UploadLostError';
  }
}

/**
 * Stores a batch of ids in an uploading version (duplicates collapse) and adds the ids it inserted
 * to the version's size; touches the version (the writer's heartbeat).
 */
export async function storeBatch(db: Queryable, id: string, version: number, userIds: readonly string[]): Promise<void> {
  // The version's row is locked first: an abandon (a takeover, the clean-up) either waits for this
  // batch or has happened and nothing is inserted, so no member lands after a version is purged.
  const { rows } = await db.query(
    `WITH v AS (
       SELECT 1 FROM segment_versions WHERE segment_id = $1 AND version = $2 AND state = 'uploading' FOR UPDATE),
     ins AS (
       INSERT INTO segment_members (segment_id, version, user_id)
       SELECT $1, $2, u FROM unnest($3::text[]) AS u WHERE EXISTS (SELECT 1 FROM v)
       ON CONFLICT DO NOTHING RETURNING 1)
     UPDATE segment_versions SET size = size + (SELECT count(*) FROM ins), touched_at = now()
      WHERE segment_id = $1 AND version = $2 AND state = 'uploading' RETURNING size`,
    [id, version, userIds],
  );
  if (!rows[0]) throw new UploadLostError(id, version);
}

/**
 * Switches a complete upload in, in one transaction: the version `live` with its size, the previous
 * live one `retired`, the segment's row (created if new) pointing at it.
 * @throws PlatformError segment_kind_conflict (a rule segment appeared meanwhile); UploadLostError
 */
export async function switchVersion(pool: Pool, id: string, version: number, by: string): Promise<{ created: boolean; view: SegmentView }> {
  return withTransaction(pool, async (c) => {
    const ins = await c.query(
      `INSERT INTO segments (id, kind, updated_by) VALUES ($1, 'list', $2) ON CONFLICT (id) DO NOTHING RETURNING id`,
      [id, by],
    );
    const created = ins.rows.length > 0;
    // Waits for a fan-out planning in progress that holds the row FOR SHARE (loadSegment lock).
    const { rows } = await c.query<{ kind: SegmentKind }>('SELECT kind FROM segments WHERE id = $1 FOR UPDATE', [id]);
    if (rows[0]!.kind !== 'list') throw kindConflict(id, rows[0]!.kind);
    const live = await c.query<{ size: string }>(
      `UPDATE segment_versions SET state = 'live', completed_at = now()
        WHERE segment_id = $1 AND version = $2 AND state = 'uploading' RETURNING size`,
      [id, version],
    );
    if (!live.rows[0]) throw new UploadLostError(id, version);
    await c.query(`UPDATE segment_versions SET state = 'retired' WHERE segment_id = $1 AND state = 'live' AND version <> $2`, [
      id,
      version,
    ]);
    const upd = await c.query<SegmentRow>(
      `UPDATE segments SET version = $2, size = $3, updated_at = now(), updated_by = $4 WHERE id = $1 RETURNING ${COLUMNS}`,
      [id, version, live.rows[0].size, by],
    );
    return { created, view: toView(upd.rows[0]!) };
  });
}

/**
 * Deletes a segment; false when there is none. A list's live version is retired, so the clean-up
 * deletes its members once no open fan-out pins it (a fan-out planning now holds the row FOR
 * SHARE, and this waits for it). An upload in progress is left to finish: it creates the segment
 * again, as a new version.
 */
export async function deleteSegment(pool: Pool, id: string): Promise<boolean> {
  return withTransaction(pool, async (c) => {
    const del = await c.query('DELETE FROM segments WHERE id = $1 RETURNING kind', [id]);
    if (del.rowCount === 0) return false;
    await c.query(`UPDATE segment_versions SET state = 'retired' WHERE segment_id = $1 AND state = 'live'`, [id]);
    return true;
  });
}

/** Marks a failed upload `abandoned`; the clean-up deletes its members. */
export async function abandonUpload(db: Queryable, id: string, version: number): Promise<void> {
  await db.query(`UPDATE segment_versions SET state = 'abandoned' WHERE segment_id = $1 AND version = $2 AND state = 'uploading'`, [
    id,
    version,
  ]);
}

/**
 * A page of segments in id byte order, after `after` (the last id of the previous page). A rule
 * segment's size is not counted here (a count over the profiles per segment would make a list page
 * as slow as the number of rule segments): it is `null`, and counted when the segment is read.
 */
export async function listSegments(
  db: Queryable,
  q: { after?: string; limit: number },
): Promise<{ segments: (Omit<SegmentView, 'size'> & { size: number | null })[]; more: boolean }> {
  const params: unknown[] = [q.limit + 1];
  const where = q.after === undefined ? '' : `WHERE id COLLATE "C" > $${params.push(q.after)}`;
  const { rows } = await db.query<SegmentRow>(`SELECT ${COLUMNS} FROM segments ${where} ORDER BY id COLLATE "C" LIMIT $1`, params);
  const page = rows.slice(0, q.limit).map((r) => {
    const v = toView(r);
    return { ...v, size: v.kind === 'rule' ? null : v.size };
  });
  return { segments: page, more: rows.length > q.limit };
}

/** One stored version of a list segment. */
export interface SegmentVersionView {
  version: number;
  /** uploading, live, retired or abandoned. */
  state: string;
  size: number;
  createdBy: string | null;
  createdAt: Date;
  completedAt: Date | null;
  /** Its members have been deleted by the clean-up. */
  purged: boolean;
}

/** A list segment's versions, newest first, at most `limit` (a rule segment keeps none). */
export async function listVersions(db: Queryable, id: string, limit: number): Promise<SegmentVersionView[]> {
  const { rows } = await db.query<{
    version: number;
    state: string;
    size: string;
    created_by: string | null;
    created_at: Date;
    completed_at: Date | null;
    purged_at: Date | null;
  }>(
    `SELECT version, state, size, created_by, created_at, completed_at, purged_at FROM segment_versions
      WHERE segment_id = $1 ORDER BY version DESC LIMIT $2`,
    [id, limit],
  );
  return rows.map((r) => ({
    version: r.version,
    state: r.state,
    size: Number(r.size),
    createdBy: r.created_by,
    createdAt: r.created_at,
    completedAt: r.completed_at,
    purged: r.purged_at !== null,
  }));
}
