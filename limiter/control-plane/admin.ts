/**
 * The admin operations behind both transports (gRPC QuotaAdminService and the internal HTTP API):
 * validate, write through the store, move the in-memory table on at once, and wait for the
 * connected sidecars to ack the new version before answering.
 */
import type { Quota } from '../../proto/gen/quota/v1/quota_pb.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { hashSubject, type Logger } from '../../shared/log.js';
import type { QuotaMirror } from './mirror.js';
import { validateQuota } from './quota-record.js';
import type { SidecarRegistry } from './sidecars.js';
import type { QuotaStore } from './store.js';
import { checkSubjectId } from './subject.js';

/** Longest ack wait a caller may ask for. */
export const MAX_ACK_TIMEOUT_MS = 60_000;
export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

export interface WriteOptions {
  /** Names fields in errors: `quota.` for gRPC, empty for HTTP bodies. */
  fieldPrefix?: string;
  /** Ack wait in ms; 0 or undefined takes the configured default (CONTROL_PLANE_ACK_TIMEOUT). */
  ackTimeoutMs?: number;
  /** Who asked, for the audit line. */
  by?: string;
}

export interface PutOutcome {
  quota: Quota;
  version: number;
  created: boolean;
  acked: string[];
  lagging: string[];
}

export interface DeleteOutcome {
  deleted: boolean;
  version: number;
  acked: string[];
  lagging: string[];
}

export interface QuotaAdminDeps {
  store: QuotaStore;
  mirror: QuotaMirror;
  sidecars: SidecarRegistry;
  log: Logger;
  defaultAckTimeoutMs: number;
}

export class QuotaAdmin {
  constructor(private readonly deps: QuotaAdminDeps) {}

  async put(input: Quota, opts: WriteOptions = {}): Promise<PutOutcome> {
    const prefix = opts.fieldPrefix ?? '';
    const timeout = this.ackTimeout(opts.ackTimeoutMs);
    const validated = validateQuota(input, prefix);
    const res = await this.deps.store.put(validated, prefix);
    const wait = this.afterCommit(res.version, { version: res.version, subjectId: res.quota.subjectId, record: res.quota }, timeout);
    this.deps.log.info({ subject: logSubject(res.quota.subjectId), version: res.version, created: res.created, by: opts.by }, 'quota put');
    const { acked, lagging } = await wait;
    return { quota: res.quota, version: res.version, created: res.created, acked, lagging };
  }

  async get(subjectId: string, field = 'subject_id'): Promise<Quota> {
    checkSubjectId(subjectId, field);
    const q = await this.deps.store.get(subjectId);
    if (!q) throw new PlatformError('not_found', { detail: 'no quota for this subject' });
    return q;
  }

  async delete(subjectId: string, opts: WriteOptions = {}): Promise<DeleteOutcome> {
    const prefix = opts.fieldPrefix ?? '';
    checkSubjectId(subjectId, `${prefix}subject_id`);
    const timeout = this.ackTimeout(opts.ackTimeoutMs);
    const res = await this.deps.store.delete(subjectId, prefix);
    if (!res.deleted) return { deleted: false, version: res.version, acked: [], lagging: [] };
    const wait = this.afterCommit(res.version, { version: res.version, subjectId, record: undefined }, timeout);
    this.deps.log.info({ subject: logSubject(subjectId), version: res.version, by: opts.by }, 'quota deleted');
    const { acked, lagging } = await wait;
    return { deleted: true, version: res.version, acked, lagging };
  }

  /** A page of records in subject_id order; `pageToken` is the previous page's `nextPageToken`. */
  async list(pageSize: number, pageToken: string, field = 'page_token'): Promise<{ quotas: Quota[]; nextPageToken: string }> {
    const size = Math.min(pageSize > 0 ? pageSize : DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
    const after = pageToken === '' ? '' : decodePageToken(pageToken, field);
    // One extra row tells whether another page exists without a second query.
    const rows = await this.deps.store.list(after, size + 1);
    const quotas = rows.slice(0, size);
    const last = quotas[quotas.length - 1];
    return { quotas, nextPageToken: rows.length > size && last ? encodePageToken(last.subjectId) : '' };
  }

  /**
   * A page of the records whose subject id starts with `prefix` (empty: all), in subject_id order;
   * `cursor` is the previous page's `nextCursor` (opaque; '' for the first page).
   */
  async listByPrefix(prefix: string, limit: number, cursor: string, field = 'cursor'): Promise<{ quotas: Quota[]; nextCursor: string }> {
    const size = Math.min(limit > 0 ? limit : DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
    const after = cursor === '' ? '' : decodePageToken(cursor, field);
    const rows = await this.deps.store.listWithPrefix(prefix, after, size + 1);
    const quotas = rows.slice(0, size);
    const last = quotas[quotas.length - 1];
    return { quotas, nextCursor: rows.length > size && last ? encodePageToken(last.subjectId) : '' };
  }

  /**
   * The sidecars connected to any replica (sorted by id), with the version each last acked, and
   * the table's current version (from the database, so every replica answers the same).
   */
  async sidecars(): Promise<{ version: number; sidecars: { id: string; ackedVersion: number; local: boolean }[] }> {
    const version = await this.deps.store.currentVersion();
    const local = new Set(this.deps.sidecars.local());
    const sidecars = this.deps.sidecars
      .connected()
      .map((id) => ({ id, ackedVersion: this.deps.sidecars.ackedVersion(id), local: local.has(id) }));
    return { version, sidecars };
  }

  /**
   * Starts the ack wait for a committed version (the sidecars connected now), then hands the change
   * to the mirror, which streams it to them.
   */
  private afterCommit(version: number, change: Parameters<QuotaMirror['committed']>[0], timeoutMs: number) {
    this.deps.sidecars.committed(version);
    const wait = this.deps.sidecars.waitForAcks(version, timeoutMs);
    this.deps.mirror.committed(change);
    return wait;
  }

  private ackTimeout(requested: number | undefined): number {
    if (requested === undefined || requested === 0) return this.deps.defaultAckTimeoutMs;
    if (!Number.isInteger(requested) || requested < 0 || requested > MAX_ACK_TIMEOUT_MS) {
      throw invalidField('ack_timeout_ms', `must be an integer from 0 to ${MAX_ACK_TIMEOUT_MS}`);
    }
    return requested;
  }
}

/** Plans are named in the log; any other subject only by a short hash. */
function logSubject(subjectId: string): string {
  return subjectId.startsWith('plan:') ? subjectId : hashSubject(subjectId);
}

/** Page tokens are opaque to callers: base64url of the last subject id of the page. */
export function encodePageToken(afterSubject: string): string {
  return Buffer.from(JSON.stringify({ a: afterSubject }), 'utf8').toString('base64url');
}

function decodePageToken(token: string, field: string): string {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    if (parsed !== null && typeof parsed === 'object' && typeof (parsed as { a?: unknown }).a === 'string')
      return (parsed as { a: string }).a;
  } catch {
    // fall through
  }
  throw invalidField(field, 'is not a page token this server issued');
}
