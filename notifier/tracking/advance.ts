/**
 * Moving a delivery forward on a tracking signal (provider acceptance, the open pixel, an app's
 * receipt or open, an inbox read): a conditional UPDATE from the states the signal may leave
 * (states.ts), so a late or repeated signal changes nothing.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import { advanceableFrom, type DeliveryStatus, type Signal } from './states.js';

const TIMESTAMP: Readonly<Record<Signal, string>> = {
  sent: 'sent_at',
  delivered: 'delivered_at',
  opened: 'opened_at',
  read: 'read_at',
};

/**
 * Applies `signal` to the delivery. Returns its status afterwards and whether it moved, or
 * undefined when there is no such delivery.
 */
export async function advanceDelivery(
  db: Pool | PoolClient,
  deliveryId: string,
  signal: Signal,
): Promise<{ status: DeliveryStatus; moved: boolean } | undefined> {
  const col = TIMESTAMP[signal];
  const moved = await db.query<{ status: DeliveryStatus }>(
    `UPDATE deliveries SET status = $2, ${col} = coalesce(${col}, now()), updated_at = now()
      WHERE id = $1 AND status = ANY($3::text[])
      RETURNING status`,
    [deliveryId, signal, advanceableFrom(signal)],
  );
  if (moved.rows[0]) return { status: moved.rows[0].status, moved: true };
  const { rows } = await db.query<{ status: DeliveryStatus }>('SELECT status FROM deliveries WHERE id = $1', [deliveryId]);
  return rows[0] ? { status: rows[0].status, moved: false } : undefined;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when `s` is a UUID (ids from paths are checked before they reach a uuid column). */
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}
