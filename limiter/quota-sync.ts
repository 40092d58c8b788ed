/**
 * The sidecar's side of quota synchronisation (README, "The sidecar's side"): keeps
 * the local {@link QuotaCache} current from the control plane's QuotaSyncService.
 *
 * - **Push.** One `Watch(since_version = the version held)` stream. Every snapshot is applied in
 *   version order: older ones are ignored; a delta cut from another base triggers an immediate
 *   unary `Snapshot(since_version = 0)` full fetch. Each applied version is acked at once (`Ack`),
 *   because a Put on the control plane answers only when every connected sidecar has acked it.
 *   Ack failures are logged, never fatal (the control plane then reports this sidecar as lagging).
 * - **Reconnect.** When the stream ends or fails, it is reopened after an exponential backoff with
 *   jitter (quota-sync-backoff.ts), resuming from the version held.
 * - **Poll.** Independently, a unary `Snapshot(since_version)` about every `pollIntervalMs` (±10 %),
 *   the source of truth that makes a missed push harmless.
 * - **Last-known-good.** The working set (plans and the key records held) is kept on disk
 *   (snapshot-store.ts) after every applied version and every batch of records looked up, and
 *   loaded at start, so a restarted sidecar starts warm and serves while the control plane is down.
 * - **Lookups.** {@link QuotaSync.lookup} is the unary `Lookup` call quota-lookup.ts batches into.
 * - **Max age.** {@link QuotaSync.stale} says when the last successful sync is older than
 *   `maxAgeMs`; the data plane then holds every cached quota to the floor plan with
 *   {@link QuotaSync.effective} (rule: quota-sync-max-age.ts).
 *
 * A successful sync is any answer that tells us our version is current: a snapshot applied, a
 * heartbeat or poll answer at the version we hold.
 *
 * Authentication: when `token` is set, every call carries `authorization: Bearer <token>`, the
 * scheme the control plane checks against its CONTROL_PLANE_SYNC_TOKEN.
 *
 * All snapshot handling runs one at a time, in arrival order.
 */
import { hostname } from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import {
  AckRequestSchema,
  LookupRequestSchema,
  QuotaSyncService,
  SnapshotRequestSchema,
  WatchRequestSchema,
  type Snapshot,
} from '../proto/gen/quota/v1/quota_pb.js';
import { grpcClientConstructor, unaryCall, type GrpcClient } from '../shared/grpc.js';
import { systemClock, type Clock } from '../shared/clock.js';
import type { Logger } from '../shared/log.js';
import type { CompiledQuota, QuotaCache } from './quota-cache.js';
import type { LookupAnswer } from './quota-lookup.js';
import { backoffDelay, type BackoffOptions } from './quota-sync-backoff.js';
import { capToFloor } from './quota-sync-max-age.js';
import { SnapshotStore, nodeTimers, type Timers } from './snapshot-store.js';

