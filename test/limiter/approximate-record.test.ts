/**
 * `accuracy` on the quota record, end to end: validated and stored by a real control plane over
 * PostgreSQL (gRPC and HTTP, the `quotas.accuracy` column of migration 002), kept in the sidecar's
 * last-known-good snapshot file, and compiled into the quota cache (`CompiledQuota.accuracy`, which
 * the gate puts on every counter-store request). Approximate needs a token or leaky bucket; a plan
 * reference cannot set it; unset means exact.
 */
import t from 'tap';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Accuracy, Algorithm, GetRequestSchema, SnapshotSchema } from '../../proto/gen/quota/v1/quota_pb.js';
import { unaryCall } from '../../shared/grpc.js';
import { createLogger } from '../../shared/log.js';
import { QuotaCache, compileQuota, readSnapshotFile } from '../../limiter/quota-cache.js';
import { SnapshotStore } from '../../limiter/snapshot-store.js';
import { useTestDatabase } from '../harness/db.js';
import { adminClient, bearer, grpcFailure, put, quota, useControlPlane } from '../control-plane/helpers.js';

const db = await useTestDatabase(t, 'cp_accuracy');
const cp = await useControlPlane(t, db.url);
const client = adminClient(t, cp.grpc);

async function http(method: string, path: string, body?: unknown) {
  const res = await fetch(`${cp.http}${path}`, {
    method,
    headers: { authorization: 'Bearer test-admin-token-0123456789abcdef', 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

t.test('gRPC: stored and read back; unset stays unset (exact)', async (t) => {
  const put1 = await put(client, quota('user:approx', { accuracy: Accuracy.APPROXIMATE }));
  t.equal(put1.quota?.accuracy, Accuracy.APPROXIMATE, 'the stored record says approximate');
  const got = await unaryCall(client, 'get', create(GetRequestSchema, { subjectId: 'user:approx' }), { metadata: bearer() });
  t.equal(got.quota?.accuracy, Accuracy.APPROXIMATE, 'read back from PostgreSQL');
  const leaky = await put(client, quota('user:leaky', { algorithm: Algorithm.LEAKY_BUCKET, accuracy: Accuracy.APPROXIMATE }));
  t.equal(leaky.quota?.accuracy, Accuracy.APPROXIMATE, 'a leaky bucket may be approximate');
  const plain = await put(client, quota('user:plain'));
  t.equal(plain.quota?.accuracy, Accuracy.UNSPECIFIED, 'unset: unspecified, which is exact');
  t.equal(compileQuota(plain.quota!).accuracy, 'exact');
  t.equal(compileQuota(put1.quota!).accuracy, 'approximate');
});

t.test('gRPC: refused for windows and for plan references, naming the field', async (t) => {
  for (const algorithm of [Algorithm.SLIDING_WINDOW, Algorithm.FIXED_WINDOW]) {
    const f = await grpcFailure(put(client, quota('user:win', { algorithm, accuracy: Accuracy.APPROXIMATE })));
    t.same([f.errorCode, f.field], ['invalid_field', 'quota.accuracy'], `${Algorithm[algorithm]}: a window count cannot be leased`);
  }
  await put(client, quota('plan:free', { accuracy: Accuracy.APPROXIMATE }));
  const ref = await grpcFailure(
    put(client, quota('user:ref', { algorithm: 0, rate: 0, burst: 0, plan: 'free', accuracy: Accuracy.EXACT })),
  );
  t.same([ref.errorCode, ref.field], ['invalid_field', 'quota.accuracy'], "a plan reference takes the plan's accuracy");
  const bad = await grpcFailure(put(client, quota('user:bad', { accuracy: 7 as Accuracy })));
  t.equal(bad.field, 'quota.accuracy', 'an unknown value');
});

t.test('HTTP: the JSON field accuracy, lowercase', async (t) => {
  const ok = await http('PUT', '/internal/subjects/user%3Ahttp/quota', {
    algorithm: 'token_bucket',
    rate: 10,
    burst: 40,
    unit: 'second',
    accuracy: 'approximate',
  });
  t.equal(ok.status, 201);
  t.equal((ok.json?.quota as Record<string, unknown>).accuracy, 'approximate');
  const got = await http('GET', '/internal/subjects/user%3Ahttp/quota');
  t.equal((got.json?.quota as Record<string, unknown>).accuracy, 'approximate');
  const bad = await http('PUT', '/internal/subjects/user%3Ahttp2/quota', {
    algorithm: 'sliding_window',
    rate: 10,
    burst: 10,
    unit: 'second',
    accuracy: 'approximate',
  });
  t.equal(bad.status, 400);
  t.equal(bad.json?.field, 'accuracy', JSON.stringify(bad.json));
});

t.test("the sidecar's snapshot file keeps it, and the quota cache compiles it", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'limiter-accuracy-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'snapshot.json');
  const log = createLogger({ service: 'limiter', level: 'silent' });
  const cache = new QuotaCache(10);
  const store = new SnapshotStore({ path, log, minWriteIntervalMs: 0, source: (at) => cache.snapshot(at) });
  const approx = quota('user:file', { accuracy: Accuracy.APPROXIMATE, version: 3n });
  const windowed = quota('user:file-window', { algorithm: Algorithm.SLIDING_WINDOW, accuracy: Accuracy.APPROXIMATE, version: 3n });
  cache.apply(create(SnapshotSchema, { version: 3n, quotas: [approx, windowed], issuedAt: 1_795_200_000 }), Date.now());
  store.changed(Date.now());
  await store.flush(true);
  t.match(await readFile(path, 'utf8'), /"accuracy":\s*"approximate"/, 'written as JSON');
  const back = await readSnapshotFile(path);
  const compiled = new Map(back.quotas.map((q) => [q.subjectId, compileQuota(q)]));
  t.equal(compiled.get('user:file')?.accuracy, 'approximate', 'read back and compiled');
  t.equal(compiled.get('user:file-window')?.accuracy, 'exact', 'a hand-written approximate window is held exact');
});
