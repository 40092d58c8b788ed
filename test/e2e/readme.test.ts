// @tier: pure
// @alone
/**
 * The README is executed: every `sh` block of README.md, in order, in one bash shell, against a
 * platform started the way `npm start` starts it (dist/bin/start.js), and each step's output
 * compared with what the README shows under it (the convention: test/harness/readme-walkthrough.ts
 * and README "Tests").
 *
 * Pure tier: it uses none of the suite's servers. It starts its own platform, with its embedded
 * PostgreSQL, in a scratch folder that stands for the checkout: the shell's working directory is
 * that folder (files the README creates, such as ids.ndjson, land there), `DATA_DIR` is its
 * `.data` (so the README's `.data/secrets.env` is this platform's), and every service listens on a
 * free port, never the defaults a running platform may hold (8080–8090, 9090, 50051: uWS listens
 * with SO_REUSEPORT, so a second sidecar on 8080 would silently share it). The README's
 * `localhost:8080`-style addresses are rewritten to those ports, and the shell exports
 * CONTROL_PLANE_GRPC_URL and IDENTITY_URL for the CLIs' defaults. Two shell functions instrument
 * without changing what runs: `curl` adds `-sS` and writes each answer's status to stderr for the
 * comparison; `npm` adds `--prefix <the checkout>`. Any command that exits non-zero fails its step.
 *
 * A step made only of GET requests is run again until its output matches (as a reader re-runs a
 * status call until the message arrived), for at most a minute; anything else runs once. A step
 * that fails does not stop the walk-through (every wrong step is reported in one run), unless the
 * platform did not start.
 */
import t from 'tap';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { PLAIN_NODE, plainNodeArgs, plainProgramArgs } from '../harness/child.js';
import { freePort } from '../harness/ports.js';
import { waitFor } from '../harness/wait.js';
import {
  DEFAULT_PORTS,
  isReadOnly,
  lastJson,
  mismatch,
  parsePattern,
  printsLine,
  substitutePorts,
  walkthrough,
  type Step,
} from '../harness/readme-walkthrough.js';

// One platform start (initdb included) and the whole walk-through, on a machine that may be busy.
t.setTimeout(900_000);

const steps = walkthrough(readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8'));
const work = mkdtempSync(join(tmpdir(), 'readme-'));
// As root the embedded PostgreSQL runs as the postgres user, who must be able to enter the folder.
chmodSync(work, 0o755);
const dataDir = join(work, '.data');

const ports: Record<string, number> = {};
for (const name of Object.values(DEFAULT_PORTS)) ports[name] = await freePort();
const host = '127.0.0.1';
const baseEnv = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? work,
  LANG: 'C.UTF-8',
  DATA_DIR: dataDir,
  // npm would otherwise ask the registry whether it is out of date, on every `npm run`.
  npm_config_update_notifier: 'false',
};

let platform: ChildProcessWithoutNullStreams | undefined;
let platformOut = '';
let failed = false;
/** Set when the walk-through cannot go on (the platform did not start, the shell died). */
let broken = false;

async function startPlatform(): Promise<void> {
  const env: Record<string, string> = { ...baseEnv, LOG_LEVEL: 'warn', CONSOLE_PUBLIC_URL: `http://${host}:${ports.CONSOLE_PORT}` };
  for (const [name, port] of Object.entries(ports)) env[name] = String(port);
  platform = spawn(PLAIN_NODE, plainNodeArgs([join(PROJECT_ROOT, 'dist/bin/start.js')]), { cwd: PROJECT_ROOT, env });
  platform.stdout.on('data', (d: Buffer) => (platformOut += d.toString()));
  platform.stderr.on('data', (d: Buffer) => (platformOut += d.toString()));
  await waitFor(() => platformOut.includes('Ctrl-C stops everything') || platform?.exitCode !== null, {
    timeoutMs: 180_000,
    intervalMs: 200,
    what: 'npm start to be ready',
  });
  if (!platformOut.includes('the platform is ready')) throw new Error(`npm start exited:\n${platformOut}`);
}

// One shell for the whole walk-through: variables and files carry from step to step, as in a
// reader's terminal. It and the platform start without the test process's NODE_OPTIONS
// (test/harness/child.ts), as a reader's would.
const shell = spawn(PLAIN_NODE, plainProgramArgs('bash', ['--noprofile', '--norc']), {
  cwd: work,
  env: {
    ...baseEnv,
    README_ROOT: PROJECT_ROOT,
    CONTROL_PLANE_GRPC_URL: `${host}:${ports.CONTROL_PLANE_GRPC_PORT}`,
    IDENTITY_URL: `http://${host}:${ports.IDENTITY_PORT}`,
  },
});
let shellOut = '';
shell.stdout.on('data', (d: Buffer) => (shellOut += d.toString()));
shell.stderr.on('data', (d: Buffer) => (shellOut += d.toString()));
shell.stdin.write(
  [
    'set -o pipefail',
    `curl() { command curl -sS -w '%{stderr}@@HTTP %{http_code}@@\\n' "$@"; }`,
    `npm() { command npm --prefix "$README_ROOT" "$@"; }`,
    `trap 'echo "@@FAILED exit $? at line $LINENO: $BASH_COMMAND" >&2' ERR`,
    '',
  ].join('\n'),
);

