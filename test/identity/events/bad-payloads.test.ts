/**
 * Issue 24, item 4: "re-drive means fixed". A stored payload that is not a JSON object, or whose
 * present fields have the wrong type, is refused before any projector sees it, on the live path
 * and on a re-drive alike (identity/events/payload-check.ts); missing fields are still tolerated.
 * A re-drive with nothing fixed fails every such dead letter again: still open, attempts raised,
 * error replaced, not one row of any read model (or outbox) written, and the answer says so. After
 * a fix (here, the design's fix for a badly stored payload: a build whose catalogue reads it
 * through an upcaster), the re-drive projects it and closes its dead letters.
 *
 * Every projector the service runs, on a real database; the bad events are written around the
 * codec, as a faulty writer, migration or manual insert could.
 */
import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import { createRegistry } from '../../../shared/metrics.js';
import type { JsonRecord } from '../../../shared/proto-json.js';
import { EVENT_CATALOG, type EventCatalog } from '../../../identity/events/catalog.js';
import { listDeadLetters, redriveDeadLetters, type DeadLetter } from '../../../identity/events/dead-letters.js';
import { EventStore } from '../../../identity/events/event-store.js';
import { createEventMetrics } from '../../../identity/events/metrics.js';
import { identityProjectors } from '../../../identity/events/projectors/index.js';
import { ReadModels } from '../../../identity/events/read-models.js';
import { captureLogger, raw, testRunner, useEventsDb } from './helpers.js';

const { pool, store } = await useEventsDb(t, 'events_bad_payloads');
const clock = new FakeClock(Date.UTC(2026, 0, 1));
const now = clock.now() / 1000;
const projectors = identityProjectors({ warehouseWindowMs: 3_600_000 });
const read = new ReadModels(pool);
const { log } = captureLogger();
const registry = createRegistry('bad_payloads', { defaults: false });
const metrics = createEventMetrics(registry);
const runner = testRunner(pool, store, projectors, { clock, log, metrics, maxAttempts: 3 });
await runner.ensure();

/** Writes one event as stored JSON text, around the codec (the events table only says jsonb). */
async function insertRaw(stream: string, version: number, type: string, json: string, schemaVersion = 1): Promise<void> {
  await pool.query(
    `INSERT INTO events (stream_id, stream_version, event_type, schema_version, event_id, data)
     VALUES ($1, $2, $3, $4, gen_random_uuid(), $5::jsonb)`,
    [stream, version, type, schemaVersion, json],
  );
}

const placed = (id: string, extra: JsonRecord = {}): JsonRecord => ({
  order_id: id,
  customer_id: 'c1',
  items: [],
  total: 10,
  ts: now,
  ...extra,
});

/** The orders and users whose events are bad, and the reason each dead letter must give. */
const BAD: Record<string, string> = {
  'order-null': 'the stored payload is not a JSON object',
  'order-array': 'the stored payload is not a JSON object',
  'order-strtotal': 'the stored payload does not fit OrderPlaced: total: must be a number',
  'order-badqty': 'the stored payload does not fit OrderPlaced: items[0].quantity: must be an integer from 0 to 4294967295',
  'order-itemsobj': 'the stored payload does not fit OrderPlaced: items: must be an array',
  'order-good': 'the stored payload does not fit OrderShipped: tracking_number: must be a string',
  'user-badname': 'the stored payload does not fit UserRegistered: name: must be a string',
};
const BAD_ORDERS = ['null', 'array', 'strtotal', 'badqty', 'itemsobj'];
/** OrderPlaced, OrderShipped: order_search, order_timeline, warehouse_queue; UserRegistered: user_card, user_search, welcome_notification. */
const LETTERS = Object.keys(BAD).length * 3;

/**
 * Every row every projector keeps (each table of the live generation, as JSON, sorted), plus the
 * outbox, the profile sync and the side-effect dedup rows: "nothing written" means this is equal.
 */
