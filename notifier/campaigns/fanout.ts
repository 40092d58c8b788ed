/**
 * The campaign worker: a fan-out's planning step and its shards, on the campaign queues
 * (`notify-campaign-<tier>`, queues/names.ts), never in the request path.
 *
 * Plan (one job per audience request, re-sent by the reconciler while the fan-out is unfinished):
 * pins the segment's version, reads its size and shard boundaries in one pass over the index,
 * and then either holds the fan-out for an operator (`pending_approval`, above
 * NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD), finishes an empty one, or writes the shard rows and one
 * job per shard. Run again while expanding, it re-sends the job of every pending shard whose job
 * is no longer waiting in pg-boss; after a stop, it cancels what the stop left queued, shard by
 * shard, and marks the notification routed.
 *
 * Shard (about NOTIFIER_CAMPAIGN_SHARD_SIZE members): in ONE transaction, under the shard row's
 * lock and a shared lock on the campaign row (a stop waits for it, and a shard that starts after
 * a stop sees it): read the members in keyset order, then their preferences, time zones and cap
 * counts (one round trip), decide each member's deliveries (member-plan.ts), write them all in
 * one INSERT, then the counters, the checkpoint and the fan-out's progress (one statement), and
 * complete its job. A crash anywhere rolls all of it back and the job comes back: no member is
 * missing and none is written twice (the checkpoint and the rows commit together; shards
 * partition the members).
 * The deliveries get no wake-up here: the pump (pump.ts) meters them onto the delivery queues.
 * A shard is claimed with this replica's id as its job starts; a replica that dies mid-shard has
 * its shard handed on by shard-rescue.ts within a few heartbeats.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { policyFor, type PolicySettings } from '../policy/table.js';
import { storedType, type TypeCatalog } from '../policy/types.js';
import { EMPTY_PREFERENCES, storedPreferences, type PreferenceDoc } from '../preferences/document.js';
import { orderedIds } from './ordered-id.js';
import { txDb, type Boss, type Job } from '../queues/boss.js';
import { campaignQueue, type ChannelName, type Tier } from '../queues/names.js';
import type { CampaignJob } from '../queues/wake-ups.js';
import { loadSegment, readMembers, shardBoundaries, type SegmentRule } from '../segments/index.js';
import { compactCounts, shardCounts } from './counts.js';
import { planMember, type MemberDelivery } from './member-plan.js';
import type { CampaignMetrics } from '../metrics.js';

export interface CampaignWorkerOptions {
  pool: Pool;
  boss: Boss;
  log: Logger;
  clock: Clock;
  catalog: TypeCatalog;
  settings: PolicySettings;
  /** Members per shard (NOTIFIER_CAMPAIGN_SHARD_SIZE). */
  shardSize: number;
  /** Fan-outs larger than this wait for an operator (NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD). */
  approvalThreshold: number;
  /** A progress line every this many shards. */
  logEveryShards: number;
  metrics: CampaignMetrics;
  /** Called after a shard committed new deliveries (the pump meters them out). */
  expanded: () => void;
  wake: (queue: string) => void;
  /** This replica's id in notifier_replicas (the kill switch's): a shard it expands is claimed with it. */
  replicaId: string;
}

interface FanoutRow {
  state: string;
  segment_id: string;
  segment_version: number | null;
  segment_rule: SegmentRule | null;
  approved: boolean | null;
  priority: Tier;
  campaign_id: string;
  stopped: boolean;
  routed: boolean;
}

/**
 * Shards whose cancellation one statement covers after a stop: one, so a statement locks its rows
 * in id order (a shard's ids are time-ordered in member order, ordered-id.ts), as a claim does,
 * and the two can never wait on each other in a cycle.
 */
const SWEEP_SHARDS = 1;
/** Fold the counters of a fan-out after this many of its shards (off the shard's transaction). */
const COMPACT_EVERY_SHARDS = 50;

export class CampaignWorker {
  constructor(private readonly o: CampaignWorkerOptions) {}

