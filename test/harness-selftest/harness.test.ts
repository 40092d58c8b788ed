import t from 'tap';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createTestDatabase, testDatabaseName, useTestDatabase, type TestContext } from '../harness/db.js';
import { deleteKeys, testKeyPrefix, useRedis, useRedisCluster } from '../harness/redis.js';
import { testDatabaseUrl, testRedisClusterNodes } from '../harness/env.js';
import { freeClusterPort, freePort } from '../harness/ports.js';
import { waitFor } from '../harness/wait.js';
import { setupGlobal } from '../harness/global.js';
import { foldersWithMigrations, MIGRATED_SERVICES, TEMPLATE_ENV } from '../harness/template-db.js';
import { loadMigrations } from '../../shared/migrate.js';
import { migrationsDir } from '../../shared/paths.js';
import { findRedisServer, REDIS_SERVER_MISSING, startRedisServer } from '../harness/redis-server.js';

async function databaseExists(name: string): Promise<boolean> {
  const c = new pg.Client(testDatabaseUrl());
  await c.connect();
  try {
    return (await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  } finally {
    await c.end();
  }
}

/** A stand-in for tap's `t` whose outcome the test decides, to exercise the keep-on-failure policy. */
function fakeContext(passing: boolean): TestContext & { runTeardown(): Promise<void> } {
  const fns: Array<() => unknown> = [];
  return {
    teardown: (fn) => void fns.push(fn),
    passing: () => passing,
    async runTeardown() {
      for (const fn of fns) await fn();
    },
  };
}

t.test('each test file gets its own database', async (t) => {
  const a = await useTestDatabase(t, 'selftest A');
  const b = await useTestDatabase(t, 'selftest A');
  t.not(a.name, b.name, 'the same label still gives distinct databases');
  t.match(a.name, /^t_selftest_a_[0-9a-f]{8}$/);
  await a.pool.query('CREATE TABLE only_in_a (id int)');
  t.same((await b.pool.query("SELECT to_regclass('only_in_a') AS r")).rows, [{ r: null }], 'isolated');
  t.same((await a.pool.query('SELECT current_database() AS d')).rows, [{ d: a.name }], 'the pool is on it');
  t.ok(testDatabaseName('x'.repeat(100)).length <= 63, 'names fit PostgreSQL identifiers');
});

t.test("a test database is a copy of the run's migrated template; an empty one on request", async (t) => {
  const template = process.env[TEMPLATE_ENV];
  if (!template) return t.fail(`${TEMPLATE_ENV} is not set: run this file with npm test`);
  const versions = async (db: { pool: pg.Pool }): Promise<Record<string, number[]>> => {
    const { rows } = await db.pool.query<{ service: string; version: number }>(
      'SELECT service, version FROM schema_migrations ORDER BY service, version',
    );
    const out: Record<string, number[]> = {};
    for (const r of rows) (out[r.service] ??= []).push(r.version);
    return out;
  };
  const expected: Record<string, number[]> = {};
  for (const s of [...MIGRATED_SERVICES].sort((a, b) => a.name.localeCompare(b.name)))
    expected[s.name] = (await loadMigrations(migrationsDir(s.dir))).map((m) => m.version);

  const a = await useTestDatabase(t, 'selftest migrated');
  t.same(await versions(a), expected, "every service's migrations, as files on disk today");
  t.same((await a.pool.query("SELECT to_regclass('pgboss.job') IS NOT NULL AS boss")).rows, [{ boss: true }], "and pg-boss's schema");
  const b = await useTestDatabase(t, 'selftest migrated');
  await a.pool.query("INSERT INTO schema_migrations (service, version, name, checksum) VALUES ('only_in_a', 1, 'x', 'x')");
  t.same(await versions(b), expected, 'copies are isolated from each other');

  const empty = await useTestDatabase(t, 'selftest empty', { empty: true });
  t.same((await empty.pool.query("SELECT to_regclass('schema_migrations') AS r")).rows, [{ r: null }], 'an empty one has no tables');

  const admin = new pg.Client(testDatabaseUrl());
  await admin.connect();
  t.teardown(() => admin.end());
  const { rows } = await admin.query<{ datallowconn: boolean }>('SELECT datallowconn FROM pg_database WHERE datname = $1', [template]);
  t.same(rows, [{ datallowconn: false }], 'the template itself takes no connections (a session on it would stop every copy)');
});

t.test('the template lists every service that has migrations', async (t) => {
  t.same(
    MIGRATED_SERVICES.map((s) => s.dir).sort(),
    foldersWithMigrations(),
    'every folder holding migrations/ (a service left out would migrate at each start: correct, but slow)',
  );
});

t.test('a database is dropped when its test passes and kept when it fails', async (t) => {
  const passed = fakeContext(true);
  const ok = await useTestDatabase(passed, 'selftest pass');
  t.ok(await databaseExists(ok.name));
  await passed.runTeardown();
  t.notOk(await databaseExists(ok.name), 'dropped');

  const failed = fakeContext(false);
  const lines: string[] = [];
  const kept = await useTestDatabase(failed, 'selftest fail', { onKept: (l) => void lines.push(l) });
  await failed.runTeardown();
  t.ok(await databaseExists(kept.name), 'kept for inspection');
  t.same(lines, [`kept test database ${kept.name} for inspection (on the DATABASE_URL server)`], 'and its name printed');
  t.equal(kept.pool.totalCount, 0, 'but its pool is closed');
  await kept.drop();
  t.notOk(await databaseExists(kept.name));

  const plain = await createTestDatabase('selftest plain');
  const other = new pg.Client(plain.url);
  await other.connect();
  other.on('error', () => {});
  await plain.drop(); // even with another session still connected
  t.notOk(await databaseExists(plain.name));
  await other.end().catch(() => {});
});

t.test('Redis: a key prefix per file, removed at teardown', async (t) => {
  const { redis, prefix } = await useRedis(t, 'selftest');
  t.match(prefix, /^test:selftest:[0-9a-f]{8}:$/);
  t.not(testKeyPrefix('selftest'), prefix);
  await redis.set(`${prefix}a`, '1');
  await redis.set(`${prefix}b`, '2');
  const neighbour = testKeyPrefix('neighbour');
  await redis.set(`${neighbour}a`, 'x');
  t.equal(await deleteKeys(redis, prefix), 2);
  t.equal(await redis.exists(`${prefix}a`, `${prefix}b`), 0);
  t.equal(await redis.get(`${neighbour}a`), 'x', "another prefix's keys are untouched");
  await redis.del(`${neighbour}a`);
});

t.test('the Redis Cluster is a real 3-master cluster', async (t) => {
  const { cluster, prefix, nodes } = await useRedisCluster(t, 'selftest');
  t.equal(nodes.length, 3);
  t.same(nodes, testRedisClusterNodes());

  const masters = cluster.nodes('master');
  t.equal(masters.length, 3, 'three masters');
  for (const m of masters) {
    const info = (await m.call('CLUSTER', 'INFO')) as string;
    t.match(info, /cluster_state:ok/);
    t.match(info, /cluster_slots_assigned:16384/);
    t.match(info, /cluster_known_nodes:3/);
  }

  // Keys on different slots land on different nodes and still work through the one client.
  const keys = Array.from({ length: 60 }, (_, i) => `${prefix}k${i}`);
  await Promise.all(keys.map((k, i) => cluster.set(k, String(i))));
  t.same(
    await Promise.all(keys.map((k) => cluster.get(k))),
    keys.map((_, i) => String(i)),
  );
  const perNode = await Promise.all(
    masters.map(async (m) => {
      const [, found] = await m.scan('0', 'MATCH', `${prefix}*`, 'COUNT', 1000);
      return found.length;
    }),
  );
  t.ok(
    perNode.every((n) => n > 0),
    `keys spread over every master (${perNode.join(', ')})`,
  );
  t.equal(
    perNode.reduce((a, b) => a + b, 0),
    keys.length,
  );

  // A standalone server would accept a multi-key command across slots; a cluster refuses it.
  await t.rejects(cluster.call('MSET', `${prefix}x`, '1', `${prefix}y`, '2'), /CROSSSLOT/);
  t.equal(await cluster.set(`${prefix}{tag}x`, '1'), 'OK');
  t.equal(await cluster.mset(`${prefix}{tag}x`, '1', `${prefix}{tag}y`, '2'), 'OK', 'one hash tag, one slot');

  const removed = await deleteKeys(cluster, prefix);
  t.equal(removed, keys.length + 2);
  t.equal(
    (await Promise.all(keys.map((k) => cluster.exists(k)))).reduce((a, b) => a + b, 0),
    0,
  );
});

t.test('each cluster node is reachable on its own address', async (t) => {
  for (const node of testRedisClusterNodes()) {
    const [host, port] = node.split(':');
    const r = new Redis({ host, port: Number(port), lazyConnect: true });
    await r.connect();
    t.equal(await r.ping(), 'PONG', node);
    r.disconnect();
  }
});

t.test('ports and waitFor', async (t) => {
  const port = await freePort();
  const srv = createServer();
  await new Promise<void>((res, rej) => {
    srv.once('error', rej);
    srv.listen(port, '127.0.0.1', () => res());
  });
  srv.close();
  t.pass(`freePort gave a bindable port (${port})`);
  const cp = await freeClusterPort();
  t.ok(cp + 10_000 <= 65_535, 'a cluster port leaves room for its bus port');

  let n = 0;
  t.equal(await waitFor(() => (++n >= 3 ? 'done' : false), { intervalMs: 1 }), 'done');
  await t.rejects(
    waitFor(
      () => {
        throw new Error('not yet');
      },
      { timeoutMs: 30, intervalMs: 5, what: 'the impossible' },
    ),
    { message: 'timed out after 30 ms waiting for the impossible: not yet' },
  );
});

t.test('setupGlobal uses the servers given in the environment and names one it cannot reach', async (t) => {
  const names = ['DATABASE_URL', 'REDIS_URL', 'TEST_REDIS_CLUSTER_NODES', 'TEST_DATABASE_TEMPLATE'] as const;
  const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  t.teardown(() => {
    for (const n of names) process.env[n] = saved[n];
  });

  const given = await setupGlobal();
  t.same(given.env, saved, 'the environment passes through unchanged');
  await given.teardown(); // starts nothing, stops nothing

  const dead = await freePort();
  process.env.DATABASE_URL = `postgres://someone:secret@127.0.0.1:${dead}/db`;
  process.env.REDIS_URL = `redis://127.0.0.1:${dead}`;
  await t.rejects(setupGlobal(), {
    message:
      `PostgreSQL: DATABASE_URL (127.0.0.1:${dead}) is not reachable: connect ECONNREFUSED 127.0.0.1:${dead}; ` +
      `Redis: REDIS_URL (127.0.0.1:${dead}) is not reachable: connect ECONNREFUSED 127.0.0.1:${dead}`,
  });
});

t.test('a spawned redis-server answers, and is gone after stop', async (t) => {
  const bin = findRedisServer();
  if (!bin) return t.fail(REDIS_SERVER_MISSING);
  const server = await startRedisServer(bin);
  const r = new Redis(server.url, { lazyConnect: true });
  await r.connect();
  t.equal(await r.config('GET', 'save').then((v) => (v as string[])[1]), '', 'no persistence');
  r.disconnect();
  await server.stop();
  const probe = new Redis(server.url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  probe.on('error', () => {});
  await t.rejects(probe.connect(), 'nothing listens after stop');

  const path = process.env.PATH;
  t.teardown(() => void (process.env.PATH = path));
  process.env.PATH = '';
  t.equal(findRedisServer(), undefined, 'a missing binary is detected up front');
});
