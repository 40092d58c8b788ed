/**
 * The internal HTTP API (README, "Changing a quota"), admin-only (the same auth as gRPC, from the
 * Authorization
 * header). The API key in the path is hashed on arrival: only `key:<sha256 hex>` is stored, shown
 * or logged, and no log line or error carries the path (errors are logged under the route's
 * pattern, `/internal/quotas/{api_key}`).
 *
 * - `PUT /internal/quotas/{api_key}`: replaces the key's whole record. Body: `algorithm`
 *   (token_bucket, sliding_window, leaky_bucket, fixed_window), `rate`, `burst`, `unit` (second,
 *   minute, hour, day; or `interval_ms` instead), all required unless the record is a plan
 *   reference (`rate` 0 with `plan`); optional `cost` (default 1), `fail_mode` (open, closed;
 *   default: the route class's), `shadow` (default false), `plan` (default none), `routes`
 *   (default none), `accuracy` (exact, approximate; default exact; approximate needs a token or
 *   leaky bucket). 201 when the key had no record, else 200; the body is quota.v1.PutResponse as
 *   JSON: `{"quota": {...stored record, version...}, "version", "acked_sidecar_ids",
 *   "lagging_sidecar_ids"}`. Optional query `ack_timeout_ms` (default CONTROL_PLANE_ACK_TIMEOUT).
 * - `GET /internal/quotas/{api_key}`: 200 `{"quota": {...}}` (quota.v1.GetResponse), 404 unknown.
 * - `DELETE /internal/quotas/{api_key}`: 204 (header `quota-version`), 404 unknown.
 *
 * By subject of every kind (`key:<sha256 hex>`, `user:<id>`, `tenant:<id>`, `plan:<name>`), for
 * the operator console and scripts that already hold a subject id:
 * - `GET /internal/quotas?subject_kind=&prefix=&cursor=&limit=`: a page of records in subject_id
 *   order (bytewise, stable), `{"quotas": [...], "next_cursor": "..." | null}`. `subject_kind`
 *   (key, user, tenant, plan) and `prefix` (the start of the whole subject id, e.g. `user:4`)
 *   narrow it; `limit` 1 to 1000 (default 100); `cursor` is the previous page's `next_cursor`
 *   (opaque). Any other query parameter is refused (a typo would otherwise list everything).
 * - `GET|PUT|DELETE /internal/subjects/{subject}/quota`: the same shapes as the three above, for
 *   the subject id in the path (URL-encoded: `user%3A42`); the PUT body is the same.
 * - `GET /internal/sidecars`: the sidecars connected to any replica and the version each acked,
 *   `{"version": N, "sidecars": [{"sidecar_id", "acked_version", "local", "lagging"}]}`.
 *
 * Errors are problem+json: 400 `invalid_field` with `field`, 401, 403, 404 `not_found`, 503
 * `dependency_unavailable` when PostgreSQL is down (never 500 for that).
 */
import { create } from '@bufbuild/protobuf';
import { ListResponseSchema } from '../../proto/gen/quota/v1/quota_pb.js';
import { GetResponseSchema, PutResponseSchema, QuotaSchema } from '../../proto/gen/quota/v1/quota_pb.js';
import { invalidField, isPlatformError, PlatformError } from '../../shared/errors.js';
import { errorReply, jsonBody, route, type EdgeOptions, type Reply, type RequestContext } from '../../shared/http.js';
import { fromJson, toJson } from '../../shared/proto-json.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { MAX_PAGE_SIZE, type QuotaAdmin } from './admin.js';
import type { Authenticator } from './auth.js';
import { principalName } from './grpc-admin.js';
import type { ControlPlaneMetrics } from './metrics.js';
import { apiKeySubject, checkRawApiKey, checkSubjectId, MAX_SUBJECT_LENGTH, SUBJECT_KINDS } from './subject.js';
import { controlPlaneOpenApi } from './openapi.js';
import { serveOpenApi } from '../../shared/openapi.js';

export const QUOTA_ROUTE = '/internal/quotas/{api_key}';
export const SUBJECT_ROUTE = '/internal/subjects/{subject}/quota';

const LIST_PARAMS = new Set(['subject_kind', 'prefix', 'cursor', 'limit']);