  /** Handles one job; completes it in the transaction of its writes, or throws (pg-boss retries it). */
  async handle(queue: string, job: Job<CampaignJob>): Promise<void> {
    const data = job.data;
    if (data.step === 'shard') await this.#shard(queue, job.id, data.notification_id, data.shard);
    else await this.#plan(queue, job.id, data.notification_id);
  }

  async #plan(queue: string, jobId: string, id: string): Promise<void> {
    const o = this.o;
    const f = await this.#fanout(o.pool, id);
    const swept = f?.stopped === true && !f.routed;
    if (swept) await this.#sweep(id);
    const due = await withTransaction(o.pool, async (client) => {
      const complete = () => o.boss.complete(queue, jobId, {}, { db: txDb(client) });
      const f = await this.#fanout(client, id, true);
      if (!f || f.routed) {
        await complete();
        return [];
      }
      if (f.stopped) {
        // Stopped since the look above, so not swept here: the stop's own campaign job sweeps and
        // finishes it (marking it routed now would leave that job nothing to do).
        if (!swept) {
          await complete();
          return [];
        }
        // Swept above (a second sweep after a crash finds nothing left): the fan-out is done.
        await client.query(`UPDATE campaign_shards SET state = 'cancelled' WHERE notification_id = $1 AND state = 'pending'`, [id]);
        await client.query(
          `UPDATE campaign_fanouts SET state = CASE WHEN state = 'rejected' THEN state ELSE 'cancelled' END, updated_at = now()
            WHERE notification_id = $1`,
          [id],
        );
        await markRouted(client, id);
        await complete();
        return [];
      }
      switch (f.state) {
        case 'planning':
          return this.#planShards(client, id, f, complete);
        case 'expanding':
          return this.#resendLostShards(client, id, f, complete);
        default:
          // pending_approval, expanded, rejected, cancelled: nothing to move on.
          await markRouted(client, id);
          await complete();
          return [];
      }
    });
    for (const q of due) o.wake(q);
  }

  async #planShards(client: PoolClient, id: string, f: FanoutRow, complete: () => Promise<unknown>): Promise<string[]> {
    const o = this.o;
    // Locked until the commit: an upload cannot retire the version pinned here before the pin is visible.
    const seg = await loadSegment(client, f.segment_id, { lock: true });
    if (!seg) {
      // Deleted after the request was accepted: nothing to send to.
      o.log.warn({ notification: id, segment: f.segment_id }, 'campaign: the segment no longer exists; fan-out finished with 0 recipients');
      await this.#finishEmpty(client, id, 0);
      await complete();
      return [];
    }
    // A fan-out held for approval keeps the version (and rule) it was counted with.
    const version = f.segment_version ?? seg.version;
    const ref = { id: seg.id, kind: seg.kind, version, ...(seg.kind === 'rule' ? { rule: f.segment_rule ?? seg.rule } : {}) };
    const { firstUsers, size } = await shardBoundaries(client, ref, o.shardSize);
    await client.query(
      'UPDATE campaign_fanouts SET segment_version = $2, segment_kind = $3, segment_rule = $4 WHERE notification_id = $1',
      [id, version, seg.kind, seg.kind === 'rule' ? (f.segment_rule ?? seg.rule ?? null) : null],
    );
    if (f.approved === null && size > o.approvalThreshold) {
      await client.query(
        `UPDATE campaign_fanouts SET state = 'pending_approval', recipients = $2, updated_at = now() WHERE notification_id = $1`,
        [id, size],
      );
      // Nothing moves until an operator decides (routes.ts): the reconciler leaves it alone.
      await markRouted(client, id);
      await complete();
      o.log.info({ notification: id, campaign: f.campaign_id, recipients: size }, 'campaign: waiting for approval');
      return [];
    }
    if (size === 0) {
      await this.#finishEmpty(client, id, 0);
      await complete();
      return [];
    }
    const jobIds = firstUsers.map(() => randomUUID());
    await client.query(
      `INSERT INTO campaign_shards (notification_id, shard, first_user, next_user, job_id)
       SELECT $1, s.i - 1, s.first_user, lead(s.first_user) OVER (ORDER BY s.i), s.job_id
         FROM unnest($2::text[], $3::uuid[]) WITH ORDINALITY AS s (first_user, job_id, i)`,
      [id, firstUsers, jobIds],
    );
    await client.query(
      `UPDATE campaign_fanouts SET state = 'expanding', recipients = $2, shards = $3, planned_at = now(), updated_at = now()
        WHERE notification_id = $1`,
      [id, size, firstUsers.length],
    );
    const queue = campaignQueue(f.priority);
    await o.boss.insert(
      jobIds.map((jid, shard) => ({ id: jid, name: queue, data: { notification_id: id, step: 'shard', shard } satisfies CampaignJob })),
      { db: txDb(client) },
    );
    await complete();
    o.log.info(
      { notification: id, campaign: f.campaign_id, segment: f.segment_id, version, recipients: size, shards: firstUsers.length },
      'campaign: fan-out planned',
    );
    return [queue];
  }

  /** The planning step run again while expanding: a shard whose job was lost gets another. */
  async #resendLostShards(client: PoolClient, id: string, f: FanoutRow, complete: () => Promise<unknown>): Promise<string[]> {
    const queue = campaignQueue(f.priority);
    const { rows } = await client.query<{ shard: number }>(
      `SELECT s.shard FROM campaign_shards s
        WHERE s.notification_id = $1 AND s.state = 'pending'
          AND NOT EXISTS (SELECT 1 FROM pgboss.job j WHERE j.name = $2 AND j.id = s.job_id AND j.state < 'completed')
        ORDER BY s.shard
        -- A shard locked now is being expanded (its job is alive); waiting for it while holding the
        -- fan-out's lock, which that shard's checkpoint needs, would deadlock.
        FOR UPDATE OF s SKIP LOCKED`,
      [id, queue],
    );
    await complete();
    if (rows.length === 0) return [];
    const jobIds = rows.map(() => randomUUID());
    await client.query(
      `UPDATE campaign_shards s SET job_id = r.job_id FROM unnest($2::int[], $3::uuid[]) AS r (shard, job_id)
        WHERE s.notification_id = $1 AND s.shard = r.shard`,
      [id, rows.map((r) => r.shard), jobIds],
    );
    await this.o.boss.insert(
      rows.map((r, k) => ({
        id: jobIds[k]!,
        name: queue,
        data: { notification_id: id, step: 'shard', shard: r.shard } satisfies CampaignJob,
      })),
      { db: txDb(client) },
    );
    this.o.log.warn({ notification: id, shards: rows.length }, 'campaign: shard jobs were lost; sent again');
    return [queue];
  }

  async #finishEmpty(client: PoolClient, id: string, recipients: number): Promise<void> {
    await client.query(
      `UPDATE campaign_fanouts SET state = 'expanded', recipients = $2, shards = 0, planned_at = coalesce(planned_at, now()),
              expanded_at = now(), updated_at = now()
        WHERE notification_id = $1`,
      [id, recipients],
    );
    await markRouted(client, id);
  }

  /**
   * After a stop: every delivery of the fan-out still queued (never claimed) becomes `cancelled`,
   * a shard per statement (each shard's rows are one range of deliveries_campaign_shard).
   * Idempotent; a crash half-way is finished by the next run.
   */
  async #sweep(id: string): Promise<void> {
    const { rows } = await this.o.pool.query<{ shards: number | null }>('SELECT shards FROM campaign_fanouts WHERE notification_id = $1', [
      id,
    ]);
    const shards = rows[0]?.shards ?? 0;
    let cancelled = 0;
    for (let from = 0; from < shards; from += SWEEP_SHARDS) {
      const r = await this.o.pool.query(
        `UPDATE deliveries SET status = 'cancelled', last_error = 'cancelled: the campaign was stopped', next_attempt_at = NULL,
                updated_at = now()
          WHERE notification_id = $1 AND campaign_shard >= $2 AND campaign_shard < $3 AND status = 'queued'`,
        [id, from, from + SWEEP_SHARDS],
      );
      cancelled += r.rowCount ?? 0;
    }
    await compactCounts(this.o.pool, id);
    if (cancelled > 0) this.o.log.info({ notification: id, cancelled }, 'campaign: stopped; queued deliveries cancelled');
  }

  async #fanout(db: Pool | PoolClient, id: string, lock = false): Promise<FanoutRow | undefined> {
    if (lock) {
      // The campaign row first, shared, as a shard and the ingestion take it: a stop (FOR UPDATE
      // of it, then the fan-outs) waits for this transaction instead of deadlocking with it. Taken
      // after the fan-out row, it would come too late: a second UPDATE of the fan-out in this
      // transaction checks its foreign key, which takes the campaign row (KEY SHARE) while the
      // stop holds it and waits for the fan-out.
      await db.query(
        'SELECT 1 FROM campaigns c JOIN campaign_fanouts f ON f.campaign_id = c.id WHERE f.notification_id = $1 FOR SHARE OF c',
        [id],
      );
    }
    const { rows } = await db.query<FanoutRow>(
      `SELECT f.state, f.segment_id, f.segment_version, f.segment_rule, f.approved, n.priority, f.campaign_id,
              (c.stopped_at IS NOT NULL) AS stopped, (n.routed_at IS NOT NULL) AS routed
         FROM campaign_fanouts f JOIN notifications n ON n.id = f.notification_id JOIN campaigns c ON c.id = f.campaign_id
        WHERE f.notification_id = $1 ${lock ? 'FOR UPDATE OF f' : ''}`,
      [id],
    );
    return rows[0];
  }

  async #shard(queue: string, jobId: string, id: string, shard: number): Promise<void> {
    const o = this.o;
    const started = o.clock.now();
    // Claimed before the work, in its own statement (the work's transaction rolls back with this
    // replica): if this replica dies, shard-rescue.ts hands the shard on once its heartbeat stops.
    await o.pool.query(
      `UPDATE campaign_shards SET claimed_by = $3 WHERE notification_id = $1 AND shard = $2 AND state = 'pending' AND job_id = $4`,
      [id, shard, o.replicaId, jobId],
    );
    const done = await withTransaction(o.pool, async (client) => {
      const complete = () => o.boss.complete(queue, jobId, {}, { db: txDb(client) });
      const { rows } = await client.query<{
        state: string;
        first_user: string;
        next_user: string | null;
        fanout_state: string;
        segment_id: string;
        segment_version: number;
        segment_kind: 'list' | 'rule';
        segment_rule: SegmentRule | null;
        stopped: boolean;
        priority: Tier;
        channels: ChannelName[];
        template_id: string;
        event_type: string;
        notification_type: string | null;
        campaign_id: string;
      }>(
        `SELECT s.state, s.first_user, s.next_user, f.state AS fanout_state, f.segment_id, f.segment_version, f.segment_kind, f.segment_rule,
                (c.stopped_at IS NOT NULL) AS stopped, n.priority, n.channels, n.template_id, n.event_type, n.notification_type,
                f.campaign_id
           FROM campaign_shards s
           JOIN campaign_fanouts f ON f.notification_id = s.notification_id
           JOIN notifications n ON n.id = s.notification_id
           JOIN campaigns c ON c.id = f.campaign_id
          WHERE s.notification_id = $1 AND s.shard = $2
          FOR UPDATE OF s FOR SHARE OF c`,
        [id, shard],
      );
      const s = rows[0];
      if (!s || s.state !== 'pending' || s.fanout_state !== 'expanding') {
        await complete();
        return undefined;
      }
      if (s.stopped) {
        await client.query(`UPDATE campaign_shards SET state = 'cancelled' WHERE notification_id = $1 AND shard = $2`, [id, shard]);
        await complete();
        return undefined;
      }
      const members = await readMembers(
        client,
        { id: s.segment_id, kind: s.segment_kind, version: s.segment_version, ...(s.segment_rule ? { rule: s.segment_rule } : {}) },
        { first: s.first_user, next: s.next_user },
      );
      const type = storedType(o.catalog, s.notification_type, s.event_type);
      const policy = policyFor(type, s.priority, o.settings);
      const facts = await memberFacts(client, members, type.name, policy.caps ? type.caps : {});
      const now = o.clock.now();
      const rows2 = new ShardRows(id, shard, s.priority, s.template_id, type.name);
      for (const user of members) {
        for (const d of planMember({
          requested: s.channels,
          type,
          tier: s.priority,
          policy,
          prefs: facts.prefs.get(user) ?? EMPTY_PREFERENCES,
          timeZone: facts.zones.get(user),
          nowMs: now,
          counted: (channel) => facts.counted.get(`${user}\0${channel}`) ?? 0,
        }))
          rows2.add(user, d);
      }
      await rows2.insert(client, now);
      // The counters, the checkpoint and the fan-out's progress in one round trip.
      const c = shardCounts(members.length, rows2.counts);
      const progress = await client.query<{ shards_done: number; shards: number }>(
        `WITH counted AS (
           INSERT INTO campaign_counts (notification_id, channel, status, n)
           SELECT $1, t.c, t.s, t.n FROM unnest($4::text[], $5::text[], $6::bigint[]) AS t (c, s, n) WHERE t.n <> 0
         ), checkpoint AS (
           UPDATE campaign_shards SET state = 'done', members = $3, done_at = now() WHERE notification_id = $1 AND shard = $2
         )
         UPDATE campaign_fanouts SET shards_done = shards_done + 1,
                state = CASE WHEN shards_done + 1 >= shards THEN 'expanded' ELSE state END,
                expanded_at = CASE WHEN shards_done + 1 >= shards THEN now() ELSE expanded_at END, updated_at = now()
          WHERE notification_id = $1
          RETURNING shards_done, shards`,
        [id, shard, members.length, c.channels, c.statuses, c.ns],
      );
      const p = progress.rows[0]!;
      if (p.shards_done >= p.shards) await markRouted(client, id);
      await complete();
      return { members: members.length, deliveries: rows2.size, ...p, campaign: s.campaign_id };
    });
    if (!done) return;
    o.metrics.shardExpanded(done.members, (o.clock.now() - started) / 1000);
    if (done.deliveries > 0) o.expanded();
    if (done.shards_done >= done.shards || done.shards_done % o.logEveryShards === 0) {
      o.log.info(
        { notification: id, campaign: done.campaign, shards_done: done.shards_done, shards: done.shards },
        done.shards_done >= done.shards ? 'campaign: fan-out expanded' : 'campaign: fan-out progress',
      );
    }
    if (done.shards_done % COMPACT_EVERY_SHARDS === 0 || done.shards_done >= done.shards) {
      await compactCounts(o.pool, id).catch((err: unknown) => o.log.warn({ err, notification: id }, 'campaign: folding counters failed'));
    }
  }
}

