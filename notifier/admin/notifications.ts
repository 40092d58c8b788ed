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

/** A user's notifications, newest first (ties by id), `limit` a page. */
export async function listNotificationsOf(
  pool: Pool,
  o: { userId: string; cursor: string | undefined; limit: number; deferred: (tier: Tier) => boolean },
): Promise<{ notifications: AdminNotification[]; next_cursor: string | null }> {
  const after = o.cursor === undefined ? undefined : decodeCursor(o.cursor);
  const { rows } = after
    ? await pool.query<NotificationRow>(
        `SELECT ${COLUMNS} FROM notifications WHERE recipient_id = $1 AND (created_at, id) < ($2::timestamptz, $3::uuid)
          ORDER BY created_at DESC, id DESC LIMIT $4`,
        [o.userId, after.t, after.i, o.limit + 1],
      )
    : await pool.query<NotificationRow>(
        `SELECT ${COLUMNS} FROM notifications WHERE recipient_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`,
        [o.userId, o.limit + 1],
      );
  const page = rows.slice(0, o.limit);
  const notifications: AdminNotification[] = [];
  for (const row of page) notifications.push(await withStatus(pool, row, o.deferred));
  const last = page[page.length - 1];
  return { notifications, next_cursor: rows.length > o.limit && last ? encodeCursor(last) : null };
}
