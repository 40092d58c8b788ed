/**
 * Runs test files as processes, `jobs` at a time, for `npm test` (bin/test.mjs): each file is its
 * own `node` process writing TAP (tap's API, `import t from 'tap'`), and its output comes back as
 * one subtest named for the file, indented as tap's runner would print it, when the file is done.
 *
 * Why not tap's runner: it starts every test process with tap's processinfo hook (a module-loading
 * hook on a thread of its own, told of every module the process loads, and put in NODE_OPTIONS so
 * every process the test starts loads it too) for coverage and `--changed`, which the suite does
 * not use; and the file ran from its TypeScript source through a second loader. Here a test
 * process is `node --enable-source-maps --import=bin/test-cpu.mjs dist/test/…/x.test.js`: the
 * JavaScript `tsc -b` (the runner's first step) just wrote, with nothing hooked into its loading.
 * The two hooks cost a short test file about half its CPU (bench/RESULTS.md, "Session 6").
 *
 * What it keeps of tap's runner: `TAP_TIMEOUT` (each file's root test times itself out and prints
 * what was still running; the process is killed `KILL_AFTER_MS` later if it has not exited, later
 * still when the file's `t.setTimeout` asked for more), `--bail` (no file starts after one
 * failed), `--grep` and `--only` (tap's own variables). Tested by
 * test/harness-selftest/runner.test.ts.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '../..');
const cpuHook = pathToFileURL(resolve(root, 'bin/test-cpu.mjs')).href;
const loader = pathToFileURL(resolve(root, 'bin/test-loader.mjs')).href;

/** How long after its own timeout a file's process is killed if it has not exited. */
export const KILL_AFTER_MS = 30_000;

/** How long after a file's process exited its stdout and stderr are read before they are closed. */
const STREAMS_AFTER_EXIT_MS = 1_000;

/**
 * The options `npm test` takes besides files (tap's names for them). Returns the parsed values, or
 * throws an Error naming the option it does not know.
 */
export function parseOptions(args, defaults) {
  const out = { ...defaults, grep: [], only: false, bail: false };
  for (let i = 0; i < args.length; i += 1) {
    const a = args[i];
    const eq = a.indexOf('=');
    const [name, inline] = a.startsWith('-') && eq > 0 ? [a.slice(0, eq), a.slice(eq + 1)] : [a, undefined];
    const value = () => {
      const v = inline ?? args[++i];
      if (v === undefined) throw new Error(`${name} needs a value`);
      return v;
    };
    const count = (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new Error(`${name} takes a whole number of at least 1, not ${JSON.stringify(v)}`);
      return n;
    };
    if (name === '--jobs' || name === '-j') out.jobs = count(value());
    else if (name === '--timeout' || name === '-t') out.timeout = count(value());
    else if (name === '--grep' || name === '-g') out.grep.push(value());
    else if (name === '--only' || name === '-O') out.only = true;
    else if (name === '--bail' || name === '-b') out.bail = true;
    else
      throw new Error(
        `unknown option ${a}: npm test takes test files and folders, --jobs=N, --timeout=SECONDS, --grep=PATTERN, --only and --bail`,
      );
  }
  return out;
}

/** The command line of one test file's process: its compiled copy when there is one, else the source through the loader. */
export function testCommand(file) {
  const rel = relative(root, resolve(root, file));
  const compiled = resolve(root, 'dist', rel.replace(/\.ts$/, '.js'));
  return existsSync(compiled)
    ? ['--enable-source-maps', `--import=${cpuHook}`, compiled]
    : ['--enable-source-maps', `--import=${loader}`, resolve(root, rel)];
}

/**
 * Runs one file; resolves to `{ file, code, signal, timedOut, out, err, ms }` (its stdout and
 * stderr whole, its time from spawn to exit).
 */
