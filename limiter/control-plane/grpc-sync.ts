/**
 * gRPC quota.v1.QuotaSyncService: how sidecars keep their quota copy current.
 *
 * - `Watch(since_version, sidecar_id)`: first a full snapshot (since 0, too old for the change log,
 *   or ahead of us), a delta from `since`, or an empty delta at our version when `since` is current;
 *   then a delta after every move of the table (coalesced: a slow reader gets one delta covering
 *   everything it missed, never a queue), and an empty delta at the current version after
 *   CONTROL_PLANE_HEARTBEAT without one. Each delta's `base_version` is the version of the
 *   previous message on that stream, so the deltas chain exactly.
 * - `Snapshot(since_version)`: the same first message, for polling.
 * - `Ack(sidecar_id, version)`: the sidecar applied `version`; releases writes waiting for it.
 * - `Lookup(subject_ids)`: the records of keys a sidecar does not hold, read from the quotas
 *   table's primary key with the version they were read at (one batch per sidecar event-loop turn).
 *
 * A sidecar counts as connected while it has a Watch stream open here. Watch, Snapshot and Ack are
 * served from memory, so they keep working, at the last version read, while PostgreSQL is down;
 * Lookup needs PostgreSQL and answers UNAVAILABLE without it (the sidecar then refuses the keys it
 * does not hold: an outage never makes a key exist).
 */
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import {
  AckResponseSchema,
  LookupResponseSchema,
  type QuotaSyncService,
  type Snapshot,
  type WatchRequest,
} from '../../proto/gen/quota/v1/quota_pb.js';
import type { Clock } from '../../shared/clock.js';
import { invalidField, isPlatformError, PlatformError } from '../../shared/errors.js';
import { failStream, toGrpcError, type GrpcServiceImplementation } from '../../shared/grpc.js';
import type { Logger } from '../../shared/log.js';
import type { Authenticator } from './auth.js';
import { authorizationOf } from './grpc-admin.js';
import type { ControlPlaneMetrics } from './metrics.js';
import type { QuotaMirror } from './mirror.js';
import type { SnapshotKind } from './quota-table.js';
import type { SidecarRegistry } from './sidecars.js';
import type { QuotaStore } from './store.js';
import { checkSidecarId, MAX_SUBJECT_LENGTH } from './subject.js';

/** Most subjects one Lookup may ask for (proto quota.v1 LookupRequest); the sidecar splits above it. */
export const MAX_LOOKUP_SUBJECTS = 1000;

export interface SyncDeps {
  mirror: QuotaMirror;
  /** Where Lookup reads key records (the quotas table's primary key). */
  store: QuotaStore;
  sidecars: SidecarRegistry;
  auth: Authenticator;
  metrics: ControlPlaneMetrics;
  log: Logger;
  clock: Clock;
  heartbeatMs: number;
}

interface Watcher {
  call: grpc.ServerWritableStream<WatchRequest, Snapshot>;
  sidecarId: string;
  /** The version of the last message written to this stream. */
  sent: number;
  /** Waiting for 'drain' after a write the transport could not take at once. */
  blocked: boolean;
  lastSendMs: number;
  /** False until the first message is out (nothing else may precede it). */
  started: boolean;
  closed: boolean;
}

export class SyncService {
  private readonly watchers = new Set<Watcher>();
  private closing = false;

  constructor(private readonly deps: SyncDeps) {}

  /** Open Watch streams. */
  get streams(): number {
    return this.watchers.size;
  }

  /** The table moved on: bring every stream up to date. */
  advanced(): void {
    for (const w of this.watchers) this.pump(w);
  }

  /** Sends a heartbeat on every stream idle for CONTROL_PLANE_HEARTBEAT. Call periodically. */
  heartbeat(): void {
    const now = this.deps.clock.now();
    for (const w of this.watchers) {
      if (w.started && !w.blocked && now - w.lastSendMs >= this.deps.heartbeatMs)
        this.send(w, this.deps.mirror.table.snapshotSince(w.sent));
    }
  }

  /** Ends every stream (shutdown); sidecars reconnect to another replica or when we are back. */
  closeAll(): void {
    this.closing = true;
    for (const w of [...this.watchers]) {
      this.drop(w);
      try {
        w.call.end();
      } catch {
        // the stream may already be gone
      }
    }
  }

