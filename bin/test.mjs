#!/usr/bin/env node
/**
 * `npm test`: type-check and format check, then the test files (the lint beside the pure tier),
 * ending with the line `N passed, N failed`.
 *
 * Each test file is its own process, three at a time (bin/test-files.mjs): the JavaScript the
 * type-check just wrote to dist/, run by a plain `node`, writing TAP through tap's API; its output
 * is read here, nested under the file's name as tap's runner would print it.
 *
 * Tiers. A test file whose FIRST line is exactly `// @tier: pure` needs none of the run's servers;
 * every other file (including any file without a marker) needs them. The marker is opt-in because
 * a forgotten marker then only costs speed, never correctness. The pure files run first, in their
 * own pass, before any server starts, with DATABASE_URL, REDIS_URL and TEST_REDIS_CLUSTER_NODES
 * unset and TEST_TIER=pure (test/harness/env.ts throws a message naming the marker if such a file
 * asks for a server). Then, only if a selected file needs them, the servers start and the other
 * files run. Rules and helpers: test/harness/tiers.ts.
 *
 * The servers are started once per run (test/harness/global.ts): DATABASE_URL and REDIS_URL when
 * set, else an embedded PostgreSQL and a spawned redis-server; plus a 3-node Redis Cluster. Their
 * addresses reach every server-tier test process through the environment.
 *
 * Alone. A file marked `// @alone` (first line, or second after the pure marker: a test that loads
 * the CPU on purpose) runs after all the others, one file at a time (--jobs=1), in the tier
 * `alone`: with the servers when it is not pure.
 *
 * Timing. The run ends with a table (also in .tap/timing.txt, and every file in .tap/timing.json):
 * the wall time of each step and tier, per tier the number of test files and of assertions, the
 * CPU of its test processes (each writes its own and its reaped children's at exit:
 * bin/test-cpu.mjs), of PostgreSQL and how busy the machine was, and its slowest files with
 * their time, CPU and assertions, and the files that took the most CPU; then the `N passed, N
 * failed` line. `.ci/run` runs `npm test`, so every CI log shows it.
 *
 * Temp dir. The run makes one in memory when the machine has a tmpfs with room
 * (test/harness/throwaway-dir.ts), which every server and test process gets as TMPDIR.
 *
 * Arguments: files and folders select test files (a folder: its `*.test.ts`, recursively; none:
 * all of test/); the options are tap's names for what they do: --jobs=N, --timeout=SECONDS (per
 * file), --grep=PATTERN, --only, --bail (bin/test-files.mjs `parseOptions`; any other is an
 * error). `npm test -- test/limiter` runs one folder, `npm test -- test/shared/http.test.ts` one
 * file (pure: no server starts).
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, createWriteStream, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { statCpu } from './proc-cpu.mjs';
import { countTap, nest, parseOptions, runFiles } from './test-files.mjs';

/**
 * Test files run at a time in the pure and servers tiers (`--jobs=N`): one more than the two cores
 * CI gives. A file spends part of its time waiting (on PostgreSQL, on a service it started, on a
 * timer), and with two at a time the machine was 74–85 % busy; with three, 93–95 %, and the run
 * took 383 s instead of 431 (bench/RESULTS.md, "Session 6").
 */
const JOBS = 3;
/** Each file's timeout in seconds (`--timeout=N`): tap's root test in the file fails after it and prints what still ran. */
const TIMEOUT_S = 240;

const root = resolve(fileURLToPath(import.meta.url), '../..');
process.chdir(root);
const bin = (name) => resolve(root, 'node_modules/.bin', name);

let passed = 0;
let failed = 0;
let exitCode = 0;
const started = performance.now();
/** Wall time of each step and tier, in order: `{name, ms}`. */
const phases = [];
/** Per tier: `{tier, ms, files: [{file, ms, assertions, ok}], assertions}`. */
const tierRuns = [];
const finish = (code) => {
  printTiming();
  console.log(`\n${passed} passed, ${failed} failed`);
  process.exit(code ?? (failed > 0 ? 1 : 0));
};

