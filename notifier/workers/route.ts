/**
 * The routing worker: one job per accepted notification, on its tier's routing queue. It decides
 * the channels and what becomes of each (policy/resolve.ts: the request's channels, else the
 * user's preferences for the type, else the type's defaults, else push; the user's "off"; digests)
 * and creates one delivery record per (notification, channel, recipient), each with its wake-up on
 * the channel × tier delivery queue, in one transaction with the jobs' completion, a fetched batch
 * at a time. Running it twice creates nothing twice (`routed_at`, and the deliveries' unique key).
 *
 * A channel the user turned off gets a delivery in state `opted_out`, so the status view says so.
 * A channel whose type digests joins the user's open digest for (type, channel), or opens one:
 * the item is recorded `digested`, and the digest's own send (kind `digest`) is woken when the
 * window ends. A join holds the digest's row lock until the commit, and the flush closes it under
 * that lock (workers/claim.ts): an item lands in the digest that is sent, or opens the next one.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { planChannels, type ChannelPlan } from '../policy/resolve.js';
import { policyFor, type PolicySettings } from '../policy/table.js';
import { storedType, type NotificationType, type TypeCatalog } from '../policy/types.js';
import { loadPreferencesInTransaction, type PreferenceCache, type PreferenceDoc } from '../preferences/index.js';
import type { PolicyMetrics } from '../metrics.js';
import { completeJobs, txDb, type Boss, type Job } from '../queues/boss.js';
import type { ChannelName, Tier } from '../queues/names.js';
import { wakeDeliveries, type DeliveryWake, type RouteJob } from '../queues/wake-ups.js';
import { deliveryKey } from './delivery-sql.js';

export type { RouteJob } from '../queues/wake-ups.js';

export interface RoutingWorkerOptions {
  pool: Pool;
  boss: Boss;
  log: Logger;
  wake: (queue: string) => void;
  catalog: TypeCatalog;
  settings: PolicySettings;
  preferences: PreferenceCache;
  /** Longest wait for the preference rows before they count as unreadable (NOTIFIER_PREFERENCES_TIMEOUT). */
  prefsTimeoutMs: number;
  metrics: PolicyMetrics;
  clock: Clock;
}

interface NotificationRow {
  id: string;
  recipient_id: string;
  priority: Tier;
  template_id: string;
  channels: ChannelName[];
  event_type: string;
  notification_type: string | null;
}

/** The rows of one bulk insert into deliveries, column by column. */
class DeliveryRows {
  readonly id: string[] = [];
  readonly n: string[] = [];
  readonly channel: string[] = [];
  readonly recipient: string[] = [];
  readonly priority: string[] = [];
  readonly template: string[] = [];
  readonly key: string[] = [];
  readonly status: string[] = [];
  readonly type: string[] = [];
  readonly kind: string[] = [];
  readonly digest: (string | null)[] = [];
  readonly hold: (string | null)[] = [];
  readonly nextMs: (number | null)[] = [];
  readonly error: (string | null)[] = [];

  add(r: {
    id?: string;
    notificationId: string;
    channel: ChannelName;
    recipient: string;
    priority: Tier;
    template: string;
    key: string;
    status: 'queued' | 'opted_out' | 'digested';
    type: string;
    kind?: 'single' | 'digest';
    digestId?: string;
    hold?: 'digest';
    nextMs?: number;
    error?: string;
  }): string {
    const id = r.id ?? randomUUID();
    this.id.push(id);
    this.n.push(r.notificationId);
    this.channel.push(r.channel);
    this.recipient.push(r.recipient);
    this.priority.push(r.priority);
    this.template.push(r.template);
    this.key.push(r.key);
    this.status.push(r.status);
    this.type.push(r.type);
    this.kind.push(r.kind ?? 'single');
    this.digest.push(r.digestId ?? null);
    this.hold.push(r.hold ?? null);
    this.nextMs.push(r.nextMs ?? null);
    this.error.push(r.error ?? null);
    return id;
  }

