/**
 * The SQL of the delivery records: creating them, the conditional claim before a provider call,
 * and the writes that end an attempt. Each function takes a client or the pool; the callers put
 * the end-of-attempt writes and the job bookkeeping in one transaction.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from '../../shared/db.js';
import type { ChannelName, Tier } from '../queues/names.js';
import type { DeliveryStatus } from '../tracking/states.js';

export type Queryable = Pool | PoolClient;

/**
 * The delivery's idempotency key (README, "Delivery, retries, failover, the dead-letter queue"):
 * sha256 hex of notification id, channel and recipient.
 */
export function deliveryKey(notificationId: string, channel: ChannelName, recipientId: string): string {
  return createHash('sha256').update(`${notificationId}\n${channel}\n${recipientId}`).digest('hex');
}

export interface NewDelivery {
  notificationId: string;
  channel: ChannelName;
  recipientId: string;
  priority: Tier;
  templateId: string;
}

/**
 * Creates the delivery for (notification, channel, recipient) unless it exists. Returns its id,
 * its status, and whether this call created it.
 */
export async function ensureDelivery(db: Queryable, d: NewDelivery): Promise<{ id: string; status: DeliveryStatus; created: boolean }> {
  const key = deliveryKey(d.notificationId, d.channel, d.recipientId);
  const ins = await db.query<{ id: string }>(
    `INSERT INTO deliveries (id, notification_id, channel, recipient_id, priority, template_id, idempotency_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (idempotency_key) DO NOTHING
     RETURNING id`,
    [randomUUID(), d.notificationId, d.channel, d.recipientId, d.priority, d.templateId, key],
  );
  if (ins.rows[0]) return { id: ins.rows[0].id, status: 'queued', created: true };
  const { rows } = await db.query<{ id: string; status: DeliveryStatus }>('SELECT id, status FROM deliveries WHERE idempotency_key = $1', [
    key,
  ]);
  return { id: rows[0]!.id, status: rows[0]!.status, created: false };
}

/** A claimed delivery with what the worker needs of its notification. */
export interface ClaimedDelivery {
  id: string;
  notification_id: string;
  channel: ChannelName;
  recipient_id: string;
  priority: Tier;
  template_id: string;
  attempts: number;
  use_secondary: boolean;
  failed_over_to: string | null;
  /** Another delivery failed over to this one: it does not fail over in turn (no chain of failovers). */
  is_failover: boolean;
  /** `sending` when this claim took over an attempt whose worker died (the crash window). */
  previous_status: DeliveryStatus;
  event_type: string;
  template_data: Record<string, string>;
  locale: string | null;
  /** The campaign it belongs to (the kill switch's unit), if any. */
  campaign_id: string | null;
  /** When the notification was accepted (epoch ms), for send latency. */
  accepted_at_ms: number;
  /** NULL only for deliveries older than migration 070 (the catalogue's fallback type then). */
  notification_type: string | null;
  /** `digest`: the one send of a digest (its items are read when the claim closes it). */
  kind: 'single' | 'digest';
  digest_id: string | null;
  /** The cap admitted this send before (`counted_at` is set): a retry is not counted again. */
  counted: boolean;
  /** A digest send's items (their template_data, oldest first) and how many there are in all. */
  digest?: { items: Record<string, string>[]; count: number };
}

/**
 * The conditional write before a provider call: `queued` → `sending` (attempts + 1), or a takeover
 * of a `sending` whose lease (`leaseMs` since the claim) ran out: its worker died mid-send. Anything
 * else (already sent, delivered, failed, or another worker's live claim) claims nothing. Several
 * deliveries at once (a fetched batch), locked in id order so concurrent claims cannot deadlock.
 */
