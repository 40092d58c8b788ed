/**
 * The sidecar's last-known-good working set on disk, so a sidecar that restarts (even while the
 * control plane is down) starts warm: the plans and every key record it held, at the version held.
 *
 * The store keeps no copy of its own: each write asks `source` for the cache's current state as
 * one full snapshot (QuotaCache.snapshot: the records as received), written as JSON (shared/
 * proto-json, the format of LIMITER_QUOTA_FILE too, so the file doubles as a standalone quota
 * file). Its `issued_at` is the time of the last successful sync when it was written, which is what
 * the max-age rule counts from after a restart.
 *
 * Writes are atomic (a temporary file in the same directory, fsync, rename), so a crash leaves the
 * previous file or the new one, never half of one; changes (applied versions, records looked up)
 * are coalesced to at most one write per `minWriteIntervalMs`.
 *
 * A write serializes {@link WRITE_CHUNK} records per turn of the event loop and writes each piece
 * as it goes: the state written is the one `source` returned (its records are the immutable
 * messages as received), but serving goes on between pieces. Serialized in one piece, 200,000
 * held records were 45 MB of JSON and 0.5–0.6 s of a blocked sidecar, every 10 s while lookups
 * filled the working set (bench/RESULTS.md, "Quota working set", third run).
 */
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { create } from '@bufbuild/protobuf';
import type { FileHandle } from 'node:fs/promises';
import { QuotaSchema, SnapshotSchema, type Snapshot } from '../proto/gen/quota/v1/quota_pb.js';
import { fromJsonString, toJson } from '../shared/proto-json.js';
import { InternalError } from '../shared/errors.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import type { Logger } from '../shared/log.js';

/**
 * Records serialized per turn of the event loop while a file is written: a piece is what a request
 * that arrives meanwhile may wait behind, so it is kept to about a millisecond (2,000 records,
 * ≈ 5 ms a piece, put 15 ms on a held key's p99 while the file was rewritten under traffic:
 * bench/RESULTS.md, "Quota working set", third run).
 */
export const WRITE_CHUNK = 500;

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
  /** Least time between two writes, ms; later changes wait and are written together. Default 1000. */
  minWriteIntervalMs?: number;
  /** The state to write, as one full snapshot stamped with the given sync time (QuotaCache.snapshot). */
  source: (syncedAtMs: number) => Snapshot;
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
  private readonly source: (syncedAtMs: number) => Snapshot;
  private syncedAtMs = 0;
  // Nothing is written before the cache holds a state of its own (loaded or synced).
  private holding = false;
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
    this.source = opts.source;
  }

  /**
   * Reads the file: undefined when there is no file yet.
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
    this.syncedAtMs = s.issuedAt * 1000;
    return s;
  }

  /**
   * The cache changed (a version applied, a record looked up, a file loaded): schedules a write.
   * `syncedAtMs`, when given, is the time of that sync (it becomes the file's `issued_at`).
   */
  changed(syncedAtMs?: number, delayMs = 0): void {
    this.holding = true;
    if (syncedAtMs !== undefined) this.syncedAtMs = Math.max(this.syncedAtMs, syncedAtMs);
    this.scheduleWrite(delayMs);
  }

  /** Records a successful sync that changed nothing (written with the next write, or on flush). */
  touch(syncedAtMs: number): void {
    this.syncedAtMs = Math.max(this.syncedAtMs, syncedAtMs);
  }

  /** The control plane's table went back: the next sync time is taken as it comes. */
  reset(): void {
    this.syncedAtMs = 0;
  }

  /**
   * Writes now when there is anything unwritten (or, with `force`, whenever the cache holds a
   * state, e.g. to record the last sync time at shutdown), after any write in progress.
   */
  async flush(force = false): Promise<void> {
    while (this.writing) await this.writing;
    if (this.timer !== undefined) {
      this.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (force && this.holding) this.dirty = true;
    if (this.dirty) await this.write();
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
    const snapshot = this.source(this.syncedAtMs);
    this.dirty = false;
    const p = this.writeAtomically((fh) => writeSnapshotJson(fh, snapshot)).then(
      () => {
        this.writes++;
        if (this.failing) this.log.info({ path: this.path }, 'last-known-good snapshot written again');
        this.failing = false;
      },
      (err: unknown) => {
        // Serving is unaffected; the next change tries again. Logged once per failing streak.
        if (!this.failing) this.log.error({ err, path: this.path }, 'cannot write the last-known-good snapshot');
        this.failing = true;
      },
    );
    this.writing = p.finally(() => {
      this.writing = null;
      // Changes made while this write ran: one more write, after the minimum interval.
      if (this.dirty && this.timer === undefined) this.scheduleWrite(this.minWriteIntervalMs);
    });
    return this.writing;
  }

  private async writeAtomically(fill: (fh: FileHandle) => Promise<void>): Promise<void> {
    const tmp = `${this.path}.${process.pid}.${++this.seq}.tmp`;
    await mkdir(dirname(this.path), { recursive: true });
    try {
      const fh = await open(tmp, 'w', 0o600);
      try {
        await fill(fh);
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

/**
 * The JSON of `snapshot` (what `toJsonString(SnapshotSchema, snapshot)` gives, which `load` reads),
 * written {@link WRITE_CHUNK} records at a time with a turn of the event loop between pieces.
 */
async function writeSnapshotJson(fh: FileHandle, snapshot: Snapshot): Promise<void> {
  // The snapshot without its records, split where they go: `"quotas":[` is a key here (a value in
  // it would be a string, whose quotes JSON escapes), and the rest of the fields keep their order.
  const shell = JSON.stringify(toJson(SnapshotSchema, create(SnapshotSchema, { ...snapshot, quotas: [] })));
  const at = shell.indexOf('"quotas":[]') + '"quotas":['.length;
  await fh.write(shell.slice(0, at));
  const quotas = snapshot.quotas;
  for (let i = 0; i < quotas.length; i += WRITE_CHUNK) {
    if (i > 0) await nextTurn();
    const piece = quotas.slice(i, i + WRITE_CHUNK).map((q) => JSON.stringify(toJson(QuotaSchema, q)));
    await fh.write((i > 0 ? ',' : '') + piece.join(','));
  }
  await fh.write(shell.slice(at));
}
