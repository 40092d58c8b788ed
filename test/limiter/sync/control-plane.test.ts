/**
 * limiter/quota-sync.ts end to end against the real control plane (limiter/control-plane, real
 * PostgreSQL): a Put answers only after both sidecars acked it, so their caches already hold the new
 * limit when it returns; the sync token is required when configured; and a control plane restart
 * leaves the sidecars serving, then resyncing.
 */
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QuotaCache } from '../../../limiter/quota-cache.js';
import { QuotaSync } from '../../../limiter/quota-sync.js';
import { useTestDatabase } from '../../harness/db.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';
import { adminClient, put, quota, useControlPlane } from '../../control-plane/helpers.js';

const SYNC_TOKEN = 'test-sync-token-0123456789abcdef';
const log = testLogger('quota-sync');
const db = await useTestDatabase(t, 'quota_sync_e2e');
const dir = mkdtempSync(join(tmpdir(), 'quota-sync-e2e-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function sidecar(t: Test, url: string, id: string, token: string | undefined = SYNC_TOKEN): { sync: QuotaSync; cache: QuotaCache } {
  const cache = new QuotaCache(1000);
  const sync = new QuotaSync({
    controlPlaneUrl: url,
    sidecarId: id,
    token,
    cache,
    log,
    snapshotPath: join(dir, `${id}.json`),
    pollIntervalMs: 1000,
    backoff: { baseMs: 50, maxMs: 500 },
  });
  t.teardown(() => sync.close());
  return { sync, cache };
}

/** Looks `subject` up from the control plane into the sidecar's working set (what a first request does). */
async function hold(s: { sync: QuotaSync; cache: QuotaCache }, subject: string): Promise<void> {
  s.cache.beginLookup(subject);
  const r = await s.sync.lookup([subject]);
  s.cache.finishLookup(subject, r.quotas[0], r.version);
}

t.test('a Put returns after every connected sidecar acked it: the next lookup sees the new limit', async (t) => {
  const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_SYNC_TOKEN: SYNC_TOKEN, CONTROL_PLANE_ACK_TIMEOUT: '3s' });
  const admin = adminClient(t, cp.grpc);
  const a = sidecar(t, cp.grpc, 'sc-a');
  const b = sidecar(t, cp.grpc, 'sc-b');
  await Promise.all([a.sync.start(), b.sync.start()]);
  t.equal(await a.sync.whenSynced(5000), true);
  t.equal(await b.sync.whenSynced(5000), true);
  await waitFor(() => a.sync.status().connected && b.sync.status().connected);
  await put(admin, quota('tenant:acme', { rate: 1, burst: 1 }), 3000);
  await Promise.all([hold(a, 'tenant:acme'), hold(b, 'tenant:acme')]);

  for (let i = 0; i < 20; i++) {
    const rate = i % 2 === 0 ? 5 : 50;
    const res = await put(admin, quota('tenant:acme', { rate, burst: rate }), 3000);
    t.strictSame(res.laggingSidecarIds, [], `write ${i}: no sidecar lags`);
    t.strictSame([...res.ackedSidecarIds].sort(), ['sc-a', 'sc-b']);
    const version = Number(res.version);
    // Synchronously after the answer: both caches already hold the write.
    if (a.cache.version < version || b.cache.version < version) t.fail(`write ${i}: a sidecar had not applied version ${version}`);
    t.equal(a.cache.record('tenant:acme')?.limit?.rate, rate);
    t.equal(b.cache.record('tenant:acme')?.limit?.rate, rate);
  }
  t.equal(a.sync.status().consecutiveFailures, 0);
});

t.test('with a sync token configured, a sidecar without it is refused and keeps its cache', async (t) => {
  const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_SYNC_TOKEN: SYNC_TOKEN });
  const intruder = sidecar(t, cp.grpc, 'sc-wrong', 'not-the-sync-token-at-all');
  await intruder.sync.start();
  await waitFor(() => intruder.sync.status().consecutiveFailures >= 2, { what: 'refused calls' });
  t.equal(intruder.cache.appliedAt, 0, 'nothing applied');
  t.equal(intruder.sync.status().connected, false);
});

t.test('a control plane restart: the sidecar keeps serving, reconnects and catches up', async (t) => {
  const first = await useControlPlane(t, db.url, { CONTROL_PLANE_SYNC_TOKEN: SYNC_TOKEN });
  const port = first.grpcPort;
  const s = sidecar(t, first.grpc, 'sc-restart');
  await s.sync.start();
  await put(adminClient(t, first.grpc), quota('tenant:restart', { rate: 7, burst: 7 }), 2000);
  await hold(s, 'tenant:restart');
  t.equal(s.cache.record('tenant:restart')?.limit?.rate, 7);
  await first.close();
  await waitFor(() => s.sync.status().consecutiveFailures >= 1 && !s.sync.status().connected, { what: 'the outage seen' });
  t.equal(s.cache.record('tenant:restart')?.limit?.rate, 7, 'still serving the cached quota');

  const second = await useControlPlane(t, db.url, { CONTROL_PLANE_SYNC_TOKEN: SYNC_TOKEN, CONTROL_PLANE_GRPC_PORT: String(port) });
  await waitFor(() => s.sync.status().connected, { what: 'the reconnect', timeoutMs: 10_000 });
  const res = await put(adminClient(t, second.grpc), quota('tenant:restart', { rate: 9, burst: 9 }), 3000);
  t.ok(res.ackedSidecarIds.includes('sc-restart'), 'acked by the reconnected sidecar');
  t.equal(s.cache.record('tenant:restart')?.limit?.rate, 9);
});
