import t from 'tap';
import type pg from 'pg';
import { FakeClock } from '../../../shared/clock.js';
import { createRegistry } from '../../../shared/metrics.js';
import type { Actor } from '../../../identity/domain/actor.js';
import { Orders } from '../../../identity/domain/orders.js';
import { Users } from '../../../identity/domain/users.js';
import { EventStore, START } from '../../../identity/events/event-store.js';
import { createEventMetrics } from '../../../identity/events/metrics.js';
import { identityProjectors } from '../../../identity/events/projectors/index.js';
import { projectionContext } from '../../../identity/events/projector.js';
import { ReadModels } from '../../../identity/events/read-models.js';
import { AppendSignal, EventsListener } from '../../../identity/events/wakeup.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';
import { raw, testRunner, useEventsDb } from './helpers.js';

const HOUR = 3_600_000;
const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
const { db, pool, store } = await useEventsDb(t, 'events_projections', { poolMax: 12 });
const log = testLogger();
const users = new Users({ store, clock, log, snapshotEvery: 100 });
const orders = new Orders({ store, clock, log, snapshotEvery: 100, policy: { selfDeleteMaxTotal: 100 } });
const projectors = identityProjectors({ warehouseWindowMs: HOUR });
const runner = testRunner(pool, store, projectors, { clock });
const read = new ReadModels(pool);
await runner.ensure();

const admin: Actor = { id: 'admin-1', role: 'admin' };
const items = [{ sku: 'BOOK-1', quantity: 2, price: 12.5 }];
const card = { cardToken: 'tok_test', cardLast4: '4242' };

t.test('the read models after a realistic history', async (t) => {
  await users.register({ userId: 'ada', email: 'ada@example.com', name: 'Ada' });
  await users.register({ userId: 'bob', email: 'bob@example.com', name: 'Bob' });
  await users.changeProfilePic('ada', 'https://cdn.example.com/ada.png');
  for (let i = 0; i < 10; i++) {
    await users.register({ userId: `fan-${i}`, email: `fan${i}@example.com`, name: `Fan ${i}` });
    await users.follow(`fan-${i}`, 'ada');
  }
  await users.follow('bob', 'ada');
  await users.follow('bob', 'ada'); // no-op: already following

  // An order placed two hours "ago" never enters the warehouse queue.
  clock.set(clock.now() - 2 * HOUR);
  await orders.checkout({ orderId: 'old', customerId: 'ada', items, payment: card });
  clock.set(clock.now() + 2 * HOUR);
  await orders.checkout({ orderId: 'o-ship', customerId: 'ada', items, payment: card });
  await orders.ship('o-ship', '1Z');
  await orders.deliver('o-ship');
  await orders.checkout({ orderId: 'o-cancel', customerId: 'bob', items, payment: card });
  await orders.cancel('o-cancel', { id: 'bob', role: 'customer' }, 'changed my mind');
  await orders.checkout({ orderId: 'o-mod', customerId: 'bob', items, payment: card });
  await orders.modify('o-mod', admin, { items: [{ sku: 'PEN', quantity: 4, price: 1 }], reason: 'swap' });
  await orders.checkout({ orderId: 'o-del', customerId: 'ada', items, payment: card });
  await orders.delete('o-del', admin, 'fraud');
  await runner.drain();

  const byId = async (id: string) => read.order(id);
  t.match(await byId('o-ship'), { customer_id: 'ada', status: 'delivered', total: 25 });
  t.equal((await byId('o-ship'))?.date, clock.now() / 1000, 'date is when it was placed, epoch seconds');
  t.match(await byId('o-cancel'), { status: 'cancelled' });
  t.match(await byId('o-mod'), { status: 'processing', total: 4 }, 'the modified total');
  t.equal(await byId('o-del'), undefined, 'a deleted order leaves the read model');
  t.same((await read.ordersOf('ada')).map((o) => o.order_id).sort(), ['o-ship', 'old']);

  const timeline = await read.timeline('o-del');
  t.same(
    timeline.map((e) => e.event_type),
    ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved', 'OrderDeleted'],
    "a deleted order's timeline keeps every event",
  );
  t.notOk(JSON.stringify(timeline).includes('tok_test'), 'the timeline leaves the card token out');
  t.equal(timeline[1]?.data.card_last4, '4242');

  const queue = await read.warehouseQueue(clock.now(), HOUR);
  t.same(queue.map((q) => q.order_id).sort(), ['o-mod'], 'only orders placed within the hour and not shipped, cancelled or deleted');
  t.same(queue[0]?.items, [{ sku: 'PEN', quantity: 4, price: 1 }], 'with the modified lines');
  t.same(await read.warehouseQueue(clock.now() + HOUR + 1000, HOUR), [], 'an hour later the queue is empty');

  const adaCard = await read.userCard('ada');
  t.match(adaCard, { name: 'Ada', pic_url: 'https://cdn.example.com/ada.png', follower_count: 11, badge: 'rising' });
  t.match(await read.userCard('bob'), { follower_count: 0, badge: null });
  t.same(await read.searchUsers('ad'), [{ user_id: 'ada', name: 'Ada', bio: null, follower_count: 11 }]);
  t.equal((await read.searchUsers('fan')).length, 10);
  t.same(await read.searchUsers('%'), [], 'LIKE wildcards in the prefix are literal');
});

