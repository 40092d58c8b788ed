/**
 * The routing worker: one job per accepted notification, on its tier's routing queue. It decides
 * the channels (those of the request; else the conservative default, push only, until user
 * preferences exist) and creates one delivery record per (notification, channel, recipient), each
 * with its job on the channel × tier delivery queue, in one transaction with the jobs' completion,
 * a fetched batch at a time. Running it twice creates nothing twice (`routed_at`, and the
 * deliveries' unique key).
 */
import { withTransaction, type Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { randomUUID } from 'node:crypto';
import { completeJobs, txDb, type Boss, type Job } from '../queues/boss.js';
import type { ChannelName, Tier } from '../queues/names.js';
import { wakeDeliveries, type RouteJob } from '../queues/wake-ups.js';
import { deliveryKey } from './delivery-sql.js';

export type { RouteJob } from '../queues/wake-ups.js';

/** The channels when the request names none: the conservative default, push only (README, "Ingestion"). */
export const DEFAULT_CHANNELS: readonly ChannelName[] = ['push'];

/** The channels a notification goes out on. Pure. */
export function resolveChannels(requested: readonly ChannelName[]): ChannelName[] {
  return requested.length > 0 ? [...requested] : [...DEFAULT_CHANNELS];
}

export interface RoutingWorkerOptions {
  pool: Pool;
  boss: Boss;
  log: Logger;
  wake: (queue: string) => void;
}

export class RoutingWorker {
  readonly #o: RoutingWorkerOptions;

  constructor(opts: RoutingWorkerOptions) {
    this.#o = opts;
  }

  /**
   * Routes a fetched batch of notifications in one transaction: their deliveries (one multi-row
   * insert), the delivery jobs (one pg-boss bulk insert), `routed_at`, and the routing jobs'
   * completion. Notifications are locked in id order, so concurrent batches cannot deadlock.
   */
  async handleBatch(queue: string, jobs: readonly Job<RouteJob>[]): Promise<void> {
    const o = this.#o;
    const ids = [...new Set(jobs.map((j) => j.data.notification_id))];
    const wake = await withTransaction(o.pool, async (client) => {
      const { rows } = await client.query<{
        id: string;
        recipient_id: string;
        priority: Tier;
        template_id: string;
        channels: ChannelName[];
      }>(
        `SELECT id, recipient_id, priority, template_id, channels FROM notifications
          WHERE id = ANY($1::uuid[]) AND routed_at IS NULL ORDER BY id FOR UPDATE`,
        [ids],
      );
      const queues = new Set<string>();
      if (rows.length > 0) {
        const d: {
          id: string[];
          n: string[];
          channel: string[];
          recipient: string[];
          priority: string[];
          template: string[];
          key: string[];
        } = {
          id: [],
          n: [],
          channel: [],
          recipient: [],
          priority: [],
          template: [],
          key: [],
        };
        for (const n of rows) {
          for (const channel of resolveChannels(n.channels)) {
            d.id.push(randomUUID());
            d.n.push(n.id);
            d.channel.push(channel);
            d.recipient.push(n.recipient_id);
            d.priority.push(n.priority);
            d.template.push(n.template_id);
            d.key.push(deliveryKey(n.id, channel, n.recipient_id));
          }
        }
        const created = await client.query<{ id: string; channel: ChannelName; priority: Tier }>(
          `INSERT INTO deliveries (id, notification_id, channel, recipient_id, priority, template_id, idempotency_key)
           SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
           ON CONFLICT (idempotency_key) DO NOTHING
           RETURNING id, channel, priority`,
          [d.id, d.n, d.channel, d.recipient, d.priority, d.template, d.key],
        );
        const due = await wakeDeliveries(
          client,
          o.boss,
          created.rows.map((r) => ({ deliveryId: r.id, channel: r.channel, tier: r.priority })),
        );
        for (const q of due) queues.add(q);
        await client.query('UPDATE notifications SET routed_at = now() WHERE id = ANY($1::uuid[])', [rows.map((r) => r.id)]);
      }
      await completeJobs(
        o.boss,
        queue,
        jobs.map((j) => j.id),
        txDb(client),
      );
      return queues;
    });
    for (const q of wake) o.wake(q);
  }
}
