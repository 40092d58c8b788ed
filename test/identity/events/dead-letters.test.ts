import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import { createRegistry } from '../../../shared/metrics.js';
import { listDeadLetters, redriveDeadLetters } from '../../../identity/events/dead-letters.js';
import { createEventMetrics } from '../../../identity/events/metrics.js';
import { orderSearchProjector } from '../../../identity/events/projectors/order-search.js';
import type { Projector } from '../../../identity/events/projector.js';
import { ReadModels } from '../../../identity/events/read-models.js';
import { captureLogger, raw, testRunner, useEventsDb } from './helpers.js';

const { pool, store } = await useEventsDb(t, 'events_dead_letters');
const clock = new FakeClock(Date.UTC(2026, 0, 1));
const read = new ReadModels(pool);

/** order_search, with a bug that a flag switches on: it chokes on orders whose total is 13.13. */
let buggy = true;
let badCalls = 0;
const fragile: Projector = {
  ...orderSearchProjector,
  async apply(client, events, ctx) {
    const bad = events.some((e) => e.data.total === 13.13);
    if (bad) badCalls++;
    if (buggy && bad) throw new TypeError('cannot read the unlucky total');
    return orderSearchProjector.apply(client, events, ctx);
  },
};

const placed = (id: string, total: number) => raw('OrderPlaced', { order_id: id, customer_id: 'c1', items: [], total, ts: 1 });

t.test('a failing event is retried, dead-lettered, logged and counted; the others are projected', async (t) => {
  const { log, lines } = captureLogger();
  const registry = createRegistry('dl', { defaults: false });
  const metrics = createEventMetrics(registry);
  const runner = testRunner(pool, store, [fragile], { clock, log, metrics, maxAttempts: 3 });
  await runner.ensure();
  await store.append('order-a', 0, [placed('a', 10)]);
  await store.append('order-bad', 0, [placed('bad', 13.13)]);
  await store.append('order-b', 0, [placed('b', 20)]);
  badCalls = 0;
  await runner.drain();
  t.equal(badCalls, 1 + 3, 'in its batch once, then alone three times (IDENTITY_PROJECTION_MAX_ATTEMPTS)');
  t.match(await read.order('a'), { total: 10 });
  t.match(await read.order('b'), { total: 20 });
  t.equal(await read.order('bad'), undefined);
  const letters = await listDeadLetters(pool, { status: 'open' });
  t.equal(letters.length, 1);
  t.match(letters[0], {
    projector: 'order_search',
    eventType: 'OrderPlaced',
    attempts: 3,
    error: 'cannot read the unlucky total',
    generation: 1,
  });
  const logged = lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === 'projector failed on an event; dead-lettered it and continued');
  t.match(logged, { level: 50, projector: 'order_search', event_type: 'OrderPlaced' }, 'logged as an error');
  t.match(await registry.metrics(), /identity_projection_dead_letters_total\{projector="order_search"[^}]*\} 1\n/);
  const [status] = await runner.status();
  t.equal(status?.openDeadLetters, 1);

  // The projector moved on: later events are projected as usual.
  await store.append('order-c', 0, [placed('c', 30)]);
  await runner.drain();
  t.match(await read.order('c'), { total: 30 });
});

t.test('re-driving after the fix applies the dead letter once', async (t) => {
  const { log } = captureLogger();
  const deps = { pool, store, projectors: [fragile], clock, log };
  const stillBroken = await redriveDeadLetters(deps);
  t.same(stillBroken, { redriven: 0, failed: 1, remaining: 1 }, 'before the fix it fails again and stays open');
  t.equal((await listDeadLetters(pool, { status: 'open' }))[0]?.attempts, 4);

  buggy = false;
  const fixed = await redriveDeadLetters(deps, { projector: 'order_search' });
  t.same(fixed, { redriven: 1, failed: 0, remaining: 0 });
  t.match(await read.order('bad'), { total: 13.13, status: 'placed' });
  t.same(await listDeadLetters(pool, { status: 'open' }), []);
  t.equal((await listDeadLetters(pool, { status: 'redriven' })).length, 1);
  t.same(await redriveDeadLetters(deps), { redriven: 0, failed: 0, remaining: 0 }, 'nothing left to re-drive');
});

t.test('an infrastructure error is never dead-lettered: the batch is retried later', async (t) => {
  const { log } = captureLogger();
  let broken = true;
  const flaky: Projector = {
    ...orderSearchProjector,
    async apply(client, events, ctx) {
      if (broken) throw Object.assign(new Error('relation "order_search_g1" does not exist'), { code: '42P01' });
      return orderSearchProjector.apply(client, events, ctx);
    },
  };
  const runner = testRunner(pool, store, [flaky], { clock, log });
  await store.append('order-d', 0, [placed('d', 40)]);
  const before = (await runner.status())[0]!.livePosition;
  await t.rejects(runner.drain(), { code: '42P01' });
  t.equal((await runner.status())[0]!.livePosition, before, 'the checkpoint did not move');
  t.same(await listDeadLetters(pool, { status: 'open' }), [], 'nothing dead-lettered');
  broken = false;
  await runner.drain();
  t.match(await read.order('d'), { total: 40 });
});

