// @tier: pure
/**
 * shared/grpc.ts against a real grpc-js server on port 0 and a real client: unary and
 * server-streaming calls of the quota services, and the error mapping to gRPC status codes.
 */
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { PlatformError } from '../../shared/errors.js';
import {
  addGrpcService,
  failStream,
  GRPC_ERROR_CODE_KEY,
  GRPC_ERROR_FIELD_KEY,
  grpcClientConstructor,
  grpcServiceDefinition,
  grpcStatusFor,
  toGrpcError as toError,
  unaryCall,
} from '../../shared/grpc.js';
import type { GrpcServiceImplementation } from '../../shared/grpc.js';
import {
  AckRequestSchema,
  AckResponseSchema,
  LookupResponseSchema,
  Algorithm,
  DeleteRequestSchema,
  DeleteResponseSchema,
  GetRequestSchema,
  GetResponseSchema,
  ListRequestSchema,
  ListResponseSchema,
  PutRequestSchema,
  PutResponseSchema,
  QuotaAdminService,
  QuotaSchema,
  QuotaSyncService,
  SnapshotRequestSchema,
  SnapshotSchema,
  WatchRequestSchema,
} from '../../proto/gen/quota/v1/quota_pb.js';
import type { Quota, Snapshot } from '../../proto/gen/quota/v1/quota_pb.js';

// A small in-memory quota table behind the real transport.
const table = new Map<string, Quota>();
let version = 0n;
const acks: { sidecarId: string; version: bigint }[] = [];

const admin: GrpcServiceImplementation<typeof QuotaAdminService> = {
  put(call, callback) {
    const quota = call.request.quota;
    if (quota === undefined || quota.subjectId === '') {
      callback(toError(new PlatformError('invalid_field', { field: 'quota.subject_id', detail: 'quota.subject_id: required' })));
      return;
    }
    if (quota.subjectId === 'boom') {
      callback(toError(new Error('database password is hunter2')));
      return;
    }
    version++;
    const stored = create(QuotaSchema, { ...quota, version, updatedAt: 1718035200.5 });
    table.set(stored.subjectId, stored);
    callback(null, create(PutResponseSchema, { quota: stored, version, ackedSidecarIds: ['sc-1'], laggingSidecarIds: ['sc-2'] }));
  },
  get(call, callback) {
    const quota = table.get(call.request.subjectId);
    if (quota === undefined) callback(toError(new PlatformError('not_found', { detail: `no quota for ${call.request.subjectId}` })));
    else callback(null, create(GetResponseSchema, { quota }));
  },
  delete(call, callback) {
    const deleted = table.delete(call.request.subjectId);
    if (deleted) version++;
    callback(null, create(DeleteResponseSchema, { deleted, version }));
  },
  list(call, callback) {
    const all = [...table.values()].sort((a, b) => a.subjectId.localeCompare(b.subjectId));
    const start = call.request.pageToken === '' ? 0 : Number(call.request.pageToken);
    const end = start + (call.request.pageSize || 100);
    callback(null, create(ListResponseSchema, { quotas: all.slice(start, end), nextPageToken: end < all.length ? String(end) : '' }));
  },
};

const sync: GrpcServiceImplementation<typeof QuotaSyncService> = {
  watch(call) {
    const since = call.request.sinceVersion;
    call.write(create(SnapshotSchema, { version: since + 1n, delta: since !== 0n, baseVersion: since, issuedAt: 1.5 }));
    call.write(create(SnapshotSchema, { version: since + 2n, delta: true, baseVersion: since + 1n, deletedSubjectIds: ['key:gone'] }));
    call.write(create(SnapshotSchema, { version: since + 2n, delta: true, baseVersion: since + 2n }));
    if (call.request.sidecarId === 'fail-mid-stream') failStream(call, new PlatformError('unavailable', { detail: 'draining' }));
    else call.end();
  },
  snapshot(call, callback) {
    callback(null, create(SnapshotSchema, { version, quotas: [...table.values()], issuedAt: 2.5 }));
  },
  ack(call, callback) {
    acks.push({ sidecarId: call.request.sidecarId, version: call.request.version });
    callback(null, create(AckResponseSchema));
  },
  lookup(call, callback) {
    const ids = call.request.subjectIds;
    callback(
      null,
      create(LookupResponseSchema, {
        quotas: ids.flatMap((id) => table.get(id) ?? []),
        unknownSubjectIds: ids.filter((id) => !table.has(id)),
        version,
      }),
    );
  },
};

