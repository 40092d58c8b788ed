// @tier: pure
// @alone
/**
 * Stopping means stopped: `npm start` stops every service and the embedded PostgreSQL on SIGTERM
 * to npm, SIGTERM to start.js, SIGTERM to the process group, and when its parent dies; each
 * service drains exactly once however many signals reach it; and the next start works.
 *
 * Cheap by design: one platform start per way to stop, in one data directory and on one set of
 * free ports, each start being "the second start" after the previous way; a last start (after a
 * stale lock is planted) proves the fourth. The platform's own embedded PostgreSQL in a temporary
 * directory (none of the suite's servers: the file is pure). Never on 8080–8090, 9090 or 50051.
 */
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { PLAIN_NODE, plainNodeArgs, plainProgramArgs } from '../harness/child.js';
import { freePort } from '../harness/ports.js';
import { waitFor } from '../harness/wait.js';

// Five platform starts, each waiting for six services and PostgreSQL: slow on a loaded machine.
t.setTimeout(1_800_000);

const dir = mkdtempSync(join(tmpdir(), 'edge-stop-'));
chmodSync(dir, 0o755); // the postgres OS user (when run as root) must reach the data directory
const pgDir = join(dir, 'postgres');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const START_JS = resolve(PROJECT_ROOT, 'dist/bin/start.js');
const SERVICES = ['control-plane', 'identity', 'sandbox', 'notifier', 'limiter', 'console'];
const SCRIPTS: Record<string, string> = {
  'control-plane': 'dist/limiter/control-plane/main.js',
  identity: 'dist/identity/main.js',
  sandbox: 'dist/sandbox/main.js',
  notifier: 'dist/notifier/main.js',
  limiter: 'dist/limiter/main.js',
  console: 'dist/console/main.js',
};

async function platformEnv(): Promise<Record<string, string>> {
  const p = {
    LIMITER_PORT: await freePort(),
    LIMITER_ADMIN_PORT: await freePort(),
    CONTROL_PLANE_HTTP_PORT: await freePort(),
    CONTROL_PLANE_GRPC_PORT: await freePort(),
    NOTIFIER_PORT: await freePort(),
    IDENTITY_PORT: await freePort(),
    SANDBOX_PORT: await freePort(),
    SANDBOX_SMTP_PORT: await freePort(),
    CONSOLE_PORT: await freePort(),
  };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  for (const k of ['DATABASE_URL', 'REDIS_URL', 'START_SERVICES', 'ADMIN_TOKEN', 'IDENTITY_ADMIN_TOKEN', 'NODE_OPTIONS']) delete env[k];
  for (const [k, v] of Object.entries(p)) env[k] = String(v);
  return {
    ...env,
    LOG_LEVEL: 'info', // each service's "shutdown: …" lines are read below
    START_READY_TIMEOUT: '600s',
    DATA_DIR: dir, // its generated secrets.env stays out of the checkout
    EMBEDDED_PG_DIR: pgDir,
    IDENTITY_URL: `http://127.0.0.1:${p.IDENTITY_PORT}`,
    NOTIFIER_URL: `http://127.0.0.1:${p.NOTIFIER_PORT}`,
    CONSOLE_PUBLIC_URL: `http://127.0.0.1:${p.CONSOLE_PORT}`,
    SMTP_URL: `smtp://127.0.0.1:${p.SANDBOX_SMTP_PORT}`,
    FCM_URL: `http://127.0.0.1:${p.SANDBOX_PORT}`,
    SMS_URL: `http://127.0.0.1:${p.SANDBOX_PORT}`,
    npm_config_update_notifier: 'false',
  };
}

// ── the process table (Linux /proc) ─────────────────────────────────────────

interface Proc {
  ppid: number;
  state: string;
}

function processTable(): Map<number, Proc> {
  const table = new Map<number, Proc>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(name), { state: fields[0]!, ppid: Number(fields[1]) });
    } catch {
      // exited while we read
    }
  }
  return table;
}

/** `root` and every process below it. */
function tree(root: number): number[] {
  const table = processTable();
  const out = [root];
  for (let i = 0; i < out.length; i++) for (const [pid, p] of table) if (p.ppid === out[i]) out.push(pid);
  return out;
}

/** A zombie has exited; only its parent has not read its status yet. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

// ── one platform ────────────────────────────────────────────────────────────

interface Platform {
  proc: ChildProcess;
  out(): string;
  exited: Promise<number | null>;
  /** Every process of the platform once it is ready: start.js, the services, PostgreSQL's. */
  pids: number[];
  startJs: number;
}

type How = 'npm' | 'npm in its own group' | 'node' | 'node under a parent';

