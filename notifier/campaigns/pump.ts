/**
 * The campaign pump: gives a campaign's delivery records their wake-ups at delivery speed.
 *
 * A shard writes a thousand deliveries in one statement and no queue job (fanout.ts); a million
 * jobs written at expansion speed would double the expansion's writes and sit in pg-boss for as
 * long as the sends take. Instead each replica keeps every delivery queue that has campaign work
 * topped up to NOTIFIER_CAMPAIGN_QUEUE_DEPTH waiting jobs: it picks the oldest due unwoken
 * deliveries (`deliveries_campaign_unwoken`, SKIP LOCKED so replicas never pick the same row),
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

/** Which (channel, tier) pairs have a due, unwoken campaign delivery: one index probe each. */
const DUE_PAIRS = `
  SELECT p.channel, p.priority FROM unnest($1::text[], $2::text[]) AS p (channel, priority)
   WHERE EXISTS (SELECT 1 FROM deliveries d
                  WHERE d.campaign_shard IS NOT NULL AND d.status = 'queued' AND d.wake_job_id IS NULL
                    AND d.channel = p.channel AND d.priority = p.priority
                    AND coalesce(d.next_attempt_at, d.created_at) <= now())`;

// Due now: a retry scheduled for later is not waiting in front of the campaign.
const WAITING = `SELECT count(*)::int AS n FROM (
  SELECT 1 FROM pgboss.job WHERE name = $1 AND state < 'active' AND start_after <= now() LIMIT $2) w`;

/** The oldest due unwoken deliveries of running campaigns, locked for this transaction. */
const PICK = `
  SELECT d.id FROM deliveries d
   WHERE d.campaign_shard IS NOT NULL AND d.status = 'queued' AND d.wake_job_id IS NULL
     AND d.channel = $1 AND d.priority = $2 AND coalesce(d.next_attempt_at, d.created_at) <= now()
     AND NOT EXISTS (SELECT 1 FROM notifications n JOIN campaigns c ON c.id = n.campaign_id
                      WHERE n.id = d.notification_id AND c.stopped_at IS NOT NULL)
   ORDER BY coalesce(d.next_attempt_at, d.created_at)
   LIMIT $3
   FOR UPDATE OF d SKIP LOCKED`;

export class CampaignPump {
  readonly #o: PumpOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;
  #poked = false;
  readonly #pairs: { channel: ChannelName; tier: Tier }[] = [];

  constructor(o: PumpOptions) {
    this.#o = o;
    for (const tier of CAMPAIGN_TIERS) for (const channel of CHANNEL_NAMES) this.#pairs.push({ channel, tier });
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

  /** One round: top up every queue with due campaign work; true when any had some. */
  async pumpOnce(): Promise<{ pumped: number; busy: boolean }> {
    const o = this.#o;
    const runnable = this.#pairs.filter((p) => o.mayRun(p.tier));
    if (runnable.length === 0) return { pumped: 0, busy: false };
    const { rows } = await o.pool.query<{ channel: ChannelName; priority: Tier }>(DUE_PAIRS, [
      runnable.map((p) => p.channel),
      runnable.map((p) => p.tier),
    ]);
    let pumped = 0;
    for (const r of rows) pumped += await this.#topUp(r.channel, r.priority);
    return { pumped, busy: rows.length > 0 };
  }

  async #topUp(channel: ChannelName, tier: Tier): Promise<number> {
    const o = this.#o;
    const queue = deliverQueue(channel, tier);
    const { rows } = await o.pool.query<{ n: number }>(WAITING, [queue, o.depth]);
    const room = o.depth - (rows[0]?.n ?? 0);
    // Top up in steps of at least a tenth of the depth: one transaction per few sends would cost more than it saves.
    if (room < Math.max(1, Math.floor(o.depth / 10))) return 0;
    const woken = await withTransaction(o.pool, async (client) => {
      const picked = await client.query<{ id: string }>(PICK, [channel, tier, room]);
      if (picked.rows.length === 0) return 0;
      await wakeDeliveries(
        client,
        o.boss,
        picked.rows.map((d) => ({ deliveryId: d.id, channel, tier })),
      );
      return picked.rows.length;
    });
    if (woken > 0) o.wake(queue);
    return woken;
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