  async insert(
    client: PoolClient,
  ): Promise<{ id: string; channel: ChannelName; priority: Tier; status: string; next_ms: number | null }[]> {
    if (this.id.length === 0) return [];
    const { rows } = await client.query<{ id: string; channel: ChannelName; priority: Tier; status: string; next_ms: number | null }>(
      `INSERT INTO deliveries (id, notification_id, channel, recipient_id, priority, template_id, idempotency_key, status,
                               notification_type, kind, digest_id, hold_reason, next_attempt_at, last_error)
       SELECT id, n, channel, recipient, priority, template, key, status, type, kind, digest, hold,
              to_timestamp(next_ms / 1000), error
         FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                     $9::text[], $10::text[], $11::uuid[], $12::text[], $13::float8[], $14::text[])
           AS r (id, n, channel, recipient, priority, template, key, status, type, kind, digest, hold, next_ms, error)
       ON CONFLICT (idempotency_key) DO NOTHING
       RETURNING id, channel, priority, status, (extract(epoch FROM next_attempt_at) * 1000)::float8 AS next_ms`,
      [
        this.id,
        this.n,
        this.channel,
        this.recipient,
        this.priority,
        this.template,
        this.key,
        this.status,
        this.type,
        this.kind,
        this.digest,
        this.hold,
        this.nextMs,
        this.error,
      ],
    );
    return rows;
  }
}

/** The idempotency key of a digest's own send. */
export function digestDeliveryKey(digestId: string): string {
  return createHash('sha256').update(`digest\n${digestId}`).digest('hex');
}

export class RoutingWorker {
  readonly #o: RoutingWorkerOptions;

  constructor(opts: RoutingWorkerOptions) {
    this.#o = opts;
  }

