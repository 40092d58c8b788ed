// @tier: pure
import t from 'tap';
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../../shared/config.js';
import {
  createLifecycle,
  describeStartupError,
  EXIT_CONFIG,
  watchParent,
  withDependency,
  type LifecycleLog,
} from '../../shared/lifecycle.js';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';
import { waitFor as until } from '../harness/wait.js';
import { sourceUrl } from '../harness/source.js';

// ── in-process: the state machine with injected exit and signals ────────────

function harness() {
  const exits: number[] = [];
  const lines: string[] = [];
  const logged: string[] = [];
  const log: LifecycleLog = { info: (_o, m) => void logged.push(m), error: (_o, m) => void logged.push(m) };
  const signals = new EventEmitter();
  const lc = createLifecycle({
    exit: (code) => void exits.push(code),
    writeLine: (l) => void lines.push(l),
    log,
    signals,
  });
  return { exits, lines, logged, signals, lc };
}

t.test('closers run in reverse registration order, one at a time, then exit 0', async (t) => {
  const { lc, exits } = harness();
  const order: string[] = [];
  let running = 0;
  let overlap = false;
  for (const name of ['pool', 'queue', 'http']) {
    lc.onShutdown(name, async () => {
      if (running++ > 0) overlap = true;
      await new Promise((r) => setImmediate(r));
      order.push(name);
      running--;
    });
  }
  t.equal(lc.draining(), false);
  const done = lc.shutdown('test', { graceMs: 5000 });
  t.equal(lc.draining(), true, 'draining as soon as shutdown starts');
  await done;
  t.same(order, ['http', 'queue', 'pool']);
  t.equal(overlap, false, 'closers do not overlap');
  t.same(exits, [0]);
});

t.test('a closer that throws does not stop the others; exit 1', async (t) => {
  const { lc, exits, logged } = harness();
  const order: string[] = [];
  lc.onShutdown('pool', () => void order.push('pool'));
  lc.onShutdown('broken', () => {
    throw new Error('nope');
  });
  await lc.shutdown('test', { graceMs: 5000 });
  t.same(order, ['pool']);
  t.same(exits, [1]);
  t.ok(logged.includes('shutdown: closing broken failed'));
});

t.test('first signal drains; later ones are logged and ignored; shutdown runs only once', async (t) => {
  const { lc, exits, signals, logged } = harness();
  let release!: () => void;
  let calls = 0;
  lc.onShutdown('slow', () => {
    calls++;
    return new Promise<void>((r) => (release = r));
  });
  const uninstall = lc.installSignalHandlers({ graceMs: 60_000 });
  signals.emit('SIGTERM', 'SIGTERM');
  t.equal(lc.draining(), true);
  t.same(exits, [], 'no exit while draining');
  // Under npm start the group's SIGTERM and the supervisor's forwarded one both arrive.
  signals.emit('SIGTERM', 'SIGTERM');
  signals.emit('SIGINT', 'SIGINT');
  t.same(exits, [], 'a second signal does not cut the drain short');
  t.ok(logged.includes('shutdown: SIGINT while draining, ignored (already stopping)'));
  await lc.shutdown('again', { graceMs: 60_000 });
  t.equal(calls, 1, 'closers ran once');
  release();
  await new Promise((r) => setImmediate(r));
  t.same(exits, [0], 'the one drain finishes and exits 0');
  uninstall();
  t.equal(signals.listenerCount('SIGTERM'), 0, 'uninstall removes the handlers');
  t.equal(signals.listenerCount('SIGINT'), 0);
});

t.test('watchParent: an IPC channel that closes, or was closed before, means the parent is gone', async (t) => {
  const channel = Object.assign(new EventEmitter(), { connected: true });
  const reasons: string[] = [];
  watchParent({ channel, onGone: (r) => reasons.push(r) });
  t.equal(channel.listenerCount('disconnect'), 1, 'listens for the channel closing');
  channel.emit('disconnect');
  channel.emit('disconnect');
  t.same(reasons, ['the parent process exited (its IPC channel closed)'], 'called once');
  t.equal(channel.listenerCount('disconnect'), 0, 'and lets the channel go');

  const closed = Object.assign(new EventEmitter(), { connected: false });
  const early: string[] = [];
  watchParent({ channel: closed, onGone: (r) => early.push(r) });
  t.same(early, ['the parent process exited (its IPC channel closed)'], 'a channel closed while loading counts too');
});