t.test('projectors are idempotent: applying the same events again changes nothing', async (t) => {
  const all = await store.readAll(START, 10_000);
  const dump = async () => {
    const out: Record<string, unknown> = {};
    for (const v of ['order_search', 'order_timeline', 'warehouse_queue', 'user_cards', 'user_search']) {
      out[v] = (await pool.query(`SELECT * FROM ${v} ORDER BY 1, 2`)).rows;
    }
    out.outbox = (await pool.query('SELECT event_id FROM notification_outbox ORDER BY 1')).rows;
    return out;
  };
  const before = await dump();
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    for (const p of projectors) {
      const ctx = projectionContext(1, clock.now(), log);
      const mine = all.events.filter((e) => p.eventTypes.has(e.type));
      await p.apply(client, mine, ctx);
      for (const e of mine) await p.apply(client, [e], ctx);
    }
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  t.same(await dump(), before);
});

t.test('unknown event types are passed over; missing fields are tolerated', async (t) => {
  await store.append('order-partial', 0, [
    raw('OrderPlaced', { order_id: 'partial', customer_id: 'ada' }),
    raw('SomethingFromTheFuture', { x: 1 }, 7),
  ]);
  await store.append('order-orphan', 0, [raw('PaymentProcessed', {})]);
  await runner.drain();
  t.match(await read.order('partial'), { customer_id: 'ada', status: 'placed', total: null, date: null });
  t.equal(await read.order('orphan'), undefined, 'an order without OrderPlaced stays out of the view');
  const status = await runner.status();
  const head = (await pool.query<{ p: string }>('SELECT max(position) AS p FROM events')).rows[0]!.p;
  for (const s of status) t.equal(s.livePosition, Number(head), `${s.projector} passed every event`);
  t.equal(
    status.reduce((n, s) => n + s.openDeadLetters, 0),
    0,
    'nothing dead-lettered',
  );
});

t.test('LISTEN/NOTIFY wakes the projectors long before the poll would', async (t) => {
  const registry = createRegistry('identity-test', { defaults: false });
  const metrics = createEventMetrics(registry, () => live.lagSeconds());
  const signal = new AppendSignal(pool, log);
  const notifying = new EventStore(pool, { onAppended: () => signal.poke() });
  const live = testRunner(pool, notifying, projectors, { clock, pollIntervalMs: 600_000, metrics });
  const listener = new EventsListener({ url: db.url, log, onNotify: () => live.wake() });
  t.teardown(async () => {
    signal.close();
    await listener.close();
    await live.close();
  });
  await live.start();
  await listener.start();
  t.ok(listener.connected);
  const wokenUsers = new Users({ store: notifying, clock, log, snapshotEvery: 100 });
  await wokenUsers.register({ userId: 'woken', email: 'woken@example.com', name: 'Woken' });
  await waitFor(() => read.userCard('woken'), { timeoutMs: 5_000, what: 'the user card, via NOTIFY' });
  const text = await registry.metrics();
  t.match(text, /identity_projection_lag_seconds\{projector="user_card"[^}]*\} 0\n/, 'caught up: lag 0');
  t.match(text, /identity_projection_events_total\{projector="user_card"[^}]*\} [1-9]/);
});

