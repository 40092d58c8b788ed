/**
 * Process lifecycle: graceful shutdown on SIGTERM/SIGINT, and one clear line for startup failures.
 *
 * A service registers a closer for each thing it opened, in the order it opened them
 * (`onShutdown('pool', ...)`, then `onShutdown('http', ...)`); on the first signal it starts
 * draining (`draining()` turns true, so /readyz answers 503 and load balancers stop sending), runs
 * the closers in reverse order, one at a time, and exits 0. Past the grace deadline it exits 1 with
 * a line naming the closers that did not finish; a closer that throws is logged and the exit code
 * is 1. A second signal exits at once.
 *
 * `fatal(err)` is for failures before a service is up: it prints one line that says what is wrong
 * (the ConfigError's own message, "port 8080 is in use", "cannot reach PostgreSQL at host:5432")
 * and exits non-zero: 78 (EX_CONFIG) for configuration errors, which a supervisor should not
 * retry, 1 otherwise.
 *
 * The module-level functions use one default instance bound to `process`; tests build their own
 * with `createLifecycle`.
 */
import { isCodedError, type CodedError } from './errors.js';

/** Closes one resource; may be async. */
export type Closer = () => Promise<void> | void;

/** The log calls this module makes; a pino `Logger` fits. */
export interface LifecycleLog {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Something that delivers process signals (`process`, or an EventEmitter in tests). */
export interface SignalSource {
  on(event: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
  off(event: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
}

export interface LifecycleDeps {
  /** Ends the process; default `process.exit`. A test double may return (then `fatal` rethrows). */
  exit?: (code: number) => void;
  /** Default log for shutdown progress; without one, plain lines go to stderr. */
  log?: LifecycleLog;
  /** Where `fatal` writes its one line; default stderr. */
  writeLine?: (line: string) => void;
  /** Default `process`. */
  signals?: SignalSource;
}

export interface ShutdownOptions {
  log?: LifecycleLog;
  /** How long the closers may take in total before the process exits 1 anyway, ms. */
  graceMs: number;
}

export interface Lifecycle {
  /** Registers a closer; closers run in reverse registration order on shutdown. */
  onShutdown(name: string, fn: Closer): void;
  /** True once shutdown has begun: report not-ready, stop taking new work. */
  draining(): boolean;
  /**
   * Drains now: runs the closers within `graceMs`, then exits (0 when all finished, else 1).
   * A second call while draining does nothing. Resolves just before `exit` is called.
   */
  shutdown(reason: string, opts: ShutdownOptions): Promise<void>;
  /** First SIGTERM/SIGINT starts `shutdown`; later ones are logged and ignored. Returns an uninstaller. */
  installSignalHandlers(opts: ShutdownOptions): () => void;
  /** Prints one line describing a startup failure and exits non-zero. Never returns. */
  fatal(err: unknown, log?: LifecycleLog): never;
}

/** Exit code for a configuration error (sysexits EX_CONFIG): retrying will not help. */
export const EXIT_CONFIG = 78;

const stderrLog: LifecycleLog = {
  info: (_obj, msg) => process.stderr.write(msg + '\n'),
  error: (_obj, msg) => process.stderr.write(msg + '\n'),
};

/** Builds a lifecycle over injected process hooks. */
export function createLifecycle(deps: LifecycleDeps = {}): Lifecycle {
  const exit = deps.exit ?? ((code: number) => process.exit(code));
  const writeLine = deps.writeLine ?? ((line: string) => void process.stderr.write(line + '\n'));
  const signals: SignalSource = deps.signals ?? process;
  const closers: { name: string; fn: Closer }[] = [];
  let isDraining = false;

  async function shutdown(reason: string, opts: ShutdownOptions): Promise<void> {
    if (isDraining) return;
    isDraining = true;
    const log = opts.log ?? deps.log ?? stderrLog;
    const queue = closers.slice().reverse();
    log.info({ reason, closers: queue.map((c) => c.name), graceMs: opts.graceMs }, `shutdown: ${reason}, draining`);
    let next = 0; // index into queue of the closer running now (or next to run)
    const deadline = setTimeout(() => {
      const unfinished = queue.slice(next).map((c) => c.name);
      log.error(
        { unfinished, graceMs: opts.graceMs },
        `shutdown: did not finish within ${opts.graceMs}ms: ${unfinished.join(', ')}; exiting anyway`,
      );
      exit(1);
    }, opts.graceMs);
    let failed = false;
    for (; next < queue.length; next++) {
      const c = queue[next]!;
      try {
        await c.fn();
      } catch (err) {
        failed = true;
        log.error({ err, closer: c.name }, `shutdown: closing ${c.name} failed`);
      }
    }
    clearTimeout(deadline);
    log.info({ failed }, failed ? 'shutdown: done, with errors' : 'shutdown: done');
    exit(failed ? 1 : 0);
  }

  function installSignalHandlers(opts: ShutdownOptions): () => void {
    const log = opts.log ?? deps.log ?? stderrLog;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (isDraining) {
        log.info({ signal }, `shutdown: ${signal} while draining, ignored (already stopping)`);
        return;
      }
      void shutdown(`${signal} received`, opts);
    };
    signals.on('SIGTERM', onSignal);
    signals.on('SIGINT', onSignal);
    return () => {
      signals.off('SIGTERM', onSignal);
      signals.off('SIGINT', onSignal);
    };
  }

  function fatal(err: unknown, log?: LifecycleLog): never {
    const line = describeStartupError(err);
    // Unrecognised failures keep their stack and cause in the structured log; the line is what a
    // person reads.
    const l = log ?? deps.log;
    if (l && !isRecognised(err)) l.error({ err }, line);
    writeLine(line);
    exit(isConfigError(err) ? EXIT_CONFIG : 1);
    // Reached only when an injected `exit` returns (tests).
    throw err;
  }

  return {
    onShutdown: (name, fn) => void closers.push({ name, fn }),
    draining: () => isDraining,
    shutdown,
    installSignalHandlers,
    fatal,
  };
}

// ── noticing that the parent went away ──────────────────────────────────────

/** Where `watchParent` learns of the parent: injected in tests, `process` by default. */
export interface ParentWatchOptions {
  /** Called once, with a sentence saying what happened. */
  onGone(reason: string): void;
  /**
   * With no IPC channel, poll `ppid()` this often and call `onGone` when it changes (the parent
   * died and the process was re-parented). 0 (the default) does not poll.
   */
  pollMs?: number;
  /** Default `() => process.ppid`. */
  ppid?: () => number;
  /**
   * The IPC channel to the parent, if the process was started with one; its 'disconnect' (or
   * `connected` already false) means the parent is gone. Default: `process` when it was started
   * with a channel (`process.send` exists, and stays even after the channel closed).
   */
  channel?:
    | { readonly connected: boolean; on(event: 'disconnect', l: () => void): unknown; off(event: 'disconnect', l: () => void): unknown }
    | undefined;
}

/**
 * Calls `onGone` when the process that started this one exits. With an IPC channel (a child of
 * the supervisor) that is the channel's 'disconnect', at once; without one, a change of
 * `process.ppid` seen by a poll (unref'd: it never keeps the process alive). A process whose
 * parent is already init (pid 1, or 0 in a container) has nothing to watch. Returns an uninstaller.
 */
export function watchParent(opts: ParentWatchOptions): () => void {
  const channel = 'channel' in opts ? opts.channel : typeof process.send === 'function' ? process : undefined;
  let done = false;
  const gone = (reason: string): void => {
    if (done) return;
    done = true;
    uninstall();
    opts.onGone(reason);
  };
  const onDisconnect = (): void => gone('the parent process exited (its IPC channel closed)');
  let timer: NodeJS.Timeout | undefined;
  // A listener for 'disconnect' keeps the channel referenced; the uninstaller lets it go.
  const uninstall = (): void => {
    channel?.off('disconnect', onDisconnect);
    if (timer) clearInterval(timer);
  };
  if (channel) {
    // The channel may have closed already, while this process was still loading its modules.
    if (!channel.connected) onDisconnect();
    else channel.on('disconnect', onDisconnect);
  } else if ((opts.pollMs ?? 0) > 0) {
    const ppid = opts.ppid ?? (() => process.ppid);
    const first = ppid();
    if (first > 1) {
      timer = setInterval(() => {
        if (ppid() !== first) gone(`the parent process (pid ${first}) exited`);
      }, opts.pollMs);
      timer.unref();
    }
  }
  return () => {
    done = true;
    uninstall();
  };
}

// ── describing startup failures ─────────────────────────────────────────────

interface SysError {
  code?: unknown;
  syscall?: unknown;
  address?: unknown;
  port?: unknown;
  hostname?: unknown;
  dependency?: unknown;
  severity?: unknown;
  message?: unknown;
  stack?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/**
 * Marks a connection failure as being to `dependency` (e.g. `PostgreSQL`, `Redis`) so `fatal`
 * can name it. Returns the same error.
 */
export function withDependency<E>(err: E, dependency: string): E {
  if (err !== null && typeof err === 'object') (err as SysError).dependency = dependency;
  return err;
}

/** The error itself, then its causes and (for AggregateError) its first inner error. */
function* chain(err: unknown): Generator<SysError> {
  let e: unknown = err;
  for (let depth = 0; depth < 6 && e !== null && typeof e === 'object'; depth++) {
    const s = e as SysError;
    yield s;
    if (s.cause !== undefined) e = s.cause;
    else if (Array.isArray(s.errors) && s.errors.length > 0) e = s.errors[0];
    else break;
  }
}

const isConfigError = (err: unknown): err is CodedError<'config_variable_invalid'> =>
  isCodedError(err) && err.code === 'config_variable_invalid';
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);
const isRecognised = (err: unknown): boolean =>
  isConfigError(err) ||
  [...chain(err)].some(
    (e) => e.code === 'EADDRINUSE' || e.code === 'EACCES' || e.code === 'ENOTFOUND' || CONNECT_CODES.has(String(e.code)),
  );

function dependencyOf(err: unknown): string | undefined {
  for (const e of chain(err)) {
    if (typeof e.dependency === 'string') return e.dependency;
    const stack = typeof e.stack === 'string' ? e.stack : '';
    if (/[/\\]node_modules[/\\](pg|pg-pool)[/\\]/.test(stack)) return 'PostgreSQL';
    if (/[/\\]node_modules[/\\]ioredis[/\\]/.test(stack)) return 'Redis';
  }
  return undefined;
}

const firstLine = (s: string): string => s.split('\n', 1)[0]!.trim();

/**
 * The one line `fatal` prints for `err`: what failed, in words, never a stack trace. Exported for
 * tests and for callers that report failures their own way.
 */
export function describeStartupError(err: unknown): string {
  if (isConfigError(err)) return err.message;
  const dependency = dependencyOf(err);
  for (const e of chain(err)) {
    const code = typeof e.code === 'string' ? e.code : undefined;
    const port = portOf(e);
    if (code === 'EADDRINUSE') return port !== undefined ? `port ${port} is in use` : 'the address to listen on is in use';
    if (code === 'EACCES' && (e.syscall === 'listen' || e.syscall === 'bind')) {
      return `no permission to listen on port ${port ?? '?'} (ports below 1024 need privileges)`;
    }
    if (code === 'ENOTFOUND') return `cannot resolve host ${hostOf(e) ?? '?'}${dependency ? ` for ${dependency}` : ''}`;
    if (code !== undefined && CONNECT_CODES.has(code)) {
      // An AggregateError (both address families tried) carries the address on its inner errors.
      const where = whereOf(err);
      const why = code === 'ECONNREFUSED' ? '' : ` (${code})`;
      return dependency ? `cannot reach ${dependency} at ${where ?? '?'}${why}` : `cannot reach ${where ?? 'a dependency'} (${code})`;
    }
    // A PostgreSQL server error (authentication, missing database, ...): its message is already clear.
    if (typeof e.severity === 'string' && typeof e.message === 'string') return `PostgreSQL: ${firstLine(e.message)}`;
  }
  if (err instanceof Error) return `fatal: ${firstLine(err.message) || err.name}`;
  return `fatal: ${firstLine(String(err))}`;
}

const portOf = (e: SysError): string | undefined => (typeof e.port === 'number' || typeof e.port === 'string' ? String(e.port) : undefined);
const hostOf = (e: SysError): string | undefined =>
  typeof e.address === 'string' ? e.address : typeof e.hostname === 'string' ? e.hostname : undefined;

/** `host:port` (IPv6 in brackets) from the first error in the chain that has both. */
function whereOf(err: unknown): string | undefined {
  for (const e of chain(err)) {
    const host = hostOf(e);
    const port = portOf(e);
    if (host !== undefined && port !== undefined) return `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }
  return undefined;
}

// ── the default instance, bound to this process ────────────────────────────

const defaultLifecycle = createLifecycle();

/** The process-wide lifecycle that `main.ts` files use. */
export const lifecycle: Lifecycle = defaultLifecycle;
export const onShutdown: Lifecycle['onShutdown'] = defaultLifecycle.onShutdown;
export const draining: Lifecycle['draining'] = defaultLifecycle.draining;
export const shutdown: Lifecycle['shutdown'] = defaultLifecycle.shutdown;
export const installSignalHandlers: Lifecycle['installSignalHandlers'] = defaultLifecycle.installSignalHandlers;
export const fatal: Lifecycle['fatal'] = defaultLifecycle.fatal;
