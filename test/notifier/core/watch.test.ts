/**
 * The queue watch (notifier/queues/watch.ts) and a runner that waits for it: one statement finds
 * the queues with due work, an empty queue's runner does not poll by itself, and what another
 * process sent (no wake-up in this one) is found and handled.
 */
import t, { type Test } from 'tap';
import { startBoss, type Boss } from '../../../notifier/queues/boss.js';
import { QueueRunner } from '../../../notifier/queues/runner.js';
import { QueueWatch } from '../../../notifier/queues/watch.js';
import { deliverQueue, routeQueue } from '../../../notifier/queues/names.js';
import { useTestDatabase } from '../../harness/db.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';

const log = testLogger('watch');
const A = routeQueue('transactional');
const B = deliverQueue('push', 'transactional');
const C = deliverQueue('email', 'low');

async function setup(t: Test): Promise<{ boss: Boss; db: Awaited<ReturnType<typeof useTestDatabase>> }> {
  const db = await useTestDatabase(t, 'queue_watch');
  const boss = await startBoss({ pool: db.pool, log, jobExpireMs: 60_000, maintenanceMs: 60_000, schedule: false });
  t.teardown(() => boss.stop({ graceful: false, wait: true }));
  return { boss, db };
}

t.test('a poll names the queues with a job due: created or retried, its start passed, not taken', async (t) => {
  const { boss, db } = await setup(t);
  const woken: string[] = [];
  const watch = new QueueWatch({ pool: db.pool, queues: new Map([A, B, C].map((q) => [q, 50])), wake: (q) => woken.push(q), log });

  t.same(await watch.poll([A, B, C]), [], 'empty queues: none');
  await boss.send(C, { n: 1 }, { startAfter: 3600 });
  t.same(await watch.poll([A, B, C]), [], 'a job due in an hour: none');

  await boss.send(B, { n: 2 });
  await boss.send(B, { n: 3 });
  t.same(await watch.poll([A, B, C]), [B], 'a job due now: its queue, once');
  t.same(woken, [B], 'and its runner woken');
  t.same(await watch.poll([A, C]), [], 'only the queues asked about');

  const taken = await boss.fetch(B, { batchSize: 10 });
  t.equal(taken.length, 2);
  t.same(await watch.poll([A, B, C]), [], 'jobs taken by a worker: none');
  // Handed back by a worker that failed it: pg-boss retries it (retryDelay 1 s with backoff), so
  // it is due again only later; made due now, it is named again.
  await boss.fail(B, taken[0]!.id);
  await db.pool.query(`UPDATE pgboss.job SET start_after = now() - interval '1 second' WHERE id = $1`, [taken[0]!.id]);
  t.same(await watch.poll([A, B, C]), [B], 'a retried job, due: its queue');
});

t.test('an empty queue’s runner waits for the watch; another process’s job is found by it and handled', async (t) => {
  const { boss, db } = await setup(t);
  // Fetches counted on the real pg-boss: a runner polling by itself would fetch every 10 ms.
  let fetches = 0;
  const fetch = boss.fetch.bind(boss);
  const counting = new Proxy(boss, {
    get: (target, prop, receiver) =>
      prop === 'fetch'
        ? (...args: Parameters<Boss['fetch']>) => {
            fetches++;
            return fetch(...args);
          }
        : Reflect.get(target, prop, receiver),
  });
  const handled: unknown[] = [];
  const runner = new QueueRunner<{ n: number }>({
    boss: counting,
    queue: A,
    concurrency: 4,
    idleMs: 10,
    emptyMs: 600_000,
    handleBatch: async (jobs) => {
      for (const j of jobs) handled.push(j.data.n);
      await boss.complete(
        A,
        jobs.map((j) => j.id),
      );
    },
    log,
  });
  const watch = new QueueWatch({ pool: db.pool, queues: new Map([[A, 10]]), wake: () => runner.wake(), log });
  t.teardown(() => runner.stop(1000));
  runner.start();
  await waitFor(() => fetches === 1, { what: 'the first (empty) fetch' });
  // The watch's periods driven by hand: twenty polls of the empty queue, each a round trip to
  // the database (longer together than the runner's 10 ms idleMs), and no fetch among them.
  for (let i = 0; i < 20; i++) t.same(await watch.poll([A]), [], `poll ${i + 1}: nothing due`, { diagnostic: false });
  t.equal(fetches, 1, 'the empty queue’s runner fetched nothing by itself');

  // Sent as another replica would: no wake-up reaches this runner.
  await boss.send(A, { n: 7 });
  t.same(await watch.poll([A]), [A], 'the watch sees it');
  await waitFor(() => handled.length === 1, { what: 'the job handled' });
  t.same(handled, [7]);
  // The wake-up's fetch, and the refills as the batch's slot frees: no timer's.
  t.ok(fetches <= 4, `${fetches} fetches in all`);

  // Running, the watch finds the next one by itself.
  watch.start();
  t.teardown(() => watch.stop());
  await boss.send(A, { n: 8 });
  await waitFor(() => handled.length === 2, { what: 'the second job handled' });
  t.same(handled, [7, 8]);
});

t.test('a statement that fails is logged once and tried again; the watch stops cleanly', async (t) => {
  const { db } = await setup(t);
  const lines: { msg: string }[] = [];
  let failures = 0;
  // The real pool, its failed statements counted.
  const query = db.pool.query.bind(db.pool) as (text: string, values: unknown[]) => Promise<unknown>;
  const pool = new Proxy(db.pool, {
    get: (target, prop, receiver) =>
      prop === 'query'
        ? (text: string, values: unknown[]) =>
            query(text, values).catch((err: unknown) => {
              failures++;
              throw err;
            })
        : Reflect.get(target, prop, receiver),
  });
  const record = (o: object, msg: string): void => void lines.push({ ...o, msg });
  const watch = new QueueWatch({
    pool,
    queues: new Map([[A, 10]]),
    wake: () => {},
    log: { ...log, warn: record, info: record } as typeof log,
  });
  await db.pool.query('ALTER TABLE pgboss.job RENAME TO job_away');
  watch.start();
  t.teardown(() => watch.stop());
  await waitFor(() => failures >= 3, { what: 'three failed periods' });
  await db.pool.query('ALTER TABLE pgboss.job_away RENAME TO job');
  await waitFor(() => lines.some((l) => l.msg.includes('polling again')), { what: 'the recovery line' });
  t.equal(lines.filter((l) => l.msg.includes('failed')).length, 1, 'one warning for the outage');
  await watch.stop();
  await watch.stop();
  t.pass('stop is idempotent');
});
