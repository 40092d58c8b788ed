// @tier: pure
/**
 * The runner of `npm test` (bin/test-files.mjs): its options, how a file's TAP is nested and
 * counted, and running files as processes: the fixtures in test/fixtures/runner/, compiled by the
 * type-check like every test file.
 */
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../harness/source.js';

interface FileResult {
  file: string;
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  out: string;
  err: string;
  ms: number;
}
interface Options {
  jobs: number;
  timeout: number;
  grep: string[];
  only: boolean;
  bail: boolean;
}
interface Counts {
  assertions: number;
  pass: number;
  fail: number;
  fileOk: boolean;
  print: string[];
}
interface Runner {
  parseOptions(args: string[], defaults: { jobs: number; timeout: number }): Options;
  nest(result: FileResult, n: number): string;
  countTap(text: string): Counts;
  runFiles(
    files: string[],
    env: Record<string, string | undefined>,
    opts: Options,
    onDone: (r: FileResult, n: number) => void,
  ): Promise<void>;
}
const runner = (await import(pathToFileURL(join(ROOT, 'bin/test-files.mjs')).href)) as Runner;
const fixture = (name: string): string => `test/fixtures/runner/${name}.ts`;
const defaults = { jobs: 3, timeout: 240 };

t.test('options: tap names, both spellings; anything else is refused by name', async (t) => {
  t.same(runner.parseOptions([], defaults), { jobs: 3, timeout: 240, grep: [], only: false, bail: false });
  t.same(runner.parseOptions(['--jobs=1', '-t', '60', '--grep', 'a', '-g=b', '--only', '-b'], defaults), {
    jobs: 1,
    timeout: 60,
    grep: ['a', 'b'],
    only: true,
    bail: true,
  });
  t.same(runner.parseOptions(['-j', '4', '--timeout=5', '-O'], defaults), { jobs: 4, timeout: 5, grep: [], only: true, bail: false });
  t.throws(() => runner.parseOptions(['--reporter=dot'], defaults), /unknown option --reporter=dot: npm test takes test files/);
  t.throws(() => runner.parseOptions(['--jobs=0'], defaults), /--jobs takes a whole number of at least 1, not "0"/);
  t.throws(() => runner.parseOptions(['--timeout'], defaults), /--timeout needs a value/);
});

const result = (over: Partial<FileResult>): FileResult => ({
  file: 'test/x.test.ts',
  code: 0,
  signal: null,
  timedOut: false,
  out: 'TAP version 14\n# Subtest: a\n    ok 1 - one\n    ok 2 - two # SKIP why\n    1..2\nok 1 - a # time=1ms\n\n1..1\n# { total: 2, pass: 1 }\n# time=5ms\n',
  err: '',
  ms: 12.5,
  ...over,
});

t.test("a file's TAP is one subtest named for the file, and what a failed process died of", async (t) => {
  const ok = runner.nest(result({}), 7);
  t.equal(
    ok,
    '# Subtest: test/x.test.ts\n    # Subtest: a\n        ok 1 - one\n        ok 2 - two # SKIP why\n        1..2\n    ok 1 - a # time=1ms\n    1..1\n    # { total: 2, pass: 1 }\n    # time=5ms\nok 7 - test/x.test.ts # time=12.500ms\n',
  );
  t.same(
    { ...runner.countTap(ok), print: [] },
    { assertions: 2, pass: 1, fail: 0, fileOk: true, print: [] },
    'a skip is neither passed nor failed',
  );
  t.same(runner.countTap(ok).print, [
    '# Subtest: test/x.test.ts',
    '    # Subtest: a',
    '    ok 1 - a # time=1ms',
    'ok 7 - test/x.test.ts # time=12.500ms',
  ]);

  // As tap counts: a subtest that holds no assertion (a test that only has to run) is a point.
  const empty = runner.nest(
    result({
      out: '# Subtest: a\n    ok 1 - one\n    # Subtest: b\n        1..0\n    ok 2 - b\nok 1 - a\n# Subtest: c\n    1..0\nnot ok 2 - c\n',
    }),
    1,
  );
  t.same(
    { ...runner.countTap(empty), print: [] },
    { assertions: 3, pass: 2, fail: 1, fileOk: true, print: [] },
    'empty subtests are points',
  );

  const crashed = runner.nest(result({ code: 1, out: '' }), 1);
  t.match(
    crashed,
    /^not ok 1 - test\/x\.test\.ts # time=12\.500ms\n {2}---\n {2}exitCode: 1\n {2}signal: null\n {2}why: exit code 1\n {2}\.\.\.\n$/m,
  );
  t.same(
    { ...runner.countTap(crashed), print: [] },
    { assertions: 0, pass: 0, fail: 0, fileOk: false, print: [] },
    'a crash outside any assertion',
  );
  t.match(runner.nest(result({ code: null, signal: 'SIGKILL', timedOut: true }), 1), /why: killed 30 s after its timeout/);
  t.match(runner.nest(result({ code: null, signal: 'SIGTERM' }), 1), /why: killed by SIGTERM/);
});

