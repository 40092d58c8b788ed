/**
 * Retention (README, "Tracking": delivery logs kept 90 days by default): a scheduled pg-boss job
 * deletes notifications
 * older than NOTIFIER_RETENTION with their delivery records and dead letters (ON DELETE CASCADE),
 * inbox items of the same age, closed digests of the same age, provider feedback events
 * (notifier/feedback) received before then, and idempotency records past their time. In batches,
 * so no single statement holds locks for long. The e-mail suppression list is kept: an address
 * leaves it only by an operator's hand.
 */
import type { Pool } from '../../shared/db.js';

export interface RetentionResult {
  notifications: number;
  digests: number;
  inboxItems: number;
  idempotencyKeys: number;
  providerEvents: number;
}

const BATCH = 5_000;

async function deleteInBatches(pool: Pool, sql: string, params: unknown[]): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await pool.query(sql, [...params, BATCH]);
    total += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < BATCH) return total;
  }
}

/** Deletes what is older than `before` (and idempotency records expired by then). */
export async function runRetention(pool: Pool, before: Date): Promise<RetentionResult> {
  const notifications = await deleteInBatches(
    pool,
    'DELETE FROM notifications WHERE id IN (SELECT id FROM notifications WHERE created_at < $1 LIMIT $2)',
    [before],
  );
  // A digest's items and send go with their notifications; the digest row itself once closed.
  const digests = await deleteInBatches(
    pool,
    `DELETE FROM digests WHERE id IN (SELECT id FROM digests WHERE status = 'closed' AND opened_at < $1 LIMIT $2)`,
    [before],
  );
  const inboxItems = await deleteInBatches(
    pool,
    'DELETE FROM inbox_items WHERE id IN (SELECT id FROM inbox_items WHERE created_at < $1 LIMIT $2)',
    [before],
  );
  const idempotencyKeys = await deleteInBatches(
    pool,
    'DELETE FROM idempotency_keys WHERE (caller, key) IN (SELECT caller, key FROM idempotency_keys WHERE expires_at < now() LIMIT $1)',
    [],
  );
  const providerEvents = await deleteInBatches(
    pool,
    'DELETE FROM provider_events WHERE id IN (SELECT id FROM provider_events WHERE received_at < $1 LIMIT $2)',
    [before],
  );
  return { notifications, digests, inboxItems, idempotencyKeys, providerEvents };
}
