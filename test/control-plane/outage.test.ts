/**
 * PostgreSQL gone under a running control plane (its database dropped WITH (FORCE), which also
 * kills every connection): admin calls fail with 503 / UNAVAILABLE, never 500 / INTERNAL; the sync
 * service keeps serving the last version from memory, so sidecars are unaffected; the raw API key
 * stays out of the error logs.
 */
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { GetRequestSchema, SnapshotRequestSchema } from '../../proto/gen/quota/v1/quota_pb.js';
import { unaryCall } from '../../shared/grpc.js';
import { createTestDatabase } from '../harness/db.js';
import {
  ADMIN_TOKEN,
  adminClient,
  bearer,
  capturingLogger,
  grpcFailure,
  put,
  quota,
  syncClient,
  TestWatcher,
  useControlPlane,
} from './helpers.js';

t.test('PostgreSQL down: writes 503 / UNAVAILABLE, sync keeps serving from memory', async (t) => {
  const db = await createTestDatabase('cp_outage');
  t.teardown(() => db.drop());
  const captured = capturingLogger();
  const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_POLL_INTERVAL: '100ms' }, captured.log);
  const admin = adminClient(t, cp.grpc);
  const sync = syncClient(t, cp.grpc);
  const before = await put(admin, quota('plan:standard', { rate: 40, burst: 40 }));
  const w = new TestWatcher(sync, 'sc-outage');
  t.teardown(() => w.close());
  await w.reach(Number(before.version));

  await db.drop();

  const grpcPut = await grpcFailure(put(admin, quota('user:during-outage')));
  t.same([grpcPut.code, grpcPut.errorCode], [grpc.status.UNAVAILABLE, 'dependency_unavailable'], 'gRPC Put: UNAVAILABLE');
  const grpcGet = await grpcFailure(
    unaryCall(admin, 'get', create(GetRequestSchema, { subjectId: 'plan:standard' }), { metadata: bearer() }),
  );
  t.equal(grpcGet.code, grpc.status.UNAVAILABLE, 'gRPC Get: UNAVAILABLE');

  const rawKey = 'raw-outage-key-never-logged-123';
  const res = await fetch(`${cp.http}/internal/quotas/${rawKey}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ algorithm: 'token_bucket', rate: 1, burst: 1, unit: 'second' }),
  });
  t.equal(res.status, 503, 'HTTP PUT: 503');
  t.equal(res.headers.get('content-type'), 'application/problem+json');
  const problem = (await res.json()) as { code: string; instance?: string };
  t.equal(problem.code, 'dependency_unavailable');
  t.notMatch(JSON.stringify(problem), rawKey, 'the problem does not echo the key');
  const get = await fetch(`${cp.http}/internal/quotas/${rawKey}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  t.equal(get.status, 503, 'HTTP GET: 503');
  t.equal((await fetch(`${cp.http}/readyz`)).status, 503, '/readyz reports the database');

  const snap = await unaryCall(sync, 'snapshot', create(SnapshotRequestSchema, { sinceVersion: 0n }));
  t.same([snap.delta, snap.version], [false, before.version], 'Snapshot still answers, at the last known version');
  t.ok(snap.quotas.some((q) => q.subjectId === 'plan:standard'));
  t.notOk(w.ended || w.error, 'the watch stream stays open');
  t.ok(w.cache.plan('standard'), 'and the sidecar keeps its quotas');

  const logged = captured.text();
  t.match(logged, /request failed/, 'the 503 was logged');
  t.match(logged, /\/internal\/quotas\/\{api_key\}/, 'under the route pattern');
  t.notOk(logged.includes(rawKey), 'never with the raw key');
  t.notMatch(logged, /"code":"internal"/, 'nothing was an internal error');
});
