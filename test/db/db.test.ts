import t from 'tap';
import { createServer, type Socket } from 'node:net';
import { checkDatabase, createPool, withTransaction } from '../../shared/db.js';
import { useTestDatabase } from '../harness/db.js';
import { freePort } from '../harness/ports.js';
import { waitFor } from '../harness/wait.js';

/** A log that records warnings, to see connection errors reported rather than thrown. */
function recordingLog() {
  const warnings: Array<{ obj: unknown; msg: unknown }> = [];
  const noop = (): void => {};
  return { warnings, log: { warn: (obj: unknown, msg?: unknown) => void warnings.push({ obj, msg }), info: noop, error: noop } };
}

t.test('withTransaction commits on success and rolls back on a throw', async (t) => {
  const db = await useTestDatabase(t, 'db_tx', { empty: true });
  await db.pool.query('CREATE TABLE tx (id int)');
  const out = await withTransaction(db.pool, async (c) => {
    await c.query('INSERT INTO tx VALUES (1)');
    return 'done';
  });
  t.equal(out, 'done');
  await t.rejects(
    withTransaction(db.pool, async (c) => {
      await c.query('INSERT INTO tx VALUES (2)');
      throw new Error('boom');
    }),
    { message: 'boom' },
  );
  t.same((await db.pool.query('SELECT id FROM tx ORDER BY id')).rows, [{ id: 1 }]);
  t.equal(db.pool.idleCount, db.pool.totalCount, 'every client went back to the pool');
});

t.test('a statement over statement_timeout is cancelled by the server', async (t) => {
  const db = await useTestDatabase(t, 'db_timeout', { empty: true });
  const { log } = recordingLog();
  const pool = createPool(db.url, { applicationName: 'timeout-test', log, statementTimeoutMs: 100 });
  t.teardown(() => pool.end());
  await t.rejects(pool.query('SELECT pg_sleep(2)'), { code: '57014', message: /statement timeout/ });
  t.same((await pool.query('SELECT 1 AS one')).rows, [{ one: 1 }], 'the pool still works');
  t.same((await pool.query('SHOW application_name')).rows, [{ application_name: 'timeout-test' }]);
});

t.test('a connection killed by the server is logged and replaced, never crashes the process', async (t) => {
  const db = await useTestDatabase(t, 'db_kill', { empty: true });
  const { log, warnings } = recordingLog();
  const pool = createPool(db.url, { applicationName: 'kill-test', max: 2, log });
  t.teardown(() => pool.end());
  const kill = () => db.pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kill-test'");

  // An idle pooled client (the pool's own 'error' event).
  await pool.query('SELECT 1');
  await kill();
  await waitFor(() => warnings.length >= 1, { what: 'the idle client error to be logged' });
  t.same((await pool.query('SELECT 2 AS two')).rows, [{ two: 2 }], 'a fresh connection serves the next query');

  // A checked-out client that is not running a query (no pool listener covers this one).
  const client = await pool.connect();
  await kill();
  await waitFor(() => warnings.length >= 2, { what: 'the checked-out client error to be logged' });
  client.release(true);
  t.match(warnings[0], { msg: /postgres connection error/ });
  t.same((await pool.query('SELECT 3 AS three')).rows, [{ three: 3 }]);
});

t.test('checkDatabase passes on a live server and names the problem otherwise', async (t) => {
  const db = await useTestDatabase(t, 'db_check', { empty: true });
  await t.resolves(checkDatabase(db.pool));

  const { log } = recordingLog();
  const port = await freePort();
  const dead = createPool(`postgres://nobody@127.0.0.1:${port}/none`, { applicationName: 'dead', log, connectionTimeoutMs: 500 });
  t.teardown(() => dead.end());
  await t.rejects(checkDatabase(dead), { message: /^postgres: .*ECONNREFUSED/ });

  // A server that accepts the TCP connection but never answers: the check's own deadline.
  const sockets = new Set<Socket>();
  const silent = createServer((s) => void sockets.add(s));
  await new Promise<void>((res) => silent.listen(0, '127.0.0.1', () => res()));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const addr = silent.address();
  const silentPort = typeof addr === 'object' && addr ? addr.port : 0;
  const hung = createPool(`postgres://nobody@127.0.0.1:${silentPort}/none`, { applicationName: 'hung', log, connectionTimeoutMs: 1_000 });
  t.teardown(() => void hung.end().catch(() => {}));
  await t.rejects(checkDatabase(hung, 200), { message: 'postgres did not answer within 200 ms' });
});