async function markRouted(client: PoolClient, id: string): Promise<void> {
  await client.query('UPDATE notifications SET routed_at = now() WHERE id = $1 AND routed_at IS NULL', [id]);
}

/**
 * What the policies need of each member, in one round trip: the stored preferences, the profile's
 * time zone (for a member with quiet hours), and for each capped channel the sends already
 * counted in its window.
 */
async function memberFacts(
  client: PoolClient,
  users: readonly string[],
  type: string,
  caps: Readonly<Partial<Record<ChannelName, { windowMs: number }>>>,
): Promise<{ prefs: Map<string, PreferenceDoc>; zones: Map<string, string>; counted: Map<string, number> }> {
  const channels = Object.keys(caps) as ChannelName[];
  const { rows } = await client.query<{ user_id: string; prefs: unknown; timezone: string | null; caps: Record<string, number> | null }>(
    `SELECT u.user_id, p.prefs, pr.timezone,
            (SELECT json_object_agg(c.channel, c.n) FROM (
               SELECT d.channel, count(*) AS n
                 FROM deliveries d JOIN unnest($3::text[], $4::float8[]) AS w (channel, window_ms) ON w.channel = d.channel
                WHERE d.recipient_id = u.user_id AND d.notification_type = $2 AND d.counted_at IS NOT NULL
                  AND d.counted_at > now() - make_interval(secs => w.window_ms / 1000)
                GROUP BY d.channel) c) AS caps
       FROM unnest($1::text[]) AS u (user_id)
       LEFT JOIN user_preferences p ON p.user_id = u.user_id
       -- The time zone matters only to a member with quiet hours: the condition on p gates the
       -- lookup (a one-time filter per member), so most members cost no profile read at all.
       LEFT JOIN LATERAL (SELECT x.timezone FROM user_profiles x WHERE x.user_id = u.user_id AND p.prefs ? 'quiet_hours') pr ON true`,
    [[...users], type, channels, channels.map((c) => caps[c]!.windowMs)],
  );
  const prefs = new Map<string, PreferenceDoc>();
  const zones = new Map<string, string>();
  const counted = new Map<string, number>();
  for (const r of rows) {
    if (r.prefs !== null) prefs.set(r.user_id, storedPreferences(r.prefs));
    if (r.timezone !== null) zones.set(r.user_id, r.timezone);
    if (r.caps) for (const [c, n] of Object.entries(r.caps)) counted.set(`${r.user_id}\0${c}`, Number(n));
  }
  return { prefs, zones, counted };
}

