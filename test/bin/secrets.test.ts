/**
 * `npm start`'s generated secrets survive a restart, and the CLIs read them: the first start writes
 * DATA_DIR/secrets.env (0600) and prints it once; the second reuses it silently, so the quota CLI,
 * reading the file, is still accepted by the restarted control plane; an exported ADMIN_TOKEN
 * still wins over the file. Runs dist/bin/start.js with the control plane alone, against the
 * suite's PostgreSQL, and the CLI through its npm launcher (bin/run-built.mjs).
 */
import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { freePort } from '../harness/ports.js';
import { testDatabaseUrl } from '../harness/env.js';
import { waitFor } from '../harness/wait.js';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';

const dataDir = mkdtempSync(join(tmpdir(), 'secrets-start-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const grpcPort = await freePort();
const env: Record<string, string> = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? dataDir,
  DATABASE_URL: testDatabaseUrl(),
  DATA_DIR: dataDir,
  LOG_LEVEL: 'warn',
  START_SERVICES: 'control-plane',
  CONTROL_PLANE_HTTP_PORT: String(await freePort()),
  CONTROL_PLANE_GRPC_PORT: String(grpcPort),
};

/** Starts the platform, waits until ready, and returns its output so far and a stop function. */
async function start(t: Test): Promise<{ out: () => string; stop: () => Promise<number | null> }> {
  const child = spawn(PLAIN_NODE, plainNodeArgs([join(PROJECT_ROOT, 'dist/bin/start.js')]), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((res) => child.on('exit', res));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await waitFor(() => out.includes('Ctrl-C stops everything') || child.exitCode !== null, { timeoutMs: 120_000, what: 'npm start' });
  t.match(out, 'the platform is ready', out);
  return {
    out: () => out,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** `npm run quota -- list` as the launcher runs it, with `extra` in its environment. */
function quotaList(extra: Record<string, string> = {}) {
  const r = spawnSync(PLAIN_NODE, plainNodeArgs([join(PROJECT_ROOT, 'bin/run-built.mjs'), 'quota', 'list']), {
    env: { ...env, CONTROL_PLANE_GRPC_URL: `127.0.0.1:${grpcPort}`, ...extra },
    encoding: 'utf8',
  });
  return { code: r.status, stderr: r.stderr };
}

t.test('generated once, printed once, reused on restart; the quota CLI reads them', async (t) => {
  const first = await start(t);
  const printed = /^ {2}ADMIN_TOKEN=(\S+)$/m.exec(first.out())?.[1];
  t.ok(printed, 'the first start prints the admin token it generated');
  t.match(first.out(), `generated secrets, kept in ${join(dataDir, 'secrets.env')} (mode 0600)`);
  const file = join(dataDir, 'secrets.env');
  t.equal(statSync(file).mode & 0o777, 0o600, 'secrets.env is readable by its owner only');
  const text = readFileSync(file, 'utf8');
  for (const name of ['ADMIN_TOKEN', 'IDENTITY_ADMIN_TOKEN', 'SERVICE_SECRET', 'NOTIFIER_TRACKING_SECRET'])
    t.match(text, new RegExp(`^${name}=\\S{32,}$`, 'm'), `${name} is kept`);
  t.match(text, `ADMIN_TOKEN=${printed}\n`);

  t.same(quotaList(), { code: 0, stderr: '' }, 'the CLI, with no ADMIN_TOKEN exported, is accepted');
  const wrong = quotaList({ ADMIN_TOKEN: 'an-exported-token-that-is-wrong' });
  t.equal(wrong.code, 1, 'an exported ADMIN_TOKEN wins over the file');
  t.match(wrong.stderr, /UNAUTHENTICATED/);
  t.equal(await first.stop(), 0);

  const second = await start(t);
  t.notMatch(second.out(), /ADMIN_TOKEN=/, 'a restart prints no secret');
  t.match(second.out(), `secrets: ${file} (ADMIN_TOKEN, IDENTITY_ADMIN_TOKEN, SERVICE_SECRET, NOTIFIER_TRACKING_SECRET)`);
  t.equal(readFileSync(file, 'utf8'), text, 'the file is unchanged');
  t.same(quotaList(), { code: 0, stderr: '' }, 'the restarted control plane runs with the same token');
  t.equal(await second.stop(), 0);
});
