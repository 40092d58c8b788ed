/**
 * The durable quota table in PostgreSQL: writes that take the next global version, the change log
 * that lets a sidecar catch up by deltas, and the reads the admin API and the sync mirror need.
 *
 * A write is one transaction that first bumps the single version row (so writes are serialised
 * and every committed change gets exactly the next version, in commit order), then checks what
 * depends on other rows (a referenced plan exists; a deleted plan has no references), writes the
 * record and its change-log entry, prunes the log to `changelogKeep` versions, and NOTIFYs
 * {@link CHANGES_CHANNEL} with the version. A failed check rolls back, so no version is skipped.
 *
 * Failures of the database itself surface as `dependency_unavailable` (503 / UNAVAILABLE).
 */
import { create } from '@bufbuild/protobuf';
import type pg from 'pg';
import {
  AccuracySchema,
  AlgorithmSchema,
  FailModeSchema,
  QuotaSchema,
  RouteRuleSchema,
  type Quota,
} from '../../proto/gen/quota/v1/quota_pb.js';
import { withTransaction } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';
import { enumFromJson, enumToJson, fromJson, toJson } from '../../shared/proto-json.js';
import type { ValidatedQuota } from './quota-record.js';
import { asStoreError } from './store-errors.js';
import * as sql from './store-sql.js';
import { planOfSubject } from './subject.js';

export { CHANGES_CHANNEL } from './store-sql.js';

/** One entry of the change log. */
export interface Change {
  version: number;
  subjectId: string;
  /** The record as stored by this change; undefined for a delete. */
  record: Quota | undefined;
}

/** The plans at one version, with the change log as it stood then (key records stay in PostgreSQL). */
export interface TableState {
  version: number;
  /** Every `plan:` record. */
  plans: Quota[];
  /** Ascending and contiguous, ending at `version` (empty when nothing was ever written). */
  changes: Change[];
}

export interface PutResult {
  quota: Quota;
  version: number;
  /** True when the subject had no record before. */
  created: boolean;
}

export interface DeleteResult {
  deleted: boolean;
  /** The version of the delete, or the current version when nothing was deleted. */
  version: number;
}

export interface QuotaStoreOptions {
  /** Versions kept in the change log (CONTROL_PLANE_CHANGELOG_KEEP). */
  changelogKeep: number;
  /** NOTIFY on commit. Default true; false only to test that polling alone suffices. */
  notify?: boolean;
}

interface QuotaRow {
  subject_id: string;
  algorithm: string | null;
  rate: string;
  burst: string;
  interval_ms: string;
  cost: string;
  fail_mode: string | null;
  shadow: boolean;
  plan: string;
  routes: unknown[];
  accuracy: string | null;
  version: string;
  updated_at: number;
}

interface ChangeRow {
  version: string;
  subject_id: string;
  op: 'upsert' | 'delete';
  record: unknown;
}

export class QuotaStore {
  private readonly notify: boolean;

  constructor(
    private readonly pool: pg.Pool,
    private readonly opts: QuotaStoreOptions,
  ) {
    this.notify = opts.notify ?? true;
  }

  /**
   * Creates or replaces a record (already validated). `fieldPrefix` names fields in errors found
   * here (`quota.` for gRPC).
   *
   * @throws PlatformError `invalid_field` (`plan`) when a referenced plan does not exist;
   *   `dependency_unavailable` when the database is.
   */
  async put(input: ValidatedQuota, fieldPrefix = ''): Promise<PutResult> {
    return this.write(async (client) => {
      const { version, now } = await nextVersion(client);
      if (input.referencedPlan !== undefined) {
        const plan = await client.query(sql.SUBJECT_EXISTS, [input.referencedPlan]);
        if (plan.rowCount === 0)
          throw invalidField(`${fieldPrefix}plan`, `there is no plan ${input.quota.plan} (create ${input.referencedPlan} first)`);
      }
      const existed = await client.query(sql.SUBJECT_EXISTS, [input.quota.subjectId]);
      const quota = create(QuotaSchema, { ...input.quota, version: BigInt(version), updatedAt: now });
      await client.query(sql.UPSERT_QUOTA, rowParams(quota, now));
      await this.logChange(client, version, quota.subjectId, quota);
      return { quota, version, created: existed.rowCount === 0 };
    });
  }

