// @tier: pure
import t from 'tap';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../shared/embedded-postgres.js';

const HOOKED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'beforeExit', 'message'] as const;
const isRoot = process.getuid?.() === 0;

async function tempDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-embedded-pg-test-'));
  // Readable by the postgres OS user when running as root (mkdtemp makes it 0700).
  await chmod(dir, 0o755);
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const c = new pg.Client(url);
  await c.connect();
  try {
    return (await c.query<T>(sql)).rows;
  } finally {
    await c.end();
  }
}

async function refused(port: number): Promise<boolean> {
  const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', connectionTimeoutMillis: 1000 });
  c.on('error', () => {});
  return c.connect().then(
    async () => {
      await c.end();
      return false;
    },
    () => true,
  );
}

function infoLog() {
  const infos: string[] = [];
  const warns: string[] = [];
  return {
    infos,
    warns,
    log: {
      info: (_o: unknown, m?: unknown) => void infos.push(String(m)),
      warn: (_o: unknown, m?: unknown) => void warns.push(String(m)),
      debug: () => {},
    },
  };
}

t.test('starts on a free port, keeps its data across a restart, and stops', async (t) => {
  const dir = join(await tempDir(t), 'nested', 'data');
  const listenersBefore = HOOKED.map((e) => process.listenerCount(e));
  const { log, infos, warns } = infoLog();

  let db: EmbeddedPostgres | undefined = await startEmbeddedPostgres({ dataDir: dir, log, ephemeral: true });
  t.teardown(() => db?.stop());
  t.not(db.port, 5432);
  t.equal(db.url, `postgres://postgres:postgres@127.0.0.1:${db.port}/postgres`);
  t.same(
    HOOKED.map((e) => process.listenerCount(e)),
    listenersBefore,
    "the package's exit hooks are removed: no signal, beforeExit or message listeners added",
  );
  const [row] = await query<{ v: string; c: string }>(
    db.url,
    "SELECT current_setting('server_version_num') AS v, (SELECT datcollate FROM pg_database WHERE datname = current_database()) AS c",
  );
  t.ok(Number(row?.v) >= 170000, 'PostgreSQL 17');
  t.equal(row?.c, 'C');
  await query(db.url, "CREATE TABLE kept (note text); INSERT INTO kept VALUES ('before restart')");
  const pgVersion = await readFile(join(dir, 'PG_VERSION'), 'utf8');

  const firstPort = db.port;
  await db.stop();
  await db.stop(); // idempotent
  t.ok(await refused(firstPort), 'nothing listens after stop');

  db = await startEmbeddedPostgres({ dataDir: dir, log, ephemeral: true });
  t.same(await query(db.url, 'SELECT note FROM kept'), [{ note: 'before restart' }], 'the table survives the restart');
  t.equal(await readFile(join(dir, 'PG_VERSION'), 'utf8'), pgVersion);
  t.equal(infos.filter((m) => m === 'initialising embedded postgres').length, 1, 'initialised once, reused after');
  await db.stop();
  t.same(warns, [], 'a requested stop is not reported as unexpected');
  db = undefined;
});

t.test('stop() returns when the server already exited on its own', async (t) => {
  const dir = await tempDir(t);
  const { log, warns } = infoLog();
  const db = await startEmbeddedPostgres({ dataDir: join(dir, 'data'), log, ephemeral: true });
  t.teardown(() => db.stop());
  const pid = Number((await readFile(join(dir, 'data', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  process.kill(pid, 'SIGINT'); // as Ctrl-C in a terminal would
  await new Promise<void>((res) => {
    const poll = setInterval(() => {
      if (warns.length) {
        clearInterval(poll);
        res();
      }
    }, 20);
  });
  t.same(warns, ['embedded postgres exited unexpectedly']);
  await db.stop();
  t.pass('stop resolved');
});

t.test('fails with one clear line', async (t) => {
  t.test('when the port is taken', async (t) => {
    const dir = await tempDir(t);
    const blocker: Server = createServer();
    await new Promise<void>((res) => blocker.listen(0, '127.0.0.1', () => res()));
    t.teardown(() => new Promise<void>((res) => blocker.close(() => res())));
    const addr = blocker.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    await t.rejects(startEmbeddedPostgres({ dataDir: join(dir, 'data'), port, ephemeral: true }), {
      name: 'EmbeddedPostgresError',
      code: 'port_in_use',
      message: `embedded postgres: port ${port} on 127.0.0.1 is already in use; pick another or use 0 for a free one`,
    });
  });

  t.test('when the data directory holds something else', async (t) => {
    const dir = await tempDir(t);
    await mkdir(join(dir, 'data'));
    await writeFile(join(dir, 'data', 'notes.txt'), 'mine');
    await t.rejects(startEmbeddedPostgres({ dataDir: join(dir, 'data') }), {
      code: 'data_dir_unusable',
      message: `embedded postgres: ${join(dir, 'data')} is not empty and holds no PostgreSQL cluster (no PG_VERSION)`,
    });
  });

  t.test('when another server already runs on the data directory', async (t) => {
    const dir = await tempDir(t);
    const first = await startEmbeddedPostgres({ dataDir: join(dir, 'data'), ephemeral: true });
    t.teardown(() => first.stop());
    await t.rejects(startEmbeddedPostgres({ dataDir: join(dir, 'data'), ephemeral: true }), {
      code: 'data_dir_in_use',
      // The server is ours (this process started it), so the message names its pid and ours.
      message: new RegExp(
        `^embedded postgres: ${join(dir, 'data').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by PostgreSQL pid \\d+, started by process ${process.pid}, which is still running \\(another npm start\\?\\); stop that first$`,
      ),
    });
    t.same(await query(first.url, 'SELECT 1 AS ok'), [{ ok: 1 }], 'the running server is untouched');
  });

  t.test('as root, when the postgres user cannot reach the data directory', { skip: isRoot ? false : 'only as root' }, async (t) => {
    const dir = await tempDir(t);
    await mkdir(join(dir, 'private'), { mode: 0o700 });
    await t.rejects(startEmbeddedPostgres({ dataDir: join(dir, 'private', 'data') }), {
      code: 'data_dir_unusable',
      message: `embedded postgres: the postgres OS user cannot enter ${join(dir, 'private')} (mode 700), so it cannot reach ${join(dir, 'private', 'data')}; choose a data directory outside it or set DATABASE_URL`,
    });
  });
});
