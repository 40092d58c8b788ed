#!/usr/bin/env node
/**
 * `npm test`: type-check, lint, format check, then the tap suite, ending with the line
 * `N passed, N failed`.
 *
 * Tiers. A test file whose FIRST line is exactly `// @tier: pure` needs none of the run's servers;
 * every other file (including any file without a marker) needs them. The marker is opt-in because
 * a forgotten marker then only costs speed, never correctness. The pure files run first, in their
 * own tap pass, before any server starts, with DATABASE_URL, REDIS_URL and TEST_REDIS_CLUSTER_NODES
 * unset and TEST_TIER=pure (test/harness/env.ts throws a message naming the marker if such a file
 * asks for a server). Then, only if a selected file needs them, the servers start and the other
 * files run. Rules and helpers: test/harness/tiers.ts.
 *
 * The servers are started once per run (test/harness/global.ts): DATABASE_URL and REDIS_URL when
 * set, else an embedded PostgreSQL and a spawned redis-server; plus a 3-node Redis Cluster. Their
 * addresses reach every server-tier test process through the environment.
 *
 * Arguments: files and folders select test files (a folder: its `*.test.ts`, recursively; none:
 * all of test/); anything else is passed to tap. `npm test -- test/limiter` runs one folder,
 * `npm test -- test/shared/http.test.ts` one file (pure: no server starts).
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
let exitCode = 0;
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

const tiers = await import(resolve(root, 'dist/test/harness/tiers.js'));
const { options, files } = tiers.selectTests(process.argv.slice(2));
const { pure, servers: serverFiles } = tiers.splitByTier(files);
console.log(`# ${pure.length} pure test files, ${serverFiles.length} needing servers`);

mkdirSync(resolve(root, '.tap'), { recursive: true });
const raw = createWriteStream(resolve(root, '.tap/last-run.tap'));
const baseEnv = { ...process.env, NODE_ENV: 'test', LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' };

if (pure.length > 0) {
  process.stdout.write('# tier: pure (no servers)\n');
  await runTap(pure, tiers.pureEnv(baseEnv));
}

if (serverFiles.length > 0) {
  const { setupGlobal } = await import(resolve(root, 'dist/test/harness/global.js'));
  let servers;
  try {
    servers = await setupGlobal();
  } catch (err) {
    console.log(`not ok - test servers could not start: ${err instanceof Error ? err.message : String(err)}`);
    failed += 1;
    raw.end();
    finish(1);
  }
  // Ctrl-C: the servers share our process group and get the signal too; remove their temp dirs.
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      servers.teardown().finally(() => process.exit(130));
    });
  }
  process.stdout.write('# tier: servers\n');
  await runTap(serverFiles, { ...baseEnv, ...servers.env });
  await servers.teardown().catch((err) => console.log(`# teardown: ${err instanceof Error ? err.message : String(err)}`));
}
raw.end();
if (files.length === 0) {
  console.log('not ok - no test files selected');
  failed += 1;
}

/**
 * Runs tap over `testFiles` with `env`, prints file-level and test-level lines and every failure
 * with its diagnostics (the full TAP stream goes to .tap/last-run.tap), and adds the pass's
 * results to the totals.
 */
async function runTap(testFiles, env) {
  const tap = spawn(bin('tap'), ['-R', 'tap', ...options, ...testFiles], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
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
        // Skipped and todo tests are neither passes nor failures.
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
  if (summary) {
    passed += summary.pass;
    failed += summary.total - summary.pass - summary.notRun;
    if (summary.notRun > 0) console.log(`# ${summary.notRun} skipped or todo`);
  }
  if (code !== 0 && (!summary || summary.total === summary.pass + summary.notRun)) failed += 1; // tap failed outside any test
  if (code !== 0) exitCode = 1;
}
finish(exitCode === 0 && failed === 0 ? 0 : 1);
