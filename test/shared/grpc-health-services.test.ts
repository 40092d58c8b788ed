/**
 * gRPC health and reflection where they are served, following real readiness:
 *
 * - the control plane's gRPC port: QuotaAdminService and "" follow PostgreSQL (its database dropped
 *   under it, then created again), QuotaSyncService stays SERVING (it serves the table from memory
 *   through an outage); a Watch sees each transition; reflection lists the quota services;
 * - the sidecar's RLS port: NOT_SERVING while it has no quota snapshot (its control plane not up
 *   yet), SERVING once it syncs, NOT_SERVING as it shuts down; reflection lists the RLS.
 */
import t, { type Test } from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus as S,
  type HealthCheckResponse,
} from '../../proto/gen/grpc/health/v1/health_pb.js';
import { ServerReflectionRequestSchema, type ServerReflectionResponse } from '../../proto/gen/grpc/reflection/v1/reflection_pb.js';
import { loadConfig } from '../../shared/config.js';
import { grpcClientConstructor, unaryCall, type GrpcClient } from '../../shared/grpc.js';
import { reflectionClientConstructor } from '../../shared/grpc-reflection.js';
import { startControlPlane, type ControlPlane } from '../../limiter/control-plane/app.js';
import { controlPlaneConfig } from '../../limiter/control-plane/config.js';
import { useTestDatabase } from '../harness/db.js';
import { testDatabaseUrl } from '../harness/env.js';
import { testLogger } from '../harness/log.js';
import { freePort } from '../harness/ports.js';
import { testEnv } from '../harness/services.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { startRlsSidecar } from '../limiter/rls/fixtures.js';

const SYNC_TOKEN = 'test-sync-token-0123456789abcdef';
const ADMIN = 'quota.v1.QuotaAdminService';
const SYNC = 'quota.v1.QuotaSyncService';
const RLS = 'envoy.service.ratelimit.v3.RateLimitService';

async function controlPlane(t: Test, databaseUrl: string, grpcPort = 0): Promise<ControlPlane> {
  const env = testEnv({
    DATABASE_URL: databaseUrl,
    ADMIN_TOKEN: 'test-admin-token-0123456789abcdef',
    CONTROL_PLANE_SYNC_TOKEN: SYNC_TOKEN,
    CONTROL_PLANE_GRPC_PORT: String(grpcPort),
    SHUTDOWN_GRACE: '1s',
  });
  const cp = await startControlPlane(loadConfig(controlPlaneConfig, env), testLogger('control-plane'), { healthPollMs: 50 });
  t.teardown(() => cp.close());
  return cp;
}

function healthClient(t: Test, address: string): GrpcClient<typeof Health> {
  const Client = grpcClientConstructor(Health);
  const c = new Client(address, grpc.credentials.createInsecure());
  t.teardown(() => c.close());
  return c;
}

const check = async (c: GrpcClient<typeof Health>, service: string): Promise<S> =>
  (await unaryCall(c, 'check', create(HealthCheckRequestSchema, { service }), { timeoutMs: 10_000 })).status;

function watch(t: Test, c: GrpcClient<typeof Health>, service: string): S[] {
  const stream = c.watch(create(HealthCheckRequestSchema, { service }));
  const seen: S[] = [];
  stream.on('data', (r: HealthCheckResponse) => seen.push(r.status));
  stream.on('error', () => {});
  t.teardown(() => stream.cancel());
  return seen;
}

async function listServices(t: Test, address: string): Promise<string[]> {
  const Client = reflectionClientConstructor('v1');
  const c = new Client(address, grpc.credentials.createInsecure());
  const call = (
    c as unknown as { serverReflectionInfo(): grpc.ClientDuplexStream<unknown, ServerReflectionResponse> }
  ).serverReflectionInfo();
  // A server shutting down cancels the stream.
  call.on('error', () => {});
  t.teardown(() => {
    call.end();
    c.close();
  });
  const answer = new Promise<ServerReflectionResponse>((resolve) => call.once('data', resolve));
  call.write(create(ServerReflectionRequestSchema, { messageRequest: { case: 'listServices', value: '' } }));
  const r = await answer;
  // Ended once answered: a stream left open holds a draining server's tryShutdown to its grace.
  call.end();
  return r.messageResponse.case === 'listServicesResponse' ? r.messageResponse.value.service.map((s) => s.name) : [];
}

