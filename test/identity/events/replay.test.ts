import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import { Orders } from '../../../identity/domain/orders.js';
import { Users } from '../../../identity/domain/users.js';
import { LOCK_NS, lockKey } from '../../../identity/events/projection-sql.js';
import { orderSearchProjector } from '../../../identity/events/projectors/order-search.js';
import { identityProjectors } from '../../../identity/events/projectors/index.js';
import { ReadModels } from '../../../identity/events/read-models.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';
import { testRunner, useEventsDb } from './helpers.js';

const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
const { pool, store } = await useEventsDb(t, 'events_replay', { poolMax: 12 });
const log = testLogger();
const users = new Users({ store, clock, log, snapshotEvery: 100 });
const orders = new Orders({ store, clock, log, snapshotEvery: 100, policy: { selfDeleteMaxTotal: 100 } });
const read = new ReadModels(pool);
const card = { cardToken: 'tok_r', cardLast4: '1111' };
const items = [{ sku: 'A', quantity: 1, price: 10 }];
const runner = testRunner(pool, store, identityProjectors({ warehouseWindowMs: 3_600_000 }), { clock, batchSize: 2 });
await runner.ensure();

const outbox = async (): Promise<number> =>
  Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM notification_outbox')).rows[0]!.n);
const orderRows = async () =>
  (await pool.query('SELECT order_id, customer_id, status, date, total FROM order_search ORDER BY order_id')).rows;
const viewSource = async (view: string): Promise<string> =>
  (await pool.query<{ d: string }>('SELECT pg_get_viewdef($1::regclass) AS d', [view])).rows[0]!.d;
const tableExists = async (name: string): Promise<boolean> =>
  (await pool.query<{ r: string | null }>('SELECT to_regclass($1) AS r', [name])).rows[0]!.r !== null;

t.test('history, projected once: one welcome notification per registered user', async (t) => {
  for (let i = 0; i < 5; i++) await users.register({ userId: `u${i}`, email: `u${i}@example.com`, name: `User ${i}` });
  for (let i = 0; i < 4; i++) await orders.checkout({ orderId: `o${i}`, customerId: `u${i}`, items, payment: card });
  await orders.ship('o0', '1Z');
  await runner.drain();
  t.equal(await outbox(), 5);
  t.equal((await orderRows()).length, 4);
});

t.test('rebuild: a new generation on a separate consumer while the live one keeps serving, then an atomic switch', async (t) => {
  const before = await orderRows();
  const gen = await runner.rebuild('order_search');
  t.equal(gen, 2);
  t.match(
    (await runner.status()).find((s) => s.projector === 'order_search'),
    { liveGeneration: 1, buildingGeneration: 2 },
  );
  await orders.checkout({ orderId: 'o-new', customerId: 'u4', items, payment: card });

  // Another replica holds the rebuilding consumer for now (its advisory lock): only the live one moves.
  const other = await pool.connect();
  await other.query('SELECT pg_advisory_lock($1, $2)', [LOCK_NS, lockKey('order_search', 'build')]);
  await waitFor(async () => (await runner.stepAll(), read.order('o-new')), {
    timeoutMs: 10_000,
    what: 'the live generation to take o-new',
  });
  t.match(
    (await runner.status()).find((s) => s.projector === 'order_search'),
    { liveGeneration: 1, buildingGeneration: 2 },
    'not switched',
  );
  t.match(await viewSource('order_search'), /order_search_g1/, 'readers still see generation 1');
  t.match(await read.order('o-new'), { status: 'placed' }, 'the live generation keeps taking new events');
  const partial = (await pool.query<{ n: string }>('SELECT count(*) AS n FROM order_search_g2')).rows[0]!.n;
  t.ok(Number(partial) < 5, `generation 2 is still being built (${partial} rows)`);
  await other.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_NS, lockKey('order_search', 'build')]);
  other.release();

  // Readers during the switch see the whole model, old or new, never an error or a partial one.
  let reading = true;
  const counts: number[] = [];
  const reader = (async () => {
    while (reading) counts.push(Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM order_search')).rows[0]!.n));
  })();
  await runner.drain();
  reading = false;
  await reader;
  t.ok(counts.length > 0);
  t.ok(
    counts.every((n) => n === 5),
    `every read saw all 5 orders (${counts.length} reads)`,
  );

  t.match(
    (await runner.status()).find((s) => s.projector === 'order_search'),
    { liveGeneration: 2, buildingGeneration: null },
  );
  t.match(await viewSource('order_search'), /order_search_g2/, 'the view now reads generation 2');
  t.notOk(await tableExists('order_search_g1'), 'the old generation is dropped');
  t.same(
    (await orderRows()).filter((r) => r.order_id !== 'o-new'),
    before,
    'the rebuilt model equals the old one',
  );
  t.match(await read.order('o-new'), { status: 'processing' });
});

t.test('replaying the side-effect consumer never repeats a side effect', async (t) => {
  t.equal(await outbox(), 5);
  await runner.rebuild('welcome_notification');
  await runner.rebuild('user_card');
  await runner.drain();
  t.match(
    (await runner.status()).find((s) => s.projector === 'welcome_notification'),
    { liveGeneration: 2, buildingGeneration: null },
  );
  t.equal(await outbox(), 5, 'no welcome sent twice');
  const dedup = (await pool.query<{ n: string }>(`SELECT count(*) AS n FROM side_effects_done WHERE effect = 'welcome_notification'`))
    .rows[0]!.n;
  t.equal(Number(dedup), 5);
  t.match(await read.userCard('u3'), { name: 'User 3' }, 'the rebuilt user card');
  await users.register({ userId: 'u-after', email: 'after@example.com', name: 'After' });
  await runner.drain();
  t.equal(await outbox(), 6, 'new registrations still get their welcome');
});

t.test('a changed projector version rebuilds on start; the old generation is frozen until the switch', async (t) => {
  const v2 = { ...orderSearchProjector, version: 2 };
  const next = testRunner(pool, store, [v2], { clock, batchSize: 2 });
  await next.ensure();
  const [s] = await next.status();
  t.match(s, { liveGeneration: 2, liveCodeVersion: 1, buildingGeneration: 3, codeVersion: 2 });
  await orders.cancel('o1', { id: 'u1', role: 'customer' }, '');
  await next.stepAll();
  t.match(await read.order('o1'), { status: 'processing' }, 'the frozen generation does not take new events');
  await next.drain();
  t.match((await next.status())[0], { liveGeneration: 3, liveCodeVersion: 2, buildingGeneration: null });
  t.match(await read.order('o1'), { status: 'cancelled' });
});