  /**
   * Deletes a subject's record. Nothing changes (and no version is taken) when there is none.
   *
   * @throws PlatformError `invalid_field` (`subject_id`) when deleting a plan that records still
   *   reference; `dependency_unavailable`.
   */
  async delete(subjectId: string, fieldPrefix = ''): Promise<DeleteResult> {
    return this.write(async (client) => {
      const { version } = await nextVersion(client);
      const plan = planOfSubject(subjectId);
      if (plan !== undefined) {
        const refs = await client.query<{ n: number }>(sql.COUNT_PLAN_REFERENCES, [plan]);
        const n = refs.rows[0]?.n ?? 0;
        if (n > 0)
          throw invalidField(
            `${fieldPrefix}subject_id`,
            `plan ${plan} is referenced by ${n} quota${n === 1 ? '' : 's'}; move them to another plan first`,
          );
      }
      const res = await client.query(sql.DELETE_QUOTA, [subjectId]);
      if (res.rowCount === 0) throw new NothingToDelete(version - 1);
      await this.logChange(client, version, subjectId, undefined);
      return { deleted: true, version };
    }).catch((err: unknown) => {
      if (err instanceof NothingToDelete) return { deleted: false, version: err.current };
      throw err;
    });
  }

  async get(subjectId: string): Promise<Quota | undefined> {
    const res = await this.read(() => this.pool.query<QuotaRow>(sql.GET_QUOTA, [subjectId]));
    const row = res.rows[0];
    return row === undefined ? undefined : quotaFromRow(row);
  }

  /** Up to `limit` records with subject_id after `after`, in subject_id order (bytewise). */
  async list(after: string, limit: number): Promise<Quota[]> {
    const res = await this.read(() => this.pool.query<QuotaRow>(sql.LIST_QUOTAS, [after, limit]));
    return res.rows.map(quotaFromRow);
  }

  /**
   * Up to `limit` records whose subject_id starts with `prefix` and sorts after `after`, in
   * subject_id order (bytewise).
   */
  async listWithPrefix(prefix: string, after: string, limit: number): Promise<Quota[]> {
    if (prefix === '') return this.list(after, limit);
    const res = await this.read(() => this.pool.query<QuotaRow>(sql.LIST_QUOTAS_WITH_PREFIX, [after, prefix, prefixEnd(prefix), limit]));
    return res.rows.map(quotaFromRow);
  }

  async currentVersion(): Promise<number> {
    const res = await this.read(() => this.pool.query<{ version: string }>(sql.CURRENT_VERSION));
    return Number(res.rows[0]?.version ?? 0);
  }

  /**
   * The records of `subjectIds` by primary key, and the table version they were read at (one
   * statement, one snapshot). Subjects without a record are listed in `unknown`.
   */
  async lookup(subjectIds: readonly string[]): Promise<{ version: number; quotas: Quota[]; unknown: string[] }> {
    const res = await this.read(() =>
      this.pool.query<Omit<QuotaRow, 'subject_id'> & { subject_id: string | null; table_version: string }>(sql.LOOKUP_QUOTAS, [subjectIds]),
    );
    const quotas: Quota[] = [];
    const found = new Set<string>();
    for (const row of res.rows) {
      if (row.subject_id === null) continue;
      found.add(row.subject_id);
      quotas.push(quotaFromRow(row as QuotaRow));
    }
    const unknown = [...new Set(subjectIds)].filter((id) => !found.has(id));
    return { version: Number(res.rows[0]?.table_version ?? 0), quotas, unknown };
  }