/** Body fields the control plane assigns or takes from the path. */
const NOT_IN_BODY: Record<string, string> = {
  subject_id: 'is taken from the path; leave it out',
  version: 'is assigned by the control plane; leave it out',
  updated_at: 'is assigned by the control plane; leave it out',
};

export interface HttpApiDeps {
  admin: QuotaAdmin;
  auth: Authenticator;
  metrics: ControlPlaneMetrics;
}

type Run = (ctx: RequestContext, subjectId: string, by: string) => Promise<Reply>;

export function registerHttpApi(app: TemplatedApp, edge: EdgeOptions, deps: HttpApiDeps): void {
  const { admin } = deps;
  /**
   * Authenticates, finds the subject (`subjectOf`, which validates the path), runs, counts; errors
   * are logged and shown under `pattern`: a real path may hold a raw key or a user id.
   */
  const handle =
    (method: string, pattern: string, subjectOf: (ctx: RequestContext) => string, run: Run) =>
    async (ctx: RequestContext): Promise<Reply> => {
      try {
        const principal = await deps.auth.admin(ctx.headers.authorization);
        const reply = await run(ctx, subjectOf(ctx), principalName(principal));
        deps.metrics.adminCalls.inc({ method, transport: 'http', code: 'ok' });
        return reply;
      } catch (err) {
        deps.metrics.adminCalls.inc({ method, transport: 'http', code: isPlatformError(err) ? err.code : 'internal' });
        return errorReply(err, edge.log, { method: ctx.method, path: pattern });
      }
    };
  const byKey = (ctx: RequestContext): string => {
    const raw = ctx.params[0] ?? '';
    checkRawApiKey(raw);
    return apiKeySubject(raw);
  };
  const bySubject = (ctx: RequestContext): string => {
    const subject = ctx.params[0] ?? '';
    checkSubjectId(subject, 'subject');
    return subject;
  };
  const none = (): string => '';

  const put: Run = async (ctx, subjectId, by) => {
    const body = jsonBody(ctx);
    const quota = fromJson(QuotaSchema, { ...checkBody(body), subject_id: subjectId });
    const r = await admin.put(quota, { ackTimeoutMs: ackTimeoutOf(ctx), by });
    const res = create(PutResponseSchema, {
      quota: r.quota,
      version: BigInt(r.version),
      ackedSidecarIds: r.acked,
      laggingSidecarIds: r.lagging,
    });
    return { status: r.created ? 201 : 200, body: toJson(PutResponseSchema, res) };
  };
  const get =
    (what: string): Run =>
    async (_ctx, subjectId) => {
      const quota = await admin.get(subjectId).catch(notFound(what));
      return { body: toJson(GetResponseSchema, create(GetResponseSchema, { quota })) };
    };
  const del =
    (what: string): Run =>
    async (ctx, subjectId, by) => {
      const r = await admin.delete(subjectId, { ackTimeoutMs: ackTimeoutOf(ctx), by });
      if (!r.deleted) throw new PlatformError('not_found', { detail: `no quota for ${what}` });
      return { status: 204, headers: { 'quota-version': String(r.version) } };
    };

  route(app, 'put', '/internal/quotas/:api_key', handle('put', QUOTA_ROUTE, byKey, put), edge);
  route(app, 'get', '/internal/quotas/:api_key', handle('get', QUOTA_ROUTE, byKey, get('this API key')), edge);
  route(app, 'del', '/internal/quotas/:api_key', handle('delete', QUOTA_ROUTE, byKey, del('this API key')), edge);

  route(app, 'put', '/internal/subjects/:subject/quota', handle('put', SUBJECT_ROUTE, bySubject, put), edge);
  route(app, 'get', '/internal/subjects/:subject/quota', handle('get', SUBJECT_ROUTE, bySubject, get('this subject')), edge);
  route(app, 'del', '/internal/subjects/:subject/quota', handle('delete', SUBJECT_ROUTE, bySubject, del('this subject')), edge);

  route(
    app,
    'get',
    '/internal/quotas',
    handle('list', '/internal/quotas', none, async (ctx) => {
      const { prefix, limit, cursor } = listQuery(ctx.query);
      const page = await admin.listByPrefix(prefix, limit, cursor);
      const res = toJson(ListResponseSchema, create(ListResponseSchema, { quotas: page.quotas }));
      return { body: { quotas: res.quotas, next_cursor: page.nextCursor === '' ? null : page.nextCursor } };
    }),
    edge,
  );
  // The document of this API (openapi.ts), without credentials (shared/openapi.ts says why).
  serveOpenApi(app, edge, controlPlaneOpenApi);
  route(
    app,
    'get',
    '/internal/sidecars',
    handle('sidecars', '/internal/sidecars', none, async () => {
      const s = await admin.sidecars();
      return {
        body: {
          version: s.version,
          sidecars: s.sidecars.map((c) => ({
            sidecar_id: c.id,
            acked_version: c.ackedVersion,
            local: c.local,
            lagging: c.ackedVersion < s.version,
          })),
        },
      };
    }),
    edge,
  );
}

