/**
 * The sidecar's last-known-good quota table on disk, so a sidecar that starts while the control
 * plane is down still serves everyone's quotas.
 *
 * The quota cache holds compiled records; this keeps the records as received (quota.v1 messages by
 * subject), brought forward by the same full and delta snapshots in the same order, and writes them
 * as the JSON of one full snapshot (shared/proto-json, the format of LIMITER_QUOTA_FILE too, so the
 * file doubles as a standalone quota file). Its `issued_at` is the time of the last successful sync
 * when it was written, which is what the max-age rule counts from after a restart.
 *
 * Only complete states are written: after a full snapshot, or a delta on top of the version held.
 * A delta from another base leaves the copy incomplete, and nothing is written until the next full
 * snapshot. Writes are atomic (a temporary file in the same directory, fsync, rename), so a crash
 * leaves the previous file or the new one, never half of one; bursts of versions are coalesced to
 * at most one write per `minWriteIntervalMs`.
 */
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { SnapshotSchema, type Quota, type Snapshot } from '../proto/gen/quota/v1/quota_pb.js';
import { fromJsonString, toJsonString } from '../shared/proto-json.js';
import { InternalError } from '../shared/errors.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import type { Logger } from '../shared/log.js';

/** The timer functions the store and the sync client schedule with (injectable for tests). */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Node's timers, unref'd: pending sync work never keeps a process alive on its own. */
export const nodeTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface SnapshotStoreOptions {
  /** Where the file lives; a relative path is resolved against the project root. */
  path: string;
  log: Logger;
  /** Least time between two writes, ms; later versions wait and are written together. Default 1000. */
  minWriteIntervalMs?: number;
  timers?: Timers;
}

/** Why the file on disk could not be used (`snapshot_file_unusable`). */
export class SnapshotFileError extends InternalError<'snapshot_file_unusable'> {
  constructor(path: string, problem: string) {
    super('snapshot_file_unusable', `last-known-good snapshot ${path}: ${problem}`);
    this.name = 'SnapshotFileError';
  }
}

export class SnapshotStore {
  /** The resolved path of the file. */
  readonly path: string;
  private readonly log: Logger;
  private readonly minWriteIntervalMs: number;
  private readonly timers: Timers;
  private readonly quotas = new Map<string, Quota>();
  // -1: no complete state held (nothing yet, or a delta came from another base).
  private held = -1;
  private syncedAtMs = 0;
  private dirty = false;
  private writing: Promise<void> | null = null;
  private timer: unknown = undefined;
  private failing = false;
  private seq = 0;
  /** Files written since construction (for tests and metrics). */
  writes = 0;

  constructor(opts: SnapshotStoreOptions) {
    this.path = isAbsolute(opts.path) ? opts.path : resolve(PROJECT_ROOT, opts.path);
    this.log = opts.log;
    this.minWriteIntervalMs = opts.minWriteIntervalMs ?? 1000;
    this.timers = opts.timers ?? { setTimeout: nodeTimers.setTimeout, clearTimeout: nodeTimers.clearTimeout };
  }

  /** The version of the complete state held, or -1 when there is none. */
  get version(): number {
    return this.held;
  }