t.test('an event whose stored payload is not an object (JSON null, an array) is dead-lettered at once, logged and counted', async (t) => {
  const { log, lines } = captureLogger();
  const registry = createRegistry('dl-null', { defaults: false });
  const metrics = createEventMetrics(registry);
  const runner = testRunner(pool, store, [orderSearchProjector], { clock, log, metrics, maxAttempts: 3 });
  await runner.ensure();
  // Written around the codec, as a faulty migration or a manual fix could: the table only says jsonb.
  for (const [stream, payload] of [
    ['order-null', 'null'],
    ['order-array', '[1, 2]'],
  ] as const) {
    await pool.query(
      `INSERT INTO events (stream_id, stream_version, event_type, schema_version, event_id, data)
       VALUES ($1, 1, 'OrderPlaced', 1, gen_random_uuid(), $2::jsonb)`,
      [stream, payload],
    );
  }
  await store.append('order-after-null', 0, [placed('after-null', 40)]);
  await runner.drain();
  t.match(await read.order('after-null'), { total: 40 }, 'the next event is projected');
  const letters = (await listDeadLetters(pool, { status: 'open' })).filter((l) => l.error === 'the stored payload is not a JSON object');
  t.equal(letters.length, 2, 'both dead-lettered, not skipped');
  t.ok(
    letters.every((l) => l.attempts === 1 && l.eventType === 'OrderPlaced'),
    'at once, without retries',
  );
  t.ok(
    lines.some((l) => (JSON.parse(l) as Record<string, unknown>).msg === 'projector failed on an event; dead-lettered it and continued'),
    'logged',
  );
  t.match(await registry.metrics(), /identity_projection_dead_letters_total\{projector="order_search"[^}]*\} 2\n/, 'counted');
});

t.test('re-driving an event whose stored payload is not an object fails again and writes nothing', async (t) => {
  const { log } = captureLogger();
  const letters = (await listDeadLetters(pool, { status: 'open' })).filter((l) => l.error === 'the stored payload is not a JSON object');
  t.equal(letters.length, 2);
  const ids = letters.map((l) => l.id);
  const result = await redriveDeadLetters({ pool, store, projectors: [orderSearchProjector], clock, log }, { ids });
  t.match(result, { redriven: 0, failed: 2 }, 'not reported as re-driven');
  const after = await listDeadLetters(pool, { ids });
  t.same(
    after.map((l) => [l.status, l.attempts, l.error]),
    letters.map(() => ['open', 2, 'the stored payload is not a JSON object']),
  );
  const { rows } = await pool.query(`SELECT order_id FROM order_search_g1 WHERE order_id IN ('null', 'array')`);
  t.same(rows, [], 'no order_search row, not even a customerless one');
});

t.test('a projector that wrote before it failed leaves nothing behind, on the live path and on a re-drive', async (t) => {
  const { log } = captureLogger();
  let failAfterWriting = true;
  const halfway: Projector = {
    ...orderSearchProjector,
    async apply(client, events, ctx) {
      await orderSearchProjector.apply(client, events, ctx);
      if (failAfterWriting && events.some((e) => e.data.total === 66.6)) throw new TypeError('failed after writing its row');
    },
  };
  const runner = testRunner(pool, store, [halfway], { clock, log, maxAttempts: 2 });
  await store.append('order-half', 0, [placed('half', 66.6)]);
  await store.append('order-whole', 0, [placed('whole', 70)]);
  await runner.drain();
  const rowsOf = async () => (await pool.query(`SELECT order_id FROM order_search_g1 WHERE order_id = 'half'`)).rows;
  t.match(await read.order('whole'), { total: 70 }, 'the rest of its batch is projected');
  t.same(await rowsOf(), [], 'the row it wrote before failing was rolled back');
  const [letter] = (await listDeadLetters(pool, { status: 'open' })).filter((l) => l.error === 'failed after writing its row');
  t.match(letter, { attempts: 2 });

  const deps = { pool, store, projectors: [halfway], clock, log };
  t.match(await redriveDeadLetters(deps, { ids: [letter!.id] }), { redriven: 0, failed: 1 });
  t.same(await rowsOf(), [], 'a failed re-drive wrote nothing either');
  t.match((await listDeadLetters(pool, { ids: [letter!.id] }))[0], { status: 'open', attempts: 3 });

  failAfterWriting = false;
  t.match(await redriveDeadLetters(deps, { ids: [letter!.id] }), { redriven: 1, failed: 0 });
  t.match(await read.order('half'), { total: 66.6, status: 'placed' });
  t.match((await listDeadLetters(pool, { ids: [letter!.id] }))[0], { status: 'redriven' });
});
