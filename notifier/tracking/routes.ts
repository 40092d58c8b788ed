/**
 * Tracking endpoints:
 * - `GET /api/v1/notifications/{notification_id}/status`: the status view (the sender, the
 *   recipient, or a service role; 404 for anyone else, so ids cannot be probed);
 * - `GET /api/v1/track/open/{delivery_id}.{signature}.gif`: the e-mail open pixel (pixel.ts); no
 *   credentials (mail clients have none), always the image, whatever the signature;
 * - `POST /api/v1/deliveries/{delivery_id}/events` `{"event": "received" | "opened"}`: an app's
 *   receipt or open, with the user's token (or a service role) → 200 `{delivery_id, status}`;
 * - `GET /api/v1/users/{user_id}/notifications?unread=&cursor=&limit=`: the in-app inbox;
 * - `POST /api/v1/users/{user_id}/notifications/{id}/read`: 204, read on the next fetch.
 */
import type { Pool } from '../../shared/db.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { Logger } from '../../shared/log.js';
import { toJson } from '../../shared/proto-json.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { InboxPageSchema, StatusViewSchema } from '../../proto/gen/notify/v1/notify_pb.js';
import { isServiceCaller, requireUserOrService, type CallerResolver } from '../caller.js';
import { advanceDelivery, isUuid } from './advance.js';
import { listInbox, markRead } from './inbox.js';
import { PIXEL_GIF, verifyPixelFile, type PixelSigner } from './pixel.js';
import { visible } from './states.js';
import { notificationStatus } from './status.js';
import type { Tier } from '../queues/names.js';

export interface TrackingRoutesOptions {
  pool: Pool;
  caller: CallerResolver;
  pixel: PixelSigner;
  inboxPageSize: number;
  log: Logger;
  /** Whether this replica defers a tier under backpressure (shown in the status view). */
  deferred?: (tier: Tier) => boolean;
}

const MAX_PAGE = 100;
const APP_EVENTS = { received: 'delivered', opened: 'opened' } as const;

function notFound(what: string): PlatformError {
  return new PlatformError('not_found', { detail: `no ${what} with this id` });
}

export function registerTrackingRoutes(app: TemplatedApp, edge: EdgeOptions, o: TrackingRoutesOptions): void {
  const roles = o.caller.serviceRoles;

  route(
    app,
    'get',
    '/api/v1/notifications/:notification_id/status',
    async (ctx) => {
      const caller = await o.caller.callerOf(ctx);
      const id = ctx.params[0]!;
      const s = isUuid(id) ? await notificationStatus(o.pool, id.toLowerCase(), o.deferred) : undefined;
      const allowed = s && (isServiceCaller(caller, roles) || caller.subject === s.caller || caller.userId === s.recipientId);
      if (!s || !allowed) throw notFound('notification');
      return { body: toJson(StatusViewSchema, s.view) };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/track/open/:file',
    async (ctx) => {
      const id = verifyPixelFile(o.pixel, ctx.params[0]!);
      if (id !== undefined) {
        await advanceDelivery(o.pool, id, 'opened').catch((err: unknown) => o.log.warn({ err }, 'open pixel: could not record'));
      }
      return {
        status: 200,
        body: PIXEL_GIF,
        contentType: 'image/gif',
        headers: { 'cache-control': 'no-store, max-age=0', 'referrer-policy': 'no-referrer' },
      };
    },
    edge,
  );

  route(
    app,
    'post',
    '/api/v1/deliveries/:delivery_id/events',
    async (ctx) => {
      const caller = await o.caller.callerOf(ctx);
      const id = ctx.params[0]!.toLowerCase();
      const body = jsonBody(ctx);
      const event = body['event'];
      if (typeof event !== 'string' || !(event in APP_EVENTS)) throw invalidField('event', 'must be received or opened');
      for (const k of Object.keys(body)) if (k !== 'event') throw invalidField(k, 'is not a field of a delivery event');
      const owner = isUuid(id)
        ? (await o.pool.query<{ recipient_id: string }>('SELECT recipient_id FROM deliveries WHERE id = $1', [id])).rows[0]
        : undefined;
      if (!owner || !(isServiceCaller(caller, roles) || caller.userId === owner.recipient_id)) throw notFound('delivery');
      const r = await advanceDelivery(o.pool, id, APP_EVENTS[event as keyof typeof APP_EVENTS]);
      if (!r) throw notFound('delivery');
      return { body: { delivery_id: id, status: visible(r.status) } };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/users/:user_id/notifications',
    async (ctx) => {
      const userId = ctx.params[0]!;
      requireUserOrService(await o.caller.callerOf(ctx), userId, roles);
      const unread = ctx.query.get('unread');
      if (unread !== null && !['true', 'false', '1', '0'].includes(unread)) throw invalidField('unread', 'must be true or false');
      const limitRaw = ctx.query.get('limit');
      let limit = o.inboxPageSize;
      if (limitRaw !== null) {
        if (!/^\d{1,3}$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > MAX_PAGE) {
          throw invalidField('limit', `must be an integer from 1 to ${MAX_PAGE}`);
        }
        limit = Number(limitRaw);
      }
      const cursor = ctx.query.get('cursor');
      const page = await listInbox(o.pool, {
        userId,
        unreadOnly: unread === 'true' || unread === '1',
        cursor: cursor === null || cursor === '' ? undefined : cursor,
        limit,
      });
      return { body: toJson(InboxPageSchema, page) };
    },
    edge,
  );

  route(
    app,
    'post',
    '/api/v1/users/:user_id/notifications/:id/read',
    async (ctx) => {
      const userId = ctx.params[0]!;
      requireUserOrService(await o.caller.callerOf(ctx), userId, roles);
      if (!(await markRead(o.pool, userId, ctx.params[1]!.toLowerCase()))) throw notFound('inbox item');
      return { status: 204 };
    },
    edge,
  );
}