export interface QuotaSyncOptions {
  /** The control plane's gRPC address, `host:port` (LIMITER_CONTROL_PLANE_URL). */
  controlPlaneUrl: string;
  /** This sidecar's id as the control plane reports it (SIDECAR_ID; default {@link defaultSidecarId}). */
  sidecarId: string;
  /** Sent as `authorization: Bearer <token>` on every call when set (CONTROL_PLANE_SYNC_TOKEN). */
  token?: string | undefined;
  cache: QuotaCache;
  log: Logger;
  clock?: Clock;
  /** The last-known-good file (LIMITER_SNAPSHOT_FILE); undefined keeps nothing on disk. */
  snapshotPath?: string | undefined;
  /** Poll period, ms (LIMITER_SYNC_POLL_INTERVAL). Default 5000. */
  pollIntervalMs?: number;
  /** Max age of the last successful sync, ms, before {@link QuotaSync.stale} (LIMITER_QUOTA_MAX_AGE); 0 never. Default 0. */
  maxAgeMs?: number;
  /** Reconnect backoff. Default 250 ms doubling up to 10 s. */
  backoff?: BackoffOptions;
  /** Deadline of a poll or an ack, ms. Default 5000. */
  callTimeoutMs?: number;
  /** Deadline of a full-snapshot fetch (the whole table), ms. Default 30 000. */
  fullFetchTimeoutMs?: number;
  /** Least time between two writes of the snapshot file, ms. Default 1000. */
  minWriteIntervalMs?: number;
  /**
   * How long records looked up wait before the snapshot file is rewritten for them, ms (the whole
   * working set is written each time). Default 10 000.
   */
  workingSetWriteDelayMs?: number;
  /** Deadline of a Lookup call, ms (LIMITER_LOOKUP_TIMEOUT). Default 1000. */
  lookupTimeoutMs?: number;
  /** In [0, 1): jitter of the backoff and the poll period. Default Math.random. */
  random?: () => number;
  timers?: Timers;
  /** Default insecure (the control plane is internal). */
  credentials?: grpc.ChannelCredentials;
  /**
   * Called with every snapshot applied to the cache (`force`: a full table that replaced a newer
   * one), in order, before it is acked. `LIMITER_WORKERS` ≥ 2: the main thread relays it to the
   * worker threads (quota-relay.ts).
   */
  onApplied?: (s: Snapshot, force: boolean) => void;
  /**
   * An ack is sent once this resolves (asked when the ack is due). `LIMITER_WORKERS` ≥ 2: once every
   * worker thread has applied what was relayed to it, so a Put still returns only when the next
   * request on any thread sees the new record.
   */
  beforeAck?: () => Promise<void>;
  /** Called whenever the time of the last successful sync changes (epoch ms). */
  onSyncedAt?: (ms: number) => void;
}

/** What /metrics and /readyz report about the sync. */
export interface QuotaSyncStatus {
  sidecarId: string;
  /** The quota table version the cache holds. */
  version: number;
  /** Epoch ms of the last successful sync (for a state loaded from disk: when it was last synced); 0 never. */
  lastSyncAtMs: number;
  /** The Watch stream is open and the control plane has answered on it. */
  connected: boolean;
  /** Failed calls (stream, poll, full fetch) since the last successful sync. */
  consecutiveFailures: number;
  /** Past the max age: quotas are held to the floor plan. */
  stale: boolean;
  /** The highest version acked on the current stream; -1 none yet. */
  ackedVersion: number;
  /** Streams opened after the first one. */
  reconnects: number;
  /** Successful syncs since start (snapshots applied, or answers that our version is current). */
  syncs: number;
}

type Client = GrpcClient<typeof QuotaSyncService>;

/** `<hostname>-<pid>`: unique per process on a host, stable for the process's life. */
export function defaultSidecarId(): string {
  return `${hostname()}-${process.pid}`;
}

export class QuotaSync {
  private readonly o: Required<
    Omit<QuotaSyncOptions, 'token' | 'snapshotPath' | 'credentials' | 'onApplied' | 'beforeAck' | 'onSyncedAt'>
  > &
    Pick<QuotaSyncOptions, 'onApplied' | 'beforeAck' | 'onSyncedAt'> & { token: string | undefined };
  private readonly cache: QuotaCache;
  private readonly log: Logger;
  private readonly client: Client;
  private readonly store: SnapshotStore | undefined;
  private call: grpc.ClientReadableStream<Snapshot> | undefined;
  private tail: Promise<void> = Promise.resolve();
  private polling: Promise<void> | undefined;
  private pollTimer: unknown;
  private reconnectTimer: unknown;
  private attempt = 0;
  private started = false;
  private closed = false;
  private connected = false;
  private lastSyncAtMs = 0;
  private failures = 0;
  private syncs = 0;
  private ackedVersion = -1;
  private streams = 0;
  // After a failed full fetch, further deltas from another base wait for the next poll to resync.
  private fullFetchBlocked = false;
  private waiters: (() => void)[] = [];

