/**
 * Read model "order search" (README, "Read models and their staleness"): order_id, customer_id,
 * status, date, total — the view
 * `order_search`, one row per live order. Possibly stale: it lags the log by the projection lag.
 *
 * Every update is a merge that does not depend on order or repetition, so a batch is folded in
 * memory into one delta per order and written with one statement, and a re-driven or replayed
 * event converges to the same row:
 * - status is the highest rank seen (order.ts: statuses only ever move up), with `processing`
 *   derived from the `paid` and `reserved` flags (PaymentProcessed and InventoryReserved, any order);
 * - the total is last-writer-wins by stream version (OrderPlaced, then any OrderModified);
 * - OrderDeleted leaves a tombstone, so the order leaves the view and nothing brings it back;
 * - a row whose OrderPlaced has not been seen (a dead letter) has no customer and stays out of the
 *   view until it is re-driven.
 */
import type { Queryable, RecordedEvent } from '../event-store.js';
import { entityId, num, str, type ProjectionContext, type Projector } from '../projector.js';

const RANK: Readonly<Record<string, number>> = { OrderPlaced: 1, OrderShipped: 3, OrderDelivered: 4, OrderCancelled: 5, OrderRefunded: 6 };
const PROCESSING = 2;

/** The merged effect of some events on one order. */
export interface OrderSearchDelta {
  orderId: string;
  customerId: string | null;
  placedAt: number | null;
  total: number | null;
  totalVersion: number;
  paid: boolean;
  reserved: boolean;
  rank: number;
  deleted: boolean;
  position: number;
}

/** Folds events into one delta per order (pure). */
export function foldOrderSearch(events: readonly RecordedEvent[]): Map<string, OrderSearchDelta> {
  const out = new Map<string, OrderSearchDelta>();
  for (const e of events) {
    const orderId = entityId(e, 'order', 'order_id');
    let d = out.get(orderId);
    if (!d) {
      d = {
        orderId,
        customerId: null,
        placedAt: null,
        total: null,
        totalVersion: 0,
        paid: false,
        reserved: false,
        rank: 0,
        deleted: false,
        position: 0,
      };
      out.set(orderId, d);
    }
    d.position = Math.max(d.position, e.position);
    d.rank = Math.max(d.rank, RANK[e.type] ?? 0);
    switch (e.type) {
      case 'OrderPlaced':
        d.customerId = str(e.data.customer_id) ?? d.customerId;
        d.placedAt = num(e.data.ts) ?? d.placedAt;
        setTotal(d, num(e.data.total), e.streamVersion);
        break;
      case 'OrderModified':
        setTotal(d, num(e.data.total), e.streamVersion);
        break;
      case 'PaymentProcessed':
        d.paid = true;
        break;
      case 'InventoryReserved':
        d.reserved = true;
        break;
      case 'OrderDeleted':
        d.deleted = true;
        break;
    }
    if (d.paid && d.reserved) d.rank = Math.max(d.rank, PROCESSING);
  }
  return out;
}

function setTotal(d: OrderSearchDelta, total: number | undefined, version: number): void {
  if (total !== undefined && version > d.totalVersion) {
    d.total = total;
    d.totalVersion = version;
  }
}

const TYPES = [
  'OrderPlaced',
  'PaymentProcessed',
  'InventoryReserved',
  'OrderShipped',
  'OrderDelivered',
  'OrderCancelled',
  'OrderRefunded',
  'OrderModified',
  'OrderDeleted',
];

export const orderSearchProjector: Projector = {
  name: 'order_search',
  version: 1,
  eventTypes: new Set(TYPES),
  tables: ['order_search'],

  async createTables(client: Queryable, ctx: ProjectionContext) {
    const t = ctx.table('order_search');
    await client.query({
      text: `CREATE TABLE IF NOT EXISTS ${t} (
  order_id      text        PRIMARY KEY,
  customer_id   text,
  placed_at     float8,
  total         float8,
  total_version integer     NOT NULL DEFAULT 0,
  paid          boolean     NOT NULL DEFAULT false,
  reserved      boolean     NOT NULL DEFAULT false,
  status_rank   smallint    NOT NULL DEFAULT 0,
  deleted       boolean     NOT NULL DEFAULT false,
  position      bigint      NOT NULL DEFAULT 0,
  updated_at    timestamptz NOT NULL DEFAULT now()
)`,
    });
    await client.query({
      text: `CREATE INDEX IF NOT EXISTS "order_search_g${ctx.generation}_customer_idx" ON ${t} (customer_id, placed_at DESC)`,
    });
  },

  views(ctx) {
    return [
      {
        name: 'order_search',
        select: `SELECT order_id, customer_id,
       CASE status_rank WHEN 1 THEN 'placed' WHEN 2 THEN 'processing' WHEN 3 THEN 'shipped' WHEN 4 THEN 'delivered'
                        WHEN 5 THEN 'cancelled' WHEN 6 THEN 'refunded' END AS status,
       placed_at AS date, total, position
  FROM ${ctx.table('order_search')}
 WHERE NOT deleted AND customer_id IS NOT NULL AND status_rank > 0`,
      },
    ];
  },

  async apply(client, events, ctx) {
    const deltas = [...foldOrderSearch(events).values()];
    if (deltas.length === 0) return;
    const t = ctx.table('order_search');
    await client.query({
      text: `INSERT INTO ${t} AS o (order_id, customer_id, placed_at, total, total_version, paid, reserved, status_rank, deleted, position)
SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[], $5::int[], $6::bool[], $7::bool[], $8::smallint[], $9::bool[], $10::bigint[])
ON CONFLICT (order_id) DO UPDATE SET
  customer_id   = COALESCE(o.customer_id, EXCLUDED.customer_id),
  placed_at     = COALESCE(o.placed_at, EXCLUDED.placed_at),
  total         = CASE WHEN EXCLUDED.total_version > o.total_version THEN EXCLUDED.total ELSE o.total END,
  total_version = GREATEST(o.total_version, EXCLUDED.total_version),
  paid          = o.paid OR EXCLUDED.paid,
  reserved      = o.reserved OR EXCLUDED.reserved,
  status_rank   = GREATEST(o.status_rank, EXCLUDED.status_rank,
                    CASE WHEN (o.paid OR EXCLUDED.paid) AND (o.reserved OR EXCLUDED.reserved) THEN ${PROCESSING} ELSE 0 END),
  deleted       = o.deleted OR EXCLUDED.deleted,
  position      = GREATEST(o.position, EXCLUDED.position),
  updated_at    = now()`,
      values: [
        deltas.map((d) => d.orderId),
        deltas.map((d) => d.customerId),
        deltas.map((d) => d.placedAt),
        deltas.map((d) => d.total),
        deltas.map((d) => d.totalVersion),
        deltas.map((d) => d.paid),
        deltas.map((d) => d.reserved),
        deltas.map((d) => d.rank),
        deltas.map((d) => d.deleted),
        deltas.map((d) => d.position),
      ],
    });
  },
};
