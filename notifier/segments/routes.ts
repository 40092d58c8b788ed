/**
 * The segment operator API (roles NOTIFIER_ADMIN_ROLES; README, "Segments"):
 *
 * - `PUT /api/v1/admin/segments/{segment_id}/members`: uploads a list segment's members as a
 *   stream (`application/x-ndjson` or `text/csv`, lines.ts), up to NOTIFIER_SEGMENT_MAX_BYTES;
 *   the new version is switched in when the last line is stored → 201 (new segment) or 200, with
 *   the segment; 400 `invalid_field` naming the line, 409 for a rule segment or an upload in
 *   progress, 413 past the cap; the live version is unchanged by any failure;
 * - `PUT /api/v1/admin/segments/{segment_id}` `{"kind": "rule", "rule": {…}}`: creates or changes
 *   a rule segment → 201 or 200 (a changed rule bumps the version);
 * - `GET /api/v1/admin/segments?cursor=&limit=` → `{segments, next_cursor}`, in id byte order (a
 *   rule segment's `size` is null here: it is counted when the segment itself is read);
 * - `GET /api/v1/admin/segments/{segment_id}` → the segment (a rule segment's size counted now);
 * - `GET /api/v1/admin/segments/{segment_id}/versions?limit=` → `{segment_id, versions}`, a list
 *   segment's stored versions newest first (a rule segment keeps none: `[]`); 404 when neither the
 *   segment nor any version exists;
 * - `DELETE /api/v1/admin/segments/{segment_id}` → 204; a campaign already expanding it goes on
 *   with the version it pinned.
 */
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, streamRoute, type EdgeOptions, type StreamRouteOptions } from '../../shared/http.js';
import type { BodyStream } from '../../shared/body-stream.js';
import type { Pool } from '../../shared/db.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireRole, type CallerResolver } from '../caller.js';
import type { SegmentCleanup } from './cleanup.js';
import { uploadFormat } from './lines.js';
import { parseRule } from './rule.js';
import { isSegmentId, parseSegmentId } from './segment-id.js';
import { deleteSegment, listSegments, listVersions, loadSegment, putRuleSegment, type SegmentView } from './store.js';
import { uploadList } from './upload.js';

export interface SegmentRoutesOptions {
  pool: Pool;
  caller: CallerResolver;
  adminRoles: readonly string[];
  /** NOTIFIER_SEGMENT_MAX_BYTES. */
  maxUploadBytes: number;
  /** An `uploading` version untouched this long is taken over. */
  staleMs: number;
  cleanup: Pick<SegmentCleanup, 'kick'>;
  /** Sees each upload's body reader (tests). */
  onUploadBody?: (body: BodyStream) => void;
}

/** `limit` of a list: 1 to 500, `dflt` when absent. */
function limitOf(raw: string | null, dflt: number): number {
  const limit = raw === null ? dflt : /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw invalidField('limit', 'must be an integer from 1 to 500');
  return limit;
}

/** The segment as the API shows it (`size` null: a rule segment in a list, not counted). */
export function segmentJson(v: Omit<SegmentView, 'size'> & { size: number | null }): Record<string, unknown> {
  return {
    id: v.id,
    kind: v.kind,
    version: v.version,
    size: v.size,
    ...(v.rule ? { rule: v.rule } : {}),
    updated_at: v.updatedAt.toISOString(),
    updated_by: v.updatedBy,
  };
}

export function registerSegmentRoutes(app: TemplatedApp, edge: EdgeOptions, o: SegmentRoutesOptions): void {
  const admin = async (ctx: { headers: Readonly<Record<string, string>> }): Promise<string> => {
    const caller = await o.caller.callerOf(ctx);
    requireRole(caller, o.adminRoles);
    return caller.subject;
  };
  const streamOpts: StreamRouteOptions = { ...edge, maxBodyBytes: o.maxUploadBytes, onBody: o.onUploadBody };

  streamRoute(
    app,
    'put',
    '/api/v1/admin/segments/:segment_id/members',
    async (ctx) => {
      const by = await admin(ctx);
      const id = parseSegmentId(ctx.params[0]!);
      const format = uploadFormat(ctx.headers['content-type']);
      if (!format) throw new PlatformError('unsupported_media_type', { detail: 'send application/x-ndjson or text/csv' });
      try {
        const { created, view } = await uploadList({
          pool: o.pool,
          id,
          by,
          format,
          body: ctx.body,
          aborted: ctx.aborted,
          staleMs: o.staleMs,
        });
        return { status: created ? 201 : 200, body: segmentJson(view) };
      } finally {
        o.cleanup.kick();
      }
    },
    streamOpts,
  );

  route(
    app,
    'put',
    '/api/v1/admin/segments/:segment_id',
    async (ctx) => {
      const by = await admin(ctx);
      const id = parseSegmentId(ctx.params[0]!);
      const body = jsonBody(ctx);
      for (const k of Object.keys(body)) if (!['kind', 'rule'].includes(k)) throw invalidField(k, 'is not a field of a segment');
      if (body['kind'] !== 'rule') {
        throw invalidField('kind', 'must be "rule"; a list segment is created by uploading its members (PUT …/members)');
      }
      const rule = parseRule(body['rule']);
      const { created, view } = await putRuleSegment(o.pool, id, rule, by);
      return { status: created ? 201 : 200, body: segmentJson(view) };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/segments',
    async (ctx) => {
      await admin(ctx);
      const limit = limitOf(ctx.query.get('limit'), 100);
      const rawCursor = ctx.query.get('cursor') || undefined;
      let after: string | undefined;
      if (rawCursor !== undefined) {
        after = Buffer.from(rawCursor, 'base64url').toString('utf8');
        if (!isSegmentId(after)) throw invalidField('cursor', 'is not a cursor this list returned');
      }
      const { segments, more } = await listSegments(o.pool, { ...(after !== undefined ? { after } : {}), limit });
      const last = segments[segments.length - 1];
      return {
        body: {
          segments: segments.map(segmentJson),
          ...(more && last ? { next_cursor: Buffer.from(last.id, 'utf8').toString('base64url') } : {}),
        },
      };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/segments/:segment_id/versions',
    async (ctx) => {
      await admin(ctx);
      const id = parseSegmentId(ctx.params[0]!);
      const limit = limitOf(ctx.query.get('limit'), 50);
      const versions = await listVersions(o.pool, id, limit);
      if (versions.length === 0 && !(await loadSegment(o.pool, id))) throw new PlatformError('not_found', { detail: `no segment ${id}` });
      return {
        body: {
          segment_id: id,
          versions: versions.map((v) => ({
            version: v.version,
            state: v.state,
            size: v.size,
            created_by: v.createdBy,
            created_at: v.createdAt.toISOString(),
            completed_at: v.completedAt?.toISOString() ?? null,
            purged: v.purged,
          })),
        },
      };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/segments/:segment_id',
    async (ctx) => {
      await admin(ctx);
      const id = parseSegmentId(ctx.params[0]!);
      const view = await loadSegment(o.pool, id);
      if (!view) throw new PlatformError('not_found', { detail: `no segment ${id}` });
      return { body: segmentJson(view) };
    },
    edge,
  );

  route(
    app,
    'del',
    '/api/v1/admin/segments/:segment_id',
    async (ctx) => {
      await admin(ctx);
      const id = parseSegmentId(ctx.params[0]!);
      if (!(await deleteSegment(o.pool, id))) throw new PlatformError('not_found', { detail: `no segment ${id}` });
      o.cleanup.kick();
      return { status: 204 };
    },
    edge,
  );
}
