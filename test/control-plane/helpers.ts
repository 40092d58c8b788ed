/**
 * Helpers for the control-plane tests: a real control plane in-process on port 0 against a test
 * database, real grpc-js clients built from the contracts, and a sidecar-like watcher that applies
 * what it receives to a real QuotaCache (so every delta must chain onto the previous message) and
 * acks it.
 */
import { Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import {
  AckRequestSchema,
  PutRequestSchema,
  QuotaAdminService,
  QuotaSchema,
  QuotaSyncService,
  WatchRequestSchema,
  type Quota,
  type Snapshot,
} from '../../proto/gen/quota/v1/quota_pb.js';
import { loadConfig } from '../../shared/config.js';
import { GRPC_ERROR_CODE_KEY, GRPC_ERROR_FIELD_KEY, grpcClientConstructor, unaryCall, type GrpcClient } from '../../shared/grpc.js';
import { createLogger, type Logger } from '../../shared/log.js';
import { startControlPlane, type ControlPlane } from '../../limiter/control-plane/app.js';
import { controlPlaneConfig } from '../../limiter/control-plane/config.js';
import { QuotaCache, type ApplyResult } from '../../limiter/quota-cache.js';
import type { TestContext } from '../harness/db.js';
import { testLogger } from '../harness/log.js';
import { testEnv } from '../harness/services.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export type Env = Record<string, string | undefined>;

export interface RunningControlPlane extends ControlPlane {
  http: string;
  grpc: string;
}

/** Starts a control plane on ports 0 against `databaseUrl`; closed at teardown. */
export async function useControlPlane(
  t: TestContext,
  databaseUrl: string,
  overrides: Env = {},
  log?: Logger,
): Promise<RunningControlPlane> {
  const env = testEnv({ DATABASE_URL: databaseUrl, ADMIN_TOKEN, CONTROL_PLANE_ACK_TIMEOUT: '2s', SHUTDOWN_GRACE: '1s', ...overrides });
  const cp = await startControlPlane(loadConfig(controlPlaneConfig, env), log ?? testLogger('control-plane'));
  t.teardown(() => cp.close());
  return { ...cp, http: `http://127.0.0.1:${cp.port}`, grpc: `127.0.0.1:${cp.grpcPort}` };
}

/** A logger at trace level whose lines are kept in memory (to check what is and is not logged). */
export function capturingLogger(): { log: Logger; text: () => string } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { log: createLogger({ service: 'control-plane', level: 'trace', destination }), text: () => lines.join('') };
}

export function adminClient(t: TestContext, address: string): GrpcClient<typeof QuotaAdminService> {
  const Client = grpcClientConstructor(QuotaAdminService);
  const c = new Client(address, grpc.credentials.createInsecure());
  t.teardown(() => c.close());
  return c;
}

export function syncClient(t: TestContext, address: string): GrpcClient<typeof QuotaSyncService> {
  const Client = grpcClientConstructor(QuotaSyncService);
  const c = new Client(address, grpc.credentials.createInsecure());
  t.teardown(() => c.close());
  return c;
}

export function bearer(token: string | undefined = ADMIN_TOKEN): grpc.Metadata {
  const md = new grpc.Metadata();
  if (token !== undefined) md.set('authorization', `Bearer ${token}`);
  return md;
}

/** A quota record with own limits. */
export function quota(subjectId: string, fields: Partial<Omit<Quota, '$typeName'>> = {}): Quota {
  return create(QuotaSchema, { subjectId, algorithm: 1, rate: 10, burst: 20, ...fields });
}

/** Puts a record over gRPC with the admin token. */
export function put(client: GrpcClient<typeof QuotaAdminService>, q: Quota, ackTimeoutMs = 0) {
  return unaryCall(client, 'put', create(PutRequestSchema, { quota: q, ackTimeoutMs }), { metadata: bearer() });
}

