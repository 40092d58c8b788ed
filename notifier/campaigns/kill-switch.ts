/**
 * The kill switch: `POST /api/v1/admin/campaigns/{campaign_id}/stop` stops expansion and every
 * not-yet-sent delivery of the campaign on every replica (sends already with a provider finish).
 *
 * 1. {@link stopCampaign}, one transaction: the campaign row is marked stopped (under its row
 *    lock, so a shard or an approval in flight finishes first and every later one sees it), its
 *    unfinished fan-outs become `cancelled`, each fan-out's campaign job is sent to sweep what is
 *    still queued into `cancelled`, the stop is audited, and NOTIFY tells every replica.
 * 2. Each replica ({@link KillSwitch}) adds the campaign to its stopped set, which the delivery
 *    worker checks after every claim and again just before the provider call; waits for the
 *    claims it had in flight when it heard (a claim that began before the stop committed could
 *    not see it); then acknowledges (campaign_stop_acks). From then on it starts no provider call
 *    for the campaign: a claim that begins later sees the stop in the database and cancels the
 *    row instead (workers/delivery-sql.ts), and one already claimed is cancelled before its send.
 * 3. The stop call waits until every live replica (heartbeat within three periods) has
 *    acknowledged, up to NOTIFIER_CAMPAIGN_STOP_WAIT, and answers with who did and how long it took.
 *
 * A replica that was not listening when the NOTIFY went (reconnecting) reloads the stopped set on
 * reconnect; one that starts later loads it before its workers start.
 */
