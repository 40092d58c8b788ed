/**
 * The in-app inbox: the in_app channel's writer, the feed and the read mark.
 *
 * - {@link writeInbox} is what the in_app channel calls (notifier/channels/in-app.ts): one item
 *   per delivery, idempotent on the delivery id, so a repeated attempt never shows twice.
 * - The feed is newest first, paged by an opaque keyset cursor over (created_at, id): stable while
 *   new items arrive (they sort before the cursor), and cheap at any depth (an index range scan).
 * - Marking an item read sets `read_at` once; the next fetch shows it read (it is one table) and
 *   its delivery moves to `read`.
 */
import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import type { Pool } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';
import { InboxItemSchema, InboxPageSchema, type InboxPage } from '../../proto/gen/notify/v1/notify_pb.js';
import type { OutboundMessage, SendContext } from '../channels/channel.js';
import { advanceDelivery, isUuid } from './advance.js';

/**
 * Writes one in-app item for a delivery; returns the item id (the in_app "provider message id").
 * The notification's event type comes from the notification row.
 */
export async function writeInbox(pool: Pool, msg: OutboundMessage, ctx: SendContext): Promise<string> {
  const data: Record<string, string> = { ...(msg.data ?? {}) };
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO inbox_items (id, user_id, delivery_id, notification_id, event_type, title, body, data)
     SELECT $1, $2, $3, n.id, n.event_type, $5, $6, $7 FROM notifications n WHERE n.id = $4
     ON CONFLICT (delivery_id) DO UPDATE SET delivery_id = excluded.delivery_id
     RETURNING id`,
    [randomUUID(), msg.to, ctx.deliveryId, msg.notificationId, msg.title ?? null, msg.body, data],
  );
  if (!rows[0]) throw new Error(`notification ${msg.notificationId} does not exist`);
  return rows[0].id;
}

interface Cursor {
  /** created_at as PostgreSQL prints it (microseconds kept). */
  t: string;
  id: string;
}

const TS_RE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2})?$/;

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.t, c.id])).toString('base64url');
}

/** @throws PlatformError invalid_field (`cursor`) */
export function decodeCursor(raw: string): Cursor {
  try {
    const v: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string' && TS_RE.test(v[0]) && isUuid(v[1])) {
      return { t: v[0], id: v[1] };
    }
  } catch {
    // fall through
  }
  throw invalidField('cursor', 'is not a cursor this feed returned');
}

export interface FeedQuery {
  userId: string;
  unreadOnly: boolean;
  cursor: string | undefined;
  limit: number;
}

/** One page of the user's inbox, newest first. */
export async function listInbox(pool: Pool, q: FeedQuery): Promise<InboxPage> {
  const after = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
  const params: unknown[] = [q.userId, q.limit + 1];
  let where = 'user_id = $1';
  if (q.unreadOnly) where += ' AND read_at IS NULL';
  if (after) {
    params.push(after.t, after.id);
    where += ' AND (created_at, id) < ($3::timestamptz, $4::uuid)';
  }
  const { rows } = await pool.query<{
    id: string;
    notification_id: string;
    event_type: string;
    title: string | null;
    body: string;
    data: Record<string, string>;
    created_at_text: string;
    created_at_s: number;
    read_at_s: number | null;
  }>(
    `SELECT id, notification_id, event_type, title, body, data, created_at::text AS created_at_text,
            extract(epoch FROM created_at)::float8 AS created_at_s, extract(epoch FROM read_at)::float8 AS read_at_s
       FROM inbox_items WHERE ${where}
      ORDER BY created_at DESC, id DESC
      LIMIT $2`,
    params,
  );
  const more = rows.length > q.limit;
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  return create(InboxPageSchema, {
    notifications: page.map((r) =>
      create(InboxItemSchema, {
        id: r.id,
        notificationId: r.notification_id,
        eventType: r.event_type,
        title: r.title ?? '',
        body: r.body,
        data: r.data,
        createdAt: r.created_at_s,
        read: r.read_at_s !== null,
        readAt: r.read_at_s ?? undefined,
      }),
    ),
    nextCursor: more && last ? encodeCursor({ t: last.created_at_text, id: last.id }) : undefined,
  });
}

/** Marks the user's item read (idempotent). False when the user has no such item. */
export async function markRead(pool: Pool, userId: string, itemId: string): Promise<boolean> {
  if (!isUuid(itemId)) return false;
  const { rows } = await pool.query<{ delivery_id: string | null }>(
    `UPDATE inbox_items SET read_at = coalesce(read_at, now()) WHERE id = $1 AND user_id = $2 RETURNING delivery_id`,
    [itemId, userId],
  );
  if (!rows[0]) return false;
  if (rows[0].delivery_id) await advanceDelivery(pool, rows[0].delivery_id, 'read');
  return true;
}
