// @tier: pure
/**
 * shared/grpc-health.ts on a real grpc-js server, called by a client generated from
 * grpc/health/v1/health.proto: Check per service name and for "" (the whole server), NOT_FOUND for
 * a name not served, Watch streaming each change once (driven by a readiness flag), SERVICE_UNKNOWN
 * on a Watch of an unknown name with the stream left open, a check that hangs counting as failed,
 * List, and shutdown() turning every name NOT_SERVING at once, close() ending the open watches.
 */
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus as S,
  HealthListRequestSchema,
  type HealthCheckResponse,
} from '../../proto/gen/grpc/health/v1/health_pb.js';
import { grpcClientConstructor, unaryCall } from '../../shared/grpc.js';
import { addGrpcHealth, GrpcHealth } from '../../shared/grpc-health.js';
import { waitFor } from '../harness/wait.js';

let ready = true;
let hang = false;
const health = new GrpcHealth({
  services: {
    'a.v1.A': [{ name: 'flag', check: async () => void (ready || (await Promise.reject(new Error('not ready')))) }],
    'b.v1.B': [],
    'c.v1.C': [{ name: 'hang', check: () => (hang ? new Promise<void>(() => {}) : Promise.resolve()) }],
  },
  pollMs: 20,
  checkTimeoutMs: 200,
});
const server = new grpc.Server();
addGrpcHealth(server, health);
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
);
t.teardown(() => server.forceShutdown());
const Client = grpcClientConstructor(Health);
const c = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
t.teardown(() => c.close());

const check = async (service: string): Promise<S> => (await unaryCall(c, 'check', create(HealthCheckRequestSchema, { service }))).status;

function watch(service: string): { seen: S[]; ended: () => boolean; cancel(): void } {
  const stream = c.watch(create(HealthCheckRequestSchema, { service }));
  const seen: S[] = [];
  let ended = false;
  stream.on('data', (r: HealthCheckResponse) => seen.push(r.status));
  stream.on('error', () => (ended = true));
  stream.on('end', () => (ended = true));
  return { seen, ended: () => ended, cancel: () => stream.cancel() };
}

t.test('Check: per name and for the whole server, NOT_FOUND for a name not served', async (t) => {
  ready = true;
  t.same(await Promise.all(['', 'a.v1.A', 'b.v1.B', 'c.v1.C'].map(check)), [S.SERVING, S.SERVING, S.SERVING, S.SERVING], 'all up');
  ready = false;
  t.same(
    await Promise.all(['', 'a.v1.A', 'b.v1.B'].map(check)),
    [S.NOT_SERVING, S.NOT_SERVING, S.SERVING],
    'A down: A and "" not serving, B still',
  );
  ready = true;
  const err = await check('nope').then(
    () => undefined,
    (e: grpc.ServiceError) => e.code,
  );
  t.equal(err, grpc.status.NOT_FOUND, 'unknown name: NOT_FOUND');
});

t.test('a check that does not answer in time fails', async (t) => {
  hang = true;
  t.equal(await check('c.v1.C'), S.NOT_SERVING, 'hung check: NOT_SERVING');
  hang = false;
  t.equal(await check('c.v1.C'), S.SERVING);
});

t.test('Watch: the status at once, then each change once', async (t) => {
  ready = true;
  const w = watch('a.v1.A');
  const all = watch('');
  t.teardown(() => (w.cancel(), all.cancel()));
  await waitFor(() => w.seen.length === 1 && all.seen.length === 1, { what: 'the first status' });
  t.same(w.seen, [S.SERVING]);
  ready = false;
  await waitFor(() => w.seen.length === 2 && all.seen.length === 2, { what: 'NOT_SERVING' });
  ready = true;
  await waitFor(() => w.seen.length === 3 && all.seen.length === 3, { what: 'SERVING again' });
  // Several polls ran between the changes: none of them repeated a status.
  t.same(w.seen, [S.SERVING, S.NOT_SERVING, S.SERVING], 'A: three messages');
  t.same(all.seen, [S.SERVING, S.NOT_SERVING, S.SERVING], '"": three messages');
});

t.test('Watch of an unknown name: SERVICE_UNKNOWN, and the stream stays open', async (t) => {
  const w = watch('later.v1.Later');
  t.teardown(() => w.cancel());
  await waitFor(() => w.seen.length === 1, { what: 'SERVICE_UNKNOWN' });
  t.same(w.seen, [S.SERVICE_UNKNOWN]);
  // A Check on the same server afterwards proves the server went on, and the stream is still open.
  await check('');
  t.notOk(w.ended(), 'not ended');
});

t.test('List: every name with its status', async (t) => {
  ready = false;
  const r = await unaryCall(c, 'list', create(HealthListRequestSchema, {}));
  ready = true;
  t.same(Object.fromEntries(Object.entries(r.statuses).map(([k, v]) => [k, v.status])), {
    '': S.NOT_SERVING,
    'a.v1.A': S.NOT_SERVING,
    'b.v1.B': S.SERVING,
    'c.v1.C': S.SERVING,
  });
});

t.test('shutdown(): NOT_SERVING everywhere at once, open watches told', async (t) => {
  ready = true;
  const w = watch('b.v1.B');
  t.teardown(() => w.cancel());
  await waitFor(() => w.seen.length === 1, { what: 'the first status' });
  health.shutdown();
  await waitFor(() => w.seen.length === 2, { what: 'NOT_SERVING after shutdown' });
  t.same(w.seen, [S.SERVING, S.NOT_SERVING]);
  t.same(await Promise.all(['', 'a.v1.A', 'b.v1.B'].map(check)), [S.NOT_SERVING, S.NOT_SERVING, S.NOT_SERVING], 'every name');
  health.close();
  await waitFor(() => w.ended(), { what: 'the Watch stream to end' });
  t.same(w.seen, [S.SERVING, S.NOT_SERVING], 'close() ends open watches, nothing more sent');
});