  implementation(): GrpcServiceImplementation<typeof QuotaSyncService> {
    return {
      watch: (call) => void this.watch(call),
      snapshot: (call, callback) => {
        void (async () => {
          try {
            this.deps.auth.sync(authorizationOf(call));
            if (call.request.sidecarId !== '') checkSidecarId(call.request.sidecarId);
            const since = Number(call.request.sinceVersion);
            if (since > this.deps.mirror.table.version) await this.deps.mirror.refresh();
            callback(null, this.stamp(this.deps.mirror.table.snapshotSince(since)));
          } catch (err) {
            callback(toGrpcError(err));
          }
        })();
      },
      lookup: (call, callback) => {
        void (async () => {
          const started = performance.now();
          try {
            this.deps.auth.sync(authorizationOf(call));
            if (call.request.sidecarId !== '') checkSidecarId(call.request.sidecarId);
            const ids = call.request.subjectIds;
            if (ids.length > MAX_LOOKUP_SUBJECTS) throw invalidField('subject_ids', `at most ${MAX_LOOKUP_SUBJECTS} subjects per call`);
            for (const id of ids)
              if (id.length === 0 || id.length > MAX_SUBJECT_LENGTH)
                throw invalidField('subject_ids', `each subject id is 1 to ${MAX_SUBJECT_LENGTH} characters`);
            const r = await this.deps.store.lookup(ids);
            this.deps.metrics.lookupSubjects.inc({ result: 'found' }, r.quotas.length);
            this.deps.metrics.lookupSubjects.inc({ result: 'unknown' }, r.unknown.length);
            this.deps.metrics.lookupSeconds.observe((performance.now() - started) / 1000);
            callback(null, create(LookupResponseSchema, { quotas: r.quotas, unknownSubjectIds: r.unknown, version: BigInt(r.version) }));
          } catch (err) {
            this.deps.metrics.lookupSubjects.inc({ result: 'failed' }, call.request.subjectIds.length);
            callback(toGrpcError(err));
          }
        })();
      },
      ack: (call, callback) => {
        try {
          this.deps.auth.sync(authorizationOf(call));
          checkSidecarId(call.request.sidecarId);
          this.deps.sidecars.ack(call.request.sidecarId, Number(call.request.version));
          callback(null, create(AckResponseSchema, {}));
        } catch (err) {
          callback(toGrpcError(err));
        }
      },
    };
  }

  private async watch(call: grpc.ServerWritableStream<WatchRequest, Snapshot>): Promise<void> {
    try {
      if (this.closing) throw new PlatformError('shutting_down', { detail: 'the control plane is shutting down; reconnect' });
      this.deps.auth.sync(authorizationOf(call));
      checkSidecarId(call.request.sidecarId);
    } catch (err) {
      if (!isPlatformError(err)) this.deps.log.error({ err }, 'watch failed');
      failStream(call, err);
      return;
    }
    const w: Watcher = { call, sidecarId: call.request.sidecarId, sent: 0, blocked: false, lastSendMs: 0, started: false, closed: false };
    const since = Number(call.request.sinceVersion);
    this.watchers.add(w);
    this.deps.sidecars.connect(w.sidecarId);
    const end = (): void => this.drop(w);
    call.on('cancelled', end);
    call.on('close', end);
    call.on('finish', end);
    call.on('error', end);
    this.deps.log.info({ sidecar: w.sidecarId, since, version: this.deps.mirror.table.version }, 'sidecar watching');
    // A sidecar ahead of us may have been served by a replica that is further along: catch up first.
    if (since > this.deps.mirror.table.version) await this.deps.mirror.refresh();
    if (w.closed) return;
    w.started = true;
    this.send(w, this.deps.mirror.table.snapshotSince(since));
    // Anything committed while the first message was cut goes out now.
    this.pump(w);
  }

  private pump(w: Watcher): void {
    if (w.closed || !w.started || w.blocked || w.sent === this.deps.mirror.table.version) return;
    this.send(w, this.deps.mirror.table.snapshotSince(w.sent));
  }

  private send(w: Watcher, cut: { snapshot: Snapshot; kind: SnapshotKind }): void {
    if (w.closed) return;
    const snap = this.stamp(cut);
    w.sent = Number(snap.version);
    w.lastSendMs = this.deps.clock.now();
    let flushed: boolean;
    try {
      flushed = w.call.write(snap);
    } catch (err) {
      this.deps.log.warn({ err, sidecar: w.sidecarId }, 'watch stream write failed');
      this.drop(w);
      return;
    }
    if (!flushed) {
      w.blocked = true;
      w.call.once('drain', () => {
        w.blocked = false;
        this.pump(w);
      });
    }
  }

  private stamp(cut: { snapshot: Snapshot; kind: SnapshotKind }): Snapshot {
    this.deps.metrics.snapshotsSent.inc({ kind: cut.kind });
    return { ...cut.snapshot, issuedAt: this.deps.clock.now() / 1000 };
  }

  private drop(w: Watcher): void {
    if (w.closed) return;
    w.closed = true;
    this.watchers.delete(w);
    this.deps.sidecars.disconnect(w.sidecarId);
    this.deps.log.info({ sidecar: w.sidecarId, sent: w.sent }, 'sidecar stream closed');
  }
}
