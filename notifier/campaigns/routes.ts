/**
 * The campaign operator API (roles NOTIFIER_ADMIN_ROLES):
 *
 * - `GET /api/v1/admin/campaigns?pending=true&cursor=&limit=`: campaigns newest first, each with
 *   its fan-outs counted (listing.ts); `pending=true` keeps those with one waiting for approval;
 * - `GET /api/v1/admin/campaigns/{campaign_id}`: the campaign (stopped or not), its totals over
 *   every audience request that named it, each fan-out's progress, and its audit trail;
 * - `POST /api/v1/admin/campaigns/{campaign_id}/stop` (`{"reason": "…"}` optional): the kill
 *   switch (kill-switch.ts), idempotent; 200 with every live replica's acknowledgement;
 * - `POST /api/v1/admin/campaigns/{campaign_id}/approve` and `/reject` (`{"notification_id": "…",
 *   "reason": "…"}` both optional): decides the fan-outs waiting for approval (approval.ts).
 */
import { toJson } from '../../shared/proto-json.js';
import type { Pool } from '../../shared/db.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions, type RequestContext } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { CampaignProgressSchema } from '../../proto/gen/notify/v1/notify_pb.js';
import { requireRole, type CallerResolver } from '../caller.js';
import type { Boss } from '../queues/boss.js';
import { isUuid } from '../tracking/advance.js';
import { decide } from './approval.js';
import { listCampaigns } from './listing.js';
import { totalsOf } from './counts.js';
import { stopCampaign, type StopOptions } from './kill-switch.js';
import { campaignStatus, countsOf, fanoutsOfCampaign, progressOf } from './progress.js';

export interface CampaignRoutesOptions {
  pool: Pool;
  boss: Boss;
  caller: CallerResolver;
  adminRoles: readonly string[];
  wake: (queue: string) => void;
  stop: Omit<StopOptions, 'pool' | 'boss' | 'wake'>;
}

const CAMPAIGN_ID_RE = /^[\x21-\x7e]{1,128}$/;
const MAX_REASON = 500;

function campaignIdOf(ctx: RequestContext): string {
  const id = ctx.params[0]!;
  if (!CAMPAIGN_ID_RE.test(id)) throw new PlatformError('not_found', { detail: 'no campaign with this id' });
  return id;
}

/** An optional JSON object body with only these optional string fields. */
function optionalFields(ctx: RequestContext, fields: readonly string[]): Record<string, string | undefined> {
  const body = ctx.body.length === 0 ? {} : jsonBody(ctx);
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(body)) {
    if (!fields.includes(k)) throw invalidField(k, `is not a field here (${fields.join(', ')} are)`);
    if (v === null || v === undefined) continue;
    if (typeof v !== 'string' || v.length === 0 || v.length > MAX_REASON)
      throw invalidField(k, `must be a string of 1 to ${MAX_REASON} characters`);
    out[k] = v;
  }
  return out;
}

export function registerCampaignRoutes(app: TemplatedApp, edge: EdgeOptions, o: CampaignRoutesOptions): void {
  const admin = async (ctx: RequestContext): Promise<string> => {
    const caller = await o.caller.callerOf(ctx);
    requireRole(caller, o.adminRoles);
    return caller.subject;
  };

  route(
    app,
    'get',
    '/api/v1/admin/campaigns',
    async (ctx) => {
      await admin(ctx);
      const raw = ctx.query.get('limit');
      const limit = raw === null ? 50 : /^\d+$/.test(raw) ? Number(raw) : NaN;
      if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw invalidField('limit', 'must be an integer from 1 to 500');
      const pending = ctx.query.get('pending');
      if (pending !== null && pending !== 'true' && pending !== 'false') throw invalidField('pending', 'must be true or false');
      const cursor = ctx.query.get('cursor') || undefined;
      return { body: await listCampaigns(o.pool, { limit, pendingOnly: pending === 'true', ...(cursor ? { cursor } : {}) }) };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/campaigns/:campaign_id',
    async (ctx) => {
      await admin(ctx);
      const id = campaignIdOf(ctx);
      const { rows } = await o.pool.query<{
        created_at: Date;
        stopped_at: Date | null;
        stopped_by: string | null;
        stop_reason: string | null;
      }>('SELECT created_at, stopped_at, stopped_by, stop_reason FROM campaigns WHERE id = $1', [id]);
      const c = rows[0];
      if (!c) throw new PlatformError('not_found', { detail: `no campaign ${id}` });
      const fanouts = await fanoutsOfCampaign(o.pool, id);
      const counts = await countsOf(
        o.pool,
        fanouts.map((f) => f.notification_id),
      );
      const audit = await o.pool.query<{ action: string; actor: string; notification_id: string | null; detail: unknown; at: Date }>(
        'SELECT action, actor, notification_id, detail, at FROM campaign_audit WHERE campaign_id = $1 ORDER BY at, id',
        [id],
      );
      const totals = totalsOf([...counts.values()]);
      return {
        body: {
          campaign_id: id,
          created_at: c.created_at.toISOString(),
          stopped_at: c.stopped_at?.toISOString() ?? null,
          stopped_by: c.stopped_by,
          stop_reason: c.stop_reason,
          totals: { recipients: fanouts.reduce((n, f) => n + (f.recipients ?? 0), 0), ...totals },
          fanouts: fanouts.map((f) => {
            const fc = counts.get(f.notification_id)!;
            return {
              notification_id: f.notification_id,
              status: campaignStatus(f, fc).status,
              ...(toJson(CampaignProgressSchema, progressOf(f, fc)) as object),
            };
          }),
          audit: audit.rows.map((a) => ({ ...a, at: a.at.toISOString() })),
        },
      };
    },
    edge,
  );

  route(
    app,
    'post',
    '/api/v1/admin/campaigns/:campaign_id/stop',
    async (ctx) => {
      const actor = await admin(ctx);
      const id = campaignIdOf(ctx);
      const { reason } = optionalFields(ctx, ['reason']);
      return { body: await stopCampaign({ ...o.stop, pool: o.pool, boss: o.boss, wake: o.wake }, id, actor, reason ?? null) };
    },
    edge,
  );

  for (const [verb, approve] of [
    ['approve', true],
    ['reject', false],
  ] as const) {
    route(
      app,
      'post',
      `/api/v1/admin/campaigns/:campaign_id/${verb}`,
      async (ctx) => {
        const actor = await admin(ctx);
        const campaignId = campaignIdOf(ctx);
        const { notification_id: notificationId, reason } = optionalFields(ctx, ['notification_id', 'reason']);
        if (notificationId !== undefined && !isUuid(notificationId)) throw invalidField('notification_id', 'must be a notification id');
        return {
          body: await decide(
            o.pool,
            o.boss,
            {
              campaignId,
              approve,
              actor,
              reason: reason ?? null,
              ...(notificationId ? { notificationId: notificationId.toLowerCase() } : {}),
            },
            o.wake,
          ),
        };
      },
      edge,
    );
  }
}
