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
 * - `GET /api/v1/admin/segments/{segment_id}` → the segment (a rule segment's size counted now);
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
import { parseSegmentId } from './segment-id.js';
import { deleteSegment, loadSegment, putRuleSegment, type SegmentView } from './store.js';
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

/** The segment as the API shows it. */
export function segmentJson(v: SegmentView): Record<string, unknown> {
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