t.test('control plane: health follows PostgreSQL; reflection lists its services', async (t) => {
  const db = await useTestDatabase(t, 'grpc_health');
  const cp = await controlPlane(t, db.url);
  const address = `127.0.0.1:${cp.grpcPort}`;
  const c = healthClient(t, address);
  t.same(await Promise.all(['', ADMIN, SYNC].map((s) => check(c, s))), [S.SERVING, S.SERVING, S.SERVING], 'all serving');
  t.same(
    (await listServices(t, address)).filter((n) => n.startsWith('quota.') || n.startsWith('grpc.health')),
    ['grpc.health.v1.Health', ADMIN, SYNC],
    'reflection lists the quota services and health',
  );

  const adminWatch = watch(t, c, ADMIN);
  const wholeWatch = watch(t, c, '');
  await waitFor(() => adminWatch.length === 1 && wholeWatch.length === 1, { what: 'the first Watch messages' });

  await db.drop();
  await waitFor(() => adminWatch.length === 2 && wholeWatch.length === 2, { timeoutMs: 15_000, what: 'NOT_SERVING on both watches' });
  t.same(adminWatch, [S.SERVING, S.NOT_SERVING], 'admin: NOT_SERVING once PostgreSQL is gone');
  t.same(await Promise.all(['', ADMIN, SYNC].map((s) => check(c, s))), [S.NOT_SERVING, S.NOT_SERVING, S.SERVING], 'sync stays SERVING');

  // The same database name again: the pool reconnects to it.
  const name = new URL(db.url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: testDatabaseUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
  await admin.end();
  t.teardown(async () => {
    const a = new pg.Client({ connectionString: testDatabaseUrl() });
    await a.connect();
    await a.query(`DROP DATABASE IF EXISTS ${a.escapeIdentifier(name)} WITH (FORCE)`);
    await a.end();
  });
  await waitFor(() => adminWatch.length === 3, { timeoutMs: 15_000, what: 'SERVING again' });
  t.same(adminWatch, [S.SERVING, S.NOT_SERVING, S.SERVING], 'admin: SERVING again');
  t.equal(await check(c, ''), S.SERVING, '"" SERVING again');
});

t.test('sidecar RLS port: NOT_SERVING until its first quota snapshot, SERVING once synced, NOT_SERVING on shutdown', async (t) => {
  const db = await useTestDatabase(t, 'grpc_health_rls');
  const cpPort = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'grpc-health-rls-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // Also what keeps the process alive while the sidecar waits for a control plane (its timers are unref'd).
  const up = await startUpstream();
  t.teardown(() => up.close());
  const s = await startRlsSidecar(t, {
    upstream: up.url,
    env: {
      LIMITER_CONTROL_PLANE_URL: `127.0.0.1:${cpPort}`,
      // A fresh file: no last-known-good snapshot to be ready with.
      LIMITER_SNAPSHOT_FILE: join(dir, 'snapshot.json'),
      CONTROL_PLANE_SYNC_TOKEN: SYNC_TOKEN,
      LIMITER_SYNC_POLL_INTERVAL: '200ms',
    },
  });
  const c = healthClient(t, s.rls);
  t.same(await Promise.all(['', RLS].map((n) => check(c, n))), [S.NOT_SERVING, S.NOT_SERVING], 'no control plane yet: NOT_SERVING');
  t.ok((await listServices(t, s.rls)).includes(RLS), 'reflection lists the RLS');
  const seen = watch(t, c, RLS);
  await waitFor(() => seen.length === 1, { what: 'the first Watch message' });

  await controlPlane(t, db.url, cpPort);
  await waitFor(() => seen.length === 2, { timeoutMs: 20_000, what: 'SERVING once synced' });
  t.same(seen, [S.NOT_SERVING, S.SERVING], 'SERVING once the snapshot is applied');

  const closing = s.close();
  await waitFor(() => seen.length === 3, { what: 'NOT_SERVING on shutdown' });
  await closing;
  t.same(seen, [S.NOT_SERVING, S.SERVING, S.NOT_SERVING], 'NOT_SERVING as it drains');
});
