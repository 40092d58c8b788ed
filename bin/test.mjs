#!/usr/bin/env node
/**
 * `npm test`: type-check, lint, format check, then the tap suite against real servers, ending with
 * the line `N passed, N failed`.
 *
 * The servers are started once per run (test/harness/global.ts): DATABASE_URL and REDIS_URL when
 * set, else an embedded PostgreSQL and a spawned redis-server; plus a 3-node Redis Cluster. Their
 * addresses reach every test process through the environment.
 *
 * Arguments are passed to tap, e.g. `npm test -- test/limiter` runs one folder.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, createWriteStream } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '../..');
process.chdir(root);
const bin = (name) => resolve(root, 'node_modules/.bin', name);

let passed = 0;
let failed = 0;
const finish = (code) => {
  console.log(`\n${passed} passed, ${failed} failed`);
  process.exit(code ?? (failed > 0 ? 1 : 0));
};

function step(name, cmd, args) {
  process.stdout.write(`# ${name}\n`);
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: root });
  if (r.status === 0) {
    passed += 1;
    return true;
  }
  failed += 1;
  console.log(`not ok - ${name} (exit ${r.status ?? r.signal})`);
  return false;
}

// A type error or lint error fails the run before any test starts: there is no point testing code
// that does not compile, and the summary line still tells CI what happened.
if (!step('type-check (tsc -b)', bin('tsc'), ['-b'])) finish(1);
if (!step('lint (eslint)', bin('eslint'), ['.'])) finish(1);
if (!step('format (prettier --check)', bin('prettier'), ['--check', '--log-level', 'warn', '.'])) finish(1);

const { setupGlobal } = await import(resolve(root, 'dist/test/harness/global.js'));
let servers;
try {
  servers = await setupGlobal();
} catch (err) {
  console.log(`not ok - test servers could not start: ${err instanceof Error ? err.message : String(err)}`);
  failed += 1;
  finish(1);
}

// Ctrl-C: the servers share our process group and get the signal too; remove their temp dirs.
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    servers.teardown().finally(() => process.exit(130));
  });
}

mkdirSync(resolve(root, '.tap'), { recursive: true });
const raw = createWriteStream(resolve(root, '.tap/last-run.tap'));
const args = process.argv.slice(2);
const tap = spawn(bin('tap'), ['-R', 'tap', ...args], {
  cwd: root,
  env: { ...process.env, ...servers.env, NODE_ENV: 'test', LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' },
  stdio: ['ignore', 'pipe', 'inherit'],
});

// Print file-level and test-level lines, and every failure with its diagnostics; the full TAP
// stream goes to .tap/last-run.tap.
let buf = '';
let inFailure = -1;
let summary = null;
tap.stdout.on('data', (chunk) => {
  raw.write(chunk);
  buf += chunk.toString();
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    const depth = line.length - line.trimStart().length;
    const body = line.trimStart();
    const m = /^# \{ total: (\d+), pass: (\d+)/.exec(line);
    if (m) {
      // Skipped and todo tests are neither passes nor failures (a folder run lists helper files as skipped).
      const n = (key) => Number(new RegExp(`${key}: (\\d+)`).exec(line)?.[1] ?? 0);
      summary = { total: Number(m[1]), pass: Number(m[2]), notRun: n('skip') + n('todo') };
    }
    if (inFailure >= 0 && depth <= inFailure && !body.startsWith('---') && !body.startsWith('...') && body !== '') inFailure = -1;
    if (/^not ok /.test(body)) {
      inFailure = depth;
      console.log(line);
    } else if (inFailure >= 0 || depth <= 4) {
      if (body !== '' && !/^1\.\.\d+$/.test(body) && !body.startsWith('# time=')) console.log(line);
    }
  }
});

const code = await new Promise((res) => tap.on('close', (c) => res(c ?? 1)));
raw.end();
await servers.teardown().catch((err) => console.log(`# teardown: ${err instanceof Error ? err.message : String(err)}`));
if (summary) {
  passed += summary.pass;
  failed += summary.total - summary.pass - summary.notRun;
  if (summary.notRun > 0) console.log(`# ${summary.notRun} skipped or todo`);
}
if (code !== 0 && (!summary || summary.total === summary.pass + summary.notRun)) failed += 1; // tap failed outside any test
finish(code === 0 && failed === 0 ? 0 : 1);
