/**
 * The reconciler. The notifications and deliveries tables own their state; pg-boss carries only
 * wake-ups (queues/wake-ups.ts). This finds the rows that still need a worker but whose last
 * wake-up is no longer waiting in pg-boss, and sends each another: a notification not yet routed,
 * a delivery `queued` and due, or `sending` with its lease run out. A wake-up is lost when pg-boss
 * gave up on it (its crash redeliveries used up), or an operator deleted or purged jobs; without
 * this, such a row would wait for ever. A wake-up still queued, retrying or held is left alone, so
 * a deep backlog is never doubled; a second wake-up for the same row is harmless anyway (the claim
 * in delivery-sql.ts sends at most once).
 *
 * One replica at a time reconciles (a transaction-scoped advisory lock); each pass handles at most
 * `batch` rows of each kind, oldest first.
 */
import { withTransaction, type Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import type { Boss } from '../queues/boss.js';
import type { ChannelName, Tier } from '../queues/names.js';
import { wakeCampaign, wakeDeliveries, wakeRouter } from '../queues/wake-ups.js';

export interface ReconcilerOptions {
  pool: Pool;
  boss: Boss;
  log: Logger;
  /** Between passes. */
  intervalMs: number;
  /** How long a row must have been due (or unrouted) before a missing wake-up is replaced. */
  graceMs: number;
  /** Rows of each kind per pass. */
  batch?: number;
  /** Pokes a queue's runner when a wake-up is due now. */
  wake: (queue: string) => void;
}

export interface ReconcileResult {
  notifications: number;
  deliveries: number;
}

// pg-boss 10 keeps every job in pgboss.job (partitioned by queue name, keyed by (name, id)); a
// state before 'completed' (created, retry, active) is a wake-up still on its way.
// An audience request's job is its fan-out's campaign job (notifier/campaigns/fanout.ts): the
// notification stays unrouted until the fan-out is finished, and a lost job is replaced the same way.
const UNROUTED = `
  SELECT n.id, n.priority, (n.segment_id IS NOT NULL) AS campaign FROM notifications n
   WHERE n.routed_at IS NULL
     AND n.created_at < now() - make_interval(secs => $1::double precision / 1000)
     AND NOT EXISTS (SELECT 1 FROM pgboss.job j
                      WHERE j.name = (CASE WHEN n.segment_id IS NULL THEN 'notify-route-' ELSE 'notify-campaign-' END) || n.priority
                        AND j.id = n.route_job_id AND j.state < 'completed')
   ORDER BY n.created_at
   LIMIT $2
   FOR UPDATE OF n SKIP LOCKED`;

// A campaign delivery that never had a wake-up is the campaign pump's (notifier/campaigns/pump.ts).
const STRANDED = `
  SELECT d.id, d.channel, d.priority FROM deliveries d
   WHERE d.status IN ('queued', 'sending')
     AND (d.campaign_shard IS NULL OR d.wake_job_id IS NOT NULL)
     AND coalesce(d.next_attempt_at, d.created_at) < now() - make_interval(secs => $1::double precision / 1000)
     AND (d.status = 'queued' OR d.sending_since < now() - make_interval(secs => $1::double precision / 1000))
     AND NOT EXISTS (SELECT 1 FROM pgboss.job j
                      WHERE j.name = 'notify-deliver-' || d.channel || '-' || d.priority AND j.id = d.wake_job_id AND j.state < 'completed')
   ORDER BY coalesce(d.next_attempt_at, d.created_at)
   LIMIT $2
   FOR UPDATE OF d SKIP LOCKED`;

export class Reconciler {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;

  constructor(private readonly o: ReconcilerOptions) {}

  start(): void {
    this.#timer = setInterval(() => void this.#tick(), this.o.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  /** One pass now: the rows found and woken again. */
  runOnce(): Promise<ReconcileResult> {
    const o = this.o;
    const batch = o.batch ?? 1000;
    return withTransaction(o.pool, async (client) => {
      const { rows: lock } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtext('notifier:reconcile')) AS ok`);
      if (!lock[0]?.ok) return { result: { notifications: 0, deliveries: 0 }, due: [] as string[] };
      const due = new Set<string>();
      const unrouted = await client.query<{ id: string; priority: Tier; campaign: boolean }>(UNROUTED, [o.graceMs, batch]);
      for (const n of unrouted.rows)
        due.add(n.campaign ? await wakeCampaign(client, o.boss, n.id, n.priority) : await wakeRouter(client, o.boss, n.id, n.priority));
      const stranded = await client.query<{ id: string; channel: ChannelName; priority: Tier }>(STRANDED, [o.graceMs, batch]);
      const woken = await wakeDeliveries(
        client,
        o.boss,
        stranded.rows.map((d) => ({ deliveryId: d.id, channel: d.channel, tier: d.priority })),
      );
      for (const q of woken) due.add(q);
      return { result: { notifications: unrouted.rowCount ?? 0, deliveries: stranded.rowCount ?? 0 }, due: [...due] };
    }).then(({ result, due }) => {
      for (const q of due) o.wake(q);
      if (result.notifications + result.deliveries > 0) o.log.warn({ ...result }, 'reconciler: lost wake-ups replaced');
      return result;
    });
  }

  #tick(): void {
    if (this.#running) return;
    this.#running = this.runOnce()
      .catch((err: unknown) => this.o.log.warn({ err }, 'reconciler: pass failed; trying again at the next one'))
      .finally(() => {
        this.#running = undefined;
      });
  }
}
