import t from 'tap';
import { join } from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { createPool, type Pool } from '../../shared/db.js';
import { checksumOf, loadMigrations, migrate, MigrationError, planMigrations } from '../../shared/migrate.js';
import { useTestDatabase } from '../harness/db.js';
import { testLogger } from '../harness/log.js';

const log = testLogger('migrate-test');

async function recorded(pool: Pool, service: string): Promise<Array<{ version: number; name: string; checksum: string }>> {
  const { rows } = await pool.query('SELECT version, name, checksum FROM schema_migrations WHERE service = $1 ORDER BY version', [service]);
  return rows;
}

t.test('applies pending migrations in numeric order, each recorded with its checksum', async (t) => {
  const db = await useTestDatabase(t, 'migrate_order', { empty: true });
  // 10 sorts before 9 as text; 10 depends on 9, so lexical order would fail.
  const dir = t.testdir({
    '001_items.sql': 'CREATE TABLE items (id int PRIMARY KEY);\n',
    '9_add_name.sql': 'ALTER TABLE items ADD COLUMN name text;\n',
    '10_seed.sql': "INSERT INTO items (id, name) VALUES (1, 'one');\n",
    'README.md': 'not a migration',
  });
  const result = await migrate(db.pool, { service: 'svc', dir, log });
  t.same(
    result.applied.map((m) => m.file),
    ['001_items.sql', '9_add_name.sql', '10_seed.sql'],
  );
  t.equal(result.version, 10);
  const { rows } = await db.pool.query('SELECT id, name FROM items');
  t.same(rows, [{ id: 1, name: 'one' }]);
  t.same(await recorded(db.pool, 'svc'), [
    { version: 1, name: 'items', checksum: checksumOf('CREATE TABLE items (id int PRIMARY KEY);\n') },
    { version: 9, name: 'add_name', checksum: checksumOf('ALTER TABLE items ADD COLUMN name text;\n') },
    { version: 10, name: 'seed', checksum: checksumOf("INSERT INTO items (id, name) VALUES (1, 'one');\n") },
  ]);

  t.test('a second run applies nothing and changes nothing', async (t) => {
    const again = await migrate(db.pool, { service: 'svc', dir, log });
    t.same(again.applied, []);
    t.equal(again.version, 10);
    t.equal((await recorded(db.pool, 'svc')).length, 3);
    t.same((await db.pool.query('SELECT count(*)::int AS n FROM items')).rows, [{ n: 1 }]);
  });

  t.test('a new file is applied on the next run, alone', async (t) => {
    writeFileSync(join(dir, '011_more.sql'), "INSERT INTO items (id, name) VALUES (2, 'two');");
    const next = await migrate(db.pool, { service: 'svc', dir, log });
    t.same(
      next.applied.map((m) => m.version),
      [11],
    );
    t.same((await db.pool.query('SELECT count(*)::int AS n FROM items')).rows, [{ n: 2 }]);
  });

  t.test('the same files under another service name are tracked separately', async (t) => {
    const other = t.testdir({ '001_other.sql': 'CREATE TABLE other_items (id int);' });
    const r = await migrate(db.pool, { service: 'other', dir: other, log });
    t.same(
      r.applied.map((m) => m.version),
      [1],
    );
    t.equal((await recorded(db.pool, 'svc')).length, 4);
  });
});

