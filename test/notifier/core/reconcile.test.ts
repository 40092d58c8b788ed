/**
 * The rows own the state, pg-boss carries wake-ups (notifier/README.md, "Who owns a delivery's
 * state"): a wake-up still waiting in pg-boss is never replaced (a backlog is not doubled); a lost
 * one (its job gone, or given up by pg-boss) is replaced once, and what it wakes is then delivered
 * exactly once. The notifier runs without workers so that the test moves each stage itself.
 */
import t from 'tap';
import { RoutingWorker } from '../../../notifier/workers/route.js';
import { Reconciler } from '../../../notifier/workers/reconcile.js';
import { routeQueue } from '../../../notifier/queues/names.js';
import type { RouteJob } from '../../../notifier/queues/wake-ups.js';
import { testLogger } from '../../harness/log.js';
import { systemClock } from '../../../shared/clock.js';
import { createRegistry } from '../../../shared/metrics.js';
import { createNotifierMetrics } from '../../../notifier/metrics.js';
import { DEFAULT_NOTIFICATION_TYPES, parseTypeCatalog } from '../../../notifier/policy/types.js';
import { loadPreferences, PreferenceCache } from '../../../notifier/preferences/index.js';
import { createTemplate, request, startCore } from './helpers.js';

t.test('lost wake-ups are replaced, live ones are left alone', async (t) => {
  const core = await startCore(t, 'core_reconcile', { env: { NOTIFIER_WORKERS: 'false' } });
  await createTemplate(core, 'code_v1');
  const { pool, boss } = core.notifier;
  const log = testLogger('notifier');
  const woken: string[] = [];
  const reconciler = new Reconciler({ pool, boss, log, intervalMs: 60_000, graceMs: 0, wake: (q) => woken.push(q) });
  const q = async (sql: string, args: unknown[] = []): Promise<Record<string, unknown>[]> => (await pool.query(sql, args)).rows;

  const accepted = await core.notify(request({ priority: 'high', channels: ['push', 'email'] }));
  t.equal(accepted.status, 202);
  const id = accepted.body.notification_id as string;
  const [n] = await q('SELECT route_job_id FROM notifications WHERE id = $1', [id]);
  t.ok(n?.route_job_id, 'the routing wake-up is recorded on the notification');

  await t.test('a routing wake-up still queued is not replaced', async (t) => {
    t.same(await reconciler.runOnce(), { notifications: 0, deliveries: 0 });
  });

  await t.test('a lost routing wake-up is replaced once', async (t) => {
    await q('DELETE FROM pgboss.job WHERE id = $1', [n!.route_job_id]);
    const [a, b] = await Promise.all([reconciler.runOnce(), reconciler.runOnce()]);
    t.equal(a.notifications + b.notifications, 1, 'one replacement, though two passes ran at once');
    const [after] = await q('SELECT route_job_id FROM notifications WHERE id = $1', [id]);
    t.not(after?.route_job_id, n!.route_job_id, 'a new wake-up id is recorded');
    const jobs = await q(`SELECT state FROM pgboss.job WHERE name = $1 AND id = $2`, [routeQueue('high'), after?.route_job_id]);
    t.same(jobs, [{ state: 'created' }], 'and its job is waiting in the routing queue');
    t.ok(woken.includes(routeQueue('high')), 'the routing queue was poked');
  });

  // Route it by hand, as the worker would: the deliveries and their wake-ups appear.
  const catalog = parseTypeCatalog(DEFAULT_NOTIFICATION_TYPES);
  const router = new RoutingWorker({
    pool,
    boss,
    log,
    wake: () => {},
    catalog,
    settings: { quietHoursTiers: ['normal'] },
    preferences: new PreferenceCache({
      ttlMs: 0,
      maxEntries: 10,
      clock: systemClock,
      listening: () => false,
      load: (ids) => loadPreferences(pool, ids),
    }),
    prefsTimeoutMs: 1_000,
    metrics: createNotifierMetrics(createRegistry('test'), { clock: systemClock }),
    clock: systemClock,
  });
  const fetched = (await boss.fetch<RouteJob>(routeQueue('high'), { batchSize: 10 })) ?? [];
  t.equal(fetched.length, 1, 'one routing job to run');
  await router.handleBatch(routeQueue('high'), fetched);
  const deliveries = await q('SELECT id, channel, wake_job_id FROM deliveries WHERE notification_id = $1 ORDER BY channel', [id]);
  t.equal(deliveries.length, 2, 'two deliveries');
  t.ok(
    deliveries.every((d) => d.wake_job_id),
    'each delivery records its wake-up',
  );

  await t.test('delivery wake-ups still queued are not replaced', async (t) => {
    t.same(await reconciler.runOnce(), { notifications: 0, deliveries: 0 });
  });

  await t.test('a delivery whose wake-up was given up by pg-boss is woken again', async (t) => {
    const email = deliveries.find((d) => d.channel === 'email')!;
    await q(`UPDATE pgboss.job SET state = 'failed' WHERE id = $1`, [email.wake_job_id]);
    t.same(await reconciler.runOnce(), { notifications: 0, deliveries: 1 }, 'only the e-mail delivery');
    const [after] = await q('SELECT wake_job_id, status FROM deliveries WHERE id = $1', [email.id]);
    t.not(after?.wake_job_id, email.wake_job_id, 'a new wake-up');
    t.equal(after?.status, 'queued', 'the delivery itself is unchanged');
    t.same(await reconciler.runOnce(), { notifications: 0, deliveries: 0 }, 'and not again while that one waits');
  });

  await t.test('a delivery not yet due is left alone, whatever happened to its wake-up', async (t) => {
    const push = deliveries.find((d) => d.channel === 'push')!;
    await q(`UPDATE deliveries SET next_attempt_at = now() + interval '1 hour' WHERE id = $1`, [push.id]);
    await q('DELETE FROM pgboss.job WHERE id = $1', [push.wake_job_id]);
    t.same(await reconciler.runOnce(), { notifications: 0, deliveries: 0 });
  });
});

t.test('a replaced wake-up is delivered exactly once by the workers', async (t) => {
  const core = await startCore(t, 'core_reconcile_e2e', { env: { NOTIFIER_RECONCILE_INTERVAL: '1s', NOTIFIER_RECONCILE_GRACE: '1s' } });
  await createTemplate(core, 'code_v1');
  const { pool } = core.notifier;
  // Accept a notification whose routing wake-up is lost before any worker sees it: written by hand
  // in one transaction, as ingestion writes it, with no job at all.
  const accepted = await core.notify(request({ priority: 'low', channels: ['in_app'] }), core.service);
  t.equal(accepted.status, 202);
  const id = accepted.body.notification_id as string;
  const s = await core.waitStatus(id, (x) => x.status === 'sent');
  t.equal(s.status, 'sent', 'the normal path works');
  const again = await pool.query(
    `INSERT INTO notifications (id, caller, event_type, recipient_id, template_id, template_data, priority, channels)
     SELECT gen_random_uuid(), caller, event_type, recipient_id, template_id, template_data, priority, channels FROM notifications WHERE id = $1
     RETURNING id`,
    [id],
  );
  const orphan = again.rows[0].id as string;
  const done = await core.waitStatus(orphan, (x) => x.status === 'sent', 20_000);
  t.equal(done.status, 'sent', 'a notification stored without a wake-up is routed and sent by the reconciler');
  const items = await pool.query(
    'SELECT count(*)::int AS n FROM inbox_items i JOIN deliveries d ON d.id = i.delivery_id WHERE d.notification_id = $1',
    [orphan],
  );
  t.equal(items.rows[0].n, 1, 'exactly one inbox item');
});
