/**
 * The sidecar's working set (limiter/README.md, "Working set") end to end: a real control plane on
 * real PostgreSQL, real sidecars, a real upstream. Keys not held are looked up on first sight and
 * admitted; an evicted key is looked up again; a never-issued key is refused; a downgrade reaches a
 * sidecar holding the key and one that does not; with the control plane down, held keys keep
 * working and keys not held get the decoy 429 on every route; a restart starts warm from the
 * snapshot file; the negative cache forgets a key when it is created; the per-address budget of
 * unknown keys stops lookups.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Algorithm } from '../../proto/gen/quota/v1/quota_pb.js';
import { useTestDatabase } from '../harness/db.js';
import { useSidecar } from '../harness/services.js';
import { startUpstream, type Upstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { fileHolds, issuedKeys, subjectOf } from './fixtures/issued-keys.js';
import { adminClient, put, quota, useControlPlane } from '../control-plane/helpers.js';

const db = await useTestDatabase(t, 'working_set');
const up: Upstream = await startUpstream();
t.teardown(() => up.close());
const dir = mkdtempSync(join(tmpdir(), 'working-set-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const KEYS = 2000;
// Issued keys (rate 100, burst 100), written straight into the table once the first control plane
// has migrated the database.
const issued = issuedKeys(db.pool, 'ws_key_', KEYS);
const keyName = issued.name;
const seed = issued.seed;

async function get(url: string, key: string, path = '/v1/orders', headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(`${url}${path}`, { headers: { 'x-api-key': key, ...headers } });
  await res.arrayBuffer();
  return res;
}

function sidecarEnv(cpGrpc: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    LIMITER_CONTROL_PLANE_URL: cpGrpc,
    LIMITER_ROUTES: `/v1=${up.url},/v2=${up.url}`,
    LIMITER_SYNC_POLL_INTERVAL: '200ms',
    ...extra,
  };
}

async function metric(adminUrl: string, name: string): Promise<string> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .join('\n');
}

t.test('2,000 keys through a 200-record working set: every one admitted, a never-issued key refused', async (t) => {
  const cp = await useControlPlane(t, db.url);
  await seed();
  const sc = await useSidecar(t, sidecarEnv(cp.grpc, { LIMITER_QUOTA_CACHE_MAX: '200', LIMITER_UNKNOWN_KEY_BUDGET: '0' }));
  t.equal(sc.quotas.held, 0, 'started with the plans and the change-log position only, no key record');

  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < KEYS) {
      const i = next++;
      const res = await get(sc.url, keyName(i));
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: 40 }, worker));
  t.strictSame([...statuses], [[200, KEYS]], 'all 2,000 admitted');
  t.ok(sc.quotas.held <= 200, `held ${sc.quotas.held}: never above LIMITER_QUOTA_CACHE_MAX`);
  const counts = sc.lookup!.counts;
  t.equal(counts.found, KEYS, 'each key looked up once');
  t.ok(counts.batches < KEYS, `${KEYS} lookups in ${counts.batches} batched calls`);
  t.match(await metric(sc.adminUrl, 'ratelimit_quota_records_held'), /ratelimit_quota_records_held\{[^}]*\} 200/);

  // Evicted, then looked up again: never refused as unknown.
  const first = subjectOf(keyName(0));
  t.notOk(sc.quotas.has(first), 'the first key was evicted');
  t.equal((await get(sc.url, keyName(0))).status, 200, 'admitted again');
  t.ok(sc.quotas.has(first), 'and held again');
  t.equal(sc.lookup!.counts.found, KEYS + 1, 'after one more lookup');

  // Concurrent first requests for one key share one lookup.
  const evicted = keyName(1);
  const before = sc.lookup!.counts.found + sc.lookup!.counts.unknown;
  const answers = await Promise.all(Array.from({ length: 20 }, () => get(sc.url, evicted)));
  t.strictSame(
    answers.map((r) => r.status),
    Array(20).fill(200),
  );
  t.equal(sc.lookup!.counts.found + sc.lookup!.counts.unknown - before, 1, '20 concurrent requests, one lookup');

  const never = await get(sc.url, 'ws_never_issued');
  t.equal(never.status, 429, 'a never-issued key gets the unknown-key answer');
  t.equal(never.headers.get('retry-after') !== null, true, 'shaped like any quota refusal');
  t.equal((await get(sc.url, 'ws_never_issued')).status, 429, 'again, from the negative cache');
  t.equal(sc.lookup!.counts.unknown, 1, 'looked up once');
  t.equal(sc.lookup!.counts.negative, 1);
});

t.test('a downgrade reaches a sidecar that holds the key and one that does not', async (t) => {
  const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_ACK_TIMEOUT: '3s' });
  await seed();
  const admin = adminClient(t, cp.grpc);
  const key = 'ws_downgrade';
  await put(admin, quota(subjectOf(key), { algorithm: Algorithm.TOKEN_BUCKET, rate: 100, burst: 1000, intervalMs: 1000 }));
  const holder = await useSidecar(t, sidecarEnv(cp.grpc, { SIDECAR_ID: 'ws-holder' }));
  const other = await useSidecar(t, sidecarEnv(cp.grpc, { SIDECAR_ID: 'ws-other' }));
  await waitFor(() => holder.sync!.status().connected && other.sync!.status().connected, { what: 'both watching' });
  t.equal((await get(holder.url, key)).headers.get('x-ratelimit-limit'), '1000', 'the holder looked it up');
  t.notOk(other.quotas.has(subjectOf(key)));

  const r = await put(admin, quota(subjectOf(key), { algorithm: Algorithm.TOKEN_BUCKET, rate: 1, burst: 5, intervalMs: 1000 }), 3000);
  t.strictSame([...r.ackedSidecarIds].sort(), ['ws-holder', 'ws-other'], 'the Put returned after both acked');
  t.equal((await get(holder.url, key)).headers.get('x-ratelimit-limit'), '5', 'the holder: the next request sees the downgrade');
  t.equal((await get(other.url, key)).headers.get('x-ratelimit-limit'), '5', 'the other: its first request looks the new record up');
});

t.test('the control plane down: held keys keep working, keys not held get the decoy 429 on every route', async (t) => {
  const cp = await useControlPlane(t, db.url);
  await seed();
  const sc = await useSidecar(t, sidecarEnv(cp.grpc));
  const warm = keyName(10);
  const cold = keyName(11);
  t.equal((await get(sc.url, warm)).status, 200, 'warm key looked up while the control plane is up');
  await cp.close();
  await waitFor(() => !sc.sync!.status().connected, { what: 'the outage seen' });
  for (const path of ['/v1/orders', '/v2/items']) {
    t.equal((await get(sc.url, warm, path)).status, 200, `${path}: a held key keeps working`);
    const c = await get(sc.url, cold, path);
    t.equal(c.status, 429, `${path}: an issued key not held is refused: an outage never makes a key exist`);
    t.equal((await get(sc.url, 'ws_never_issued_2', path)).status, 429, `${path}: so is a never-issued one`);
  }
  t.equal(sc.lookup!.counts.unknown, 0, 'nothing was remembered as unknown during the outage');

  // Back on the same port: the cold key is looked up and admitted (the failure cached nothing).
  const port = Number(cp.grpc.split(':')[1]);
  await useControlPlane(t, db.url, { CONTROL_PLANE_GRPC_PORT: String(port) });
  await waitFor(async () => (await get(sc.url, cold)).status === 200, { what: 'the cold key admitted', timeoutMs: 10_000 });
  t.pass('admitted once the control plane answers again');
});

t.test('a restart starts warm from the snapshot file, even with the control plane down', async (t) => {
  const cp = await useControlPlane(t, db.url);
  await seed();
  const file = join(dir, `restart-${randomBytes(4).toString('hex')}.json`);
  const first = await useSidecar(t, sidecarEnv(cp.grpc, { LIMITER_SNAPSHOT_FILE: file }), { workingSetWriteDelayMs: 0 });
  const key = keyName(20);
  t.equal((await get(first.url, key)).status, 200);
  await fileHolds(file, subjectOf(key));
  await first.close(1000);
  await cp.close();

  const second = await useSidecar(t, sidecarEnv(cp.grpc, { LIMITER_SNAPSHOT_FILE: file }));
  t.ok(second.quotas.has(subjectOf(key)), 'the working set was loaded from the file');
  const res = await get(second.url, key);
  t.equal(res.status, 200, 'served with the control plane down');
  t.equal(res.headers.get('x-ratelimit-limit'), '100');
  t.equal((await get(second.url, keyName(21))).status, 429, 'a key that was not in the file is refused');
});

t.test('the negative cache forgets a key when the stream says it was created', async (t) => {
  const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_ACK_TIMEOUT: '3s' });
  await seed();
  const admin = adminClient(t, cp.grpc);
  const sc = await useSidecar(t, sidecarEnv(cp.grpc, { LIMITER_NEGATIVE_CACHE_TTL: '1h', SIDECAR_ID: 'ws-negative' }));
  await waitFor(() => sc.sync!.status().connected, { what: 'watching' });
  const key = 'ws_created_later';
  t.equal((await get(sc.url, key)).status, 429, 'unknown');
  t.equal(sc.lookup!.negativeSize, 1, 'remembered as unknown for an hour');
  const r = await put(admin, quota(subjectOf(key), { algorithm: Algorithm.TOKEN_BUCKET, rate: 10, burst: 10, intervalMs: 1000 }), 3000);
  t.strictSame(r.ackedSidecarIds, ['ws-negative']);
  t.equal(sc.lookup!.negativeSize, 0, 'the creation cleared it before the Put returned');
  t.equal((await get(sc.url, key)).status, 200, 'the next request looks it up and is admitted');
});

t.test('the per-address budget of unknown keys stops lookups from that address only', async (t) => {
  const cp = await useControlPlane(t, db.url);
  await seed();
  const sc = await useSidecar(t, sidecarEnv(cp.grpc, { LIMITER_UNKNOWN_KEY_BUDGET: '3', LIMITER_TRUST_PROXY: 'true' }));
  const from = (ip: string) => ({ 'x-forwarded-for': ip });
  t.equal((await get(sc.url, keyName(30), '/v1/orders', from('203.0.113.7'))).status, 200, 'an existing key never counts');
  for (let i = 0; i < 3; i++) t.equal((await get(sc.url, `ws_random_${i}`, '/v1/orders', from('203.0.113.7'))).status, 429);
  t.equal(sc.lookup!.counts.unknown, 3);
  t.equal((await get(sc.url, 'ws_random_3', '/v1/orders', from('203.0.113.7'))).status, 429);
  t.equal(sc.lookup!.counts.unknown, 3, 'the fourth unknown key from that address was not looked up');
  t.equal(sc.lookup!.counts.budget, 1);
  t.equal((await get(sc.url, keyName(30), '/v1/orders', from('203.0.113.7'))).status, 200, 'a held key still works from it');
  t.equal((await get(sc.url, keyName(31), '/v1/orders', from('198.51.100.9'))).status, 200, 'another address still gets lookups');
  t.equal((await get(sc.url, 'ws_random_4', '/v1/orders', from('198.51.100.9'))).status, 429);
  t.equal(sc.lookup!.counts.unknown, 4);
});
