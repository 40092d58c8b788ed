/**
 * Wake-ups: the only thing the notifier puts in pg-boss. A job says "look at notification N" (the
 * routing queues) or "look at delivery D, not before T" (the delivery queues); what to do is read
 * from the row, which owns the state (notifier/README.md, "Who owns a delivery's state"). Each
 * wake-up is sent inside the transaction that changed its row, with a job id we choose and record
 * on the row, so the reconciler (workers/reconcile.ts) can see when one was lost and send another.
 * A wake-up that arrives twice is harmless: the delivery's conditional claim sends at most once.
 */
import { randomUUID } from 'node:crypto';
import type { PoolClient } from '../../shared/db.js';
import { txDb, type Boss } from './boss.js';
import { campaignQueue, deliverQueue, routeQueue, type ChannelName, type Tier } from './names.js';

/** The job payload of every routing queue. */
export interface RouteJob {
  notification_id: string;
}

/**
 * The job payload of the campaign queues (notifier/campaigns/fanout.ts): move the fan-out of
 * `notification_id` on (plan it, re-send its lost shard jobs, or after a stop cancel what is still
 * queued), or expand one of its shards.
 */
export type CampaignJob = { notification_id: string; step: 'plan' } | { notification_id: string; step: 'shard'; shard: number };

/** The job payload of every delivery queue. */
export interface DeliveryJob {
  delivery_id: string;
}

export interface DeliveryWake {
  deliveryId: string;
  channel: ChannelName;
  tier: Tier;
  /** Not before this many ms from now (0: at once). */
  delayMs?: number;
}

/** Wakes the router for a stored notification; returns the queue. */
export async function wakeRouter(client: PoolClient, boss: Boss, notificationId: string, tier: Tier): Promise<string> {
  const queue = routeQueue(tier);
  const id = randomUUID();
  const job: RouteJob = { notification_id: notificationId };
  const sent = await boss.send(queue, job, { id, db: txDb(client) });
  if (sent === null) throw new Error(`queue ${queue} does not exist`);
  await client.query('UPDATE notifications SET route_job_id = $2 WHERE id = $1', [notificationId, id]);
  return queue;
}

/**
 * Wakes the campaign worker for a fan-out (its `plan` step); records the job on the notification
 * (`route_job_id`: the reconciler replaces it if it is lost while the fan-out is unfinished).
 * Returns the queue.
 */
export async function wakeCampaign(client: PoolClient, boss: Boss, notificationId: string, tier: Tier): Promise<string> {
  const queue = campaignQueue(tier);
  const id = randomUUID();
  const job: CampaignJob = { notification_id: notificationId, step: 'plan' };
  const sent = await boss.send(queue, job, { id, db: txDb(client) });
  if (sent === null) throw new Error(`queue ${queue} does not exist`);
  await client.query('UPDATE notifications SET route_job_id = $2 WHERE id = $1', [notificationId, id]);
  return queue;
}

/**
 * Wakes a worker for each delivery (after its delay), in the caller's transaction; returns the
 * queues with a wake-up due now (to poke their runners).
 */
export async function wakeDeliveries(client: PoolClient, boss: Boss, wakes: readonly DeliveryWake[]): Promise<string[]> {
  if (wakes.length === 0) return [];
  const due = new Set<string>();
  const ids: string[] = [];
  const now: { id: string; name: string; data: DeliveryJob }[] = [];
  for (const w of wakes) {
    const id = randomUUID();
    ids.push(id);
    const name = deliverQueue(w.channel, w.tier);
    const data: DeliveryJob = { delivery_id: w.deliveryId };
    const delayMs = w.delayMs ?? 0;
    if (delayMs > 0) {
      // Relative, so the database's clock decides when it is due, as for every other job.
      await boss.send(name, data, { id, db: txDb(client), startAfter: delayMs / 1000 });
    } else {
      now.push({ id, name, data });
      due.add(name);
    }
  }
  if (now.length > 0) await boss.insert(now, { db: txDb(client) });
  await client.query(
    `UPDATE deliveries d SET wake_job_id = w.job_id
       FROM unnest($1::uuid[], $2::uuid[]) AS w (delivery_id, job_id)
      WHERE d.id = w.delivery_id`,
    [wakes.map((w) => w.deliveryId), ids],
  );
  return [...due];
}