async function dumpReadModels(): Promise<string[]> {
  const out: string[] = [];
  const { rows: gens } = await pool.query<{ projector: string; live_generation: number }>(
    'SELECT projector, live_generation FROM projections',
  );
  const generation = new Map(gens.map((g) => [g.projector, g.live_generation]));
  const tables = projectors.flatMap((p) => p.tables.map((base) => `"${base}_g${generation.get(p.name)}"`));
  for (const table of [...tables, 'notification_outbox', 'notifier_profile_sync', 'side_effects_done']) {
    const { rows } = await pool.query<{ row: string }>(`SELECT to_jsonb(t)::text AS row FROM ${table} t`);
    out.push(...rows.map((r) => `${table} ${r.row}`));
  }
  return out.sort();
}

/** The stream of the event a dead letter is about. */
async function streamOf(letter: DeadLetter): Promise<string> {
  const { rows } = await pool.query<{ stream_id: string }>('SELECT stream_id FROM events WHERE position = $1', [letter.position]);
  return rows[0]!.stream_id;
}

const deps = { pool, store, projectors, clock, log, metrics };

t.test(
  'live path: null, an array and wrong-typed fields are dead-lettered at once and write nothing; missing fields are projected',
  async (t) => {
    // A valid order first, so a bad OrderShipped after it has something to (not) change.
    await store.append('order-good', 0, [raw('OrderPlaced', placed('good'))]);
    await insertRaw('order-null', 1, 'OrderPlaced', 'null');
    await insertRaw('order-array', 1, 'OrderPlaced', '[1, 2]');
    await store.append('order-strtotal', 0, [raw('OrderPlaced', placed('strtotal', { total: '12.50' }))]);
    await store.append('order-badqty', 0, [raw('OrderPlaced', placed('badqty', { items: [{ sku: 'A', quantity: 1.5, price: 1 }] }))]);
    await store.append('order-itemsobj', 0, [raw('OrderPlaced', placed('itemsobj', { items: { sku: 'A', quantity: 1, price: 1 } }))]);
    await store.append('order-good', 1, [raw('OrderShipped', { order_id: 'good', tracking_number: 123, ts: now })]);
    await store.append('user-badname', 0, [raw('UserRegistered', { user_id: 'badname', email: 'b@x.io', name: 42, created_at: 1 }, 2)]);
    // Missing fields, a null field (proto JSON: absent) and a field the contract does not know: all projected.
    await store.append('order-partial', 0, [raw('OrderPlaced', { order_id: 'partial', customer_id: 'c2' })]);
    await store.append('order-nulltotal', 0, [raw('OrderPlaced', placed('nulltotal', { total: null }))]);
    await store.append('order-extra', 0, [raw('OrderPlaced', placed('extra', { total: 30, gift_wrap: true }))]);
    await store.append('user-partial', 0, [raw('UserRegistered', { user_id: 'partial' }, 2)]);
    await runner.drain();

    const letters = await listDeadLetters(pool, { status: 'open' });
    t.equal(letters.length, LETTERS, 'each bad event dead-lettered by each of its three projectors');
    for (const l of letters) {
      const stream = await streamOf(l);
      t.equal(l.error, BAD[stream], `${stream} (${l.projector}): the reason names the field`);
      t.equal(l.attempts, 1, `${stream} (${l.projector}): at once, not retried`);
    }

    for (const id of BAD_ORDERS) {
      for (const table of ['order_search_g1', 'order_timeline_g1', 'warehouse_queue_g1']) {
        const { rows } = await pool.query(`SELECT 1 FROM ${table} WHERE order_id = $1`, [id]);
        t.equal(rows.length, 0, `${id}: nothing in ${table}`);
      }
    }
    t.match(await read.order('good'), { status: 'placed' }, 'the bad OrderShipped did not ship the order');
    t.same(
      (await read.timeline('good')).map((e) => e.event_type),
      ['OrderPlaced'],
      'nor reached its timeline',
    );
    for (const table of ['user_card_g1', 'user_search_g1', 'notifier_profile_sync', 'notification_outbox']) {
      const { rows } = await pool.query(`SELECT 1 FROM ${table} WHERE user_id = 'badname'`);
      t.equal(rows.length, 0, `badname: nothing in ${table}`);
    }

    t.match(await read.order('partial'), { customer_id: 'c2', status: 'placed', total: null, date: null }, 'missing fields: projected');
    t.equal((await read.timeline('partial')).length, 1);
    t.match(await read.order('nulltotal'), { status: 'placed', total: null }, 'a null field counts as missing');
    t.match(await read.order('extra'), { status: 'placed', total: 30 }, 'an unknown field is passed over');
    t.match(await read.userCard('partial'), { user_id: 'partial', name: null });
    t.match(
      await registry.metrics(),
      new RegExp(`identity_projection_dead_letters_total\\{projector="order_timeline"[^}]*\\} 6\\n`),
      'counted',
    );
  },
);

