/**
 * A small process supervisor: runs each service as its own child process, restarts a child that
 * dies with exponential backoff, forwards SIGTERM/SIGINT, and stops everything cleanly.
 *
 * A child that stays up for `stableMs` has its backoff reset, so a service that crashes once a day
 * restarts at once, while one that crashes on start backs off up to `maxBackoffMs`.
 *
 * Each child gets an IPC channel that nothing is sent on: it closes when the supervisor's process
 * ends, however it ends (SIGKILL included), and a service built on shared/main.ts drains and exits
 * when it does (`watchParent`), so a dead supervisor leaves no orphans.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';

export interface ChildSpec {
  name: string;
  command: string;
  args: string[];
  env?: Record<string, string | undefined>;
}

export interface SupervisorOptions {
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  stableMs?: number;
  /** How long a child has to exit after SIGTERM before it is killed. */
  stopGraceMs?: number;
  /** Where children's output goes; default: inherited, prefixed by nothing (they log JSON). */
  stdio?: 'inherit' | 'pipe' | 'ignore';
  now?: () => number;
  /** Exit codes that mean "restarting will not help" (e.g. 78, a configuration error). */
  giveUpCodes?: readonly number[];
}

interface Running {
  spec: ChildSpec;
  proc: ChildProcess | null;
  restarts: number;
  backoffMs: number;
  startedAt: number;
  timer: NodeJS.Timeout | null;
}

export interface SupervisorEvents {
  spawn: [name: string, pid: number];
  exit: [name: string, code: number | null, signal: NodeJS.Signals | null];
  restart: [name: string, delayMs: number, restarts: number];
  giveUp: [name: string, code: number];
}

export class Supervisor extends EventEmitter<SupervisorEvents> {
  private readonly children = new Map<string, Running>();
  private stopping = false;
  private readonly opts: Required<SupervisorOptions>;

  constructor(opts: SupervisorOptions = {}) {
    super();
    this.opts = {
      initialBackoffMs: opts.initialBackoffMs ?? 500,
      maxBackoffMs: opts.maxBackoffMs ?? 30_000,
      stableMs: opts.stableMs ?? 60_000,
      stopGraceMs: opts.stopGraceMs ?? 15_000,
      stdio: opts.stdio ?? 'inherit',
      now: opts.now ?? Date.now,
      giveUpCodes: opts.giveUpCodes ?? [],
    };
  }

  /** Starts a child and keeps it running until `stop()`. */
  add(spec: ChildSpec): void {
    if (this.children.has(spec.name)) throw new Error(`child ${spec.name} already added`);
    const r: Running = { spec, proc: null, restarts: 0, backoffMs: this.opts.initialBackoffMs, startedAt: 0, timer: null };
    this.children.set(spec.name, r);
    this.launch(r);
  }

  /** The child's current process, if it is running. */
  pid(name: string): number | undefined {
    return this.children.get(name)?.proc?.pid;
  }

  restarts(name: string): number {
    return this.children.get(name)?.restarts ?? 0;
  }

  /** Access to a child's stdout/stderr when `stdio: 'pipe'`. */
  process(name: string): ChildProcess | null {
    return this.children.get(name)?.proc ?? null;
  }

  private launch(r: Running): void {
    r.timer = null;
    if (this.stopping) return;
    const proc = spawn(r.spec.command, r.spec.args, {
      env: { ...process.env, ...r.spec.env },
      stdio: ['ignore', this.opts.stdio, this.opts.stdio, 'ipc'],
    });
    r.proc = proc;
    r.startedAt = this.opts.now();
    if (proc.pid !== undefined) this.emit('spawn', r.spec.name, proc.pid);
    proc.on('error', () => {
      // 'exit' follows for spawn failures after start; a failure to spawn at all is retried too.
    });
    proc.on('exit', (code, signal) => {
      r.proc = null;
      this.emit('exit', r.spec.name, code, signal);
      if (this.stopping) return;
      if (code !== null && this.opts.giveUpCodes.includes(code)) {
        this.emit('giveUp', r.spec.name, code);
        return;
      }
      if (this.opts.now() - r.startedAt >= this.opts.stableMs) r.backoffMs = this.opts.initialBackoffMs;
      const delay = r.backoffMs;
      r.backoffMs = Math.min(r.backoffMs * 2, this.opts.maxBackoffMs);
      r.restarts += 1;
      this.emit('restart', r.spec.name, delay, r.restarts);
      r.timer = setTimeout(() => this.launch(r), delay);
    });
  }

  /** Sends `signal` to every child (SIGTERM by default), waits, kills stragglers. Idempotent. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    this.stopping = true;
    const waits: Promise<void>[] = [];
    // Stop in reverse order of addition, so the sidecar stops taking traffic before its upstreams.
    for (const r of [...this.children.values()].reverse()) {
      if (r.timer) clearTimeout(r.timer);
      const proc = r.proc;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) continue;
      waits.push(
        new Promise<void>((resolve) => {
          const kill = setTimeout(() => proc.kill('SIGKILL'), this.opts.stopGraceMs);
          proc.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          proc.kill(signal);
        }),
      );
    }
    await Promise.all(waits);
  }
}