async function start(t: Test, how: How, env: Record<string, string>): Promise<Platform> {
  let proc: ChildProcess;
  const opts = { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] as ('ignore' | 'pipe')[] };
  // Every way starts through `env -u NODE_OPTIONS` (test/harness/child.ts), which execs the program
  // (same pid, so the signals below reach it), without the test process's NODE_OPTIONS.
  if (how === 'npm' || how === 'npm in its own group') {
    // --ignore-scripts skips prestart's `tsc -b` (the suite built dist/ already), not start itself.
    proc = spawn(PLAIN_NODE, plainProgramArgs('npm', ['start', '--ignore-scripts']), { ...opts, detached: how === 'npm in its own group' });
  } else if (how === 'node') {
    proc = spawn(PLAIN_NODE, plainNodeArgs([START_JS]), opts);
  } else {
    // A parent that only waits, as a shell or CI runner would; the platform writes to our pipes.
    const parent = `require('node:child_process').spawn(process.execPath, [${JSON.stringify(START_JS)}], { stdio: 'inherit' }); setInterval(() => {}, 1e6);`;
    proc = spawn(PLAIN_NODE, plainNodeArgs(['-e', parent]), opts);
  }
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((res) => proc.on('exit', (code) => res(code)));
  t.teardown(() => {
    // Only if the test failed half way: leave nothing behind.
    for (const pid of tree(proc.pid!).reverse()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });
  await waitFor(() => out.includes('the platform is ready') || proc.exitCode !== null, {
    timeoutMs: 600_000,
    what: `"the platform is ready" (${how})`,
  });
  t.match(out, 'the platform is ready', `${how}: the platform starts`);
  const pids = tree(proc.pid!);
  const startJs = pids.find((p) => commandLine(p).includes('dist/bin/start.js'));
  t.ok(startJs, 'start.js runs');
  for (const name of SERVICES) {
    t.ok(
      pids.some((p) => commandLine(p).includes(SCRIPTS[name]!)),
      `${name} runs`,
    );
  }
  t.ok(
    pids.some((p) => commandLine(p).includes(`-D ${pgDir}`)),
    'the embedded PostgreSQL runs',
  );
  return { proc, out: () => out, exited, pids: pids.filter((p) => p !== proc.pid), startJs: startJs ?? -1 };
}

/** After a stop: nothing of the platform runs, PostgreSQL removed its lock, each service drained once. */
async function assertStopped(t: Test, p: Platform, how: string): Promise<void> {
  await waitFor(() => p.pids.every((pid) => !running(pid)), {
    timeoutMs: 60_000,
    what: `every process of the platform to exit (${how}); still running: ${p.pids
      .filter(running)
      .map((pid) => `${pid} ${commandLine(pid)}`)
      .join('; ')}`,
  });
  t.pass(`${how}: no process of the platform remains (${p.pids.length} pids)`);
  t.notOk(existsSync(join(pgDir, 'postmaster.pid')), 'PostgreSQL shut down and removed its lock');
  const shutdowns: Record<string, string[]> = {};
  for (const line of p.out().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const { service, msg } = JSON.parse(line) as { service?: string; msg?: string };
      if (service && msg?.startsWith('shutdown: ')) (shutdowns[service] ??= []).push(msg);
    } catch {
      // not a log line
    }
  }
  for (const name of SERVICES) {
    const msgs = shutdowns[name] ?? [];
    t.equal(msgs.filter((m) => m.endsWith(', draining')).length, 1, `${name} began one drain`);
    t.equal(msgs.filter((m) => m.startsWith('shutdown: done')).length, 1, `${name} finished its drain: ${msgs.join(' | ')}`);
    t.notOk(
      msgs.some((m) => m.includes('exiting now') || m.includes('did not finish')),
      `${name} was not cut short`,
    );
  }
}

t.test('every way to stop npm start stops everything, and the next start works', async (t) => {
  const env = await platformEnv();

  await t.test('SIGTERM to npm (what process managers and CI send)', async (t) => {
    const p = await start(t, 'npm', env);
    p.proc.kill('SIGTERM');
    t.equal(await p.exited, 0, 'npm exits 0');
    // npm forwards the signal to start.js (the script execs node) and waits for it.
    t.same(p.pids.filter(running), [], 'npm exits only once everything has stopped');
    await assertStopped(t, p, 'SIGTERM to npm');
  });

  await t.test('SIGTERM to start.js', async (t) => {
    const p = await start(t, 'node', env);
    p.proc.kill('SIGTERM');
    t.equal(await p.exited, 0);
    t.same(p.pids.filter(running), [], 'start.js exits only once everything has stopped');
    await assertStopped(t, p, 'SIGTERM to start.js');
  });

  await t.test('SIGTERM to the process group (npm, start.js, every service and PostgreSQL at once)', async (t) => {
    const p = await start(t, 'npm in its own group', env);
    process.kill(-p.proc.pid!, 'SIGTERM');
    t.equal(await p.exited, 0);
    await assertStopped(t, p, 'SIGTERM to the group');
    // start.js forwards the signal too; a service that drains quickly may be gone before it comes,
    // so whether one logs it is timing (test/shared/lifecycle.test.ts pins the ignoring itself).
    t.comment(`services that saw both SIGTERMs: ${p.out().split('SIGTERM while draining, ignored').length - 1}`);
    t.notMatch(p.out(), /"level":50/, 'the second SIGTERM made no service log an error');
  });

  await t.test('its parent dies (SIGKILL: no signal reaches start.js)', async (t) => {
    const p = await start(t, 'node under a parent', env);
    p.proc.kill('SIGKILL');
    await assertStopped(t, p, 'the parent killed');
    t.match(p.out(), /stopping \(the parent process \(pid \d+\) exited\)/, 'start.js says why it stopped');
  });

  await t.test('after a lock left by a dead server, a start still works and says what it removed', async (t) => {
    // A pid that surely ran and is surely gone: a process we started and reaped.
    const gone = spawn(PLAIN_NODE, plainNodeArgs(['-e', '']));
    const deadPid = gone.pid!;
    await new Promise((res) => gone.on('exit', res));
    writeFileSync(join(pgDir, 'postmaster.pid'), `${deadPid}\n${pgDir}\n`);
    const p = await start(t, 'node', env);
    t.match(p.out(), `removing a stale postmaster.pid: PostgreSQL pid ${deadPid} is no longer running`);
    p.proc.kill('SIGINT');
    t.equal(await p.exited, 0);
    await assertStopped(t, p, 'SIGINT');
  });
});
