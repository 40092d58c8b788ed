/**
 * A campaign's progress counters. Every change of a campaign delivery's state appends a delta row
 * (the trigger in migrations/090_campaigns.sql; a shard appends its first counts itself), so
 * neither concurrent shards nor concurrent sends ever wait on one counter row, and the status
 * view sums a few rows instead of counting a million deliveries. {@link compactCounts} folds a
 * fan-out's deltas into one row per (channel, status) now and then.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import type { ChannelName } from '../queues/names.js';
import type { DeliveryStatus } from '../tracking/states.js';

type Queryable = Pool | PoolClient;

/** The pseudo-status of the members a shard expanded (channel ''). */
export const MEMBERS = 'members';

/** Delivery counts by channel and state, and the members expanded. */
export interface Counts {
  members: number;
  byChannel: Map<ChannelName, Map<DeliveryStatus, number>>;
  /** Delta rows behind these sums (how much there is to fold). */
  rows: number;
}

/** The summed counters of several fan-outs. */
export async function readCounts(db: Queryable, notificationIds: readonly string[]): Promise<Map<string, Counts>> {
  const { rows } = await db.query<{ notification_id: string; channel: string; status: string; n: number; rows: number }>(
    `SELECT notification_id, channel, status, sum(n)::float8 AS n, count(*)::int AS rows
       FROM campaign_counts WHERE notification_id = ANY($1::uuid[])
      GROUP BY notification_id, channel, status`,
    [[...notificationIds]],
  );
  const out = new Map<string, Counts>();
  for (const id of notificationIds) out.set(id, { members: 0, byChannel: new Map(), rows: 0 });
  for (const r of rows) {
    const c = out.get(r.notification_id)!;
    c.rows += r.rows;
    if (r.status === MEMBERS) {
      c.members += r.n;
      continue;
    }
    const ch = r.channel as ChannelName;
    const m = c.byChannel.get(ch) ?? new Map<DeliveryStatus, number>();
    m.set(r.status as DeliveryStatus, (m.get(r.status as DeliveryStatus) ?? 0) + r.n);
    c.byChannel.set(ch, m);
  }
  return out;
}

/**
 * Folds a fan-out's delta rows into one per (channel, status). Safe beside writers: it deletes
 * and re-inserts exactly the rows its snapshot saw, and a second compaction at the same time
 * skips the rows the first deleted.
 */
export async function compactCounts(db: Queryable, notificationId: string): Promise<void> {
  await db.query(
    `WITH gone AS (DELETE FROM campaign_counts WHERE notification_id = $1 RETURNING channel, status, n)
     INSERT INTO campaign_counts (notification_id, channel, status, n)
     SELECT $1, channel, status, sum(n) FROM gone GROUP BY channel, status HAVING sum(n) <> 0`,
    [notificationId],
  );
}

/**
 * A shard's first counts (members expanded, deliveries by channel and state) as the columns of
 * one `unnest($channels, $statuses, $ns)` insert into campaign_counts (fanout.ts writes them in
 * the statement that checkpoints the shard).
 */
export function shardCounts(members: number, byKey: ReadonlyMap<string, number>): { channels: string[]; statuses: string[]; ns: number[] } {
  const channels: string[] = [''];
  const statuses: string[] = [MEMBERS];
  const ns: number[] = [members];
  for (const [key, n] of byKey) {
    const [channel, status] = key.split('\0') as [string, string];
    channels.push(channel);
    statuses.push(status);
    ns.push(n);
  }
  return { channels, statuses, ns };
}

/** The buckets the status view shows. */
export interface Totals {
  expanded: number;
  queued: number;
  sent: number;
  delivered: number;
  failed: number;
  suppressed: number;
  cancelled: number;
}

const BUCKET: Readonly<Record<DeliveryStatus, keyof Totals | undefined>> = {
  queued: 'queued',
  sending: 'queued',
  sent: 'sent',
  delivered: 'delivered',
  opened: 'delivered',
  read: 'delivered',
  failed: 'failed',
  dead_lettered: 'failed',
  opted_out: 'suppressed',
  capped: 'suppressed',
  cancelled: 'cancelled',
  // Provider feedback (notifier/feedback): a complaint follows a delivery; the others failed.
  bounced: 'failed',
  complained: 'delivered',
  undelivered: 'failed',
  suppressed: 'suppressed',
  // Campaign deliveries are never folded into a digest.
  digested: undefined,
};

export function totalsOf(counts: readonly Counts[]): Totals {
  const t: Totals = { expanded: 0, queued: 0, sent: 0, delivered: 0, failed: 0, suppressed: 0, cancelled: 0 };
  for (const c of counts) {
    t.expanded += c.members;
    for (const m of c.byChannel.values())
      for (const [status, n] of m) {
        const b = BUCKET[status];
        if (b) t[b] += n;
      }
  }
  return t;
}