t.test('watchParent without a channel: a change of ppid seen by the poll; init as parent is not watched', async (t) => {
  let ppid = 4242;
  let reads = 0;
  const reasons: string[] = [];
  const stop = watchParent({
    channel: undefined,
    pollMs: 5,
    ppid: () => {
      reads++;
      return ppid;
    },
    onGone: (r) => reasons.push(r),
  });
  t.teardown(stop);
  await until(() => reads >= 4);
  t.same(reasons, [], 'nothing while the parent is there (after several polls)');
  ppid = 1; // re-parented to init
  await until(() => reasons.length > 0);
  t.same(reasons, ['the parent process (pid 4242) exited']);

  let polled = 0;
  const none = watchParent({
    channel: undefined,
    pollMs: 5,
    ppid: () => {
      polled++;
      return 1;
    },
    onGone: () => t.fail('init never goes away'),
  });
  // A watcher with the same period, as the yardstick: once it has polled four times, the one
  // above would have polled too had it scheduled anything.
  let yardstick = 0;
  const other = watchParent({
    channel: undefined,
    pollMs: 5,
    ppid: () => {
      yardstick++;
      return 4242;
    },
    onGone: () => undefined,
  });
  await until(() => yardstick >= 4);
  other();
  none();
  t.equal(polled, 1, 'read once, then no poll: a process whose parent is init has nothing to watch');
});

t.test('fatal writes one line and exits 78 for a ConfigError, 1 otherwise', async (t) => {
  const { lc, exits, lines, logged } = harness();
  const cfg = new ConfigError('LIMITER_PORT', 'must be a port number between 0 and 65535, got "99999"');
  t.throws(() => lc.fatal(cfg), cfg, 'an injected exit that returns makes fatal rethrow');
  t.same(lines, ['config: LIMITER_PORT must be a port number between 0 and 65535, got "99999"']);
  t.same(exits, [EXIT_CONFIG]);
  t.same(logged, [], 'a recognised error is fully described by its line');
  const odd = new Error('odd');
  t.throws(() => lc.fatal(odd));
  t.same(lines.at(-1), 'fatal: odd');
  t.same(exits.at(-1), 1);
  t.same(logged, ['fatal: odd'], 'an unrecognised error also goes to the structured log, with its stack');
});

// ── describing startup failures ─────────────────────────────────────────────

const sysError = (props: Record<string, unknown>, message = 'x') => Object.assign(new Error(message), props);

t.test('describeStartupError names what failed in one line', async (t) => {
  const cases: [string, unknown, string][] = [
    ['ConfigError', new ConfigError('HOST', 'must not be empty'), 'config: HOST must not be empty'],
    ['EADDRINUSE from net', sysError({ code: 'EADDRINUSE', syscall: 'listen', address: '127.0.0.1', port: 8080 }), 'port 8080 is in use'],
    ['EADDRINUSE without a port', sysError({ code: 'EADDRINUSE' }), 'the address to listen on is in use'],
    [
      'EACCES on listen',
      sysError({ code: 'EACCES', syscall: 'listen', port: 80 }),
      'no permission to listen on port 80 (ports below 1024 need privileges)',
    ],
    [
      'ECONNREFUSED tagged as PostgreSQL',
      withDependency(sysError({ code: 'ECONNREFUSED', address: '10.0.0.5', port: 5432 }), 'PostgreSQL'),
      'cannot reach PostgreSQL at 10.0.0.5:5432',
    ],
    [
      'ECONNREFUSED from pg-pool (recognised by its stack)',
      Object.assign(sysError({ code: 'ECONNREFUSED', address: '127.0.0.1', port: 5433 }), {
        stack: 'Error: connect ECONNREFUSED 127.0.0.1:5433\n    at /app/node_modules/pg-pool/index.js:45:11',
      }),
      'cannot reach PostgreSQL at 127.0.0.1:5433',
    ],
    [
      'ECONNREFUSED inside a cause',
      new Error('startup', { cause: withDependency(sysError({ code: 'ECONNREFUSED', address: '::1', port: 6379 }), 'Redis') }),
      'cannot reach Redis at [::1]:6379',
    ],
    [
      'ECONNREFUSED inside an AggregateError (localhost, both families)',
      withDependency(
        Object.assign(new AggregateError([sysError({ code: 'ECONNREFUSED', address: '::1', port: 5432 })], ''), { code: 'ECONNREFUSED' }),
        'PostgreSQL',
      ),
      'cannot reach PostgreSQL at [::1]:5432',
    ],
    [
      'ETIMEDOUT to a dependency',
      withDependency(sysError({ code: 'ETIMEDOUT', address: '10.0.0.5', port: 5432 }), 'PostgreSQL'),
      'cannot reach PostgreSQL at 10.0.0.5:5432 (ETIMEDOUT)',
    ],
    [
      'ECONNREFUSED, dependency unknown',
      sysError({ code: 'ECONNREFUSED', address: '127.0.0.1', port: 9 }),
      'cannot reach 127.0.0.1:9 (ECONNREFUSED)',
    ],
    [
      'ENOTFOUND',
      withDependency(sysError({ code: 'ENOTFOUND', hostname: 'db.internal' }), 'PostgreSQL'),
      'cannot resolve host db.internal for PostgreSQL',
    ],
    [
      'a PostgreSQL server error',
      sysError({ severity: 'FATAL', code: '3D000' }, 'database "nope" does not exist'),
      'PostgreSQL: database "nope" does not exist',
    ],
    ['a multi-line message keeps its first line', new Error('first\n    at x (y.ts:1:1)'), 'fatal: first'],
    ['a thrown string', 'boom', 'fatal: boom'],
  ];
  for (const [name, err, line] of cases) {
    const got = describeStartupError(err);
    t.equal(got, line, name);
    t.notMatch(got, /\n/, `${name}: one line`);
  }
});

