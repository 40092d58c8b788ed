/**
 * Read model "order timeline" (README, "Read models and their staleness"): every event of an order,
 * appended, never deleted — an
 * OrderDeleted is one more line of it, and a deleted order's timeline keeps everything before it.
 * One row per event, keyed on (order, stream version): a repeated event is a no-op, and the one
 * index is also the one reads use. The card token of PaymentProcessed is left out: the timeline is
 * for people, and the token is for the payment provider only.
 */
import { ORDER_EVENT_TYPES } from '../catalog.js';
import type { Projector } from '../projector.js';
import { entityId } from '../projector.js';

/** Payload fields the timeline never copies. */
const OMIT = new Set(['card_token']);
const OMIT_SQL = `ARRAY[${[...OMIT].map((k) => `'${k}'`).join(', ')}]::text[]`;

export const orderTimelineProjector: Projector = {
  name: 'order_timeline',
  version: 1,
  eventTypes: ORDER_EVENT_TYPES,
  tables: ['order_timeline'],

  async createTables(client, ctx) {
    const t = ctx.table('order_timeline');
    await client.query({
      text: `CREATE TABLE IF NOT EXISTS ${t} (
  order_id       text    NOT NULL,
  stream_version integer NOT NULL,
  event_id       uuid    NOT NULL,
  position       bigint  NOT NULL,
  event_type     text    NOT NULL,
  data           jsonb   NOT NULL,
  recorded_at    float8  NOT NULL,
  PRIMARY KEY (order_id, stream_version)
)`,
    });
  },

  views(ctx) {
    return [
      {
        name: 'order_timeline',
        select: `SELECT order_id, stream_version, event_type, data, recorded_at, event_id, position FROM ${ctx.table('order_timeline')}`,
      },
    ];
  },

  async apply(client, events, ctx) {
    if (events.length === 0) return;
    const t = ctx.table('order_timeline');
    // An event read as it was stored (schema version 1: nothing upcast it) is copied inside the
    // database, with no round trip of the payload; any other goes through the payload readers see,
    // which is the one the payload check passed (an upcaster may have repaired the stored one).
    const copied = events.filter((e) => e.schemaVersion === 1);
    const upcast = events.filter((e) => e.schemaVersion !== 1);
    if (copied.length > 0) {
      await client.query({
        text: `INSERT INTO ${t} (event_id, order_id, stream_version, position, event_type, data, recorded_at)
SELECT e.event_id, CASE WHEN e.stream_id LIKE 'order-%' THEN substr(e.stream_id, 7) ELSE COALESCE(e.data->>'order_id', e.stream_id) END,
       e.stream_version, e.position, e.event_type, e.data - ${OMIT_SQL}, extract(epoch FROM e.recorded_at)::float8
  FROM events e WHERE e.position = ANY ($1::bigint[])
ON CONFLICT (order_id, stream_version) DO NOTHING`,
        values: [copied.map((e) => e.position)],
      });
    }
    if (upcast.length > 0) {
      await client.query({
        text: `INSERT INTO ${t} (event_id, order_id, stream_version, position, event_type, data, recorded_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[], $5::text[], $6::jsonb[], $7::float8[])
ON CONFLICT (order_id, stream_version) DO NOTHING`,
        values: [
          upcast.map((e) => e.eventId),
          upcast.map((e) => entityId(e, 'order', 'order_id')),
          upcast.map((e) => e.streamVersion),
          upcast.map((e) => e.position),
          upcast.map((e) => e.type),
          upcast.map((e) => JSON.stringify(Object.fromEntries(Object.entries(e.data).filter(([k]) => !OMIT.has(k))))),
          upcast.map((e) => e.recordedAt / 1000),
        ],
      });
    }
  },
};