/**
 * The list's query: `subject_kind` and `prefix` combine into one prefix of the subject id (they
 * must agree: `subject_kind=user&prefix=tenant:` is refused, not silently empty).
 */
function listQuery(q: URLSearchParams): { prefix: string; limit: number; cursor: string } {
  for (const name of q.keys())
    if (!LIST_PARAMS.has(name)) throw invalidField(name, 'is not a parameter of this list (subject_kind, prefix, cursor, limit)');
  const kind = q.get('subject_kind') ?? '';
  if (kind !== '' && !(SUBJECT_KINDS as readonly string[]).includes(kind))
    throw invalidField('subject_kind', `must be one of ${SUBJECT_KINDS.join(', ')}`);
  const given = q.get('prefix') ?? '';
  if (given.length > MAX_SUBJECT_LENGTH) throw invalidField('prefix', `must be at most ${MAX_SUBJECT_LENGTH} characters`);
  if (given !== '' && !/^[\x21-\x7e]+$/.test(given)) throw invalidField('prefix', 'must be visible ASCII characters without spaces');
  let prefix = given;
  if (kind !== '') {
    const kindPrefix = `${kind}:`;
    if (given === '' || kindPrefix.startsWith(given)) prefix = kindPrefix;
    else if (!given.startsWith(kindPrefix)) throw invalidField('prefix', `must start with ${kindPrefix} when subject_kind is ${kind}`);
  }
  const rawLimit = q.get('limit') ?? '';
  let limit = 0;
  if (rawLimit !== '') {
    if (!/^\d{1,4}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > MAX_PAGE_SIZE) {
      throw invalidField('limit', `must be an integer from 1 to ${MAX_PAGE_SIZE}`);
    }
    limit = Number(rawLimit);
  }
  return { prefix, limit, cursor: q.get('cursor') ?? '' };
}

/**
 * The PUT body (README, "Changing a quota"): `algorithm`, `rate`, `burst` and `unit` (or
 * `interval_ms`) are required, except
 * for a plan reference (`rate` 0), which needs only `plan`. Type and enum errors come from the
 * proto-json converter, naming the field.
 */
function checkBody(body: Record<string, unknown>): Record<string, unknown> {
  for (const [name, why] of Object.entries(NOT_IN_BODY)) if (name in body) throw invalidField(name, why);
  if (body.rate === undefined || body.rate === null) throw invalidField('rate', 'required');
  if (body.rate === 0) return body;
  for (const name of ['algorithm', 'burst']) if (body[name] === undefined || body[name] === null) throw invalidField(name, 'required');
  if ((body.unit === undefined || body.unit === null) && (body.interval_ms === undefined || body.interval_ms === null)) {
    throw invalidField('unit', 'required (second, minute, hour or day), or interval_ms');
  }
  return body;
}

function ackTimeoutOf(ctx: RequestContext): number | undefined {
  const raw = ctx.query.get('ack_timeout_ms');
  if (raw === null || raw === '') return undefined;
  if (!/^\d{1,6}$/.test(raw)) throw invalidField('ack_timeout_ms', 'must be an integer number of milliseconds');
  return Number(raw);
}

function notFound(what: string) {
  return (err: unknown): never => {
    if (isPlatformError(err) && err.code === 'not_found') throw new PlatformError('not_found', { detail: `no quota for ${what}` });
    throw err;
  };
}