  constructor(opts: QuotaSyncOptions) {
    this.o = {
      controlPlaneUrl: opts.controlPlaneUrl,
      sidecarId: opts.sidecarId,
      token: opts.token,
      cache: opts.cache,
      log: opts.log,
      clock: opts.clock ?? systemClock,
      pollIntervalMs: opts.pollIntervalMs ?? 5000,
      maxAgeMs: opts.maxAgeMs ?? 0,
      backoff: opts.backoff ?? { baseMs: 250, maxMs: 10_000 },
      callTimeoutMs: opts.callTimeoutMs ?? 5000,
      fullFetchTimeoutMs: opts.fullFetchTimeoutMs ?? 30_000,
      minWriteIntervalMs: opts.minWriteIntervalMs ?? 1000,
      workingSetWriteDelayMs: opts.workingSetWriteDelayMs ?? 10_000,
      lookupTimeoutMs: opts.lookupTimeoutMs ?? 1000,
      random: opts.random ?? Math.random,
      timers: opts.timers ?? nodeTimers,
      onApplied: opts.onApplied,
      beforeAck: opts.beforeAck,
      onSyncedAt: opts.onSyncedAt,
    };
    this.cache = opts.cache;
    this.log = opts.log.child({ component: 'quota-sync', sidecar_id: opts.sidecarId });
    const Ctor = grpcClientConstructor(QuotaSyncService);
    this.client = new Ctor(opts.controlPlaneUrl, opts.credentials ?? grpc.credentials.createInsecure(), {
      // A full snapshot is the whole table: far above grpc-js's 4 MB default for large tables.
      'grpc.max_receive_message_length': -1,
      // Beneath our backoff, grpc-js reconnects the channel on its own (1 s, then ×1.6 up to 120 s),
      // and a call made before that timer ends fails at once without trying: a control plane that
      // came up was found only at grpc-js's next step (a sidecar started before it: 1–3 s; after a
      // long outage, up to 2 min). Its steps are ours.
      'grpc.initial_reconnect_backoff_ms': this.o.backoff.baseMs,
      'grpc.max_reconnect_backoff_ms': this.o.backoff.maxMs,
    });
    this.store =
      opts.snapshotPath === undefined
        ? undefined
        : new SnapshotStore({
            path: opts.snapshotPath,
            log: opts.log,
            minWriteIntervalMs: this.o.minWriteIntervalMs,
            timers: this.o.timers,
            source: (syncedAtMs) => this.cache.snapshot(syncedAtMs),
          });
  }

  /** The resolved path of the last-known-good file, when one is kept. */
  get snapshotPath(): string | undefined {
    return this.store?.path;
  }

  /** Files written to the last-known-good path since start. */
  get snapshotWrites(): number {
    return this.store?.writes ?? 0;
  }

  /**
   * Loads the last-known-good snapshot (when there is one and the cache holds nothing newer), then
   * opens the Watch stream and starts polling. Resolves once the file is loaded; it does not wait
   * for the control plane (see {@link whenSynced}). Never rejects for the control plane being down.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.store) await this.loadLastKnownGood(this.store);
    if (this.closed) return;
    this.openWatch();
    this.schedulePoll();
  }

  /**
   * True when the last successful sync is older than the max age (or there has been none): the
   * cached quotas may no longer be the control plane's. Cheap (one clock read); call it per request.
   */
  stale(): boolean {
    return this.o.maxAgeMs > 0 && this.o.clock.now() - this.lastSyncAtMs > this.o.maxAgeMs;
  }

  /**
   * The quota to enforce for a cached `quota`: itself while the sync is fresh; past the max age,
   * held to `floor`'s limits (the sidecar's configured default plan), so a stale cache never keeps a
   * downgraded paid plan alive. Memoised per quota: one WeakMap lookup while stale.
   */
  effective(quota: CompiledQuota, floor: CompiledQuota): CompiledQuota {
    return this.stale() ? capToFloor(quota, floor) : quota;
  }

  /** True once the cache holds a snapshot (from disk or the control plane): for /readyz. */
  ready(): boolean {
    return this.cache.appliedAt !== 0;
  }