// ── a real child process ────────────────────────────────────────────────────

// The fixture as `tsc -b` compiled it (npm test builds first), run by a plain `node` as a service's
// dist/…/main.js is: each of the ten runs below took about 1 s when it started ts-node (the
// TypeScript compiler) and tap's processinfo hook (test/harness/child.ts) to load child.ts.
const CHILD = fileURLToPath(new URL('../../dist/test/fixtures/lifecycle/child.js', sourceUrl(import.meta.url)));
if (!existsSync(CHILD)) throw new Error(`${CHILD} is missing: run \`npx tsc -b\` first (npm test does)`);

interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string[];
  err: string[];
  /** `msg` of every JSON (pino) line on stdout. */
  logs: string[];
  /** Every non-JSON line on stdout. */
  plain: string[];
}

/** What the helpers need from a tap test. */
interface Teardown {
  teardown(fn: () => unknown): void;
}

function run(t: Teardown, mode: string, arg = '') {
  const child = spawn(PLAIN_NODE, plainNodeArgs([CHILD, mode, arg]), {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  let waiter: { line: string; resolve: () => void } | undefined;
  // A plain line equal to `line`, or a pino line whose msg starts with it.
  const seen = (line: string) => stdout.split('\n').some((l) => l === line || l.includes(`"msg":"${line}`));
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    if (waiter && seen(waiter.line)) waiter.resolve();
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<Exited>((resolve) =>
    child.on('close', (code, signal) => {
      const out = stdout.split('\n').filter(Boolean);
      const logs: string[] = [];
      const plain: string[] = [];
      for (const l of out) {
        try {
          logs.push(String((JSON.parse(l) as { msg?: unknown }).msg));
        } catch {
          plain.push(l);
        }
      }
      resolve({ code, signal, out, err: stderr.split('\n').filter(Boolean), logs, plain });
    }),
  );
  /** Resolves once stdout shows `line`; rejects if the child exits first. */
  const waitFor = (line: string) =>
    new Promise<void>((resolve, reject) => {
      if (seen(line)) return resolve();
      waiter = { line, resolve };
      void exited.then((e) =>
        reject(new Error(`child exited (${e.code}) before printing ${line}: ${e.out.join(' | ')} ${e.err.join(' | ')}`)),
      );
    });
  return { child, exited, waitFor };
}

t.test('SIGTERM: closers run in reverse order, draining is set, exit 0', async (t) => {
  const { child, exited, waitFor } = run(t, 'drain');
  await waitFor('ready');
  child.kill('SIGTERM');
  const e = await exited;
  t.equal(e.code, 0, e.err.join('\n'));
  t.same(e.plain, ['ready', 'closed http draining=true', 'closed queue', 'closed pool']);
  t.ok(e.logs.includes('shutdown: SIGTERM received, draining'), 'logs that it is draining');
  t.ok(e.logs.includes('shutdown: done'));
});

t.test('SIGINT drains the same way', async (t) => {
  const { child, exited, waitFor } = run(t, 'drain');
  await waitFor('ready');
  child.kill('SIGINT');
  const e = await exited;
  t.equal(e.code, 0);
  t.same(e.plain, ['ready', 'closed http draining=true', 'closed queue', 'closed pool']);
});

t.test('a closer that hangs: exit 1 after the grace deadline, naming it', async (t) => {
  const { child, exited, waitFor } = run(t, 'hang', '300');
  await waitFor('ready');
  child.kill('SIGTERM');
  const e = await exited;
  t.equal(e.code, 1);
  t.same(e.plain, ['ready', 'closed http'], 'closers after the stuck one never ran');
  t.ok(
    e.logs.includes('shutdown: did not finish within 300ms: stuck-worker, pool; exiting anyway'),
    `names what did not finish: ${e.logs.join(' | ')}`,
  );
});

t.test('a closer that throws: the rest still run, exit 1', async (t) => {
  const { child, exited, waitFor } = run(t, 'throws');
  await waitFor('ready');
  child.kill('SIGTERM');
  const e = await exited;
  t.equal(e.code, 1);
  t.same(e.plain, ['ready', 'closed pool']);
  t.ok(e.logs.includes('shutdown: closing broken failed'));
});

t.test('signals while draining are ignored: the drain finishes once, exit 0', async (t) => {
  const { child, exited, waitFor } = run(t, 'second-signal');
  await waitFor('ready');
  child.kill('SIGTERM');
  await waitFor('shutdown: SIGTERM received, draining');
  child.kill('SIGTERM');
  child.kill('SIGINT');
  await waitFor('shutdown: SIGINT while draining, ignored (already stopping)');
  child.kill('SIGUSR2'); // lets the slow closer finish
  const e = await exited;
  t.equal(e.code, 0, e.err.join('\n'));
  t.same(e.plain, ['ready', 'closed first'], 'every closer ran, once');
  t.ok(e.logs.includes('shutdown: SIGTERM while draining, ignored (already stopping)'));
  t.notOk(
    e.logs.some((l) => l.includes('exiting now')),
    'no "exiting now"',
  );
  t.ok(e.logs.includes('shutdown: done'));
});

t.test('fatal(ConfigError): one line on stderr, exit 78, nothing else', async (t) => {
  const e = await run(t, 'fatal-config').exited;
  t.equal(e.code, EXIT_CONFIG);
  t.same(e.err, ['config: LIMITER_PORT must be a port number between 0 and 65535, got "99999"']);
  t.same(e.out, [], 'no stack trace, no log noise');
});

async function occupiedPort(t: Teardown): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

t.test('fatal(EADDRINUSE): "port N is in use", exit 1', async (t) => {
  const port = await occupiedPort(t);
  const e = await run(t, 'fatal-port-net', String(port)).exited;
  t.equal(e.code, 1);
  t.same(e.err, [`port ${port} is in use`]);
  t.same(e.out, []);
});

t.test('fatal after a uWS listen failure: one line naming the port, exit 1', async (t) => {
  const port = await occupiedPort(t);
  const e = await run(t, 'fatal-port-uws', String(port)).exited;
  t.equal(e.code, 1);
  t.equal(e.err.length, 1, e.err.join('\n'));
  t.match(e.err[0], new RegExp(`\\b${port}\\b`));
  t.match(e.err[0], /in use/);
});

t.test('fatal(ECONNREFUSED from pg): "cannot reach PostgreSQL at host:port"', async (t) => {
  // A port that was free a moment ago: nothing listens there.
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  const e = await run(t, 'fatal-pg', String(port)).exited;
  t.equal(e.code, 1);
  t.same(e.err, [`cannot reach PostgreSQL at 127.0.0.1:${port}`]);
});

t.test('fatal(unknown error): one line on stderr; the stack only in the JSON log', async (t) => {
  const e = await run(t, 'fatal-unknown').exited;
  t.equal(e.code, 1);
  t.same(e.err, ['fatal: something odd']);
  t.same(e.logs, ['fatal: something odd']);
});