import { randomUUID } from 'node:crypto';
import { withTransaction, type Pool } from '../../shared/db.js';
import { PlatformError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import type { Boss } from '../queues/boss.js';
import type { Tier } from '../queues/names.js';
import { wakeCampaign } from '../queues/wake-ups.js';

export const CAMPAIGN_STOP_CHANNEL = 'notifier_campaign_stop';

/** A replica silent this long is forgotten when another starts. */
const STALE_REPLICA_MS = 3_600_000;

export interface KillSwitchOptions {
  pool: Pool;
  log: Logger;
  /** Between heartbeats (NOTIFIER_REPLICA_HEARTBEAT); a replica is live for three of them. */
  heartbeatMs: number;
  /** The claims this replica has in flight now (the delivery worker's). */
  claimsInFlight: () => readonly Promise<unknown>[];
}

export class KillSwitch {
  readonly replicaId = randomUUID();
  readonly #o: KillSwitchOptions;
  readonly #stopped = new Set<string>();
  /** The stops this replica has acknowledged (recorded in campaign_stop_acks). */
  readonly #acked = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #registered = false;

  constructor(o: KillSwitchOptions) {
    this.#o = o;
  }

  /** Is this campaign stopped, as far as this replica has heard? */
  isStopped(campaignId: string | null | undefined): boolean {
    return campaignId != null && this.#stopped.has(campaignId);
  }

  /** Registers this replica, loads the stopped campaigns and starts the heartbeat; before the workers start. */
  async start(): Promise<void> {
    const o = this.#o;
    await o.pool.query('INSERT INTO notifier_replicas (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()', [
      this.replicaId,
    ]);
    this.#registered = true;
    // Replicas that died without deregistering (SIGKILL) are no longer waited for after three
    // heartbeats; their rows are removed here once long gone, with their acknowledgements.
    await o.pool.query(
      `WITH gone AS (DELETE FROM notifier_replicas WHERE heartbeat_at < now() - make_interval(secs => $1::double precision / 1000) RETURNING id)
       DELETE FROM campaign_stop_acks a USING gone WHERE a.replica_id = gone.id`,
      [Math.max(STALE_REPLICA_MS, 100 * o.heartbeatMs)],
    );
    await this.reload();
    this.#timer = setInterval(() => void this.#heartbeat(), o.heartbeatMs);
    this.#timer.unref();
  }

  /**
   * Reads every stopped campaign (after a reconnect: a NOTIFY may have been missed) and
   * acknowledges the ones this replica has not: it has no claim in flight that predates them
   * once this returns.
   */
  async reload(): Promise<void> {
    const { rows } = await this.#o.pool.query<{ id: string }>('SELECT id FROM campaigns WHERE stopped_at IS NOT NULL');
    for (const r of rows) this.#stopped.add(r.id);
    // Every stop not acknowledged yet, including one heard before this replica was registered
    // (onStop leaves those to this).
    const due = rows.map((r) => r.id).filter((id) => !this.#acked.has(id));
    if (due.length > 0 && this.#registered) {
      await Promise.allSettled(this.#o.claimsInFlight());
      await this.#ack(due);
    }
  }

  /** The NOTIFY of a stop. */
  async onStop(campaignId: string): Promise<void> {
    this.#stopped.add(campaignId);
    if (!this.#registered) return;
    // A claim that began before the stop committed may have claimed a row of it: it reaches the
    // stopped-set check before any provider call, and it is done once this settles.
    await Promise.allSettled(this.#o.claimsInFlight());
    await this.#ack([campaignId]);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    if (this.#registered) {
      this.#registered = false;
      await this.#o.pool.query('DELETE FROM notifier_replicas WHERE id = $1', [this.replicaId]).catch(() => {});
    }
  }

  async #ack(campaignIds: readonly string[]): Promise<void> {
    await this.#o.pool
      .query(
        `INSERT INTO campaign_stop_acks (campaign_id, replica_id)
         SELECT c, $2 FROM unnest($1::text[]) AS c ON CONFLICT DO NOTHING`,
        [[...campaignIds], this.replicaId],
      )
      .then(() => {
        for (const id of campaignIds) this.#acked.add(id);
      })
      .catch((err: unknown) => this.#o.log.warn({ err, campaigns: campaignIds }, 'kill switch: recording the acknowledgement failed'));
  }

  async #heartbeat(): Promise<void> {
    await this.#o.pool
      .query('INSERT INTO notifier_replicas (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()', [this.replicaId])
      .catch((err: unknown) => this.#o.log.warn({ err }, 'kill switch: heartbeat failed'));
  }
}

export interface StopResult {
  campaign_id: string;
  stopped_at: string;
  stopped_by: string;
  reason: string | null;
  /** True when an earlier call stopped it (this one changed nothing). */
  already_stopped: boolean;
  /** Every live replica, and when it acknowledged (null: not within the wait). */
  replicas: { id: string; acknowledged_at: string | null }[];
  /** Every live replica acknowledged. */
  acknowledged: boolean;
  /** From the stop's commit to the last acknowledgement (or to the end of the wait). */
  acknowledged_in_ms: number;
}

export interface StopOptions {
  pool: Pool;
  boss: Boss;
  heartbeatMs: number;
  waitMs: number;
  wake: (queue: string) => void;
}

/** Stops a campaign (idempotent) and waits for the replicas' acknowledgements. */
export async function stopCampaign(o: StopOptions, campaignId: string, actor: string, reason: string | null): Promise<StopResult> {
  const stopped = await withTransaction(o.pool, async (client) => {
    const { rows } = await client.query<{ stopped_at: Date | null; stopped_by: string | null; stop_reason: string | null }>(
      'SELECT stopped_at, stopped_by, stop_reason FROM campaigns WHERE id = $1 FOR UPDATE',
      [campaignId],
    );
    const c = rows[0];
    if (!c) throw new PlatformError('not_found', { detail: `no campaign ${campaignId}` });
    if (c.stopped_at) return { at: c.stopped_at, by: c.stopped_by ?? '', reason: c.stop_reason, already: true, due: [] as string[] };
    // Stopped when the campaign row was ours (clock_timestamp, not the transaction's start): an
    // approval that held the row first is recorded before the stop.
    const upd = await client.query<{ stopped_at: Date }>(
      'UPDATE campaigns SET stopped_at = clock_timestamp(), stopped_by = $2, stop_reason = $3 WHERE id = $1 RETURNING stopped_at',
      [campaignId, actor, reason],
    );
    // Every fan-out not rejected is swept by its campaign job (fanout.ts), finished or not.
    const fanouts = await client.query<{ notification_id: string; priority: Tier }>(
      `WITH f AS (
         UPDATE campaign_fanouts SET state = CASE WHEN state = 'rejected' THEN state ELSE 'cancelled' END, updated_at = now()
          WHERE campaign_id = $1 RETURNING notification_id, state)
       UPDATE notifications n SET routed_at = NULL FROM f WHERE n.id = f.notification_id AND f.state <> 'rejected'
       RETURNING n.id AS notification_id, n.priority`,
      [campaignId],
    );
    const due = new Set<string>();
    for (const f of fanouts.rows) due.add(await wakeCampaign(client, o.boss, f.notification_id, f.priority));
    await client.query(`INSERT INTO campaign_audit (campaign_id, action, actor, detail, at) VALUES ($1, 'stop', $2, $3, $4)`, [
      campaignId,
      actor,
      { reason, fanouts: fanouts.rows.length },
      upd.rows[0]!.stopped_at,
    ]);
    await client.query('SELECT pg_notify($1, $2)', [CAMPAIGN_STOP_CHANNEL, campaignId]);
    return { at: upd.rows[0]!.stopped_at, by: actor, reason, already: false, due: [...due] };
  });
  for (const q of stopped.due) o.wake(q);
  // Real time, not the service clock: this bounds a wait on other processes.
  const begun = performance.now();
  const replicas = await waitForAcks(o, campaignId);
  return {
    campaign_id: campaignId,
    stopped_at: stopped.at.toISOString(),
    stopped_by: stopped.by,
    reason: stopped.reason,
    already_stopped: stopped.already,
    replicas: replicas.map((r) => ({ id: r.id, acknowledged_at: r.acked_at?.toISOString() ?? null })),
    acknowledged: replicas.every((r) => r.acked_at !== null),
    acknowledged_in_ms: Math.round(performance.now() - begun),
  };
}

/** Polls the acknowledgements of the live replicas until all are in or the wait is over. */
async function waitForAcks(o: StopOptions, campaignId: string): Promise<{ id: string; acked_at: Date | null }[]> {
  const until = performance.now() + o.waitMs;
  for (;;) {
    const { rows } = await o.pool.query<{ id: string; acked_at: Date | null }>(
      `SELECT r.id, a.acked_at FROM notifier_replicas r
         LEFT JOIN campaign_stop_acks a ON a.replica_id = r.id AND a.campaign_id = $1
        WHERE r.heartbeat_at > now() - make_interval(secs => $2::double precision / 1000)
        ORDER BY r.id`,
      [campaignId, 3 * o.heartbeatMs],
    );
    if (rows.every((r) => r.acked_at !== null) || performance.now() >= until) return rows;
    await new Promise((r) => setTimeout(r, ACK_POLL_MS));
  }
}

/** Between looks at the acknowledgements while a stop call waits (they take milliseconds). */
const ACK_POLL_MS = 10;