t.test('an applied file that changed stops the run, naming the file', async (t) => {
  const db = await useTestDatabase(t, 'migrate_checksum', { empty: true });
  const dir = t.testdir({
    '001_a.sql': 'CREATE TABLE a (id int);\n-- a note\n',
    '002_b.sql': 'CREATE TABLE b (id int);',
  });
  await migrate(db.pool, { service: 'svc', dir, log });

  writeFileSync(join(dir, '002_b.sql'), 'CREATE TABLE b (id bigint);');
  writeFileSync(join(dir, '003_c.sql'), 'CREATE TABLE c (id int);');
  const err = await migrate(db.pool, { service: 'svc', dir, log }).catch((e: unknown) => e);
  t.ok(err instanceof MigrationError);
  t.match(err, {
    code: 'migration_checksum_mismatch',
    file: '002_b.sql',
    message: `migrations: ${join(dir, '002_b.sql')} was changed after it was applied; add a new migration instead of editing an applied one`,
  });
  t.equal((await db.pool.query("SELECT to_regclass('c') AS c")).rows[0].c, null, 'nothing after the check ran');

  t.test('line endings alone are not a change', async (t) => {
    writeFileSync(join(dir, '002_b.sql'), 'CREATE TABLE b (id int);');
    writeFileSync(join(dir, '001_a.sql'), readFileSync(join(dir, '001_a.sql'), 'utf8').replace(/\n/g, '\r\n'));
    const r = await migrate(db.pool, { service: 'svc', dir, log });
    t.same(
      r.applied.map((m) => m.version),
      [3],
    );
    t.equal(checksumOf('x\r\ny\r\n'), checksumOf('x\ny\n'));
  });
});

t.test('a failing migration rolls back entirely and is not recorded', async (t) => {
  const db = await useTestDatabase(t, 'migrate_fail', { empty: true });
  const dir = t.testdir({
    '001_ok.sql': 'CREATE TABLE ok (id int);',
    '002_bad.sql': 'CREATE TABLE half (id int);\nINSERT INTO ok VALUES (1);\nSELECT no_such_function();\n',
    '003_later.sql': 'CREATE TABLE later (id int);',
  });
  const err = await migrate(db.pool, { service: 'svc', dir, log }).catch((e: unknown) => e);
  t.match(err, {
    name: 'MigrationError',
    code: 'migration_failed',
    file: '002_bad.sql',
    message: `migrations: ${join(dir, '002_bad.sql')} failed: function no_such_function() does not exist (line 3)`,
  });
  t.same(
    (await recorded(db.pool, 'svc')).map((r) => r.version),
    [1],
    'the migration before it stays applied',
  );
  const { rows } = await db.pool.query(
    "SELECT to_regclass('half') AS half, to_regclass('later') AS later, (SELECT count(*)::int FROM ok) AS n",
  );
  t.same(rows, [{ half: null, later: null, n: 0 }], 'none of its statements, and nothing after it');

  writeFileSync(join(dir, '002_bad.sql'), 'CREATE TABLE half (id int);');
  const r = await migrate(db.pool, { service: 'svc', dir, log });
  t.same(
    r.applied.map((m) => m.version),
    [2, 3],
    'fixed, it applies on the next run',
  );
});

t.test('two runners started at once apply each migration exactly once', async (t) => {
  const db = await useTestDatabase(t, 'migrate_concurrent', { empty: true });
  // CREATE TABLE without IF NOT EXISTS fails when run twice; the sleep makes the runs overlap.
  const dir = t.testdir({
    '001_first.sql': 'SELECT pg_sleep(0.3);\nCREATE TABLE first (id int);',
    '002_second.sql': 'CREATE TABLE second (id int);',
    '003_third.sql': 'CREATE TABLE third (id int);\nINSERT INTO third VALUES (1);',
  });
  const a = createPool(db.url, { applicationName: 'runner-a', max: 2, log });
  const b = createPool(db.url, { applicationName: 'runner-b', max: 2, log });
  t.teardown(async () => {
    await a.end();
    await b.end();
  });
  const [ra, rb] = await Promise.all([migrate(a, { service: 'svc', dir, log }), migrate(b, { service: 'svc', dir, log })]);
  const all = [...ra.applied, ...rb.applied].map((m) => m.version).sort();
  t.same(all, [1, 2, 3], 'every migration applied by exactly one runner');
  t.ok(ra.applied.length === 0 || rb.applied.length === 0, 'the second runner found nothing left to do');
  t.equal(ra.version, 3);
  t.equal(rb.version, 3);
  t.same((await db.pool.query('SELECT count(*)::int AS n FROM third')).rows, [{ n: 1 }]);
  t.equal((await recorded(db.pool, 'svc')).length, 3);
});