/**
 * Runs one check as a child process, its output (stdout and stderr, in arrival order) kept to be
 * printed after it, so that checks running side by side do not interleave their lines.
 */
function check(name, cmd, args) {
  const t0 = performance.now();
  return new Promise((res) => {
    const chunks = [];
    const child = spawn(cmd, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    child.on('error', (err) => chunks.push(Buffer.from(`${err.message}\n`)));
    child.on('close', (code, signal) => res({ name, code, signal, out: Buffer.concat(chunks), ms: performance.now() - t0 }));
  });
}

// A type error or a format error fails the run before any test starts: there is no point testing
// code that does not compile, and the summary line still tells CI what happened. A lint error fails
// the run too, but the tests do not wait for eslint: type-aware linting is the longest check (about
// 50 s of one core from a clean clone), and once tsc and prettier are done it would run alone on
// one of the two cores. It goes on beside the pure tier instead, and is joined (its output
// printed, its result counted) before the servers tier; a lint error ends the run there, failed.
// The checks start side by side (each is one thread, and none reads what another writes: eslint
// type-checks from the sources, not from dist/). eslint and prettier keep a cache under .tap/
// (ignored by git): a second run re-reads only the files that changed, which is what makes
// `npm test -- one/file.test.ts` quick while working. CI starts from a clean clone, so it always
// lints everything.
/**
 * Whether tap's Test class (what `import t from 'tap'` loads in every test process) is built
 * without the plugins .taprc leaves out. npm installs it built with all of tap's default plugins;
 * tap's own runner rebuilds it when its plugin list differs, and this runner (bin/test-files.mjs)
 * does the same with `tap build` beside the type-check.
 */
function tapBuilt() {
  try {
    const built = readFileSync(resolve(root, 'node_modules/@tapjs/test/test-built/dist/esm/index.js'), 'utf8');
    const signature = /export const signature = `([^`]*)`/.exec(built)?.[1]?.split('\n') ?? [];
    const left = [...readFileSync(resolve(root, '.taprc'), 'utf8').matchAll(/^\s*-\s*"!([^"]+)"/gm)].map((m) => m[1]);
    return left.every((p) => !signature.includes(p));
  } catch {
    return false;
  }
}
const checksStarted = performance.now();
const linting = check('lint (eslint)', bin('eslint'), ['--cache', '--cache-location', '.tap/eslint-cache', '.']);
/** Prints a check's output and counts its result; false when it failed. */
function report(r) {
  process.stdout.write(`# ${r.name}\n`);
  process.stdout.write(r.out);
  phases.push({ name: r.name, ms: r.ms });
  if (r.code === 0) {
    passed += 1;
    return true;
  }
  failed += 1;
  console.log(`not ok - ${r.name} (exit ${r.code ?? r.signal})`);
  return false;
}
/** Waits for the lint, reports it; false on a lint error. */
async function joinLint() {
  const t0 = performance.now();
  const ok = report(await linting);
  phases.push({ name: 'then waited for lint', ms: performance.now() - t0 });
  return ok;
}
{
  // Not a check of ours (it is not counted as passed), but the tests cannot run without it.
  const tapBuild = tapBuilt() ? undefined : check("tap build (tap's Test class with .taprc's plugins)", bin('tap'), ['build']);
  const results = await Promise.all([
    check('type-check (tsc -b)', bin('tsc'), ['-b']),
    check('format (prettier --check)', bin('prettier'), [
      '--check',
      '--cache',
      '--cache-location',
      '.tap/prettier-cache',
      '--log-level',
      'warn',
      '.',
    ]),
  ]);
  let ok = true;
  for (const r of results) ok = report(r) && ok;
  const built = await tapBuild;
  if (built) {
    phases.push({ name: built.name, ms: built.ms });
    if (built.code !== 0) ok = report(built) && ok;
  }
  phases.push({ name: 'type-check and format side by side (lint beside them)', ms: performance.now() - checksStarted });
  if (!ok) {
    await joinLint();
    finish(1);
  }
}

