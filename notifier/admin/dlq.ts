/**
 * The dead-letter queue: deliveries whose retries ran out or that could not render, one logical
 * queue per channel (the `channel` of each entry). Entries are kept (with the reason code, the last
 * error and the attempt count) for inspection; a re-drive puts the delivery back on its queue with
 * a fresh retry budget. Re-driving an entry is idempotent: the first call marks it re-driven and
 * enqueues one job; later calls change nothing and say so. If the delivery fails again it gets a
 * new entry.
 */
import type { Pool } from '../../shared/db.js';
import { withTransaction } from '../../shared/db.js';
import type { Boss } from '../queues/boss.js';
import type { ChannelName, Tier } from '../queues/names.js';
import { decodeCursor, encodeCursor } from '../tracking/inbox.js';
import { wakeDeliveries } from '../queues/wake-ups.js';

export interface DeadLetterView {
  id: string;
  delivery_id: string;
  notification_id: string;
  recipient_id: string;
  template_id: string;
  channel: ChannelName;
  priority: Tier;
  reason: string;
  detail: string | null;
  attempts: number;
  /** Epoch seconds. */
  created_at: number;
  redriven_at?: number;
  redriven_by?: string;
  /** The delivery's status now. */
  delivery_status: string;
}

export interface DlqQuery {
  channel?: ChannelName;
  reason?: string;
  /** Include entries already re-driven. */
  all: boolean;
  cursor?: string;
  limit: number;
}

const SELECT = `SELECT l.id, l.delivery_id, d.notification_id, d.recipient_id, d.template_id, l.channel, l.priority, l.reason, l.detail,
       l.attempts, extract(epoch FROM l.created_at)::float8 AS created_at, extract(epoch FROM l.redriven_at)::float8 AS redriven_at,
       l.redriven_by, d.status AS delivery_status, l.created_at::text AS created_at_text
  FROM dead_letters l JOIN deliveries d ON d.id = l.delivery_id`;

type Row = Omit<DeadLetterView, 'redriven_at' | 'redriven_by'> & {
  redriven_at: number | null;
  redriven_by: string | null;
  created_at_text: string;
};

function view(r: Row): DeadLetterView {
  const { created_at_text: _t, redriven_at, redriven_by, ...rest } = r;
  const v: DeadLetterView = { ...rest };
  if (redriven_at !== null) v.redriven_at = redriven_at;
  if (redriven_by !== null) v.redriven_by = redriven_by;
  return v;
}

/** Oldest first. */
export async function listDeadLetters(pool: Pool, q: DlqQuery): Promise<{ dead_letters: DeadLetterView[]; next_cursor?: string }> {
  const params: unknown[] = [q.limit + 1];
  const where: string[] = [];
  if (!q.all) where.push('l.redriven_at IS NULL');
  if (q.channel) where.push(`l.channel = $${params.push(q.channel)}`);
  if (q.reason) where.push(`l.reason = $${params.push(q.reason)}`);
  if (q.cursor) {
    const c = decodeCursor(q.cursor);
    where.push(`(l.created_at, l.id) > ($${params.push(c.t)}::timestamptz, $${params.push(c.id)}::uuid)`);
  }
  const { rows } = await pool.query<Row>(
    `${SELECT} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY l.created_at, l.id LIMIT $1`,
    params,
  );
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  const out: { dead_letters: DeadLetterView[]; next_cursor?: string } = { dead_letters: page.map(view) };
  if (rows.length > q.limit && last) out.next_cursor = encodeCursor({ t: last.created_at_text, id: last.id });
  return out;
}

export async function getDeadLetter(pool: Pool, id: string): Promise<DeadLetterView | undefined> {
  const { rows } = await pool.query<Row>(`${SELECT} WHERE l.id = $1`, [id]);
  return rows[0] ? view(rows[0]) : undefined;
}

export type RedriveResult =
  | { id: string; delivery_id: string; result: 'redriven' }
  | { id: string; result: 'already_redriven' | 'not_found' | 'not_dead_lettered'; delivery_id?: string };

/**
 * Re-drives one entry: marks it re-driven and, when its delivery is still dead-lettered, puts the
 * delivery back on its queue (`queued`, attempts from zero). Returns the queue to wake, if any.
 */
export async function redrive(pool: Pool, boss: Boss, id: string, by: string): Promise<{ result: RedriveResult; queue?: string }> {
  return withTransaction(pool, async (client) => {
    const marked = await client.query<{ delivery_id: string; channel: ChannelName; priority: Tier }>(
      `UPDATE dead_letters SET redriven_at = now(), redriven_by = $2 WHERE id = $1 AND redriven_at IS NULL
       RETURNING delivery_id, channel, priority`,
      [id, by],
    );
    const entry = marked.rows[0];
    if (!entry) {
      const { rows } = await client.query<{ delivery_id: string }>('SELECT delivery_id FROM dead_letters WHERE id = $1', [id]);
      return { result: rows[0] ? { id, delivery_id: rows[0].delivery_id, result: 'already_redriven' } : { id, result: 'not_found' } };
    }
    const moved = await client.query(
      `UPDATE deliveries SET status = 'queued', attempts = 0, use_secondary = false, failed_at = NULL, last_error = NULL,
              next_attempt_at = now(), updated_at = now()
        WHERE id = $1 AND status = 'dead_lettered'`,
      [entry.delivery_id],
    );
    if ((moved.rowCount ?? 0) === 0) return { result: { id, delivery_id: entry.delivery_id, result: 'not_dead_lettered' } };
    const [queue] = await wakeDeliveries(client, boss, [{ deliveryId: entry.delivery_id, channel: entry.channel, tier: entry.priority }]);
    return { result: { id, delivery_id: entry.delivery_id, result: 'redriven' }, queue };
  });
}

/** The oldest open entries of a channel (for a bulk re-drive). */
export async function openDeadLetterIds(pool: Pool, channel: ChannelName | undefined, limit: number): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id FROM dead_letters WHERE redriven_at IS NULL AND ($1::text IS NULL OR channel = $1) ORDER BY created_at, id LIMIT $2`,
    [channel ?? null, limit],
  );
  return rows.map((r) => r.id);
}

/** Open entries per channel (the `dlq_depth` gauge). */
export async function dlqDepth(pool: Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ channel: string; n: number }>(
    'SELECT channel, count(*)::int AS n FROM dead_letters WHERE redriven_at IS NULL GROUP BY channel',
  );
  return Object.fromEntries(rows.map((r) => [r.channel, r.n]));
}
