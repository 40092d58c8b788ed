/**
 * The control plane's promise (README, "Quota control plane"), end to end through real processes'
 * cores: a real control plane on a real
 * database, a real sidecar following it over gRPC, a real upstream. After a quota write returns
 * (gRPC or the internal HTTP API), the very next request through the sidecar sees the new limit.
 * Also: the control plane going away does not stop the sidecar, and it catches up when it returns.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { Algorithm } from '../../proto/gen/quota/v1/quota_pb.js';
import { useTestDatabase } from '../harness/db.js';
import { useSidecar } from '../harness/services.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { ADMIN_TOKEN, adminClient, put, quota, useControlPlane } from '../control-plane/helpers.js';

const KEY = 'sk_test_next_request';
const SUBJECT = 'key:' + createHash('sha256').update(KEY).digest('hex');

t.test('100 writes with alternating limits: each next request sees the limit just written', async (t) => {
  const db = await useTestDatabase(t, 'e2e-next-request');
  const cp = await useControlPlane(t, db.url);
  const up = await startUpstream();
  t.teardown(() => up.close());
  const sc = await useSidecar(t, {
    LIMITER_CONTROL_PLANE_URL: cp.grpc,
    LIMITER_ROUTES: `/v1=${up.url}`,
    SIDECAR_ID: 'e2e-sidecar',
  });
  const admin = adminClient(t, cp.grpc);

  for (let i = 0; i < 100; i++) {
    const burst = i % 2 === 0 ? 50 : 80;
    if (i % 4 < 2) {
      // gRPC admin call
      const r = await put(admin, quota(SUBJECT, { algorithm: Algorithm.TOKEN_BUCKET, rate: 10, burst, intervalMs: 1000 }));
      t.same(r.laggingSidecarIds, [], `write ${i} (gRPC): no sidecar lags`);
    } else {
      // the internal HTTP API (README, "Changing a quota"), keyed by the raw key
      const r = await fetch(`${cp.http}/internal/quotas/${KEY}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ algorithm: 'token_bucket', rate: 10, burst, unit: 'second' }),
      });
      t.ok(r.status === 200 || r.status === 201, `write ${i} (HTTP): ${r.status}`);
      const body = (await r.json()) as { lagging_sidecar_ids: string[] };
      t.same(body.lagging_sidecar_ids, [], `write ${i} (HTTP): no sidecar lags`);
    }
    const res = await fetch(`${sc.url}/v1/orders`, { headers: { 'x-api-key': KEY } });
    t.equal(res.headers.get('x-ratelimit-limit'), String(burst), `request after write ${i} sees burst ${burst}`);
    await res.arrayBuffer();
  }
});

t.test('the control plane going away leaves the sidecar serving; it catches up on return', async (t) => {
  const db = await useTestDatabase(t, 'e2e-cp-outage');
  const cp = await useControlPlane(t, db.url);
  const up = await startUpstream();
  t.teardown(() => up.close());
  const admin = adminClient(t, cp.grpc);
  await put(admin, quota(SUBJECT, { algorithm: Algorithm.TOKEN_BUCKET, rate: 10, burst: 30, intervalMs: 1000 }));
  const sc = await useSidecar(t, {
    LIMITER_CONTROL_PLANE_URL: cp.grpc,
    LIMITER_ROUTES: `/v1=${up.url}`,
    LIMITER_SYNC_POLL_INTERVAL: '200ms',
  });
  const first = await fetch(`${sc.url}/v1/x`, { headers: { 'x-api-key': KEY } });
  t.equal(first.headers.get('x-ratelimit-limit'), '30');

  await cp.close();
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`${sc.url}/v1/x`, { headers: { 'x-api-key': KEY } });
    t.equal(r.status, 200, `request ${i} while the control plane is down: served`);
    t.equal(r.headers.get('x-ratelimit-limit'), '30', 'from the last-known-good table');
  }

  // Back on the same gRPC port (the address the sidecar knows), on the same database.
  const port = Number(cp.grpc.split(':')[1]);
  const cp2 = await useControlPlane(t, db.url, { CONTROL_PLANE_GRPC_PORT: String(port) });
  const admin2 = adminClient(t, cp2.grpc);
  await put(admin2, quota(SUBJECT, { algorithm: Algorithm.TOKEN_BUCKET, rate: 10, burst: 45, intervalMs: 1000 }));
  await waitFor(
    async () => {
      const r = await fetch(`${sc.url}/v1/x`, { headers: { 'x-api-key': KEY } });
      await r.arrayBuffer();
      return r.headers.get('x-ratelimit-limit') === '45';
    },
    { timeoutMs: 15_000, what: 'the sidecar to reconnect and apply the new limit' },
  );
  t.pass('the sidecar reconnected and applied the write made after the outage');
});