const tiers = await import(resolve(root, 'dist/test/harness/tiers.js'));
const { options, files } = tiers.selectTests(process.argv.slice(2));
let runOptions;
try {
  runOptions = parseOptions(options, { jobs: JOBS, timeout: TIMEOUT_S });
} catch (err) {
  console.log(`not ok - ${err.message}`);
  failed += 1;
  finish(1);
}
const { pure, servers: serverFiles, alone } = tiers.splitByTier(files);
const aloneCount = alone.pure.length + alone.servers.length;
console.log(`# ${pure.length} pure test files, ${serverFiles.length} needing servers, ${aloneCount} alone (last, one at a time)`);

// The run's temp dir, in memory when the machine has a tmpfs with room (test/harness/throwaway-dir.ts
// says why); every test process and server gets it as TMPDIR, and it goes at the end of the run.
const { throwawayDir } = await import(resolve(root, 'dist/test/harness/throwaway-dir.js'));
const runTmp = mkdtempSync(join(throwawayDir(), 'edge-test-run-'));
// As /tmp is: run as root, the embedded PostgreSQL runs as the postgres user and must reach its data.
chmodSync(runTmp, 0o1777);
process.env.TMPDIR = runTmp;
process.on('exit', () => rmSync(runTmp, { recursive: true, force: true, maxRetries: 3 }));

mkdirSync(resolve(root, '.tap'), { recursive: true });
const raw = createWriteStream(resolve(root, '.tap/last-run.tap'));
const stderrLog = createWriteStream(resolve(root, '.tap/last-run.stderr'));
const baseEnv = { ...process.env, NODE_ENV: 'test', LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' };

// The servers start while the pure tier runs (its processes never see their addresses): their
// start is mostly waiting on initdb and on the cluster's nodes, time the pure files can use.
let serversStarting;
if (serverFiles.length > 0 || alone.servers.length > 0) {
  const { setupGlobal } = await import(resolve(root, 'dist/test/harness/global.js'));
  const t0 = performance.now();
  serversStarting = setupGlobal().then(
    (servers) => {
      phases.push({ name: 'servers start (beside the pure tier)', ms: performance.now() - t0 });
      return { servers };
    },
    (err) => ({ err }),
  );
  // Ctrl-C: the servers share our process group and get the signal too; remove their temp dirs.
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      serversStarting
        .then(({ servers }) => servers?.teardown())
        .catch(() => undefined)
        .finally(() => process.exit(130));
    });
  }
}

if (pure.length > 0) {
  process.stdout.write('# tier: pure (no servers)\n');
  await runTier('pure', pure, tiers.pureEnv(baseEnv), runOptions.jobs);
}
if (!(await joinLint())) {
  // A lint error: no further tier runs.
  raw.end();
  await serversStarting?.then(({ servers }) => servers?.teardown()).catch(() => undefined);
  finish(1);
}

if (serversStarting) {
  const { servers, err } = await serversStarting;
  if (err !== undefined) {
    console.log(`not ok - test servers could not start: ${err instanceof Error ? err.message : String(err)}`);
    failed += 1;
    raw.end();
    finish(1);
  }
  if (serverFiles.length > 0) {
    process.stdout.write('# tier: servers\n');
    await runTier('servers', serverFiles, { ...baseEnv, ...servers.env }, runOptions.jobs);
  }
  await runAlone({ ...baseEnv, ...servers.env });
  await servers.teardown().catch((err) => console.log(`# teardown: ${err instanceof Error ? err.message : String(err)}`));
} else await runAlone(null);
raw.end();
stderrLog.end();
if (files.length === 0) {
  console.log('not ok - no test files selected');
  failed += 1;
}

/**
 * The alone tier: its pure files without the servers' addresses, then (given `serverEnv`, the
 * servers being up) the others with them; each pass one file at a time.
 */