  /**
   * Reads the file into the store and returns it: undefined when there is no file yet.
   *
   * @throws SnapshotFileError when the file exists but is not the JSON of a full snapshot.
   */
  async load(): Promise<Snapshot | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return undefined;
      throw new SnapshotFileError(this.path, `cannot read: ${code ?? String(err)}`);
    }
    let s: Snapshot;
    try {
      s = fromJsonString(SnapshotSchema, text);
    } catch (err) {
      throw new SnapshotFileError(this.path, err instanceof Error ? err.message : String(err));
    }
    if (s.delta) throw new SnapshotFileError(this.path, 'is a delta, not a full snapshot');
    this.replace(s);
    this.syncedAtMs = s.issuedAt * 1000;
    return s;
  }

  /**
   * Brings the copy forward with a snapshot the quota cache has just applied, and schedules a write.
   * `syncedAtMs` is the time of that sync (it becomes the file's `issued_at`).
   */
  apply(s: Snapshot, syncedAtMs: number): void {
    this.syncedAtMs = syncedAtMs;
    if (!s.delta) {
      this.replace(s);
    } else if (this.held >= 0 && Number(s.baseVersion) === this.held) {
      for (const id of s.deletedSubjectIds) this.quotas.delete(id);
      for (const q of s.quotas) this.quotas.set(q.subjectId, q);
      this.held = Number(s.version);
    } else {
      // The cache applied a delta we cannot follow (it was filled from elsewhere): keep the last
      // file as it is and wait for a full snapshot.
      this.reset();
      return;
    }
    this.scheduleWrite();
  }

  /** A full snapshot at the version the cache already holds: take it when our copy is incomplete. */
  adopt(s: Snapshot, syncedAtMs: number): void {
    if (s.delta || this.held === Number(s.version)) return;
    this.apply(s, syncedAtMs);
  }

  /** Records a successful sync that changed nothing (written with the next write, or on flush). */
  touch(syncedAtMs: number): void {
    this.syncedAtMs = Math.max(this.syncedAtMs, syncedAtMs);
  }

  /** Forgets the copy (the cache holds a state this store does not know). The file is kept. */
  reset(): void {
    this.quotas.clear();
    this.held = -1;
    this.dirty = false;
  }

  /** The held state as a full snapshot, or undefined when it is incomplete. */
  snapshot(): Snapshot | undefined {
    if (this.held < 0) return undefined;
    return create(SnapshotSchema, {
      version: BigInt(this.held),
      delta: false,
      quotas: [...this.quotas.values()],
      issuedAt: this.syncedAtMs / 1000,
    });
  }

  /**
   * Writes now when there is anything unwritten (or, with `force`, whenever a complete state is
   * held, e.g. to record the last sync time at shutdown), after any write in progress.
   */
  async flush(force = false): Promise<void> {
    while (this.writing) await this.writing;
    if (this.timer !== undefined) {
      this.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (force && this.held >= 0) this.dirty = true;
    if (this.dirty) await this.write();
  }

  private replace(s: Snapshot): void {
    this.quotas.clear();
    for (const q of s.quotas) this.quotas.set(q.subjectId, q);
    this.held = Number(s.version);
  }

  private scheduleWrite(delayMs = 0): void {
    this.dirty = true;
    if (this.writing || this.timer !== undefined) return;
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      if (this.dirty) void this.write();
    }, delayMs);
  }

  private write(): Promise<void> {
    const snapshot = this.snapshot();
    this.dirty = false;
    if (snapshot === undefined) return Promise.resolve();
    const text = toJsonString(SnapshotSchema, snapshot);
    const p = this.writeAtomically(text).then(
      () => {
        this.writes++;
        if (this.failing) this.log.info({ path: this.path }, 'last-known-good snapshot written again');
        this.failing = false;
      },
      (err: unknown) => {
        // Serving is unaffected; the next applied version tries again. Logged once per failing streak.
        if (!this.failing) this.log.error({ err, path: this.path }, 'cannot write the last-known-good snapshot');
        this.failing = true;
      },
    );
    this.writing = p.finally(() => {
      this.writing = null;
      // Versions applied while this write ran: one more write, after the minimum interval.
      if (this.dirty && this.timer === undefined) this.scheduleWrite(this.minWriteIntervalMs);
    });
    return this.writing;
  }

  private async writeAtomically(text: string): Promise<void> {
    const tmp = `${this.path}.${process.pid}.${++this.seq}.tmp`;
    await mkdir(dirname(this.path), { recursive: true });
    try {
      const fh = await open(tmp, 'w', 0o600);
      try {
        await fh.writeFile(text, 'utf8');
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, this.path);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
  }
}
