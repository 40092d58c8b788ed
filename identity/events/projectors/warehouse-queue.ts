/**
 * Read model "warehouse queue" (README, "Read models and their staleness"): the orders placed
 * within the last hour (the window is
 * IDENTITY_WAREHOUSE_WINDOW) that the warehouse still has to handle. An order enters on OrderPlaced
 * if it was placed inside the window when projected (a replay of old history does not flood the
 * queue), takes the new lines of an OrderModified, and leaves on OrderShipped, OrderDelivered,
 * OrderCancelled, OrderRefunded or OrderDeleted (a tombstone, so a repeated event cannot bring it
 * back). Rows older than the window are pruned as the projector runs, and readers apply the window
 * again with their own clock (read-models.ts), so the view never shows an order past its hour.
 */
import type { RecordedEvent } from '../event-store.js';
import { entityId, num, str, type Projector } from '../projector.js';

const LEAVES = new Set(['OrderShipped', 'OrderDelivered', 'OrderCancelled', 'OrderRefunded', 'OrderDeleted']);

interface Delta {
  orderId: string;
  customerId: string | null;
  items: unknown;
  total: number | null;
  itemsVersion: number;
  placedAt: number | null;
  removed: boolean;
}

/** Folds events into one delta per order; `cutoff` (epoch s) drops orders placed before it. */
export function foldWarehouse(events: readonly RecordedEvent[], cutoff: number): Map<string, Delta> {
  const out = new Map<string, Delta>();
  for (const e of events) {
    const orderId = entityId(e, 'order', 'order_id');
    let d = out.get(orderId);
    if (!d) {
      d = { orderId, customerId: null, items: null, total: null, itemsVersion: 0, placedAt: null, removed: false };
      out.set(orderId, d);
    }
    if (e.type === 'OrderPlaced') {
      const ts = num(e.data.ts);
      if (ts !== undefined && ts >= cutoff) {
        d.placedAt = ts;
        d.customerId = str(e.data.customer_id) ?? null;
        if (e.streamVersion > d.itemsVersion) {
          d.items = Array.isArray(e.data.items) ? e.data.items : [];
          d.total = num(e.data.total) ?? null;
          d.itemsVersion = e.streamVersion;
        }
      }
    } else if (e.type === 'OrderModified') {
      if (e.streamVersion > d.itemsVersion) {
        d.items = Array.isArray(e.data.items) ? e.data.items : [];
        d.total = num(e.data.total) ?? null;
        d.itemsVersion = e.streamVersion;
      }
    } else if (LEAVES.has(e.type)) {
      d.removed = true;
    }
  }
  return out;
}

/** The projector, with the queue's window in ms. */
export function warehouseQueueProjector(opts: { windowMs: number }): Projector {
  return {
    name: 'warehouse_queue',
    version: 1,
    eventTypes: new Set(['OrderPlaced', 'OrderModified', ...LEAVES]),
    tables: ['warehouse_queue'],

    async createTables(client, ctx) {
      const t = ctx.table('warehouse_queue');
      await client.query({
        text: `CREATE TABLE IF NOT EXISTS ${t} (
  order_id      text    PRIMARY KEY,
  customer_id   text,
  items         jsonb   NOT NULL DEFAULT '[]'::jsonb,
  total         float8,
  items_version integer NOT NULL DEFAULT 0,
  placed_at     float8  NOT NULL,
  removed       boolean NOT NULL DEFAULT false
)`,
      });
      await client.query({ text: `CREATE INDEX IF NOT EXISTS "warehouse_queue_g${ctx.generation}_placed_idx" ON ${t} (placed_at)` });
    },

    views(ctx) {
      return [
        {
          name: 'warehouse_queue',
          select: `SELECT order_id, customer_id, items, total, placed_at FROM ${ctx.table('warehouse_queue')} WHERE NOT removed`,
        },
      ];
    },

    async apply(client, events, ctx) {
      const cutoff = (ctx.now - opts.windowMs) / 1000;
      const t = ctx.table('warehouse_queue');
      const deltas = [...foldWarehouse(events, cutoff).values()];
      const placed = deltas.filter((d) => d.placedAt !== null);
      if (placed.length > 0) {
        await client.query({
          text: `INSERT INTO ${t} AS w (order_id, customer_id, items, total, items_version, placed_at, removed)
SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::float8[], $5::int[], $6::float8[], $7::bool[])
ON CONFLICT (order_id) DO UPDATE SET
  items         = CASE WHEN EXCLUDED.items_version > w.items_version THEN EXCLUDED.items ELSE w.items END,
  total         = CASE WHEN EXCLUDED.items_version > w.items_version THEN EXCLUDED.total ELSE w.total END,
  items_version = GREATEST(w.items_version, EXCLUDED.items_version),
  removed       = w.removed OR EXCLUDED.removed`,
          values: [
            placed.map((d) => d.orderId),
            placed.map((d) => d.customerId),
            placed.map((d) => JSON.stringify(d.items ?? [])),
            placed.map((d) => d.total),
            placed.map((d) => d.itemsVersion),
            placed.map((d) => d.placedAt),
            placed.map((d) => d.removed),
          ],
        });
      }
      // Orders already in the queue (or outside the window: then nothing matches).
      const updates = deltas.filter((d) => d.placedAt === null);
      if (updates.length > 0) {
        await client.query({
          text: `UPDATE ${t} AS w SET
  items         = CASE WHEN u.v > w.items_version THEN u.items ELSE w.items END,
  total         = CASE WHEN u.v > w.items_version THEN u.total ELSE w.total END,
  items_version = GREATEST(w.items_version, u.v),
  removed       = w.removed OR u.removed
  FROM unnest($1::text[], $2::jsonb[], $3::float8[], $4::int[], $5::bool[]) AS u(order_id, items, total, v, removed)
 WHERE w.order_id = u.order_id`,
          values: [
            updates.map((d) => d.orderId),
            updates.map((d) => JSON.stringify(d.items ?? [])),
            updates.map((d) => d.total),
            updates.map((d) => d.itemsVersion),
            updates.map((d) => d.removed),
          ],
        });
      }
      await client.query({ text: `DELETE FROM ${t} WHERE placed_at < $1`, values: [cutoff] });
    },
  };
}