export async function claimDeliveries(
  db: Queryable,
  ids: readonly string[],
  leaseMs: number,
  nowMs: number,
): Promise<Map<string, ClaimedDelivery>> {
  // A delivery of a stopped campaign (notifier/campaigns/kill-switch.ts) is cancelled instead of
  // claimed, in the same statement: once the stop has committed, no claim can take one.
  const { rows } = await db.query<ClaimedDelivery>(
    `WITH prev AS (
       SELECT id, status FROM deliveries WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
     ), takeable AS (
       SELECT d.id, prev.status, n.campaign_id,
              (n.campaign_id IS NOT NULL AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = n.campaign_id AND c.stopped_at IS NOT NULL)) AS stopped
         FROM prev JOIN deliveries d ON d.id = prev.id JOIN notifications n ON n.id = d.notification_id
        WHERE (prev.status = 'queued'
               -- A digest's send is never taken before its flush time, whatever woke it.
               AND (d.kind = 'single' OR d.next_attempt_at IS NULL OR d.next_attempt_at <= to_timestamp($3::double precision / 1000)))
           OR (prev.status = 'sending' AND d.sending_since < now() - make_interval(secs => $2::double precision / 1000))
     ), cancelled AS (
       UPDATE deliveries d SET status = 'cancelled', last_error = 'cancelled: the campaign was stopped', sending_since = NULL,
              next_attempt_at = NULL, hold_reason = NULL, updated_at = now()
         FROM takeable t WHERE d.id = t.id AND t.stopped
       RETURNING d.id
     )
     UPDATE deliveries d
        SET status = 'sending', attempts = d.attempts + 1, sending_since = now(), hold_reason = NULL, updated_at = now()
       FROM takeable t, notifications n
      WHERE d.id = t.id AND NOT t.stopped AND n.id = d.notification_id
     RETURNING d.id, d.notification_id, d.channel, d.recipient_id, d.priority, d.template_id, d.attempts,
               d.use_secondary, d.failed_over_to::text, t.status AS previous_status,
               n.event_type, n.template_data, n.locale, n.campaign_id,
               (extract(epoch FROM n.created_at) * 1000)::float8 AS accepted_at_ms,
               coalesce(d.notification_type, n.notification_type) AS notification_type, d.kind, d.digest_id::text,
               (d.counted_at IS NOT NULL) AS counted,
               EXISTS (SELECT 1 FROM deliveries f WHERE f.failed_over_to = d.id) AS is_failover`,
    [[...new Set(ids)], leaseMs, nowMs + 1000],
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/** Why a claim found nothing: the delivery's status and, for a live claim, when its lease ends. */
export async function deliveryState(
  db: Queryable,
  id: string,
  leaseMs: number,
): Promise<{ status: DeliveryStatus; leaseLeftMs: number; channel: ChannelName; priority: Tier } | undefined> {
  const { rows } = await db.query<{ status: DeliveryStatus; lease_left_ms: number | null; channel: ChannelName; priority: Tier }>(
    `SELECT status, channel, priority,
            (extract(epoch FROM (sending_since + make_interval(secs => $2::double precision / 1000) - now())) * 1000)::float8 AS lease_left_ms
       FROM deliveries WHERE id = $1`,
    [id, leaseMs],
  );
  const r = rows[0];
  return r ? { status: r.status, leaseLeftMs: Math.max(0, r.lease_left_ms ?? 0), channel: r.channel, priority: r.priority } : undefined;
}

/** Puts a claimed delivery back to `queued` without counting the attempt (nothing reached a provider). */
export async function releaseClaim(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE deliveries SET status = 'queued', attempts = greatest(attempts - 1, 0), sending_since = NULL, updated_at = now()
      WHERE id = $1 AND status = 'sending'`,
    [id],
  );
}

/** `sending` → `queued` with the next attempt's time (and, for the secondary, the provider switch). */
export async function markRetry(db: Queryable, id: string, delayMs: number, error: string, useSecondary = false): Promise<boolean> {
  const r = await db.query(
    `UPDATE deliveries SET status = 'queued', next_attempt_at = now() + make_interval(secs => $2::double precision / 1000),
            last_error = $3, sending_since = NULL, use_secondary = use_secondary OR $4, updated_at = now()
      WHERE id = $1 AND status = 'sending'`,
    [id, delayMs, error, useSecondary],
  );
  return (r.rowCount ?? 0) > 0;
}

/** `sending` → `failed` or `dead_lettered`, optionally parked behind a failover delivery. */
export async function markFailed(
  db: Queryable,
  id: string,
  status: 'failed' | 'dead_lettered',
  error: string,
  failedOverTo?: string,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE deliveries SET status = $2, failed_at = now(), last_error = $3, sending_since = NULL, next_attempt_at = NULL,
            failed_over_to = coalesce($4::uuid, failed_over_to), updated_at = now()
      WHERE id = $1 AND status = 'sending'`,
    [id, status, error, failedOverTo ?? null],
  );
  return (r.rowCount ?? 0) > 0;
}

/** A dead-letter queue entry for a delivery. Returns its id. */
export async function insertDeadLetter(
  db: Queryable,
  d: { deliveryId: string; channel: ChannelName; priority: Tier; reason: string; detail: string | undefined; attempts: number },
): Promise<string> {
  const id = randomUUID();
  await db.query(
    `INSERT INTO dead_letters (id, delivery_id, channel, priority, reason, detail, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [id, d.deliveryId, d.channel, d.priority, d.reason, d.detail ?? null, d.attempts],
  );
  return id;
}

/** Resumes the deliveries parked behind `failoverId` (it failed too): back to `queued`. */
export async function resumeParked(
  db: Queryable,
  failoverId: string,
): Promise<{ id: string; channel: ChannelName; priority: Tier; attempts: number }[]> {
  const { rows } = await db.query<{ id: string; channel: ChannelName; priority: Tier; attempts: number }>(
    `UPDATE deliveries SET status = 'queued', failed_at = NULL, updated_at = now()
      WHERE failed_over_to = $1 AND status = 'failed'
      RETURNING id, channel, priority, attempts`,
    [failoverId],
  );
  return rows;
}
