/**
 * The campaign pump: gives a campaign's delivery records their wake-ups at delivery speed.
 *
 * A shard writes a thousand deliveries in one statement and no queue job (fanout.ts); a million
 * jobs written at expansion speed would double the expansion's writes and sit in pg-boss for as
 * long as the sends take. Instead each replica keeps every delivery queue that has campaign work
 * topped up to NOTIFIER_CAMPAIGN_QUEUE_DEPTH waiting jobs: for each running fan-out, oldest first,
 * it picks the oldest due unwoken deliveries (`deliveries_campaign_unwoken`, which leads with the
 * fan-out's notification; SKIP LOCKED so replicas never pick the same row),
 * sends their wake-ups and records them on the rows in one transaction (queues/wake-ups.ts).
 * From there a campaign delivery is like any other: the claim checks the policies and the kill
 * switch, retries get their own wake-ups, the reconciler replaces lost ones.
 *
 * What this gives: a campaign never holds more than the depth in pg-boss per queue; a stopped
 * campaign is never pumped again (and its waiting jobs find cancelled rows); the tiers keep their
 * order (a tier the backpressure defers is not pumped); and a quiet-hours hold simply becomes due.
 */
import type { Pool } from '../../shared/db.js';
import { withTransaction } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import type { Boss } from '../queues/boss.js';
import { CAMPAIGN_TIERS, CHANNEL_NAMES, deliverQueue, type ChannelName, type Tier } from '../queues/names.js';
import { wakeDeliveries } from '../queues/wake-ups.js';

export interface PumpOptions {
  pool: Pool;
  boss: Boss;
  log: Logger;
  /** Waiting wake-ups kept per delivery queue (NOTIFIER_CAMPAIGN_QUEUE_DEPTH). */
  depth: number;
  /** Between looks when there was nothing to pump (NOTIFIER_CAMPAIGN_PUMP_IDLE). */
  idleMs: number;
  /** Between top-ups while there is campaign work. */
  busyMs: number;
  /** Whether the backpressure lets a tier run now. */
  mayRun: (tier: Tier) => boolean;
  wake: (queue: string) => void;
}

/**
 * The expanded fan-outs (not stopped, not drained) and each channel of theirs with a due, unwoken
 * delivery, oldest fan-out first. Decided: a fan-out's sends start once it is fully expanded. The
 * expansion is the part with a deadline (a million members in a minute) and gets the database to
 * itself instead of sharing it with its own sends; its counts (recipients, suppressed) are final
 * before the first send; and a stop during the expansion cancels a campaign nobody has received
 * yet: one probe of deliveries_campaign_unwoken per (fan-out, channel).
 * A stopped campaign is not here at all, so its unwoken rows (swept to `cancelled` in the
 * background) never cost a scan.
 */
const DUE = `
  SELECT f.notification_id, n.priority, ch.channel
    FROM campaign_fanouts f
    JOIN notifications n ON n.id = f.notification_id
    JOIN campaigns c ON c.id = f.campaign_id
    CROSS JOIN unnest($1::text[]) AS ch (channel)
   WHERE f.state = 'expanded' AND f.drained_at IS NULL AND c.stopped_at IS NULL
     AND n.priority = ANY($2::text[])
     AND EXISTS (SELECT 1 FROM deliveries d
                  WHERE d.notification_id = f.notification_id AND d.channel = ch.channel
                    AND d.campaign_shard IS NOT NULL AND d.status = 'queued' AND d.wake_job_id IS NULL
                    AND coalesce(d.next_attempt_at, d.created_at) <= now())
   ORDER BY f.created_at, f.notification_id`;

/** Fan-outs fully expanded with nothing left unwoken (not even a quiet-hours hold): done with. */
const DRAINED = `
  UPDATE campaign_fanouts f SET drained_at = now()
   WHERE f.state = 'expanded' AND f.drained_at IS NULL
     AND NOT EXISTS (SELECT 1 FROM deliveries d
                      WHERE d.notification_id = f.notification_id
                        AND d.campaign_shard IS NOT NULL AND d.status = 'queued' AND d.wake_job_id IS NULL)`;