t.test('re-drive with nothing fixed: every one fails again, stays open with attempts raised, and nothing is written', async (t) => {
  const before = await dumpReadModels();
  const lettersBefore = new Map((await listDeadLetters(pool, { status: 'open' })).map((l) => [l.id, l]));

  t.same(await redriveDeadLetters(deps), { redriven: 0, failed: LETTERS, remaining: LETTERS }, 'the answer counts nothing as re-driven');

  const after = await listDeadLetters(pool, { status: 'open' });
  t.equal(after.length, LETTERS, 'all still open');
  for (const l of after) {
    const was = lettersBefore.get(l.id)!;
    t.equal(l.attempts, was.attempts + 1, `${l.id}: attempts raised`);
    t.equal(l.error, BAD[await streamOf(l)], `${l.id}: the error is the check's`);
    t.ok(Date.parse(l.failedAt) > Date.parse(was.failedAt), `${l.id}: failed_at is the re-drive's`);
  }
  t.same(await dumpReadModels(), before, 'no read model, outbox or dedup row changed');
  t.match(
    await registry.metrics(),
    /identity_projection_redriven_total\{(?=[^}]*projector="order_search")(?=[^}]*outcome="failed")[^}]*\} 6\n/,
    'counted as failed',
  );

  t.same(await redriveDeadLetters(deps, { projector: 'order_timeline' }), { redriven: 0, failed: 6, remaining: 6 }, 'and again');
  t.same(await dumpReadModels(), before);
});

t.test('re-drive after a fix: the repaired event is projected and its dead letters close; the rest stay open', async (t) => {
  // The fix a stored fact allows (catalog.ts: a stored event is never rewritten): the next build
  // reads OrderPlaced through an upcaster that turns a numeric string total into a number.
  const totalFromString = (d: JsonRecord): JsonRecord =>
    typeof d.total === 'string' && Number.isFinite(Number(d.total)) ? { ...d, total: Number(d.total) } : d;
  const fixed: EventCatalog = {
    ...EVENT_CATALOG,
    OrderPlaced: { ...EVENT_CATALOG.OrderPlaced, version: 2, upcasters: [totalFromString] },
  };
  const fixedDeps = { ...deps, store: new EventStore(pool, { catalog: fixed }) };

  const result = await redriveDeadLetters(fixedDeps);
  t.same(result, { redriven: 3, failed: LETTERS - 3, remaining: LETTERS - 3 }, 'the three of the repaired event, no more');
  t.match(await read.order('strtotal'), { customer_id: 'c1', status: 'placed', total: 12.5 });
  const timeline = await read.timeline('strtotal');
  t.equal(timeline.length, 1);
  t.equal(timeline[0]?.data.total, 12.5, 'the timeline holds the payload as read, not the stored string');
  t.match(
    (await read.warehouseQueue(clock.now(), 3_600_000)).find((w) => w.order_id === 'strtotal'),
    { total: 12.5 },
  );

  const redriven = await listDeadLetters(pool, { status: 'redriven' });
  t.same((await Promise.all(redriven.map(streamOf))).sort(), ['order-strtotal', 'order-strtotal', 'order-strtotal']);
  const open = await listDeadLetters(pool, { status: 'open' });
  t.notOk((await Promise.all(open.map(streamOf))).includes('order-strtotal'), 'removed from the open dead letters');
  t.ok(
    open.every((l) => l.attempts === (l.projector === 'order_timeline' ? 4 : 3)),
    'the others failed once more',
  );
  t.same(await redriveDeadLetters(fixedDeps), { redriven: 0, failed: LETTERS - 3, remaining: LETTERS - 3 }, 'nothing else is fixed');
});