  /** The plans, the version and the change log, from one consistent snapshot. */
  async loadState(): Promise<TableState> {
    const client = await this.read(() => this.pool.connect());
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const v = await client.query<{ version: string }>(sql.CURRENT_VERSION);
      const plans = await client.query<QuotaRow>(sql.ALL_PLANS);
      const changes = await client.query<ChangeRow>(sql.ALL_CHANGES);
      await client.query('COMMIT');
      client.release();
      return { version: Number(v.rows[0]?.version ?? 0), plans: plans.rows.map(quotaFromRow), changes: changes.rows.map(changeFromRow) };
    } catch (err) {
      client.release(err instanceof Error ? err : true);
      throw asStoreError(err);
    }
  }

  /**
   * The current version and the changes after `since` (ascending), from one snapshot. The changes
   * may start later than `since + 1` when the log was pruned past it.
   */
  async changesSince(since: number): Promise<{ current: number; changes: Change[] }> {
    const res = await this.read(() => this.pool.query<ChangeRow & { current: string }>(sql.CHANGES_SINCE, [since]));
    const current = Number(res.rows[0]?.current ?? 0);
    return { current, changes: res.rows.filter((r) => r.version !== null).map(changeFromRow) };
  }

  private async logChange(client: pg.PoolClient, version: number, subjectId: string, record: Quota | undefined): Promise<void> {
    await client.query(sql.INSERT_CHANGE, [version, subjectId, record ? 'upsert' : 'delete', record ? toJson(QuotaSchema, record) : null]);
    if (version > this.opts.changelogKeep) await client.query(sql.PRUNE_CHANGES, [version - this.opts.changelogKeep]);
    if (this.notify) await client.query(sql.NOTIFY, [sql.CHANGES_CHANNEL, String(version)]);
  }

  private async write<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    try {
      return await withTransaction(this.pool, fn);
    } catch (err) {
      throw asStoreError(err);
    }
  }

  private async read<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw asStoreError(err);
    }
  }
}

/**
 * Rolls a delete of a missing subject back (giving its version back) and reports nothing deleted.
 * Deliberately not a `CodedError` with a registry code: it is control flow, not a failure. It is
 * thrown only to abort the transaction in `delete` and caught by the same method, which turns it
 * into `{ deleted: false }`; no caller, log or wire ever sees it.
 */
class NothingToDelete extends Error {
  constructor(readonly current: number) {
    super('nothing to delete');
  }
}

async function nextVersion(client: pg.PoolClient): Promise<{ version: number; now: number }> {
  const res = await client.query<{ version: string; now: number }>(sql.NEXT_VERSION);
  const row = res.rows[0];
  if (!row) throw new Error('quota_table_version has no row (migration 001 not applied?)');
  return { version: Number(row.version), now: row.now };
}

/**
 * The first string after every string starting with `prefix` (bytewise), or null when there is
 * none: the last character below DEL goes one up and the rest is cut (subject ids are visible
 * ASCII, so nothing at or above DEL can follow).
 */
function prefixEnd(prefix: string): string | null {
  for (let i = prefix.length - 1; i >= 0; i--) {
    const c = prefix.charCodeAt(i);
    if (c < 0x7f) return prefix.slice(0, i) + String.fromCharCode(c + 1);
  }
  return null;
}

function rowParams(q: Quota, now: number): unknown[] {
  return [
    q.subjectId,
    q.algorithm === 0 ? null : (enumToJson(AlgorithmSchema, q.algorithm) ?? null),
    q.rate,
    q.burst,
    q.intervalMs,
    q.cost,
    q.failMode === 0 ? null : (enumToJson(FailModeSchema, q.failMode) ?? null),
    q.shadow,
    q.plan,
    JSON.stringify(q.routes.map((r) => toJson(RouteRuleSchema, r))),
    q.version,
    now,
    q.accuracy === 0 ? null : (enumToJson(AccuracySchema, q.accuracy) ?? null),
  ];
}

function quotaFromRow(row: QuotaRow): Quota {
  return create(QuotaSchema, {
    subjectId: row.subject_id,
    algorithm: row.algorithm === null ? 0 : (enumFromJson(AlgorithmSchema, row.algorithm) ?? 0),
    rate: Number(row.rate),
    burst: Number(row.burst),
    intervalMs: Number(row.interval_ms),
    cost: Number(row.cost),
    failMode: row.fail_mode === null ? 0 : (enumFromJson(FailModeSchema, row.fail_mode) ?? 0),
    shadow: row.shadow,
    plan: row.plan,
    routes: row.routes.map((r) => fromJson(RouteRuleSchema, r)),
    accuracy: row.accuracy === null ? 0 : (enumFromJson(AccuracySchema, row.accuracy) ?? 0),
    version: BigInt(row.version),
    updatedAt: row.updated_at,
  });
}

function changeFromRow(row: ChangeRow): Change {
  return {
    version: Number(row.version),
    subjectId: row.subject_id,
    record: row.op === 'upsert' ? fromJson(QuotaSchema, row.record) : undefined,
  };
}