// Due now: a retry scheduled for later is not waiting in front of the campaign.
const WAITING = `SELECT count(*)::int AS n FROM (
  SELECT 1 FROM pgboss.job WHERE name = $1 AND state < 'active' AND start_after <= now() LIMIT $2) w`;

/** One fan-out's oldest due unwoken deliveries on one channel, locked for this transaction. */
const PICK = `
  SELECT d.id FROM deliveries d
   WHERE d.notification_id = $1 AND d.channel = $2
     AND d.campaign_shard IS NOT NULL AND d.status = 'queued' AND d.wake_job_id IS NULL
     AND coalesce(d.next_attempt_at, d.created_at) <= now()
   ORDER BY coalesce(d.next_attempt_at, d.created_at)
   LIMIT $3
   FOR UPDATE OF d SKIP LOCKED`;

export class CampaignPump {
  readonly #o: PumpOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;
  #poked = false;

  constructor(o: PumpOptions) {
    this.#o = o;
  }

  start(): void {
    this.#schedule(0);
  }

  /** New campaign deliveries were written: look now. */
  poke(): void {
    if (this.#stopped) return;
    if (this.#running) this.#poked = true;
    else this.#schedule(0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#running = this.#tick().finally(() => {
        this.#running = undefined;
      });
    }, ms);
    this.#timer.unref();
  }

  /** One round: top up every delivery queue that has due campaign work; `busy` when any had some. */
  async pumpOnce(): Promise<{ pumped: number; busy: boolean }> {
    const o = this.#o;
    const tiers = CAMPAIGN_TIERS.filter((tier) => o.mayRun(tier));
    if (tiers.length === 0) return { pumped: 0, busy: false };
    const { rows } = await o.pool.query<{ notification_id: string; priority: Tier; channel: ChannelName }>(DUE, [CHANNEL_NAMES, tiers]);
    if (rows.length === 0) {
      await o.pool.query(DRAINED);
      return { pumped: 0, busy: false };
    }
    // Each delivery queue's room is shared by its fan-outs, oldest first.
    const room = new Map<string, number>();
    let pumped = 0;
    for (const r of rows) {
      const queue = deliverQueue(r.channel, r.priority);
      let left = room.get(queue);
      if (left === undefined) {
        const { rows: w } = await o.pool.query<{ n: number }>(WAITING, [queue, o.depth]);
        left = o.depth - (w[0]?.n ?? 0);
        // Top up in steps of at least a tenth of the depth: one transaction per few sends would cost more than it saves.
        if (left < Math.max(1, Math.floor(o.depth / 10))) left = 0;
      }
      if (left > 0) {
        const n = await this.#wake(r.notification_id, r.channel, r.priority, left);
        left -= n;
        pumped += n;
        if (n > 0) o.wake(queue);
      }
      room.set(queue, left);
    }
    return { pumped, busy: true };
  }

  /** Wakes up to `limit` of one fan-out's due deliveries on one channel; returns how many. */
  async #wake(notificationId: string, channel: ChannelName, tier: Tier, limit: number): Promise<number> {
    const o = this.#o;
    return withTransaction(o.pool, async (client) => {
      const picked = await client.query<{ id: string }>(PICK, [notificationId, channel, limit]);
      if (picked.rows.length === 0) return 0;
      await wakeDeliveries(
        client,
        o.boss,
        picked.rows.map((d) => ({ deliveryId: d.id, channel, tier })),
      );
      return picked.rows.length;
    });
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    let busy = false;
    try {
      this.#poked = false;
      busy = (await this.pumpOnce()).busy;
    } catch (err) {
      this.#o.log.warn({ err }, 'campaign pump: a round failed; trying again');
    }
    if (!this.#stopped) this.#schedule(this.#poked ? 0 : busy ? this.#o.busyMs : this.#o.idleMs);
  }
}