/** The gRPC error of a failing call: status, our code and field from the trailing metadata. */
export async function grpcFailure(
  p: Promise<unknown>,
): Promise<{ code: number; details: string; errorCode: string; field: string | undefined }> {
  try {
    await p;
  } catch (err) {
    const e = err as grpc.ServiceError;
    const field = e.metadata?.get(GRPC_ERROR_FIELD_KEY)[0];
    return {
      code: e.code,
      details: e.details,
      errorCode: String(e.metadata?.get(GRPC_ERROR_CODE_KEY)[0] ?? ''),
      field: field === undefined ? undefined : String(field),
    };
  }
  throw new Error('expected the call to fail');
}

export interface WatcherOptions {
  /** A snapshot the stand-in holds before it connects; it then watches from its version. */
  initial?: Snapshot;
  /** Ack each applied snapshot (default true). */
  ack?: boolean;
  metadata?: grpc.Metadata;
}

/**
 * A sidecar stand-in: Watches, applies every message to a real QuotaCache and acks what it applied.
 * `results` records how the cache took each message (a delta that does not chain is `base_mismatch`).
 * The cache is a working set (it keeps only plans and keys it holds); `streamed` keeps every record
 * the stream carried, for checking what the control plane sent.
 */
export class TestWatcher {
  readonly cache = new QuotaCache(100_000);
  /** Every record brought by the applied messages (a full snapshot replaces it; deltas change it). */
  readonly streamed = new Map<string, Quota>();
  readonly received: Snapshot[] = [];
  readonly results: ApplyResult[] = [];
  error: grpc.ServiceError | undefined;
  ended = false;
  private readonly stream: grpc.ClientReadableStream<Snapshot>;
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly client: GrpcClient<typeof QuotaSyncService>,
    readonly sidecarId: string,
    opts: WatcherOptions = {},
  ) {
    const ack = opts.ack ?? true;
    if (opts.initial) this.cache.apply(opts.initial, Date.now());
    this.stream = client.watch(
      create(WatchRequestSchema, { sinceVersion: BigInt(this.cache.version), sidecarId }),
      opts.metadata ?? new grpc.Metadata(),
    );
    this.stream.on('data', (s: Snapshot) => {
      this.received.push(s);
      const r = this.cache.apply(s, Date.now());
      this.results.push(r);
      if (r.applied) {
        if (!s.delta) this.streamed.clear();
        for (const id of s.deletedSubjectIds) this.streamed.delete(id);
        for (const q of s.quotas) this.streamed.set(q.subjectId, q);
      }
      if (ack && r.applied) {
        client.ack(create(AckRequestSchema, { sidecarId, version: s.version }), opts.metadata ?? new grpc.Metadata(), () => {});
      }
      this.notify();
    });
    this.stream.on('error', (err: grpc.ServiceError) => {
      this.error = err;
      this.notify();
    });
    this.stream.on('end', () => {
      this.ended = true;
      this.notify();
    });
  }

  get version(): number {
    return this.cache.version;
  }

  /** The rate of the last record the stream brought for `subject`. */
  rate(subject: string): number | undefined {
    return this.streamed.get(subject)?.rate;
  }

  /** Resolves once `pred` holds (checked on every message), or rejects after `timeoutMs`. */
  until(pred: (w: TestWatcher) => boolean, timeoutMs = 5_000, what = 'the watcher'): Promise<void> {
    if (pred(this)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!pred(this)) return;
        clearTimeout(timer);
        this.listeners.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(
          new Error(`timed out after ${timeoutMs} ms waiting for ${what} (at version ${this.version}, ${this.received.length} messages)`),
        );
      }, timeoutMs);
      this.listeners.add(check);
    });
  }

  /** Resolves when the watcher holds `version` or later. */
  reach(version: number, timeoutMs = 5_000): Promise<void> {
    return this.until((w) => w.version >= version, timeoutMs, `${this.sidecarId} to reach version ${version}`);
  }

  close(): void {
    this.stream.cancel();
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }
}

/** Reads a metric's samples from Prometheus text: `name{labels} value` lines for `name`. */
export function metricLines(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}