  /**
   * Routes a fetched batch of notifications in one transaction: their deliveries (one multi-row
   * insert), the digests they join, the wake-ups (one pg-boss bulk insert), `routed_at`, and the
   * routing jobs' completion. Notifications are locked in id order and digests in key order, so
   * concurrent batches cannot deadlock.
   */
  async handleBatch(queue: string, jobs: readonly Job<RouteJob>[]): Promise<void> {
    const o = this.#o;
    const ids = [...new Set(jobs.map((j) => j.data.notification_id))];
    const wake = await withTransaction(o.pool, async (client) => {
      const { rows } = await client.query<NotificationRow>(
        `SELECT id, recipient_id, priority, template_id, channels, event_type, notification_type FROM notifications
          WHERE id = ANY($1::uuid[]) AND routed_at IS NULL ORDER BY id FOR UPDATE`,
        [ids],
      );
      const queues = new Set<string>();
      if (rows.length > 0) {
        const users = [...new Set(rows.map((n) => n.recipient_id))];
        const prefs = await o.preferences.get(users, (missing) => loadPreferencesInTransaction(client, missing, o.prefsTimeoutMs));
        const d = new DeliveryRows();
        const joins: { n: NotificationRow; type: NotificationType; channel: ChannelName }[] = [];
        let fallbacks = 0;
        for (const n of rows) {
          const type = storedType(o.catalog, n.notification_type, n.event_type);
          const userPrefs: PreferenceDoc | 'unavailable' = prefs.get(n.recipient_id) ?? 'unavailable';
          const policy = policyFor(type, n.priority, o.settings);
          if (userPrefs === 'unavailable' && policy.optOut) fallbacks++;
          for (const p of planChannels({ requested: n.channels, type, policy, prefs: userPrefs })) {
            o.metrics.policyDecision(type.name, p.channel, p.fate);
            o.metrics.routedChannel(type.name, p.fate === 'opted_out');
            if (p.fate === 'digest') joins.push({ n, type, channel: p.channel });
            else addPlanned(d, n, type, p);
          }
        }
        if (fallbacks > 0) o.metrics.preferenceFallback('route', fallbacks);
        await this.#joinDigests(client, d, joins);
        const created = await d.insert(client);
        const now = o.clock.now();
        const wakes: DeliveryWake[] = created
          .filter((r) => r.status === 'queued')
          .map((r) => ({
            deliveryId: r.id,
            channel: r.channel,
            tier: r.priority,
            delayMs: r.next_ms === null ? 0 : Math.max(0, r.next_ms - now),
          }));
        for (const q of await wakeDeliveries(client, o.boss, wakes)) queues.add(q);
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

  /**
   * Joins each item to the open digest of its (user, type, channel), opening one (with its send,
   * due when the window ends) when there is none. Keys in sorted order; each open digest is read
   * FOR SHARE, so its flush waits for this transaction.
   */
  async #joinDigests(
    client: PoolClient,
    d: DeliveryRows,
    joins: { n: NotificationRow; type: NotificationType; channel: ChannelName }[],
  ): Promise<void> {
    if (joins.length === 0) return;
    const keyOf = (j: (typeof joins)[number]): string => `${j.n.recipient_id}\n${j.type.name}\n${j.channel}`;
    joins.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
    const digestOf = new Map<string, string>();
    for (const j of joins) {
      const key = keyOf(j);
      let digestId = digestOf.get(key);
      if (digestId === undefined) {
        digestId = await this.#openOrJoin(client, d, j);
        digestOf.set(key, digestId);
      }
      d.add({
        notificationId: j.n.id,
        channel: j.channel,
        recipient: j.n.recipient_id,
        priority: j.n.priority,
        template: j.n.template_id,
        key: deliveryKey(j.n.id, j.channel, j.n.recipient_id),
        status: 'digested',
        type: j.type.name,
        digestId,
      });
    }
  }

  async #openOrJoin(
    client: PoolClient,
    d: DeliveryRows,
    j: { n: NotificationRow; type: NotificationType; channel: ChannelName },
  ): Promise<string> {
    const o = this.#o;
    const rule = j.type.digest!;
    for (let tries = 0; tries < 5; tries++) {
      const open = await client.query<{ id: string }>(
        `SELECT id FROM digests WHERE user_id = $1 AND notification_type = $2 AND channel = $3 AND status = 'open' FOR SHARE`,
        [j.n.recipient_id, j.type.name, j.channel],
      );
      if (open.rows[0]) return open.rows[0].id;
      const digestId = randomUUID();
      const sendId = randomUUID();
      const opened = await client.query(
        `INSERT INTO digests (id, user_id, notification_type, channel, delivery_id) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (user_id, notification_type, channel) WHERE status = 'open' DO NOTHING`,
        [digestId, j.n.recipient_id, j.type.name, j.channel, sendId],
      );
      if ((opened.rowCount ?? 0) === 0) continue; // another transaction opened one first: join it
      d.add({
        id: sendId,
        notificationId: j.n.id,
        channel: j.channel,
        recipient: j.n.recipient_id,
        priority: j.n.priority,
        template: rule.template,
        key: digestDeliveryKey(digestId),
        status: 'queued',
        type: j.type.name,
        kind: 'digest',
        digestId,
        hold: 'digest',
        nextMs: o.clock.now() + rule.windowMs,
      });
      return digestId;
    }
    throw new Error(`could not open or join a digest for ${j.n.recipient_id} ${j.type.name} ${j.channel}`);
  }
}

function addPlanned(d: DeliveryRows, n: NotificationRow, type: NotificationType, p: ChannelPlan): void {
  d.add({
    notificationId: n.id,
    channel: p.channel,
    recipient: n.recipient_id,
    priority: n.priority,
    template: n.template_id,
    key: deliveryKey(n.id, p.channel, n.recipient_id),
    status: p.fate === 'opted_out' ? 'opted_out' : 'queued',
    type: type.name,
    ...(p.fate === 'opted_out' ? { error: `opted_out: the user turned ${p.channel} off for ${type.name}` } : {}),
  });
}
