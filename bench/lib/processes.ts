/**
 * The processes a benchmark starts: spawned pinned to CPU cores, waited for until they answer,
 * and all stopped at the end, also when the run fails or is interrupted.
 *
 * Pinning (taskset, util-linux) keeps the load generator off the core of the server under test, so
 * the sidecar and nginx are measured on the same footing: see `corePlan`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { cpus } from 'node:os';
import { delimiter, join } from 'node:path';

/** The absolute path of an executable on PATH (plus the sbin directories), or undefined. */
export function which(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** A port nothing listens on right now (the OS's pick for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Which cores run what. Two cores: the load generator, the upstream and Redis share core 0 and
 * the server under test (sidecar or nginx) has core 1 to itself. Three or more: load generator on
 * 0, upstream and Redis on 1, server under test on 2. One core, or `pin` false: no pinning.
 */
export interface CorePlan {
  load: string | undefined;
  aux: string | undefined;
  server: string | undefined;
  description: string;
}

export function corePlan(pin: boolean): CorePlan {
  const n = cpus().length;
  if (!pin || n < 2 || !which('taskset')) {
    const why = !pin ? 'disabled (--no-pin)' : n < 2 ? 'one core' : 'taskset not installed';
    return { load: undefined, aux: undefined, server: undefined, description: `no pinning (${why})` };
  }
  if (n === 2) {
    return {
      load: '0',
      aux: '0',
      server: '1',
      description:
        'taskset: load generator (autocannon in the bench process, or wrk), upstream and Redis on core 0; ' +
        'the server under test (sidecar or nginx, master and its one worker) alone on core 1',
    };
  }
  return {
    load: '0',
    aux: '1',
    server: '2',
    description: 'taskset: load generator on core 0; upstream and Redis on core 1; the server under test (sidecar or nginx) on core 2',
  };
}

/** Pins an already running process, every thread of it (`taskset -a -p`). */
export function pinProcess(pid: number, cpu: string | undefined): void {
  if (cpu === undefined) return;
  const r = spawnSync('taskset', ['-a', '-p', '-c', cpu, String(pid)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`taskset -p ${cpu} ${pid} failed: ${r.stderr.trim()}`);
}

export interface Started {
  name: string;
  child: ChildProcess;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  exited: Promise<number | string>;
  /** Sends `signal`, waits up to `graceMs`, then SIGKILL. Idempotent. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

const live = new Set<Started>();

/** Stops every process still running (reverse start order). */
export async function stopAll(): Promise<void> {
  for (const p of [...live].reverse()) await p.stop();
}

let netInstalled = false;
/** A bench that dies or is interrupted must not leave servers behind. */
function installExitNet(): void {
  if (netInstalled) return;
  netInstalled = true;
  process.on('exit', () => {
    for (const p of live) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      console.error(`\n${sig}: stopping everything the bench started`);
      void stopAll().finally(() => process.exit(130));
    });
  }
}

export interface SpawnOptions {
  /** The core list for taskset, or undefined for no pinning. */
  cpu: string | undefined;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** stdout and stderr go to this file, truncated first (the bench's own output stays a clean table). */
  logFile: string;
}

/** Spawns `cmd args` (under `taskset -c cpu` when pinned); the pid is the command's own. */
export function spawnPinned(name: string, cmd: string, args: readonly string[], o: SpawnOptions): Started {
  installExitNet();
  const [file, argv] = o.cpu === undefined ? [cmd, [...args]] : ['taskset', ['-c', o.cpu, cmd, ...args]];
  const out = createWriteStream(o.logFile);
  const child = spawn(file, argv, { env: o.env ?? process.env, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(out, { end: false });
  child.stderr.pipe(out, { end: false });
  // 'close' comes after 'exit' once the child's stdio is drained: the log is complete then.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(started);
      resolve(code ?? signal ?? 'unknown');
    });
    child.once('error', (err) => {
      live.delete(started);
      out.write(`spawn error: ${err.message}\n`);
      resolve('spawn-error');
    });
  });
  let stopping: Promise<void> | undefined;
  const started: Started = {
    name,
    child,
    exited,
    stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000) {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill(signal);
          let timer: NodeJS.Timeout | undefined;
          const late = await Promise.race([
            exited.then(() => false),
            new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceMs))),
          ]);
          clearTimeout(timer);
          if (late) {
            child.kill('SIGKILL');
            await exited;
          }
        }
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([closed, new Promise<void>((r) => (timer = setTimeout(r, 1000)))]);
        clearTimeout(timer);
        await new Promise<void>((r) => out.end(r));
      })();
      return stopping;
    },
  };
  live.add(started);
  return started;
}

/** Resolves once a TCP connection to 127.0.0.1:port succeeds. */
function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
    sock.setTimeout(500, () => {
      sock.destroy();
      resolve(false);
    });
    sock.once('error', () => resolve(false));
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
  });
}

/**
 * Waits until `probe` says yes, or throws after `timeoutMs` (naming the process and its log), or
 * as soon as the process exits.
 */
export async function waitUntil(
  p: Started,
  what: string,
  probe: () => Promise<boolean>,
  logFile: string,
  // Generous: on a machine shared with other work (load 20 on 2 cores), a node process has taken
  // more than 15 s to start listening.
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited: number | string | undefined;
  void p.exited.then((c) => (exited = c));
  while (Date.now() < deadline) {
    if (exited !== undefined) throw new Error(`${p.name} exited (${exited}) before ${what}: see ${logFile}`);
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${p.name} did not get ${what} within ${timeoutMs} ms: see ${logFile}`);
}

/** Waits until 127.0.0.1:port accepts connections. */
export function waitForPort(p: Started, port: number, logFile: string): Promise<void> {
  return waitUntil(p, `a listener on port ${port}`, () => canConnect(port), logFile);
}

/** Waits until GET url answers `status`. */
export function waitForHttp(p: Started, url: string, logFile: string, status = 200): Promise<void> {
  return waitUntil(
    p,
    `${status} from ${url}`,
    async () => {
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
        await r.arrayBuffer();
        return r.status === status;
      } catch {
        return false;
      }
    },
    logFile,
  );
}

let clockTicks: number | undefined;

/**
 * CPU seconds (user + system) a process and its children have used so far, from /proc: how busy
 * the server under test was during a measurement tells a saturated server from a load generator
 * that could not keep up. NaN where /proc is not available.
 */
export function cpuSeconds(pid: number): number {
  clockTicks ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  let total = 0;
  const pids = [pid];
  try {
    pids.push(...readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    // no children file: the process alone
  }
  for (const p of pids) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      // Fields after the parenthesised command name (which may hold spaces): utime is field 14, stime 15.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(f[11]) + Number(f[12])) / clockTicks;
    } catch {
      if (p === pid) return NaN;
    }
  }
  return total;
}

/**
 * A process's CPU seconds (user + system), its reaped children's included (so PostgreSQL's exited
 * backends stay counted in their postmaster); 0 when it cannot be read.
 */
export function procCpu(pid: number | undefined): number {
  if (pid === undefined) return 0;
  clockTicks ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / clockTicks;
  } catch {
    return 0;
  }
}

/** CPU seconds of every PostgreSQL process on the machine (other databases' backends included). */
export function postgresCpu(): number {
  let total = 0;
  for (const e of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/comm`, 'utf8').trim() === 'postgres') total += procCpu(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return total;
}