t.test('two services migrating a fresh database at once both succeed', async (t) => {
  const db = await useTestDatabase(t, 'migrate_two_services', { empty: true });
  // One testdir per test: a second t.testdir() call would replace the first.
  const root = t.testdir({ one: { '001_one.sql': 'CREATE TABLE one (id int);' }, two: { '001_two.sql': 'CREATE TABLE two (id int);' } });
  const [one, two] = [join(root, 'one'), join(root, 'two')];
  const a = createPool(db.url, { applicationName: 'svc-one', max: 1, log });
  const b = createPool(db.url, { applicationName: 'svc-two', max: 1, log });
  t.teardown(async () => {
    await a.end();
    await b.end();
  });
  const [r1, r2] = await Promise.all([migrate(a, { service: 'one', dir: one, log }), migrate(b, { service: 'two', dir: two, log })]);
  t.equal(r1.applied.length, 1);
  t.equal(r2.applied.length, 1);
  t.equal((await db.pool.query('SELECT count(*)::int AS n FROM schema_migrations')).rows[0].n, 2);
});

t.test('the runner leaves no connection behind and releases its lock', async (t) => {
  const db = await useTestDatabase(t, 'migrate_cleanup', { empty: true });
  const dir = t.testdir({ '001_x.sql': 'CREATE TABLE x (id int);' });
  const pool = createPool(db.url, { applicationName: 'runner', max: 2, log });
  t.teardown(() => pool.end());
  await migrate(pool, { service: 'svc', dir, log });
  // pg_locks is the whole server's: other test files hold advisory locks in their own databases.
  const { rows } = await db.pool.query(
    "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
  );
  t.equal(rows[0].n, 0, 'no advisory lock held');
  t.equal(pool.totalCount, 0, 'the dedicated connection was closed');
});

t.test('bad file sets are refused before anything runs', async (t) => {
  const root = t.testdir({
    badName: { '001_ok.sql': 'SELECT 1;', 'one_bad.sql': 'SELECT 1;' },
    dup: { '001_a.sql': 'SELECT 1;', '1_b.sql': 'SELECT 1;' },
  });
  const [badName, dup] = [join(root, 'badName'), join(root, 'dup')];
  await t.rejects(loadMigrations(badName), {
    code: 'migration_invalid_name',
    message: `migrations: ${join(badName, 'one_bad.sql')} is not named NNN_name.sql`,
  });
  await t.rejects(loadMigrations(dup), {
    code: 'migration_duplicate_version',
    message: `migrations: 1_b.sql and 001_a.sql in ${dup} share version 1`,
  });
  await t.rejects(loadMigrations(join(badName, 'nope')), { code: 'migration_dir_missing' });
});

t.test('planMigrations: a file recorded but gone is reported, not fatal; a renamed one is', async (t) => {
  const m = (version: number, name: string, sql = name) => ({
    version,
    name,
    file: `${version}_${name}.sql`,
    sql,
    checksum: checksumOf(sql),
  });
  const plan = planMigrations(
    'd',
    [m(1, 'a'), m(3, 'c')],
    [
      { version: 1, name: 'a', checksum: checksumOf('a') },
      { version: 2, name: 'b', checksum: checksumOf('b') },
    ],
  );
  t.same(
    plan.pending.map((p) => p.version),
    [3],
  );
  t.same(
    plan.missing.map((p) => p.version),
    [2],
  );
  t.throws(() => planMigrations('d', [m(1, 'renamed', 'a')], [{ version: 1, name: 'a', checksum: checksumOf('a') }]), {
    code: 'migration_checksum_mismatch',
    message:
      'migrations: d/1_renamed.sql was changed after it was applied (applied as 001_a.sql); add a new migration instead of editing an applied one',
  });
});