  status(): QuotaSyncStatus {
    return {
      sidecarId: this.o.sidecarId,
      version: this.cache.version,
      lastSyncAtMs: this.lastSyncAtMs,
      connected: this.connected,
      consecutiveFailures: this.failures,
      stale: this.stale(),
      ackedVersion: this.ackedVersion,
      reconnects: Math.max(0, this.streams - 1),
      syncs: this.syncs,
    };
  }

  /**
   * Resolves true once the control plane has answered successfully since start (at once if it
   * already has; a state loaded from disk does not count), false after `timeoutMs`.
   */
  whenSynced(timeoutMs: number): Promise<boolean> {
    if (this.syncs > 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve(false);
      }, timeoutMs).unref();
      this.waiters.push(done);
    });
  }

  /**
   * One `Lookup` call: the records of `subjects` (at most 1000) and the table version they were
   * read at. Rejects when the control plane does not answer within the lookup deadline.
   */
  async lookup(subjects: string[]): Promise<LookupAnswer> {
    const r = await unaryCall<typeof QuotaSyncService, 'lookup'>(
      this.client,
      'lookup',
      create(LookupRequestSchema, { subjectIds: subjects, sidecarId: this.o.sidecarId }),
      { metadata: this.metadata(), timeoutMs: this.o.lookupTimeoutMs },
    );
    return { quotas: r.quotas, unknown: r.unknownSubjectIds, version: Number(r.version) };
  }

  /** Records were looked up and installed: the last-known-good file is rewritten (coalesced). */
  workingSetChanged(): void {
    if (this.cache.appliedAt !== 0) this.store?.changed(undefined, this.o.workingSetWriteDelayMs);
  }

  /** Polls once now (the periodic poll does the same); resolves when its answer is handled. */
  poll(): Promise<void> {
    if (this.polling) return this.polling;
    const since = this.sinceVersion();
    this.polling = unaryCall<typeof QuotaSyncService, 'snapshot'>(
      this.client,
      'snapshot',
      create(SnapshotRequestSchema, { sinceVersion: BigInt(since), sidecarId: this.o.sidecarId }),
      {
        metadata: this.metadata(),
        timeoutMs: this.o.callTimeoutMs,
      },
    )
      .then(
        (s) => {
          if (this.closed) return;
          this.fullFetchBlocked = false;
          return this.enqueue(() => this.handle(s, 'poll'));
        },
        (err: unknown) => {
          if (!this.closed) this.failure(err, 'poll');
        },
      )
      .finally(() => {
        this.polling = undefined;
      });
    return this.polling;
  }

  /**
   * Stops the stream, the poll and the reconnect timer, waits for snapshot handling in progress,
   * and writes the last-known-good file one last time (recording the last sync time).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.o.timers.clearTimeout(this.pollTimer);
    this.o.timers.clearTimeout(this.reconnectTimer);
    this.call?.cancel();
    this.call = undefined;
    this.connected = false;
    // A full fetch in flight may take its whole deadline; shutdown does not wait for it (its answer
    // is dropped, since handling stops once closed).
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.tail, new Promise<void>((resolve) => (timer = setTimeout(resolve, 1000)))]);
    clearTimeout(timer);
    this.client.close();
    await this.store?.flush(true);
  }

  // ── internals ──────────────────────────────────────────────────────────────

  private async loadLastKnownGood(store: SnapshotStore): Promise<void> {
    let s: Snapshot | undefined;
    try {
      s = await store.load();
    } catch (err) {
      this.log.error({ err }, 'ignoring the last-known-good quota snapshot');
      return;
    }
    if (s === undefined) {
      this.log.info({ path: store.path }, 'no last-known-good quota snapshot yet');
      return;
    }
    const now = this.o.clock.now();
    const r = this.cache.apply(s, now);
    if (!r.applied) {
      // The cache was filled from elsewhere with a newer version: that state wins, and ours is unknown.
      store.reset();
      this.log.warn(
        { file_version: Number(s.version), version: this.cache.version },
        'last-known-good snapshot is older than the cache; not loaded',
      );
      return;
    }
    this.lastSyncAtMs = Math.min(now, Math.round(s.issuedAt * 1000));
    this.o.onSyncedAt?.(this.lastSyncAtMs);
    this.o.onApplied?.(s, false);
    store.changed();
    this.log.info(
      { path: store.path, version: r.version, records: s.quotas.length, age_ms: now - this.lastSyncAtMs, stale: this.stale() },
      'loaded the last-known-good quota snapshot',
    );
  }

  /** From the version held (the disk copy is written from the cache, so it always follows). */
  private sinceVersion(): number {
    return this.cache.version;
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.o.token !== undefined) md.set('authorization', `Bearer ${this.o.token}`);
    return md;
  }

  private openWatch(): void {
    if (this.closed) return;
    const since = this.sinceVersion();
    const call = this.client.watch(
      create(WatchRequestSchema, { sinceVersion: BigInt(since), sidecarId: this.o.sidecarId }),
      this.metadata(),
    );
    this.call = call;
    this.streams++;
    // A new stream registers afresh: the first answer on it is acked even if its version is not new.
    this.ackedVersion = -1;
    let delivered = false;
    let done = false;
    const finish = (err?: unknown): void => {
      if (done) return;
      done = true;
      const wasConnected = this.connected && this.call === call;
      if (this.call === call) {
        this.call = undefined;
        this.connected = false;
      }
      if (this.closed) return;
      if (delivered) this.attempt = 0;
      if (err !== undefined) this.failure(err, 'watch');
      else if (wasConnected) this.log.warn({ version: this.cache.version }, 'quota watch stream ended by the control plane; reconnecting');
      const delay = backoffDelay(this.attempt++, this.o.random(), this.o.backoff);
      this.log.debug({ delay_ms: delay, attempt: this.attempt }, 'quota watch reconnect scheduled');
      this.reconnectTimer = this.o.timers.setTimeout(() => {
        this.reconnectTimer = undefined;
        this.openWatch();
      }, delay);
    };
    call.on('metadata', () => {
      if (this.call === call) this.markConnected();
    });
    call.on('data', (s: Snapshot) => {
      if (this.call !== call) return;
      delivered = true;
      this.markConnected();
      void this.enqueue(() => this.handle(s, 'watch'));
    });
    call.on('error', (err: unknown) => finish(err));
    call.on('end', () => finish());
  }

  private markConnected(): void {
    if (this.connected) return;
    this.connected = true;
    this.log.info({ url: this.o.controlPlaneUrl, version: this.cache.version }, 'quota watch stream connected');
  }

  private schedulePoll(): void {
    if (this.closed) return;
    const delay = Math.round(this.o.pollIntervalMs * (0.9 + 0.2 * this.o.random()));
    this.pollTimer = this.o.timers.setTimeout(() => {
      this.pollTimer = undefined;
      void this.poll().finally(() => this.schedulePoll());
    }, delay);
  }

  private enqueue(fn: () => void | Promise<void>): Promise<void> {
    const run = this.tail.then(fn).catch((err: unknown) => {
      this.log.error({ err }, 'quota snapshot handling failed');
    });
    this.tail = run;
    return run;
  }

  private handle(s: Snapshot, source: 'watch' | 'poll' | 'full'): void | Promise<void> {
    if (this.closed) return;
    const now = this.o.clock.now();
    const r = this.cache.apply(s, now);
    const version = Number(s.version);
    if (r.applied) {
      this.o.onApplied?.(s, false);
      this.store?.changed(now);
      this.synced(now);
      this.ack(version);
      this.log.debug(
        { version, delta: s.delta, records: s.quotas.length, deleted: s.deletedSubjectIds.length, source },
        'quota snapshot applied',
      );
      return;
    }
    if (r.reason === 'stale') {
      if (version === this.cache.version) {
        // A heartbeat, a poll with nothing new, or a full snapshot of what we hold: we are current.
        this.store?.touch(now);
        this.synced(now);
        this.ack(version);
      } else if (!s.delta && source !== 'full') {
        // A full table older than ours, in answer to "since our version" (Watch or poll): the
        // control plane's table went back (restored from a
        // backup, rebuilt, or a fresh database after a last-known-good file from another one).
        // The control plane is the authority: take its table, or we would serve ours forever.
        // (A full fetch asks from version 0 and may simply arrive after newer pushes: ignored.)
        this.log.warn(
          { their_version: version, version: this.cache.version, source },
          'control plane sent a full snapshot older than ours; its table replaces ours',
        );
        this.cache.apply(s, now, { force: true });
        this.o.onApplied?.(s, true);
        this.store?.reset();
        this.store?.changed(now);
        this.synced(now);
        this.ackedVersion = -1; // the acked versions belonged to the old table
        this.ack(version);
      }
      return;
    }
    // base_mismatch: a delta we cannot apply; the whole table puts us right.
    return this.fetchFull(Number(s.baseVersion), version);
  }

  private async fetchFull(base: number, target: number): Promise<void> {
    if (this.fullFetchBlocked) return;
    this.log.info(
      { version: this.cache.version, delta_base: base, delta_version: target },
      'delta from another base; fetching a full snapshot',
    );
    let s: Snapshot;
    try {
      s = await unaryCall<typeof QuotaSyncService, 'snapshot'>(
        this.client,
        'snapshot',
        create(SnapshotRequestSchema, { sinceVersion: 0n, sidecarId: this.o.sidecarId }),
        {
          metadata: this.metadata(),
          timeoutMs: this.o.fullFetchTimeoutMs,
        },
      );
    } catch (err) {
      if (this.closed) return;
      this.fullFetchBlocked = true;
      this.failure(err, 'full snapshot');
      return;
    }
    if (s.delta) {
      // since_version 0 must bring the whole table; following a delta here could loop.
      this.fullFetchBlocked = true;
      this.log.error(
        { version: Number(s.version) },
        'control plane answered a full-snapshot request with a delta; waiting for the next poll',
      );
      return;
    }
    return this.handle(s, 'full');
  }

  private synced(now: number): void {
    this.lastSyncAtMs = now;
    this.o.onSyncedAt?.(now);
    this.syncs++;
    if (this.failures > 0) this.log.info({ version: this.cache.version, after_failures: this.failures }, 'quota sync recovered');
    this.failures = 0;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private failure(err: unknown, what: string): void {
    this.failures++;
    const e = err as Partial<grpc.ServiceError>;
    const fields = {
      what,
      code: e.code,
      grpc_status: e.code === undefined ? undefined : grpc.status[e.code],
      details: e.details ?? e.message,
      failures: this.failures,
    };
    // The first failure of a streak is a warning; repeats (the control plane staying down) are debug.
    if (this.failures === 1) this.log.warn(fields, 'quota sync call failed; serving the cached quotas');
    else this.log.debug(fields, 'quota sync call failed again');
  }

  private ack(version: number): void {
    if (version <= this.ackedVersion) return;
    this.ackedVersion = version;
    if (this.o.beforeAck === undefined) this.sendAck(version);
    else
      void this.o.beforeAck().then(
        () => this.sendAck(version),
        () => undefined,
      );
  }

  private sendAck(version: number): void {
    if (this.closed) return;
    unaryCall<typeof QuotaSyncService, 'ack'>(
      this.client,
      'ack',
      create(AckRequestSchema, { sidecarId: this.o.sidecarId, version: BigInt(version) }),
      {
        metadata: this.metadata(),
        timeoutMs: this.o.callTimeoutMs,
      },
    ).catch((err: unknown) => {
      // Not fatal: the control plane reports us as lagging. The next answer at this version acks again.
      if (this.ackedVersion === version) this.ackedVersion = -1;
      if (!this.closed)
        this.log.warn({ version, code: (err as Partial<grpc.ServiceError>).code, details: (err as Error).message }, 'quota ack failed');
    });
  }
}
