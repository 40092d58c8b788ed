/**
 * The operator's lookups (roles NOTIFIER_ADMIN_ROLES), for the console and for "why did this user
 * not get it":
 *
 * - `GET /api/v1/admin/notifications?user_id=&notification_type=&channel=&status=&cursor=&limit=`:
 *   notifications newest first, `{notifications: [...], next_cursor}` (limit 1 to 100, default
 *   20; the cursor is opaque): one user's with `user_id`, else everyone's (the console's recent
 *   activity, audience requests included); `notification_type` keeps that type, `channel` those
 *   with a delivery on the channel, `status` those with a delivery in that state (on that
 *   channel when both are given; `queued` includes sending and held ones). Each carries its request (event and notification type, tier, template, the
 *   channels asked for) and `status_view`, the status view the sender sees: per channel its status
 *   and, in `details`, why (a suppression, a hold and until when, a failure's last error).
 * - `GET /api/v1/admin/notifications/{id}`: one, the same shape (404 for an unknown id).
 * - `GET /api/v1/admin/notification-types`: the configured catalogue (NOTIFIER_NOTIFICATION_TYPES)
 *   and what the policy table (notifier/policy/table.ts) makes of each type at each tier.
 */
import type { Pool } from '../../shared/db.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { route, type EdgeOptions, type RequestContext } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireRole, type CallerResolver } from '../caller.js';
import { policyFor, type PolicySettings } from '../policy/table.js';
import type { NotificationType, TypeCatalog } from '../policy/types.js';
import { TIERS, type Tier } from '../queues/names.js';
import { isUuid } from '../tracking/advance.js';
import { CHANNEL_NAMES } from '../channels/channel.js';
import { FILTER_STATUSES, getNotification, listNotifications, type FilterStatus } from './notifications.js';

export interface AdminNotificationRoutesOptions {
  pool: Pool;
  caller: CallerResolver;
  adminRoles: readonly string[];
  catalog: TypeCatalog;
  settings: PolicySettings;
  /** Whether this replica defers a tier under backpressure (shown in the status view). */
  deferred?: (tier: Tier) => boolean;
}

export const DEFAULT_NOTIFICATIONS_PAGE = 20;
export const MAX_NOTIFICATIONS_PAGE = 100;
const LIST_PARAMS = new Set(['user_id', 'notification_type', 'channel', 'status', 'cursor', 'limit']);
const VISIBLE_RE = /^[\x21-\x7e]+$/;

export function registerAdminNotificationRoutes(app: TemplatedApp, edge: EdgeOptions, o: AdminNotificationRoutesOptions): void {
  const deferred = o.deferred ?? (() => false);
  const admin = async (ctx: RequestContext): Promise<void> => requireRole(await o.caller.callerOf(ctx), o.adminRoles);

  route(
    app,
    'get',
    '/api/v1/admin/notifications',
    async (ctx) => {
      await admin(ctx);
      for (const k of ctx.query.keys())
        if (!LIST_PARAMS.has(k))
          throw invalidField(k, 'is not a parameter of this list (user_id, notification_type, channel, status, cursor, limit)');
      const text = (name: string): string | undefined => {
        const v = ctx.query.get(name) ?? '';
        if (v === '') return undefined;
        if (v.length > 128 || !VISIBLE_RE.test(v)) throw invalidField(name, 'must be 1 to 128 visible ASCII characters');
        return v;
      };
      const userId = text('user_id');
      const notificationType = text('notification_type');
      const channel = text('channel');
      if (channel !== undefined && !(CHANNEL_NAMES as readonly string[]).includes(channel))
        throw invalidField('channel', `must be one of ${CHANNEL_NAMES.join(', ')}`);
      const status = text('status');
      if (status !== undefined && !(FILTER_STATUSES as readonly string[]).includes(status))
        throw invalidField('status', `must be one of ${FILTER_STATUSES.join(', ')}`);
      const rawLimit = ctx.query.get('limit');
      let limit = DEFAULT_NOTIFICATIONS_PAGE;
      if (rawLimit !== null) {
        if (!/^\d{1,3}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > MAX_NOTIFICATIONS_PAGE) {
          throw invalidField('limit', `must be an integer from 1 to ${MAX_NOTIFICATIONS_PAGE}`);
        }
        limit = Number(rawLimit);
      }
      const cursor = ctx.query.get('cursor') || undefined;
      return {
        body: await listNotifications(o.pool, {
          userId,
          notificationType,
          channel,
          status: status as FilterStatus | undefined,
          cursor,
          limit,
          deferred,
        }),
      };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/notifications/:id',
    async (ctx) => {
      await admin(ctx);
      const id = ctx.params[0]!;
      const n = isUuid(id) ? await getNotification(o.pool, id.toLowerCase(), deferred) : undefined;
      if (!n) throw new PlatformError('not_found', { detail: 'no notification with this id' });
      return { body: n };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/notification-types',
    async (ctx) => {
      await admin(ctx);
      return { body: { notification_types: [...o.catalog.types.values()].map((t) => typeView(t, o.settings)) } };
    },
    edge,
  );
}

function ms(n: number): string {
  if (n % 3_600_000 === 0) return `${n / 3_600_000}h`;
  if (n % 60_000 === 0) return `${n / 60_000}m`;
  if (n % 1_000 === 0) return `${n / 1_000}s`;
  return `${n}ms`;
}

/** A type as configured (durations as written: `1h`) and its policy at each tier. */
export function typeView(t: NotificationType, settings: PolicySettings): Record<string, unknown> {
  const policies: Record<string, unknown> = {};
  for (const tier of TIERS) {
    const p = policyFor(t, tier, settings);
    policies[tier] = {
      allowed_channels: [...p.allowed],
      opt_out: p.optOut,
      caps: p.caps,
      quiet_hours: p.quietHours,
      digest: p.digest,
    };
  }
  return {
    name: t.name,
    events: [...t.events],
    channels: [...t.channels],
    mandatory: t.mandatory,
    sms: t.sms,
    caps: Object.fromEntries(Object.entries(t.caps).map(([c, r]) => [c, { limit: r.limit, window: ms(r.windowMs) }])),
    digest: t.digest ? { window: ms(t.digest.windowMs), template: t.digest.template, max_items: t.digest.maxItems } : null,
    failover: Object.fromEntries(Object.entries(t.failover).map(([c, to]) => [c, [...to]])),
    policies,
  };
}
