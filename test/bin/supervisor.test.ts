// @tier: pure
import t from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { Supervisor } from '../../bin/supervisor.js';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';
import { waitFor } from '../harness/wait.js';
import { sourceDir } from '../harness/source.js';

// Every child starts through `env -u NODE_OPTIONS` (test/harness/child.ts), which execs node (same
// pid, so the supervisor's signals reach it), without the test process's NODE_OPTIONS.
const child = resolve(sourceDir(import.meta.url), '../fixtures/supervisor/crashy.mjs');
// A service-like child: shared/lifecycle.ts's watchParent, as shared/main.ts wires it (built).
const CHILD_JS = resolve(PROJECT_ROOT, 'dist/test/fixtures/lifecycle/child.js');
const SUPERVISOR_JS = pathToFileURL(resolve(PROJECT_ROOT, 'dist/bin/supervisor.js')).href;

/** Running, not a zombie (an exited process whose parent has not read its status). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

t.test('a child that crashes is restarted with growing backoff until it stays up', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sup-'));
  const counter = join(dir, 'count');
  const sup = new Supervisor({ initialBackoffMs: 20, maxBackoffMs: 1000, stdio: 'pipe' });
  t.teardown(() => sup.stop());
  const delays: number[] = [];
  sup.on('restart', (_name, delay) => delays.push(delay));
  sup.add({ name: 'crashy', command: PLAIN_NODE, args: plainNodeArgs([child, counter, '3']) });
  // Four node processes start one after another: generous under a loaded CI machine.
  await waitFor(() => readFileSync(counter, 'utf8') === '4' && sup.pid('crashy') !== undefined, {
    timeoutMs: 30_000,
    what: 'the fourth start',
  });
  t.equal(sup.restarts('crashy'), 3, 'restarted after each of the three crashes');
  t.same(delays, [20, 40, 80], 'backoff doubles');
});

t.test('a child exiting with a give-up code is not restarted', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sup-'));
  const counter = join(dir, 'count');
  const sup = new Supervisor({ initialBackoffMs: 10, giveUpCodes: [3], stdio: 'pipe' });
  t.teardown(() => sup.stop());
  const gaveUp = new Promise<[string, number]>((res) => sup.on('giveUp', (name, code) => res([name, code])));
  const restarts: string[] = [];
  sup.on('restart', (name) => restarts.push(name));
  sup.add({ name: 'config-broken', command: PLAIN_NODE, args: plainNodeArgs([child, counter, '99']) });
  t.same(await gaveUp, ['config-broken', 3]);
  // The exit handler decides once: 'giveUp' or 'restart' (which schedules the relaunch), never both.
  t.same(restarts, [], 'no restart was scheduled');
  t.equal(sup.pid('config-broken'), undefined, 'and nothing runs');
  t.equal(readFileSync(counter, 'utf8'), '1', 'started once only');
  t.equal(sup.restarts('config-broken'), 0);
});

t.test('stop() sends SIGTERM and waits for every child to exit', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sup-'));
  const sup = new Supervisor({ stdio: 'pipe' });
  sup.add({ name: 'a', command: PLAIN_NODE, args: plainNodeArgs([child, join(dir, 'a'), '0']) });
  sup.add({ name: 'b', command: PLAIN_NODE, args: plainNodeArgs([child, join(dir, 'b'), '0']) });
  await waitFor(() => sup.pid('a') !== undefined && sup.pid('b') !== undefined, { timeoutMs: 30_000 });
  const outA: string[] = [];
  sup.process('a')!.stdout!.on('data', (d: Buffer) => outA.push(d.toString()));
  const outB: string[] = [];
  sup.process('b')!.stdout!.on('data', (d: Buffer) => outB.push(d.toString()));
  // Both children have installed their SIGTERM handlers once they print "up".
  await waitFor(() => outA.join('').includes('up') && outB.join('').includes('up'), { timeoutMs: 30_000 });
  const exits: string[] = [];
  sup.on('exit', (name, code) => exits.push(`${name}:${code}`));
  await sup.stop();
  t.same(exits.sort(), ['a:0', 'b:0'], 'both exited cleanly');
  t.match(outA.join(''), /term/, 'the child saw SIGTERM');
  t.equal(sup.restarts('a'), 0, 'no restart after stop');
});

t.test('a child of the supervisor drains and exits when the supervisor is killed (its IPC channel closes)', async (t) => {
  // A supervisor process running the fixture as its child, the way npm start runs a service; both
  // from the build (dist/), as npm start runs them, which also spares two TypeScript loads.
  const script = `
    import { Supervisor } from ${JSON.stringify(SUPERVISOR_JS)};
    const sup = new Supervisor({ stdio: 'inherit' });
    sup.add({ name: 'fixture', command: process.execPath, args: [${JSON.stringify(CHILD_JS)}, 'watch-parent'] });
    setInterval(() => {}, 1000);`;
  const parent = spawn(PLAIN_NODE, plainNodeArgs(['--input-type=module', '-e', script]), {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  parent.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  parent.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  // The fixture writes to the same pipe (inherited), so its output outlives the parent.
  const closed = new Promise<void>((res) => parent.stdout.on('close', res));
  t.teardown(() => {
    if (parent.exitCode === null && parent.signalCode === null) parent.kill('SIGKILL');
  });
  await waitFor(() => /ready pid=\d+/.test(out), { timeoutMs: 60_000, what: 'the fixture to start' });
  const pid = Number(/ready pid=(\d+)/.exec(out)![1]);
  t.teardown(() => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  });
  parent.kill('SIGKILL');
  await closed; // every writer of the pipe has exited: the parent, and the fixture after its drain
  t.match(out, 'closed work', 'the closer ran');
  t.match(out, 'shutdown: the parent process exited (its IPC channel closed), draining');
  // Its pipe closes as it exits; the process itself is gone (or a zombie: exited) a moment later.
  await waitFor(() => !running(pid), { timeoutMs: 30_000, what: `pid ${pid} to exit` });
  t.pass('the child is gone');
});
