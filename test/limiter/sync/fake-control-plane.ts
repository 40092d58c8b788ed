/**
 * A small QuotaSyncService on a real grpc-js server (port 0) that the sync tests drive: a versioned
 * in-memory table with a change log, the real protocol (Watch: full snapshot or deltas, then every
 * change; Snapshot: delta after since_version or full; Ack), and switches for the faults under test
 * (silent stream, dropped stream, failing calls, hand-crafted snapshots).
 */
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { addGrpcService } from '../../../shared/grpc.js';
import type { RouteRuleSchema } from '../../../proto/gen/quota/v1/quota_pb.js';
import {
  AckResponseSchema,
  LookupResponseSchema,
  Algorithm,
  QuotaSchema,
  QuotaSyncService,
  SnapshotSchema,
  type Quota,
  type Snapshot,
  type SnapshotRequest,
  type WatchRequest,
} from '../../../proto/gen/quota/v1/quota_pb.js';

export interface Call<R> {
  request: R;
  authorization: string | undefined;
}

interface Change {
  version: number;
  put?: Quota;
  deleted?: string;
}

export interface QuotaExtra {
  plan?: string;
  burst?: number;
  intervalMs?: number;
  algorithm?: Algorithm;
  shadow?: boolean;
  routes?: MessageInitShape<typeof RouteRuleSchema>[];
}

/** A quota record for the tests: `rate` per second, burst twice the rate unless given. */
export function quota(subjectId: string, rate: number, extra: QuotaExtra = {}): Quota {
  return create(QuotaSchema, { subjectId, algorithm: Algorithm.TOKEN_BUCKET, rate, burst: rate * 2, intervalMs: 1000, ...extra });
}

export class FakeControlPlane {
  readonly table = new Map<string, Quota>();
  version = 0;
  private readonly log: Change[] = [];
  readonly watches: Call<WatchRequest>[] = [];
  readonly snapshots: Call<SnapshotRequest>[] = [];
  readonly acks: { sidecarId: string; version: number; authorization: string | undefined }[] = [];
  private readonly open = new Set<grpc.ServerWritableStream<WatchRequest, Snapshot>>();
  /** Do not push changes to open streams (the stream is alive but silent). */
  silent = false;
  /** Fail this many next Watch calls with UNAVAILABLE right after they open. */
  failWatches = 0;
  /** Fail every Snapshot call with UNAVAILABLE while set. */
  failSnapshots = false;
  /** Fail every Ack with UNAVAILABLE while set. */
  failAcks = false;
  /** Fail every Lookup with UNAVAILABLE while set. */
  failLookups = false;
  /** The subjects of every Lookup call, in order. */
  readonly lookups: string[][] = [];
  /** Replaces the normal answer of Snapshot (e.g. to send a stale one). */
  snapshotOverride: ((req: SnapshotRequest) => Snapshot) | undefined;
  private server: grpc.Server | undefined;
  port = 0;

