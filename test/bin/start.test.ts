/**
 * `npm start` end to end: the supervisor brings every service to ready, prints the URLs, and
 * stops everything on SIGINT. Runs the built entry (dist/bin/start.js) as a user would, against
 * the suite's PostgreSQL (the embedded path is covered by test/db/embedded-postgres.test.ts).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { freePort } from '../harness/ports.js';
import { testDatabaseUrl } from '../harness/env.js';
import { waitFor } from '../harness/wait.js';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';

t.test('npm start brings every service to ready, then stops cleanly on SIGINT', async (t) => {
  const ports = {
    LIMITER_PORT: await freePort(),
    LIMITER_ADMIN_PORT: await freePort(),
    CONTROL_PLANE_HTTP_PORT: await freePort(),
    CONTROL_PLANE_GRPC_PORT: await freePort(),
    NOTIFIER_PORT: await freePort(),
    IDENTITY_PORT: await freePort(),
    SANDBOX_PORT: await freePort(),
    CONSOLE_PORT: await freePort(),
  };
  // Its own data directory: the generated secrets go there, never into the checkout's .data/.
  const dataDir = mkdtempSync(join(tmpdir(), 'start-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const env: Record<string, string> = { ...process.env, DATABASE_URL: testDatabaseUrl(), LOG_LEVEL: 'warn', DATA_DIR: dataDir };
  for (const [k, v] of Object.entries(ports)) env[k] = String(v);
  env.IDENTITY_URL = `http://127.0.0.1:${ports.IDENTITY_PORT}`;
  env.NOTIFIER_URL = `http://127.0.0.1:${ports.NOTIFIER_PORT}`;
  env.CONSOLE_PUBLIC_URL = `http://127.0.0.1:${ports.CONSOLE_PORT}`;
  delete env.START_SERVICES;
  delete env.IDENTITY_ADMIN_TOKEN;

  const child = spawn(PLAIN_NODE, plainNodeArgs([resolve(PROJECT_ROOT, 'dist/bin/start.js')]), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  await waitFor(() => out.includes('Ctrl-C stops everything'), { timeoutMs: 60_000, what: `"Ctrl-C stops everything" in:\n${out}` });
  for (const url of [
    `http://127.0.0.1:${ports.CONTROL_PLANE_HTTP_PORT}`,
    `http://127.0.0.1:${ports.IDENTITY_PORT}`,
    `http://127.0.0.1:${ports.NOTIFIER_PORT}`,
    `http://127.0.0.1:${ports.LIMITER_PORT}`,
  ]) {
    t.match(out, url, `prints ${url}`);
  }
  for (const p of [ports.CONTROL_PLANE_HTTP_PORT, ports.IDENTITY_PORT, ports.NOTIFIER_PORT, ports.LIMITER_ADMIN_PORT]) {
    const r = await fetch(`http://127.0.0.1:${p}/readyz`);
    t.equal(r.status, 200, `port ${p} is ready`);
    const m = await fetch(`http://127.0.0.1:${p}/metrics`);
    t.match(await m.text(), /process_cpu_user_seconds_total/, `port ${p} serves /metrics`);
  }
  // npm start gave the notifier the sandbox's SNS topic, so its SES webhook is on (README, the
  // e-mail walk-through): /readyz names nothing turned off.
  const notifierReady = (await (await fetch(`http://127.0.0.1:${ports.NOTIFIER_PORT}/readyz`)).json()) as Record<string, unknown>;
  t.equal(notifierReady.detail, undefined, 'nothing is off in the notifier');
  // The console: registered at identity by npm start (a confidential client with the code and
  // refresh grants, redirecting to the console's public URL), serving, and sending a browser to sign in.
  const consoleUrl = `http://127.0.0.1:${ports.CONSOLE_PORT}`;
  t.match(out, consoleUrl, 'prints the console URL');
  const adminToken = /^ {2}IDENTITY_ADMIN_TOKEN=(\S+)$/m.exec(out)?.[1];
  t.ok(adminToken, 'prints the identity admin token it generated');
  t.match(
    readFileSync(join(dataDir, 'secrets.env'), 'utf8'),
    `IDENTITY_ADMIN_TOKEN=${adminToken}\n`,
    'and keeps it in DATA_DIR/secrets.env',
  );
  const client = await fetch(`http://127.0.0.1:${ports.IDENTITY_PORT}/auth/admin/clients/console`, {
    headers: { authorization: `Bearer ${adminToken}` },
  });
  t.match(await client.json(), {
    client_type: 'confidential',
    redirect_uris: [`${consoleUrl}/auth/callback`],
    grant_types: ['authorization_code', 'refresh_token'],
  });
  t.equal((await fetch(`${consoleUrl}/readyz`)).status, 200, 'the console is ready');
  const home = await fetch(`${consoleUrl}/`, { redirect: 'manual' });
  t.equal(home.status, 303, 'an anonymous visit is sent to sign in');
  const login = await fetch(new URL(home.headers.get('location')!, consoleUrl), { redirect: 'manual' });
  t.match(login.headers.get('location'), `http://127.0.0.1:${ports.IDENTITY_PORT}/authorize?`, "at identity's sign-in page");
  // Through the sidecar to an upstream: identity's discovery path takes no credentials. Identity
  // does not serve it yet, so the answer is the upstream's own 404 with the sidecar's quota headers.
  const viaSidecar = await fetch(`http://127.0.0.1:${ports.LIMITER_PORT}/.well-known/openid-configuration`);
  t.ok(viaSidecar.headers.get('x-ratelimit-limit'), 'the sidecar admitted the request and set its headers');

  child.kill('SIGINT');
  t.equal(await exited, 0, 'exits 0 after stopping everything');
  t.match(out, /stopping/);
  for (const p of [ports.CONTROL_PLANE_HTTP_PORT, ports.NOTIFIER_PORT, ports.LIMITER_PORT, ports.CONSOLE_PORT]) {
    await t.rejects(fetch(`http://127.0.0.1:${p}/healthz`), `port ${p} is closed`);
  }
});

t.test('a bad environment variable stops npm start with one line naming it', async (t) => {
  const child = spawn(PLAIN_NODE, plainNodeArgs([resolve(PROJECT_ROOT, 'dist/bin/start.js')]), {
    env: { ...process.env, DATABASE_URL: testDatabaseUrl(), START_READY_TIMEOUT: 'soon' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((res) => child.on('exit', res));
  t.not(code, 0);
  t.equal(err.trim().split('\n').length, 1, 'one line');
  t.match(err, /START_READY_TIMEOUT/);
});