t.test('files run as processes: results, failures, a held stdout, a longer timeout asked for, CPU', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'runner-'));
  const cpuDir = join(dir, 'cpu');
  const pidFile = join(dir, 'pid');
  t.teardown(() => {
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8')));
    } catch {
      // never started, or gone
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const { mkdirSync } = await import('node:fs');
  mkdirSync(cpuDir);
  const env = { ...process.env, TEST_CPU_DIR: cpuDir, RUNNER_FIXTURE_PID_FILE: pidFile };
  const files = ['passes', 'fails', 'holds-stdout', 'asks-more-time'].map(fixture);
  const done: FileResult[] = [];
  const order: number[] = [];
  await runner.runFiles(files, env, { ...defaults, jobs: 2, timeout: 1, grep: [], only: false, bail: false }, (r, n) => {
    done.push(r);
    order.push(n);
  });
  t.same(order, [1, 2, 3, 4], 'numbered in the order they finished');
  const by = new Map(done.map((r) => [r.file, r]));
  t.same([...by.keys()].sort(), [...files].sort(), 'every file ran once');

  const passes = runner.countTap(runner.nest(by.get(fixture('passes'))!, 1));
  t.same([passes.assertions, passes.pass, passes.fail, passes.fileOk], [3, 2, 0, true]);
  const fails = runner.countTap(runner.nest(by.get(fixture('fails'))!, 2));
  t.same([fails.assertions, fails.pass, fails.fail, fails.fileOk], [2, 1, 1, false]);
  t.ok(
    fails.print.some((l) => l.includes('not ok 2 - one is not two')),
    'the failure is printed',
  );
  t.ok(
    fails.print.some((l) => l.trim() === 'compare: ==='),
    'with its diagnostics',
  );

  const held = by.get(fixture('holds-stdout'))!;
  t.equal(held.code, 0, 'a file whose leftover process holds its output still ends, with its result');
  t.match(held.out, /ok 1 - started/);
  const asked = by.get(fixture('asks-more-time'))!;
  t.same([asked.code, asked.timedOut], [0, false], 't.setTimeout in the file outlasts the runner timeout (1 s)');

  const cpu = readdirSync(cpuDir).map((n) => JSON.parse(readFileSync(join(cpuDir, n), 'utf8')) as { file: string; own: number });
  t.same(cpu.map((c) => c.file).sort(), [...files].sort(), "each process wrote its CPU, under its file's name");
  t.ok(
    cpu.every((c) => c.own > 0),
    'and used some',
  );
});

t.test('--bail: no file starts after one failed', async (t) => {
  const done: string[] = [];
  await runner.runFiles(
    [fixture('fails'), fixture('passes')],
    process.env,
    { ...defaults, jobs: 1, grep: [], only: false, bail: true },
    (r) => done.push(r.file),
  );
  t.same(done, [fixture('fails')]);
});

t.test('--grep reaches the file (tap filters its tests by name)', async (t) => {
  let out = '';
  await runner.runFiles(
    [fixture('passes')],
    process.env,
    { ...defaults, grep: ['nothing matches'], only: false, bail: false },
    (r) => (out = r.out),
  );
  t.match(out, /ok 1 - passes # SKIP filter: \/nothing matches\//);
});
