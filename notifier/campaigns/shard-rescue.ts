/**
 * Hands the shards of a dead replica to a live one within a few heartbeats.
 *
 * pg-boss 10 has no job heartbeat: a job whose worker died stays `active` until it expires
 * (NOTIFIER_JOB_EXPIRE, 60 s) and the next maintenance run (NOTIFIER_QUEUE_MAINTENANCE, 30 s) puts
 * it back, so a SIGKILL during a campaign's expansion stalled it 64–95 s. A shorter expiry would
 * hand a slow shard to a second worker while the first still works on it. The replicas already
 * heartbeat (notifier_replicas, the kill switch's), and a shard job claims its shard with its
 * replica's id as it starts (fanout.ts), so liveness is known per shard instead:
 *
 * every heartbeat period, each replica looks for pending shards of an expanding fan-out whose job is
 * `active` but whose claimer is gone (its row deleted, or silent for three heartbeats, the kill
 * switch's rule), or which no replica claimed although the job started three heartbeats ago (a
 * worker that died between fetching the job and claiming it). For each, in one transaction: the
 * shard row is locked (SKIP LOCKED: a shard some worker is expanding right now is locked by that
 * worker's transaction and never touched), the old job is cancelled, a new one is sent, and the
 * shard points at it. The next fetch by any replica, at once on this one (woken), takes it.
 *
 * Safe when wrong: a shard handed on while its worker was only slow is expanded once anyway, since
 * the expansion runs under the shard row's lock and skips a shard already done (fanout.ts).
 */
import { randomUUID } from 'node:crypto';
import { withTransaction, type Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { txDb, type Boss } from '../queues/boss.js';
import { CAMPAIGN_TIERS, campaignQueue } from '../queues/names.js';
import type { CampaignJob } from '../queues/wake-ups.js';

export interface ShardRescueOptions {
  pool: Pool;
  boss: Boss;
  log: Logger;
  /** NOTIFIER_REPLICA_HEARTBEAT: looked at this often; a replica silent for three is dead. */
  heartbeatMs: number;
  wake: (queue: string) => void;
}

/** Shards handed on per transaction (a replica holds one shard per campaign slot, so a few). */
const BATCH = 100;

export class ShardRescue {
  readonly #o: ShardRescueOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;

  constructor(o: ShardRescueOptions) {
    this.#o = o;
  }

  start(): void {
    this.#timer = setInterval(() => {
      this.#running ??= this.runOnce()
        .catch((err: unknown) => this.#o.log.warn({ err }, 'campaign: looking for shards of dead replicas failed'))
        .finally(() => (this.#running = undefined));
    }, this.#o.heartbeatMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  /** One look; returns the shards handed on. */
  async runOnce(): Promise<{ notification_id: string; shard: number }[]> {
    const o = this.#o;
    const queues = CAMPAIGN_TIERS.map((t) => campaignQueue(t));
    const handed = await withTransaction(o.pool, async (client) => {
      const { rows } = await client.query<{ notification_id: string; shard: number; job_id: string; queue: string }>(
        `SELECT s.notification_id, s.shard, s.job_id::text AS job_id, q.name AS queue
           FROM campaign_shards s
           JOIN campaign_fanouts f ON f.notification_id = s.notification_id AND f.state = 'expanding'
           JOIN notifications n ON n.id = s.notification_id
           JOIN unnest($2::text[], $3::text[]) AS q (tier, name) ON q.tier = n.priority
           JOIN pgboss.job j ON j.name = q.name AND j.id = s.job_id AND j.state = 'active'
           LEFT JOIN notifier_replicas r ON r.id = s.claimed_by
          WHERE s.state = 'pending'
            AND CASE WHEN s.claimed_by IS NULL THEN j.started_on < now() - make_interval(secs => $1::double precision / 1000)
                     ELSE r.id IS NULL OR r.heartbeat_at < now() - make_interval(secs => $1::double precision / 1000) END
          ORDER BY s.notification_id, s.shard
          LIMIT ${BATCH}
          FOR UPDATE OF s SKIP LOCKED`,
        [3 * o.heartbeatMs, [...CAMPAIGN_TIERS], queues],
      );
      if (rows.length === 0) return rows;
      const fresh = rows.map(() => randomUUID());
      for (const queue of new Set(rows.map((r) => r.queue))) {
        const old = rows.filter((r) => r.queue === queue).map((r) => r.job_id);
        await o.boss.cancel(queue, old, { db: txDb(client) });
      }
      await client.query(
        `UPDATE campaign_shards s SET job_id = r.job_id, claimed_by = NULL
           FROM unnest($1::uuid[], $2::int[], $3::uuid[]) AS r (notification_id, shard, job_id)
          WHERE s.notification_id = r.notification_id AND s.shard = r.shard`,
        [rows.map((r) => r.notification_id), rows.map((r) => r.shard), fresh],
      );
      await o.boss.insert(
        rows.map((r, k) => ({
          id: fresh[k]!,
          name: r.queue,
          data: { notification_id: r.notification_id, step: 'shard', shard: r.shard } satisfies CampaignJob,
        })),
        { db: txDb(client) },
      );
      return rows;
    });
    if (handed.length > 0) {
      for (const q of new Set(handed.map((r) => r.queue))) o.wake(q);
      o.log.warn(
        { shards: handed.map((r) => ({ notification: r.notification_id, shard: r.shard })) },
        'campaign: shards of a replica that stopped heartbeating handed on',
      );
    }
    return handed.map((r) => ({ notification_id: r.notification_id, shard: r.shard }));
  }
}
