/**
 * Three sidecars sharing one Redis (REDIS_URL) hold one quota exactly: many concurrent requests
 * spread over the three admit exactly the burst, and every admitted request saw a distinct
 * remaining count (no two sidecars decided on the same state).
 *
 * The sidecar has no setting for the Redis key prefix (the store's `prefix` option is not wired
 * to config), so this file keeps to subjects of its own (fresh random API keys) and deletes their
 * keys afterwards.
 */
import t from 'tap';
import { Redis } from 'ioredis';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { testRedisUrl } from '../harness/env.js';
import { startUpstream } from '../harness/upstream.js';
import {
  client,
  fixedQuota,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  startTestSidecar,
  writeQuotaFile,
  type Reply,
  type TestSidecar,
} from './fixtures/sidecar.js';

const url = testRedisUrl();
const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const N = 20;
const KEY = newApiKey('shared');
const COST_KEY = newApiKey('shared-cost');
const quotaFile = await writeQuotaFile(t, [
  fixedQuota(keySubject(KEY), N),
  fixedQuota(keySubject(COST_KEY), 10, { routes: [{ path_prefix: '/v1/heavy', cost: 3 }] }),
]);
const env = { REDIS_URL: url, LIMITER_QUOTA_FILE: quotaFile, LIMITER_REDIS_TIMEOUT: '2s' };
const sidecars: TestSidecar[] = [];
for (let i = 0; i < 3; i++) sidecars.push(await startTestSidecar(t, { upstream: up.url, env }));
await Promise.all(sidecars.map((s) => (s.sidecar.store as RedisCounterStore).ready(5_000)));

const redis = new Redis(url, { lazyConnect: true });
await redis.connect();
t.teardown(async () => {
  const store = sidecars[0]!.sidecar.store as RedisCounterStore;
  await redis.del(store.bucketKey(keySubject(KEY)), store.bucketKey(keySubject(COST_KEY)));
  await redis.quit();
});

t.test('exactly the burst is admitted across three sidecars', async (t) => {
  const hit = (i: number) => call(`${sidecars[i % 3]!.base}/v1/shared`, { headers: { 'x-api-key': KEY } });
  // Round robin, one at a time: each sidecar sees the others' charges.
  const seq: Reply[] = [];
  for (let i = 0; i < 6; i++) seq.push(await hit(i));
  t.same(
    seq.map((r) => r.headers['x-ratelimit-remaining']),
    ['19', '18', '17', '16', '15', '14'],
    'one count, whichever sidecar answers',
  );
  // Then a concurrent flood over all three.
  const total = 84;
  const replies = await Promise.all(Array.from({ length: total }, (_, i) => hit(i)));
  const admitted = replies.filter((r) => r.status === 200);
  const denied = replies.filter((r) => r.status === 429);
  t.equal(admitted.length, N - seq.length, `exactly the ${N - seq.length} left of ${N} admitted out of ${total} concurrent`);
  t.equal(denied.length, total - (N - seq.length), 'the rest denied (429), nothing else');
  t.same(
    admitted.map((r) => Number(r.headers['x-ratelimit-remaining'])).sort((a, b) => a - b),
    Array.from({ length: N - seq.length }, (_, i) => i),
    'each admission saw its own remaining count, once each',
  );
  const key = (sidecars[0]!.sidecar.store as RedisCounterStore).bucketKey(keySubject(KEY));
  t.ok((await redis.exists(key)) === 1, `the bucket lives in the shared Redis (${key.replace(/k:key:.*/, 'k:key:…')})`);
  t.notOk((await redis.keys(`*${KEY}*`)).length, 'no Redis key carries the raw API key');
});

t.test('costs are charged once, in the shared bucket', async (t) => {
  const replies: Reply[] = [];
  for (let i = 0; i < 5; i++) replies.push(await call(`${sidecars[i % 3]!.base}/v1/heavy`, { headers: { 'x-api-key': COST_KEY } }));
  t.same(
    replies.map((r) => r.status),
    [200, 200, 200, 429, 429],
    'burst 10 at cost 3: three admitted, whichever sidecar',
  );
  t.same(
    replies.slice(0, 3).map((r) => r.headers['x-ratelimit-remaining']),
    ['7', '4', '1'],
  );
});

t.test('each sidecar measures its Redis round trips', async (t) => {
  for (const [i, s] of sidecars.entries()) {
    const m = parseMetrics((await call(`${s.admin}/metrics`)).text);
    t.ok(metricSum(m, 'ratelimit_redis_rtt_ms_count') > 0, `sidecar ${i}: ratelimit_redis_rtt_ms observed`);
  }
});
