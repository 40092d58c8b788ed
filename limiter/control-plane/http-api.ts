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
 *   (default none). 201 when the key had no record, else 200; the body is quota.v1.PutResponse as
 *   JSON: `{"quota": {...stored record, version...}, "version", "acked_sidecar_ids",
 *   "lagging_sidecar_ids"}`. Optional query `ack_timeout_ms` (default CONTROL_PLANE_ACK_TIMEOUT).
 * - `GET /internal/quotas/{api_key}`: 200 `{"quota": {...}}` (quota.v1.GetResponse), 404 unknown.
 * - `DELETE /internal/quotas/{api_key}`: 204 (header `quota-version`), 404 unknown.
 *
 * Errors are problem+json: 400 `invalid_field` with `field`, 401, 403, 404 `not_found`, 503
 * `dependency_unavailable` when PostgreSQL is down (never 500 for that).
 */
import { create } from '@bufbuild/protobuf';
import { GetResponseSchema, PutResponseSchema, QuotaSchema } from '../../proto/gen/quota/v1/quota_pb.js';
import { invalidField, isPlatformError, PlatformError } from '../../shared/errors.js';
import { errorReply, jsonBody, route, type EdgeOptions, type Reply, type RequestContext } from '../../shared/http.js';
import { fromJson, toJson } from '../../shared/proto-json.js';
import type { TemplatedApp } from '../../shared/uws.js';
import type { QuotaAdmin } from './admin.js';
import type { Authenticator } from './auth.js';
import { principalName } from './grpc-admin.js';
import type { ControlPlaneMetrics } from './metrics.js';
import { apiKeySubject, checkRawApiKey } from './subject.js';

export const QUOTA_ROUTE = '/internal/quotas/{api_key}';

/** Body fields the control plane assigns or takes from the path. */
const NOT_IN_BODY: Record<string, string> = {
  subject_id: 'is taken from the path (the hashed API key); leave it out',
  version: 'is assigned by the control plane; leave it out',
  updated_at: 'is assigned by the control plane; leave it out',
};

export interface HttpApiDeps {
  admin: QuotaAdmin;
  auth: Authenticator;
  metrics: ControlPlaneMetrics;
}

export function registerHttpApi(app: TemplatedApp, edge: EdgeOptions, deps: HttpApiDeps): void {
  const { admin } = deps;
  const handle =
    (method: string, run: (ctx: RequestContext, subjectId: string, by: string) => Promise<Reply>) =>
    async (ctx: RequestContext): Promise<Reply> => {
      try {
        const principal = await deps.auth.admin(ctx.headers.authorization);
        const raw = ctx.params[0] ?? '';
        checkRawApiKey(raw);
        const reply = await run(ctx, apiKeySubject(raw), principalName(principal));
        deps.metrics.adminCalls.inc({ method, transport: 'http', code: 'ok' });
        return reply;
      } catch (err) {
        deps.metrics.adminCalls.inc({ method, transport: 'http', code: isPlatformError(err) ? err.code : 'internal' });
        // Logged (when 5xx) and shown under the route pattern: the real path holds the raw key.
        const reply = errorReply(err, edge.log, { method: ctx.method, path: QUOTA_ROUTE });
        return reply;
      }
    };

  route(
    app,
    'put',
    '/internal/quotas/:api_key',
    handle('put', async (ctx, subjectId, by) => {
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
    }),
    edge,
  );
  route(
    app,
    'get',
    '/internal/quotas/:api_key',
    handle('get', async (_ctx, subjectId) => {
      const quota = await admin.get(subjectId).catch(notFoundForKey);
      return { body: toJson(GetResponseSchema, create(GetResponseSchema, { quota })) };
    }),
    edge,
  );
  route(
    app,
    'del',
    '/internal/quotas/:api_key',
    handle('delete', async (ctx, subjectId, by) => {
      const r = await admin.delete(subjectId, { ackTimeoutMs: ackTimeoutOf(ctx), by });
      if (!r.deleted) throw new PlatformError('not_found', { detail: 'no quota for this API key' });
      return { status: 204, headers: { 'quota-version': String(r.version) } };
    }),
    edge,
  );
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

function notFoundForKey(err: unknown): never {
  if (isPlatformError(err) && err.code === 'not_found') throw new PlatformError('not_found', { detail: 'no quota for this API key' });
  throw err;
}