t.test('a long transaction holds the projectors back; they catch up as soon as it ends, with no notification', async (t) => {
  const signal = new AppendSignal(pool, log);
  const notifying = new EventStore(pool, { onAppended: () => signal.poke() });
  // Counts the user_card projector's passes that found committed events held back behind an open
  // transaction (projection-runner.ts heldBack): the runner looked, and could not read them yet.
  let heldBackPasses = 0;
  const watched = new Proxy(pool, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof v !== 'function') return v;
      if (prop !== 'query') return v.bind(target) as unknown;
      return async (...args: unknown[]) => {
        const res = (await v.apply(target, args)) as pg.QueryResult;
        const heldBack = typeof args[0] === 'string' && args[0].includes('JOIN projection_checkpoints');
        if (heldBack && (args[1] as unknown[] | undefined)?.[0] === 'user_card' && res.rowCount) heldBackPasses++;
        return res;
      };
    },
  });
  const live = testRunner(watched, notifying, projectors, { clock, pollIntervalMs: 600_000 });
  const listener = new EventsListener({ url: db.url, log, onNotify: () => live.wake() });
  t.teardown(async () => {
    signal.close();
    await listener.close();
    await live.close();
  });
  await live.start();
  await listener.start();
  const slow = await pool.connect();
  t.teardown(() => slow.release());
  await slow.query('BEGIN');
  await notifying.append(
    'user-held-slow',
    0,
    [raw('UserRegistered', { user_id: 'held-slow', email: 's@x.io', name: 'Slow', created_at: 1 }, 2)],
    {
      client: slow,
    },
  );
  // Committed and announced, but behind the open transaction's horizon.
  await notifying.append('user-held-fast', 0, [
    raw('UserRegistered', { user_id: 'held-fast', email: 'f@x.io', name: 'Fast', created_at: 1 }, 2),
  ]);
  heldBackPasses = 0;
  await waitFor(() => heldBackPasses >= 2, { what: 'the user_card projector to look (twice) and find held-fast held back' });
  t.equal(await read.userCard('held-fast'), undefined, 'not projected while the older transaction is open');
  await slow.query('COMMIT'); // no notification for this one
  await waitFor(async () => (await read.userCard('held-slow')) && read.userCard('held-fast'), { timeoutMs: 5_000, what: 'both cards' });
  t.pass('both projected soon after the commit, long before the 10-minute poll');
});

t.test('a lost notification is harmless: polling catches up', async (t) => {
  const polled = testRunner(pool, store, projectors, { clock, pollIntervalMs: 50 });
  t.teardown(() => polled.close());
  await polled.start();
  // No listener and no NOTIFY at all.
  await users.register({ userId: 'polled', email: 'polled@example.com', name: 'Polled' });
  await waitFor(() => read.userCard('polled'), { timeoutMs: 5_000, what: 'the user card, via polling' });
  t.pass('projected without a notification');
});

t.test('projection lag shows events the projectors have not applied yet', async (t) => {
  const registry = createRegistry('identity-lag', { defaults: false });
  createEventMetrics(registry, () => runner.lagSeconds());
  await pool.query(
    `INSERT INTO events (stream_id, stream_version, event_type, schema_version, event_id, data, recorded_at)
     VALUES ('user-lagging', 1, 'UserRegistered', 2, gen_random_uuid(), '{"user_id":"lagging","email":"l@x.io","name":"L","created_at":0}', now() - interval '42 seconds')`,
  );
  const lag = await runner.lagSeconds();
  t.ok(lag.user_card! >= 42, `user_card lags ${lag.user_card} s`);
  t.match(await registry.metrics(), /identity_projection_lag_seconds\{projector="user_card"[^}]*\} 4\d/);
  await runner.drain();
  t.equal((await runner.lagSeconds()).user_card, 0);
});