const server = new grpc.Server();
addGrpcService(server, QuotaAdminService, admin);
addGrpcService(server, QuotaSyncService, sync);
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
);
const AdminClient = grpcClientConstructor(QuotaAdminService);
const SyncClient = grpcClientConstructor(QuotaSyncService);
const adminClient = new AdminClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
const syncClient = new SyncClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
t.teardown(() => {
  adminClient.close();
  syncClient.close();
  server.forceShutdown();
});

function grpcError(err: unknown): grpc.ServiceError {
  return err as grpc.ServiceError;
}

async function rejection(call: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await call;
  } catch (err) {
    return grpcError(err);
  }
  throw new Error('the call succeeded');
}

t.test('the definition uses the descriptor names on the wire', async (t) => {
  const def = grpcServiceDefinition(QuotaAdminService);
  t.strictSame(Object.keys(def), ['put', 'get', 'delete', 'list']);
  t.equal(def.put.path, '/quota.v1.QuotaAdminService/Put');
  t.equal(grpcServiceDefinition(QuotaSyncService).watch.responseStream, true);
  t.equal(grpcServiceDefinition(QuotaSyncService).snapshot.responseStream, false);
  t.equal(grpcClientConstructor(QuotaAdminService), AdminClient, 'one client class per service');
});

t.test('unary: put then get carries every field over the wire', async (t) => {
  const quota = create(QuotaSchema, {
    subjectId: 'tenant:acme',
    algorithm: Algorithm.SLIDING_WINDOW,
    rate: 5000,
    burst: 6000,
    intervalMs: 60000,
    routes: [{ pathPrefix: '/v1/search', methods: ['GET'], cost: 10, rate: 0 }],
  });
  const put = await unaryCall(adminClient, 'put', create(PutRequestSchema, { quota, ackTimeoutMs: 250 }));
  t.equal(put.version, 1n);
  t.strictSame(put.ackedSidecarIds, ['sc-1']);
  t.strictSame(put.laggingSidecarIds, ['sc-2']);
  t.equal(put.quota?.algorithm, Algorithm.SLIDING_WINDOW);
  const got = await unaryCall(adminClient, 'get', create(GetRequestSchema, { subjectId: 'tenant:acme' }), { timeoutMs: 5000 });
  t.equal(got.quota?.rate, 5000);
  t.equal(got.quota?.routes[0]?.rate, 0, 'an optional field set to zero survives');
  t.equal(got.quota?.routes[0]?.burst, undefined, 'an unset optional field stays unset');
  t.equal(got.quota?.updatedAt, 1718035200.5);
});

t.test('unary: the callback form of the typed client works too', async (t) => {
  const res = await new Promise<Snapshot>((resolve, reject) =>
    syncClient.snapshot(create(SnapshotRequestSchema, { sinceVersion: 0n, sidecarId: 'sc-1' }), (err, value) =>
      err || !value ? reject(err ?? new Error('no snapshot')) : resolve(value),
    ),
  );
  t.equal(res.issuedAt, 2.5);
  t.ok(res.quotas.some((q) => q.subjectId === 'tenant:acme'));
  await unaryCall(syncClient, 'ack', create(AckRequestSchema, { sidecarId: 'sc-1', version: 9n }));
  t.strictSame(acks.at(-1), { sidecarId: 'sc-1', version: 9n });
});