t.teardown(async () => {
  shell.stdin.end();
  if (platform && platform.exitCode === null) {
    const exited = new Promise((res) => platform!.once('exit', res));
    platform.kill('SIGTERM');
    await exited;
  }
  if (!failed) rmSync(work, { recursive: true, force: true });
  else t.comment(`the walk-through's folder is kept for inspection: ${work}`);
});

let n = 0;
/** Runs one step's script in the shell; its stdout, stderr, and whether a command failed. */
async function run(script: string): Promise<{ out: string; err: string; statuses: number[]; failures: string[] }> {
  n += 1;
  const file = join(work, `.step-${n}.sh`);
  writeFileSync(file, script + '\n');
  const done = `@@done ${n}`;
  shell.stdin.write(`{ source ${file}; } > ${file}.out 2> ${file}.err < /dev/null; echo "${done}"\n`);
  await waitFor(() => shellOut.includes(done) || shell.exitCode !== null, { timeoutMs: 300_000, intervalMs: 50, what: `step ${n}` });
  if (shell.exitCode !== null) throw new Error(`the shell exited: ${shellOut}`);
  const out = readFileSync(`${file}.out`, 'utf8');
  const err = readFileSync(`${file}.err`, 'utf8');
  const statuses = [...err.matchAll(/@@HTTP (\d+)@@/g)].map((m) => Number(m[1]));
  const failures = [...err.matchAll(/@@FAILED (.*)/g)].map((m) => m[1]!);
  return { out, err: err.replace(/@@HTTP \d+@@\n?/g, ''), statuses, failures };
}

/** What is wrong with a run of `step`, or undefined. */
function verdict(step: Step, r: Awaited<ReturnType<typeof run>>): string | undefined {
  if (r.failures.length > 0) return `a command failed: ${r.failures.join('; ')}\nstderr: ${r.err}`;
  const e = step.expect;
  if (!e) return undefined;
  if (e.status !== undefined) {
    const last = r.statuses.at(-1);
    if (last !== e.status) return `status ${last ?? '(no HTTP call)'}, the README shows ${e.status}`;
  }
  if (e.json !== undefined) {
    const actual = lastJson(r.out);
    if (actual === undefined) return `printed no JSON:\n${r.out}`;
    const m = mismatch(parsePattern(e.json), actual);
    if (m) return m;
  }
  if (e.line !== undefined && !printsLine(e.line, r.out)) return `no line "${e.line}" in:\n${r.out}`;
  return undefined;
}

t.ok(
  steps.some((s) => s.setup.includes('start')),
  'the walk-through starts the platform with npm start',
);
t.ok(
  steps.filter((s) => s.expect).length >= 20,
  `the walk-through shows what its steps print (${steps.filter((s) => s.expect).length} steps)`,
);

for (const step of steps) {
  const first = step.script.split('\n').find((l) => l.trim() !== '' && !l.trim().startsWith('#')) ?? step.setup.join(', ');
  const name = `README.md:${step.at}: ${first.trim().slice(0, 100)}`;
  if (broken) break;
  await t.test(name, async (t) => {
    try {
      if (step.setup.includes('start') && !platform) await startPlatform();
      if (step.script.trim() === '') return t.pass('set-up');
      const script = substitutePorts(step.script, ports);
      const retry = step.expect !== undefined && isReadOnly(step.script);
      // A read-only step is run again until it prints what the README shows (a status that settles
      // within a second or two); any other step runs once.
      let r = await run(script);
      let wrong = verdict(step, r);
      if (wrong && retry) {
        await waitFor(
          async () => {
            r = await run(script);
            wrong = verdict(step, r);
            return !wrong;
          },
          { timeoutMs: 60_000, intervalMs: 250, what: `README.md:${step.at} to print what it shows` },
        ).catch(() => undefined); // the last answer's difference is reported below
      }
      if (!wrong) return t.pass(step.expect ? `prints what README.md:${step.expect.at} shows` : 'runs');
      failed = true;
      return t.fail(wrong, { script, stdout: r.out.slice(-4000), platform: platformOut.slice(-4000) });
    } catch (err) {
      failed = true;
      broken = true;
      t.fail(err instanceof Error ? err.message : String(err), { platform: platformOut.slice(-4000) });
    }
  });
}