  async start(port = 0): Promise<this> {
    const server = new grpc.Server();
    addGrpcService(server, QuotaSyncService, {
      watch: (call) => {
        const authorization = header(call.metadata);
        this.watches.push({ request: call.request, authorization });
        if (this.failWatches > 0) {
          this.failWatches--;
          call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'failing on purpose' });
          return;
        }
        this.open.add(call);
        call.on('cancelled', () => this.open.delete(call));
        call.on('close', () => this.open.delete(call));
        call.write(this.snapshotAfter(Number(call.request.sinceVersion)));
      },
      snapshot: (call, callback) => {
        this.snapshots.push({ request: call.request, authorization: header(call.metadata) });
        if (this.failSnapshots) {
          callback({ code: grpc.status.UNAVAILABLE, details: 'failing on purpose' });
          return;
        }
        const since = Number(call.request.sinceVersion);
        callback(null, this.snapshotOverride ? this.snapshotOverride(call.request) : this.snapshotAfter(since));
      },
      lookup: (call, callback) => {
        this.lookups.push([...call.request.subjectIds]);
        if (this.failLookups) {
          callback({ code: grpc.status.UNAVAILABLE, details: 'failing on purpose' });
          return;
        }
        const ids = call.request.subjectIds;
        const quotas = ids.flatMap((id) => this.table.get(id) ?? []);
        callback(
          null,
          create(LookupResponseSchema, {
            quotas,
            unknownSubjectIds: ids.filter((id) => !this.table.has(id)),
            version: BigInt(this.version),
          }),
        );
      },
      ack: (call, callback) => {
        if (this.failAcks) {
          callback({ code: grpc.status.UNAVAILABLE, details: 'failing on purpose' });
          return;
        }
        this.acks.push({ sidecarId: call.request.sidecarId, version: Number(call.request.version), authorization: header(call.metadata) });
        callback(null, create(AckResponseSchema));
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    this.server = server;
    return this;
  }

  get url(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Open Watch streams. */
  get watching(): number {
    return this.open.size;
  }

  /** Writes or replaces a record: the next version, pushed to every open stream unless silent. */
  put(q: Quota): number {
    this.version++;
    const stored = create(QuotaSchema, { ...q, version: BigInt(this.version), updatedAt: 1_700_000_000 });
    this.table.set(q.subjectId, stored);
    this.log.push({ version: this.version, put: stored });
    this.broadcast(this.deltaAfter(this.version - 1));
    return this.version;
  }

  delete(subjectId: string): number {
    this.version++;
    this.table.delete(subjectId);
    this.log.push({ version: this.version, deleted: subjectId });
    this.broadcast(this.deltaAfter(this.version - 1));
    return this.version;
  }

  /** Sends a hand-made snapshot on every open stream (even when silent). */
  push(s: Snapshot): void {
    for (const call of this.open) call.write(s);
  }

  /** An empty delta at the current version, on every open stream. */
  heartbeat(): void {
    this.push(create(SnapshotSchema, { version: BigInt(this.version), delta: true, baseVersion: BigInt(this.version), issuedAt: 1 }));
  }

  /** Ends every open stream: with UNAVAILABLE, or cleanly. */
  drop(how: 'error' | 'end' = 'error'): void {
    for (const call of this.open) {
      if (how === 'end') call.end();
      else call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'dropped on purpose' });
    }
    this.open.clear();
  }

  /** The whole table at the current version. */
  full(): Snapshot {
    return create(SnapshotSchema, { version: BigInt(this.version), delta: false, quotas: [...this.table.values()], issuedAt: 1 });
  }

  /** What the real control plane answers for since_version: deltas when the log has them, else full. */
  snapshotAfter(since: number): Snapshot {
    if (since === 0 || since > this.version || (since < this.version && !this.log.some((c) => c.version === since + 1))) return this.full();
    return this.deltaAfter(since);
  }

  private deltaAfter(since: number): Snapshot {
    const puts = new Map<string, Quota>();
    const deleted = new Set<string>();
    for (const c of this.log) {
      if (c.version <= since) continue;
      if (c.put) {
        puts.set(c.put.subjectId, c.put);
        deleted.delete(c.put.subjectId);
      }
      if (c.deleted !== undefined) {
        puts.delete(c.deleted);
        deleted.add(c.deleted);
      }
    }
    return create(SnapshotSchema, {
      version: BigInt(this.version),
      delta: true,
      baseVersion: BigInt(since),
      quotas: [...puts.values()],
      deletedSubjectIds: [...deleted],
      issuedAt: 1,
    });
  }

  private broadcast(s: Snapshot): void {
    if (!this.silent) this.push(s);
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    this.drop('end');
    server.forceShutdown();
  }
}

function header(md: grpc.Metadata): string | undefined {
  const v = md.get('authorization')[0];
  return v === undefined ? undefined : String(v);
}