t.test('unary: list pages through the table', async (t) => {
  for (const id of ['key:a', 'key:b', 'key:c']) {
    await unaryCall(
      adminClient,
      'put',
      create(PutRequestSchema, { quota: create(QuotaSchema, { subjectId: id, rate: 1 }), ackTimeoutMs: 0 }),
    );
  }
  const first = await unaryCall(adminClient, 'list', create(ListRequestSchema, { pageSize: 2, pageToken: '' }));
  t.strictSame(
    first.quotas.map((q) => q.subjectId),
    ['key:a', 'key:b'],
  );
  const second = await unaryCall(adminClient, 'list', create(ListRequestSchema, { pageSize: 2, pageToken: first.nextPageToken }));
  t.strictSame(
    second.quotas.map((q) => q.subjectId),
    ['key:c', 'tenant:acme'],
  );
  t.equal(second.nextPageToken, '');
  const del = await unaryCall(adminClient, 'delete', create(DeleteRequestSchema, { subjectId: 'key:c', ackTimeoutMs: 0 }));
  t.equal(del.deleted, true);
});

t.test('server stream: watch delivers every snapshot in order, then ends', async (t) => {
  const stream = syncClient.watch(create(WatchRequestSchema, { sinceVersion: 10n, sidecarId: 'sc-1' }));
  const got: Snapshot[] = [];
  for await (const snap of stream) got.push(snap as Snapshot);
  t.strictSame(
    got.map((s) => [s.version, s.delta, s.baseVersion]),
    [
      [11n, true, 10n],
      [12n, true, 11n],
      [12n, true, 12n],
    ],
  );
  t.strictSame(got[1]?.deletedSubjectIds, ['key:gone']);
});

t.test('server stream: an error after some messages reaches the client with its status', async (t) => {
  const stream = syncClient.watch(create(WatchRequestSchema, { sinceVersion: 0n, sidecarId: 'fail-mid-stream' }));
  const got: Snapshot[] = [];
  try {
    for await (const snap of stream) got.push(snap as Snapshot);
    t.fail('the stream ended without an error');
  } catch (err) {
    t.equal(grpcError(err).code, grpc.status.UNAVAILABLE);
    t.strictSame(grpcError(err).metadata.get(GRPC_ERROR_CODE_KEY), ['unavailable']);
  }
  t.equal(got[0]?.delta, false, 'since_version 0 starts with a full snapshot');
});

t.test('errors: PlatformError codes map to gRPC status codes with the code and field in metadata', async (t) => {
  const notFound = await rejection(unaryCall(adminClient, 'get', create(GetRequestSchema, { subjectId: 'key:nope' })));
  t.equal(notFound.code, grpc.status.NOT_FOUND);
  t.equal(notFound.details, 'no quota for key:nope');
  t.strictSame(notFound.metadata.get(GRPC_ERROR_CODE_KEY), ['not_found']);

  const invalid = await rejection(unaryCall(adminClient, 'put', create(PutRequestSchema, { ackTimeoutMs: 0 })));
  t.equal(invalid.code, grpc.status.INVALID_ARGUMENT);
  t.strictSame(invalid.metadata.get(GRPC_ERROR_FIELD_KEY), ['quota.subject_id']);

  const internal = await rejection(
    unaryCall(
      adminClient,
      'put',
      create(PutRequestSchema, {
        quota: create(QuotaSchema, { subjectId: 'boom' }),
        ackTimeoutMs: 0,
      }),
    ),
  );
  t.equal(internal.code, grpc.status.INTERNAL);
  t.equal(internal.details, 'internal error', 'the cause never reaches the wire');
});

t.test('errors: HTTP statuses of the code registry map to gRPC codes', async (t) => {
  t.equal(grpcStatusFor(400), grpc.status.INVALID_ARGUMENT);
  t.equal(grpcStatusFor(401), grpc.status.UNAUTHENTICATED);
  t.equal(grpcStatusFor(403), grpc.status.PERMISSION_DENIED);
  t.equal(grpcStatusFor(429), grpc.status.RESOURCE_EXHAUSTED);
  t.equal(grpcStatusFor(503), grpc.status.UNAVAILABLE);
  t.equal(grpcStatusFor(504), grpc.status.DEADLINE_EXCEEDED);
  t.equal(grpcStatusFor(500), grpc.status.INTERNAL);
});

t.test('a deadline is enforced', async (t) => {
  const err = await rejection(unaryCall(adminClient, 'get', create(GetRequestSchema, { subjectId: 'tenant:acme' }), { timeoutMs: -1 }));
  t.equal(err.code, grpc.status.DEADLINE_EXCEEDED);
});