function runOne(file, env, opts) {
  const t0 = performance.now();
  const name = relative(root, resolve(root, file));
  return new Promise((res) => {
    const out = [];
    const err = [];
    const child = spawn(process.execPath, testCommand(file), {
      cwd: root,
      env: {
        ...env,
        TEST_FILE: name,
        TAP_TIMEOUT: String(opts.timeout),
        ...(opts.grep.length > 0 ? { TAP_GREP: opts.grep.join('\n') } : {}),
        ...(opts.only ? { TAP_ONLY: '1' } : {}),
        ...(opts.bail ? { TAP_BAIL: '1' } : {}),
      },
      // The IPC channel carries tap's `t.setTimeout(ms)` of the file's root test (a file that
      // knows it runs long says so), which moves the kill below as tap's runner moved its own.
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let timedOut = false;
    let kill;
    const killAfter = (ms) => {
      clearTimeout(kill);
      kill = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, ms + KILL_AFTER_MS);
    };
    killAfter(opts.timeout * 1000);
    child.on('message', (m) => {
      if (typeof m?.setTimeout === 'number') killAfter(m.setTimeout);
    });
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => err.push(c));
    child.on('error', (e) => err.push(Buffer.from(`${e.message}\n`)));
    // A process the test left running may hold the file's stdout or stderr open after it exited:
    // what it wrote by then is the file's output, and the pipes are closed so the run goes on.
    child.on('exit', () => {
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, STREAMS_AFTER_EXIT_MS).unref();
    });
    child.on('close', (code, signal) => {
      clearTimeout(kill);
      res({
        file: name,
        code,
        signal,
        timedOut,
        out: Buffer.concat(out).toString(),
        err: Buffer.concat(err).toString(),
        ms: performance.now() - t0,
      });
    });
  });
}

/**
 * A finished file's TAP as one subtest of the run, numbered `n`: its lines indented under
 * `# Subtest: <file>`, then `ok n - <file> # time=…ms` (`not ok`, with why, when the process
 * failed: a non-zero exit, a signal, the kill after its timeout).
 */
export function nest(result, n) {
  const lines = [`# Subtest: ${result.file}`];
  for (const line of result.out.split('\n')) {
    if (line === '' || line.startsWith('TAP version')) continue;
    lines.push(`    ${line}`);
  }
  const ok = result.code === 0 && result.signal === null && !result.timedOut;
  const time = ` # time=${result.ms.toFixed(3)}ms`;
  lines.push(`${ok ? 'ok' : 'not ok'} ${n} - ${result.file}${time}`);
  if (!ok) {
    const why = result.timedOut
      ? `killed ${KILL_AFTER_MS / 1000} s after its timeout`
      : result.signal !== null
        ? `killed by ${result.signal}`
        : `exit code ${result.code}`;
    lines.push('  ---', `  exitCode: ${result.code}`, `  signal: ${result.signal}`, `  why: ${why}`, '  ...');
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Runs `files`, `opts.jobs` at a time, calling `onDone(result, n)` as each finishes (n counts
 * from 1 in finishing order). Stops starting files after a failure when `opts.bail`.
 */
export async function runFiles(files, env, opts, onDone) {
  const queue = [...files];
  let n = 0;
  let bailed = false;
  const worker = async () => {
    while (queue.length > 0 && !bailed) {
      const r = await runOne(queue.shift(), env, opts);
      n += 1;
      if (opts.bail && (r.code !== 0 || r.signal !== null)) bailed = true;
      onDone(r, n);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.jobs, files.length) }, worker));
}

/**
 * Reads one file's nested TAP (from {@link nest}): its test points as tap counts them (each
 * assertion, and each subtest that holds no assertion of its own: a test that only has to run,
 * or a plan of 0), passed, failed (neither skipped nor todo), whether the file passed, and the
 * lines to print: the file's line, its top-level tests' lines, every failure with its diagnostics.
 */
export function countTap(text) {
  const out = { assertions: 0, pass: 0, fail: 0, fileOk: true, print: [] };
  /** The subtests opened (`# Subtest:`) and not yet closed by their `ok` line: depth, and the points counted before it. */
  const open = [];
  const point = (body) => {
    out.assertions += 1;
    if (!/#\s*(skip|todo)\b/i.test(body)) out[body.startsWith('ok') ? 'pass' : 'fail'] += 1;
  };
  let inFailure = -1;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const depth = line.length - line.trimStart().length;
    const body = line.trimStart();
    if (body.startsWith('# Subtest')) open.push({ depth, before: out.assertions });
    else if (/^(not )?ok \d+/.test(body)) {
      const closed = open.at(-1)?.depth === depth ? open.pop() : undefined;
      if (depth === 0) out.fileOk = body.startsWith('ok');
      else if (!closed || closed.before === out.assertions) point(body);
    }
    if (inFailure >= 0 && depth <= inFailure && !body.startsWith('---') && !body.startsWith('...')) inFailure = -1;
    if (/^not ok /.test(body)) {
      inFailure = depth;
      out.print.push(line);
    } else if (inFailure >= 0 || depth <= 4) {
      if (!/^1\.\.\d+$/.test(body) && !body.startsWith('# time=') && !body.startsWith('# {')) out.print.push(line);
    }
  }
  return out;
}