/** A shard's delivery records, column by column, written in one INSERT. */
class ShardRows {
  readonly #recipient: string[] = [];
  readonly #channel: string[] = [];
  readonly #status: string[] = [];
  readonly #hold: (string | null)[] = [];
  readonly #nextMs: (number | null)[] = [];
  readonly #error: (string | null)[] = [];
  /** `channel\0status` → deliveries. */
  readonly counts = new Map<string, number>();

  constructor(
    private readonly notificationId: string,
    private readonly shard: number,
    private readonly priority: Tier,
    private readonly template: string,
    private readonly type: string,
  ) {}

  get size(): number {
    return this.#recipient.length;
  }

  add(user: string, d: MemberDelivery): void {
    this.#recipient.push(user);
    this.#channel.push(d.channel);
    this.#status.push(d.status);
    this.#hold.push(d.hold ?? null);
    this.#nextMs.push(d.nextMs ?? null);
    this.#error.push(d.error ?? null);
    const key = `${d.channel}\0${d.status}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  async insert(client: PoolClient, nowMs: number): Promise<void> {
    if (this.size === 0) return;
    await client.query(
      `INSERT INTO deliveries (id, notification_id, campaign_shard, channel, recipient_id, priority, template_id, status,
                               notification_type, hold_reason, next_attempt_at, last_error)
       SELECT r.id, $1, $2, r.channel, r.recipient, $3, $4, r.status, $5, r.hold, to_timestamp(r.next_ms / 1000), r.error
         FROM unnest($12::uuid[], $6::text[], $7::text[], $8::text[], $9::text[], $10::float8[], $11::text[])
           AS r (id, recipient, channel, status, hold, next_ms, error)`,
      [
        this.notificationId,
        this.shard,
        this.priority,
        this.template,
        this.type,
        this.#recipient,
        this.#channel,
        this.#status,
        this.#hold,
        this.#nextMs,
        this.#error,
        // Time-ordered: the rows land at the end of the primary key's index (ordered-id.ts).
        orderedIds(this.size, nowMs),
      ],
    );
  }
}
