// @tier: pure
/**
 * A postmaster.pid left in an embedded data directory: what it means (against a process table
 * given in the test), and, for real, the server a killed `npm start` leaves behind: named with its
 * pid and the command that stops it, and after that command a start works.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../../shared/embedded-postgres.js';
import { describeRunning, inspectLock, type ProcessTable } from '../../shared/postmaster-lock.js';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';
import { waitFor } from '../harness/wait.js';
import { sourceUrl } from '../harness/source.js';

async function tempDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-pg-lock-'));
  await chmod(dir, 0o755); // the postgres OS user must reach it when the suite runs as root
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function table(procs: Record<number, { argv: string[]; ppid: number }>): ProcessTable {
  return {
    alive: (pid) => pid in procs,
    commandLine: async (pid) => procs[pid]?.argv,
    parentOf: async (pid) => procs[pid]?.ppid,
  };
}

t.test('what a lock means', async (t) => {
  const dir = await tempDir(t);
  t.same(await inspectLock(dir, table({})), { state: 'free' }, 'no lock: free');
  await writeFile(join(dir, 'postmaster.pid'), `4242\n${dir}\n1700000000\n5432\n`);
  const server = { argv: ['/opt/pg/bin/postgres', '-D', dir, '-p', '5432'], ppid: 1 };
  t.same(await inspectLock(dir, table({})), { state: 'stale', pid: 4242, why: 'dead' }, 'its pid is not running: stale');
  t.same(
    await inspectLock(dir, table({ 4242: { argv: ['/usr/bin/node', 'app.js'], ppid: 1 } })),
    { state: 'stale', pid: 4242, why: 'reused' },
    'its pid now belongs to another program: stale',
  );
  t.same(
    await inspectLock(dir, table({ 4242: { ...server, argv: ['/opt/pg/bin/postgres', '-D', '/elsewhere'] } })),
    { state: 'stale', pid: 4242, why: 'reused' },
    'a PostgreSQL for another directory: stale',
  );
  t.same(
    await inspectLock(dir, table({ 4242: server })),
    { state: 'running', pid: 4242, parentPid: 1, orphan: true },
    'our server, re-parented to init: running, orphaned',
  );
  t.same(
    await inspectLock(dir, table({ 4242: { ...server, ppid: 77 }, 77: { argv: ['/sbin/tini', '--'], ppid: 1 } })),
    { state: 'running', pid: 4242, parentPid: 77, orphan: true },
    're-parented to a sub-reaper: orphaned',
  );
  const live = await inspectLock(
    dir,
    table({ 4242: { ...server, ppid: 77 }, 77: { argv: ['/usr/bin/node', 'dist/bin/start.js'], ppid: 1 } }),
  );
  t.same(live, { state: 'running', pid: 4242, parentPid: 77, orphan: false }, 'started by a node process that still runs');
  if (live.state === 'running') {
    t.equal(
      describeRunning(dir, live),
      `${dir} is in use by PostgreSQL pid 4242, started by process 77, which is still running (another npm start?); stop that first`,
    );
  }
  await writeFile(join(dir, 'postmaster.pid'), '');
  t.same(await inspectLock(dir, table({})), { state: 'stale', pid: 0, why: 'dead' }, 'an empty lock: stale');
});

t.test('the server a killed npm start left running is named with its pid; after kill N a start works', async (t) => {
  const dataDir = join(await tempDir(t), 'data');
  // The fixture as `tsc -b` compiled it, by a plain `node` (test/harness/child.ts): loading hold.ts
  // through ts-node cost about 1 s of CPU.
  const hold = spawn(
    PLAIN_NODE,
    plainNodeArgs([fileURLToPath(new URL('../../dist/test/fixtures/postgres/hold.js', sourceUrl(import.meta.url))), dataDir]),
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  hold.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const holdExited = new Promise((res) => hold.on('exit', res));
  await waitFor(() => out.includes('ready') || hold.exitCode !== null, { timeoutMs: 120_000, what: 'the fixture to start PostgreSQL' });
  const pid = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n', 1)[0]);
  t.teardown(() => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // stopped, as it should be
    }
  });
  hold.kill('SIGKILL'); // no exit hook runs: the server is orphaned, as after `kill -9` of npm start
  await holdExited;

  await t.rejects(startEmbeddedPostgres({ dataDir, ephemeral: true }), {
    code: 'data_dir_in_use',
    message: `embedded postgres: ${dataDir} is in use by PostgreSQL pid ${pid} started by a previous npm start; stop it with kill ${pid}`,
  });

  process.kill(pid, 'SIGTERM'); // `kill N`, as the message says
  await waitFor(
    async () => {
      try {
        const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
        return stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z';
      } catch {
        return true;
      }
    },
    { timeoutMs: 30_000, what: `PostgreSQL pid ${pid} to stop` },
  );
  const db = await startEmbeddedPostgres({ dataDir, ephemeral: true });
  t.teardown(() => db.stop());
  t.ok(db.port > 0, 'the next start works');
});