async function runAlone(serverEnv) {
  if (aloneCount === 0) return;
  process.stdout.write('# tier: alone (one file at a time)\n');
  const t0 = performance.now();
  const runs = [];
  if (alone.pure.length > 0) runs.push(await runTier('alone', alone.pure, tiers.pureEnv(baseEnv), 1, false));
  if (alone.servers.length > 0 && serverEnv) runs.push(await runTier('alone', alone.servers, serverEnv, 1, false));
  const merged = {
    tier: 'alone',
    ms: performance.now() - t0,
    files: runs.flatMap((r) => r.files),
    assertions: runs.reduce((n, r) => n + r.assertions, 0),
    cpu: runs.reduce((n, r) => n + r.cpu, 0),
    postgresCpu: runs.reduce((n, r) => n + r.postgresCpu, 0),
    busy: runs.reduce((n, r) => n + r.busy, 0),
    capacity: runs.reduce((n, r) => n + r.capacity, 0),
  };
  tierRuns.push(merged);
  phases.push({ name: 'tier alone', ms: merged.ms });
}

/**
 * Runs `testFiles` (bin/test-files.mjs: each its own process, `jobs` at a time) with `env`,
 * prints file-level and test-level lines and every failure with its diagnostics (the full TAP
 * stream goes to .tap/last-run.tap, and each file's stderr to .tap/last-run.stderr; a failed
 * file's stderr is printed too), and adds the results to the totals. Returns the pass's timing
 * (each file's process time, its test's own time, CPU and assertions: tap's test points,
 * bin/test-files.mjs `countTap`), which it also records unless `record` is false.
 */
