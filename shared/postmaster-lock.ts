/**
 * What a `postmaster.pid` left in an embedded data directory means, read before the server starts,
 * so that `npm start` can say which process holds the directory instead of PostgreSQL's "lock file
 * already exists".
 *
 * - **running**: the pid in the lock is alive and is a PostgreSQL server for this directory (its
 *   command line is `postgres -D <dir> …`): the directory is in use. `orphan` says the process
 *   that started it is gone (it was re-parented), which is what a previous `npm start` killed by
 *   SIGKILL leaves.
 * - **stale**: the pid is not running (`dead`), or is some other program that got the pid later
 *   (`reused`: common in containers, where pids restart small). Nothing owns the directory; the
 *   lock may be removed. PostgreSQL removes a lock whose pid is dead by itself, but refuses one
 *   whose pid was reused; and if a server's backends were still attached to its shared memory it
 *   refuses to start on its own check ("pre-existing shared memory block is still in use"), so
 *   removing the file never lets two servers share a directory.
 *
 * Where `/proc` cannot be read (not Linux), a live pid is taken to be the server: the cautious answer.
 */
import { readFile, rm } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';

export type LockState =
  | { state: 'free' }
  | { state: 'running'; pid: number; parentPid: number | undefined; orphan: boolean }
  | { state: 'stale'; pid: number; why: 'dead' | 'reused' };

/** How the process table is read; injected in tests. */
export interface ProcessTable {
  alive(pid: number): boolean;
  /** argv of a live process, or undefined when it cannot be read. */
  commandLine(pid: number): Promise<string[] | undefined>;
  parentOf(pid: number): Promise<number | undefined>;
}

export const procTable: ProcessTable = {
  alive(pid) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      // EPERM: it exists, owned by another user.
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  },
  async commandLine(pid) {
    try {
      const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      return raw.split('\0').filter((a) => a !== '');
    } catch {
      return undefined;
    }
  },
  async parentOf(pid) {
    try {
      // Field 4 of /proc/<pid>/stat, after the command name in parentheses (which may hold spaces).
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(fields[1]);
      return Number.isInteger(ppid) ? ppid : undefined;
    } catch {
      return undefined;
    }
  },
};

export const lockFile = (dataDir: string): string => join(dataDir, 'postmaster.pid');

/** Reads the lock in `dataDir` and says what holds the directory, if anything. */
export async function inspectLock(dataDir: string, table: ProcessTable = procTable): Promise<LockState> {
  let text: string;
  try {
    text = await readFile(lockFile(dataDir), 'utf8');
  } catch {
    return { state: 'free' };
  }
  const pid = Number(text.split('\n', 1)[0]);
  // An empty or torn lock (a server killed while writing it) names no process.
  if (!Number.isInteger(pid) || pid <= 0) return { state: 'stale', pid: 0, why: 'dead' };
  if (!table.alive(pid)) return { state: 'stale', pid, why: 'dead' };
  const argv = await table.commandLine(pid);
  if (argv !== undefined && !isServerFor(argv, dataDir)) return { state: 'stale', pid, why: 'reused' };
  const parentPid = await table.parentOf(pid);
  // Its starter died if it was re-parented: to init, or to a sub-reaper (tini, systemd --user),
  // which is not a node process; npm start and the test harness are.
  const parentArgv = parentPid !== undefined && parentPid > 1 ? await table.commandLine(parentPid) : undefined;
  const orphan =
    parentPid !== undefined &&
    (parentPid <= 1 || !table.alive(parentPid) || (parentArgv !== undefined && basename(parentArgv[0] ?? '') !== 'node'));
  return { state: 'running', pid, parentPid, orphan };
}

function isServerFor(argv: string[], dataDir: string): boolean {
  if (!/^(postgres|postmaster)$/.test(basename(argv[0] ?? ''))) return false;
  const d = argv.indexOf('-D');
  return d >= 0 && argv[d + 1] !== undefined && resolve(argv[d + 1]!) === resolve(dataDir);
}

/** Removes a stale lock. Only for a `stale` state from `inspectLock`. */
export async function removeStaleLock(dataDir: string): Promise<void> {
  await rm(lockFile(dataDir), { force: true });
}

/** The sentence `npm start` prints for a directory in use. */
export function describeRunning(dataDir: string, lock: Extract<LockState, { state: 'running' }>): string {
  return lock.orphan
    ? `${dataDir} is in use by PostgreSQL pid ${lock.pid} started by a previous npm start; stop it with kill ${lock.pid}`
    : `${dataDir} is in use by PostgreSQL pid ${lock.pid}` +
        (lock.parentPid !== undefined ? `, started by process ${lock.parentPid}, which is still running (another npm start?)` : '') +
        '; stop that first';
}

/**
 * The port of the server running on `dataDir` (postmaster.pid's fourth line), or undefined when
 * none runs there: how `npm run admin` reaches `npm start`'s embedded PostgreSQL, whose port is
 * picked afresh at every start.
 */
export async function runningServerPort(dataDir: string, table: ProcessTable = procTable): Promise<number | undefined> {
  const lock = await inspectLock(dataDir, table);
  if (lock.state !== 'running') return undefined;
  const text = await readFile(lockFile(dataDir), 'utf8').catch(() => '');
  const port = Number(text.split('\n')[3]);
  return Number.isInteger(port) && port > 0 ? port : undefined;
}
