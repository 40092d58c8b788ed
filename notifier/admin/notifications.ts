/**
 * The operator's view of notifications: a user's, newest first, each with the status view the
 * sender sees (notifier/tracking/status.ts: per-channel status and why: a suppression, a hold and
 * until when, a failure's last error), and one by id. Audience requests are not listed under their
 * members (they have no single recipient): their progress is the campaign's.
 */
import type { Pool } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';
import { toJson, type JsonRecord } from '../../shared/proto-json.js';
import { StatusViewSchema } from '../../proto/gen/notify/v1/notify_pb.js';
import type { Tier } from '../queues/names.js';
import { notificationStatus } from '../tracking/status.js';

export interface NotificationRow {
  id: string;
  recipient_id: string | null;
  segment_id: string | null;
  caller: string;
  event_type: string;
  notification_type: string | null;
  priority: Tier;
  template_id: string;
  channels: string[];
  campaign_id: string | null;
  /** PostgreSQL's text form (microseconds), for the cursor. */
  created_text: string;
  created_at: number;
}

const COLUMNS = `id, recipient_id, segment_id, caller, event_type, notification_type, priority, template_id, channels,
  campaign_id, created_at::text AS created_text, extract(epoch FROM created_at)::float8 AS created_at`;

/** One notification as an operator sees it. */
export interface AdminNotification extends JsonRecord {
  id: string;
  recipient_id: string | null;
  segment_id: string | null;
  caller: string;
  event_type: string;
  notification_type: string | null;
  priority: Tier;
  template_id: string;
  requested_channels: string[];
  campaign_id: string | null;
  /** Epoch seconds. */
  created_at: number;
  /** notify.v1.StatusView as JSON: `status`, `channels`, `details` (and `campaign` for an audience). */
  status_view: JsonRecord;
}

async function withStatus(pool: Pool, row: NotificationRow, deferred: (tier: Tier) => boolean): Promise<AdminNotification> {
  const s = await notificationStatus(pool, row.id, deferred);
  return {
    id: row.id,
    recipient_id: row.recipient_id,
    segment_id: row.segment_id,
    caller: row.caller,
    event_type: row.event_type,
    notification_type: row.notification_type,
    priority: row.priority,
    template_id: row.template_id,
    requested_channels: row.channels,
    campaign_id: row.campaign_id,
    created_at: row.created_at,
    // Retention may delete it between the two reads: an empty view rather than a 500.
    status_view: s ? toJson(StatusViewSchema, s.view) : { status: 'unknown', channels: {}, details: {} },
  };
}

/** One notification by id (lower-case uuid), or undefined. */
export async function getNotification(pool: Pool, id: string, deferred: (tier: Tier) => boolean): Promise<AdminNotification | undefined> {
  const { rows } = await pool.query<NotificationRow>(`SELECT ${COLUMNS} FROM notifications WHERE id = $1`, [id]);
  return rows[0] ? withStatus(pool, rows[0], deferred) : undefined;
}

/** Cursors are opaque to callers: base64url of the last row's (created_at, id). */
function encodeCursor(row: NotificationRow): string {
  return Buffer.from(JSON.stringify({ t: row.created_text, i: row.id }), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): { t: string; i: string } {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { t?: unknown; i?: unknown };
    if (typeof v.t === 'string' && typeof v.i === 'string' && /^[0-9a-f-]{36}$/.test(v.i) && /^[0-9 :.+-]{10,40}$/.test(v.t)) {
      return { t: v.t, i: v.i };
    }
  } catch {
    // fall through
  }
  throw invalidField('cursor', 'is not a cursor this server issued');
}

/** Statuses the list filters on: a delivery's visible ones (notifier/tracking/states.ts). */
export const FILTER_STATUSES = [
  'queued',
  'sent',
  'delivered',
  'opened',
  'read',
  'failed',
  'dead_lettered',
  'opted_out',
  'capped',
  'digest',
  'cancelled',
  'bounced',
  'complained',
  'undelivered',
  'suppressed',
] as const;
export type FilterStatus = (typeof FILTER_STATUSES)[number];

/** The stored statuses one shown status stands for (`queued` includes `sending` and the holds). */
function storedStatuses(s: FilterStatus): string[] {
  if (s === 'queued') return ['queued', 'sending'];
  if (s === 'digest') return ['digested'];
  return [s];
}

export interface ListFilter {
  /** One recipient's (the original lookup); undefined: everyone's, audience requests included. */
  userId?: string | undefined;
  notificationType?: string | undefined;
  /** Notifications with a delivery on this channel (in `status`, when given). */
  channel?: string | undefined;
  status?: FilterStatus | undefined;
}

/**
 * Notifications newest first (ties by id), `limit` a page: one user's, or everyone's (the
 * console's recent activity), filtered by notification type, by a channel they have a delivery
 * on, and by a delivery's status (on that channel, when one is given). The filters are SQL
 * conditions over the (created_at, id) order: one index range per page for a user, a backward
 * walk of notifications_created_at otherwise.
 */
export async function listNotifications(
  pool: Pool,
  o: ListFilter & { cursor: string | undefined; limit: number; deferred: (tier: Tier) => boolean },
): Promise<{ notifications: AdminNotification[]; next_cursor: string | null }> {
  const after = o.cursor === undefined ? undefined : decodeCursor(o.cursor);
  const params: unknown[] = [];
  const p = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const where: string[] = [];
  if (o.userId !== undefined) where.push(`recipient_id = ${p(o.userId)}`);
  if (o.notificationType !== undefined) where.push(`notification_type = ${p(o.notificationType)}`);
  if (o.channel !== undefined || o.status !== undefined) {
    const d: string[] = ['d.notification_id = n.id'];
    if (o.channel !== undefined) d.push(`d.channel = ${p(o.channel)}`);
    if (o.status !== undefined) d.push(`d.status = ANY(${p(storedStatuses(o.status))}::text[])`);
    where.push(`EXISTS (SELECT 1 FROM deliveries d WHERE ${d.join(' AND ')})`);
  }
  if (after) where.push(`(created_at, id) < (${p(after.t)}::timestamptz, ${p(after.i)}::uuid)`);
  const sql = `SELECT ${COLUMNS} FROM notifications n ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
    ORDER BY created_at DESC, id DESC LIMIT ${p(o.limit + 1)}`;
  const { rows } = await pool.query<NotificationRow>(sql, params);
  const page = rows.slice(0, o.limit);
  const notifications: AdminNotification[] = [];
  for (const row of page) notifications.push(await withStatus(pool, row, o.deferred));
  const last = page[page.length - 1];
  return { notifications, next_cursor: rows.length > o.limit && last ? encodeCursor(last) : null };
}

/** A user's notifications, newest first (ties by id), `limit` a page. */
export async function listNotificationsOf(
  pool: Pool,
  o: { userId: string; cursor: string | undefined; limit: number; deferred: (tier: Tier) => boolean },
): Promise<{ notifications: AdminNotification[]; next_cursor: string | null }> {
  return listNotifications(pool, o);
}