async function runTier(tier, testFiles, env, jobs, record = true) {
  const t0 = performance.now();
  const machine0 = machineCpu();
  const pg0 = postgresCpu();
  // Each test process writes its CPU here at exit (bin/test-cpu.mjs); emptied per pass.
  const cpuDir = resolve(root, '.tap/cpu');
  rmSync(cpuDir, { recursive: true, force: true });
  mkdirSync(cpuDir, { recursive: true });
  const timing = { tier, ms: 0, files: [], assertions: 0, cpu: 0, postgresCpu: 0, busy: 0, capacity: 0 };
  raw.write('TAP version 14\n');
  await runFiles(testFiles, { ...env, TEST_CPU_DIR: cpuDir }, { ...runOptions, jobs }, (result, n) => {
    const text = nest(result, n);
    raw.write(text);
    stderrLog.write(`# ${result.file}\n${result.err}`);
    const counts = countTap(text);
    for (const line of counts.print) console.log(line);
    const testMs = Number(/^# time=([\d.]+)ms$/m.exec(result.out)?.[1] ?? result.ms);
    timing.files.push({ file: result.file, ms: result.ms, testMs, assertions: counts.assertions, ok: counts.fileOk });
    timing.assertions += counts.assertions;
    passed += counts.pass;
    failed += counts.fail;
    if (!counts.fileOk && counts.fail === 0) failed += 1; // the process failed outside any assertion
    if (!counts.fileOk) {
      exitCode = 1;
      if (result.err.trim() !== '') process.stdout.write(`# stderr of ${result.file}:\n${result.err.replace(/^/gm, '#   ')}\n`);
    }
  });
  raw.write(`1..${timing.files.length}\n`);
  timing.ms = performance.now() - t0;
  const cpu = cpuTimes(cpuDir);
  for (const f of timing.files) {
    const c = cpu.get(f.file);
    if (c) Object.assign(f, { cpuOwn: c.own, cpuChildren: c.children });
  }
  timing.cpu = [...cpu.values()].reduce((n, c) => n + c.own + c.children, 0);
  timing.postgresCpu = postgresCpu() - pg0;
  const machine1 = machineCpu();
  timing.busy = machine1.busy - machine0.busy;
  timing.capacity = machine1.total - machine0.total;
  if (record) {
    tierRuns.push(timing);
    phases.push({ name: `tier ${tier}`, ms: timing.ms });
  }
  return timing;
}

/** Seconds of CPU used by every process named `postgres` (live, and the backends each reaped), 0 off Linux. */
function postgresCpu() {
  let total = 0;
  let names = [];
  try {
    names = readdirSync('/proc').filter((e) => /^[0-9]+$/.test(e));
  } catch {
    return 0;
  }
  for (const e of names) {
    try {
      if (readFileSync(`/proc/${e}/comm`, 'utf8').trim() !== 'postgres') continue;
      // A backend's time reaches its postmaster's reaped children's when it exits; a live one counts its own.
      const c = statCpu(readFileSync(`/proc/${e}/stat`, 'utf8'));
      total += c.own + c.children;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** The machine's CPU seconds so far, busy (not idle nor waiting for I/O) and in all, from /proc/stat; zeros off Linux. */
function machineCpu() {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0) / 100;
    return { total, busy: total - (f[3] + f[4]) / 100 };
  } catch {
    return { total: 0, busy: 0 };
  }
}

/** Each test file's CPU seconds (`{own, children}`), as its process wrote them at exit (bin/test-loader.mjs). */
function cpuTimes(dir) {
  const out = new Map();
  let names = [];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const n of names) {
    try {
      const c = JSON.parse(readFileSync(resolve(dir, n), 'utf8'));
      out.set(c.file, { own: c.own, children: c.children });
    } catch {
      // unreadable: that file shows no CPU
    }
  }
  return out;
}

/**
 * The timing table: where the run's time went. Printed before the summary line (so that line
 * stays last), and kept in .tap/timing.txt; every file's figures in .tap/timing.json.
 */
function printTiming() {
  const TOP = 25;
  const s = (ms) => (ms / 1000).toFixed(1).padStart(7);
  const lines = ['', '# timing (wall clock, seconds)'];
  lines.push(
    `#  ${phases.map((p) => `${p.name} ${(p.ms / 1000).toFixed(1)}`).join(', ')}; total ${((performance.now() - started) / 1000).toFixed(1)}`,
  );
  for (const r of tierRuns) {
    lines.push(
      `# tier ${r.tier}: ${r.files.length} test files, ${r.assertions} assertions, ${(r.ms / 1000).toFixed(1)} s; CPU-s: ${r.cpu.toFixed(1)} test processes and their children, ${r.postgresCpu.toFixed(1)} PostgreSQL, machine ${r.capacity > 0 ? Math.round((100 * r.busy) / r.capacity) : '?'} % busy`,
    );
    const slow = [...r.files].sort((a, b) => b.ms - a.ms).slice(0, TOP);
    const cpu = (v) => (v === undefined ? '      –' : v.toFixed(1).padStart(7));
    if (slow.length > 0)
      lines.push(
        `#  ${'process'.padStart(7)} ${'in test'.padStart(7)} ${'CPU'.padStart(7)} ${'+ kids'.padStart(7)} ${'asserts'.padStart(7)}  slowest ${slow.length} file${slow.length === 1 ? '' : 's'} (seconds: the process from spawn to exit; the test's own time; CPU of the process, and of the children it reaped)`,
      );
    for (const f of slow)
      lines.push(
        `#  ${s(f.ms)} ${s(f.testMs)} ${cpu(f.cpuOwn)} ${cpu(f.cpuChildren)} ${String(f.assertions).padStart(7)}  ${f.file}${f.ok ? '' : '  (failed)'}`,
      );
    const hungry = [...r.files].filter((f) => f.cpuOwn !== undefined).sort((a, b) => b.cpuOwn + b.cpuChildren - (a.cpuOwn + a.cpuChildren));
    if (hungry.length > 0)
      lines.push(
        `#  most CPU: ${hungry
          .slice(0, 10)
          .map((f) => `${f.file} ${(f.cpuOwn + f.cpuChildren).toFixed(1)}`)
          .join(', ')}`,
      );
  }
  const all = tierRuns.flatMap((r) => r.files);
  lines.push(`# all tiers: ${all.length} test files, ${tierRuns.reduce((n, r) => n + r.assertions, 0)} assertions`);
  console.log(lines.join('\n'));
  try {
    mkdirSync(resolve(root, '.tap'), { recursive: true });
    writeFileSync(resolve(root, '.tap/timing.txt'), lines.slice(1).join('\n') + '\n');
    writeFileSync(resolve(root, '.tap/timing.json'), JSON.stringify({ phases, tiers: tierRuns }, null, 1) + '\n');
  } catch {
    // the table was printed; the files are a convenience
  }
}
finish(exitCode === 0 && failed === 0 ? 0 : 1);
