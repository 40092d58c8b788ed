/**
 * Approximate mode end to end: three sidecars on one real Redis share a quota declared
 * `accuracy: approximate` (limiter/admission/lease.ts). The bucket refills one token per hour, so
 * within the test every admitted request is a token taken from Redis:
 * - each sidecar counts the three lessees (the lease share is burst / (4 × 3));
 * - a concurrent flood is mostly answered from leases (no round trip), and never admits more than
 *   the burst;
 * - once the leases are past their TTL, every unspent token is back in Redis (admitted + Redis's
 *   remaining = burst), and draining it admits exactly the burst in all: approximate mode moves
 *   admissions in time, it does not create tokens;
 * - an exact quota on the same sidecars takes no lease and admits exactly its burst.
 * The same on a real 3-master Redis Cluster with a global bucket (16 shards): leases are taken from
 * and given back to the subject's bucket and its global shard in one slot.
 */
import t, { type Test } from 'tap';
import { Cluster, Redis } from 'ioredis';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { testRedisClusterNodes, testRedisUrl } from '../harness/env.js';
import { deleteKeys, testKeyPrefix } from '../harness/redis.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import {
  client,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  startTestSidecar,
  writeQuotaFile,
  type Reply,
  type TestSidecar,
} from './fixtures/sidecar.js';

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const BURST = 600;
const HOUR = 3_600_000;

async function run(t: Test, label: string, redisEnv: Record<string, string>, redis: Redis | Cluster, shards: number): Promise<void> {
  const APPROX = newApiKey('approx');
  const EXACT = newApiKey('exact');
  const prefix = testKeyPrefix(label).slice(0, -1).replace(/:/g, '.');
  t.teardown(() => deleteKeys(redis, prefix + ':'));
  const quotaFile = await writeQuotaFile(t, [
    { subject_id: keySubject(APPROX), algorithm: 'token_bucket', rate: 1, burst: BURST, interval_ms: HOUR, accuracy: 'approximate' },
    { subject_id: keySubject(EXACT), algorithm: 'token_bucket', rate: 1, burst: BURST, interval_ms: HOUR },
  ]);
  const env = {
    ...redisEnv,
    LIMITER_REDIS_PREFIX: prefix,
    LIMITER_QUOTA_FILE: quotaFile,
    LIMITER_REDIS_TIMEOUT: '2s',
    // A global bucket that never binds, so leases are taken from and given back to its shard too.
    LIMITER_GLOBAL_RATE: '1000000',
    LIMITER_GLOBAL_BURST: String(1_000_000 * shards),
  };
  const sidecars: TestSidecar[] = [];
  for (let i = 0; i < 3; i++) sidecars.push(await startTestSidecar(t, { upstream: up.url, env }));
  const store = sidecars[0]!.sidecar.store as RedisCounterStore;
  await Promise.all(sidecars.map((s) => s.sidecar.store.ready(5_000)));
  t.equal(store.shards, shards);

  /** Tokens in the shared bucket now (the stored level, whole tokens; the refill is 1 per hour). */
  async function inRedis(apiKey: string): Promise<number> {
    const v = await redis.get(store.bucketKey(keySubject(apiKey)));
    if (v === null) return BURST;
    return Math.floor(Number(v.split(':')[1]) / HOUR);
  }

  /** `n` requests per sidecar, `concurrency` at a time on each. */
  async function flood(apiKey: string, n: number, concurrency = 25): Promise<Reply[]> {
    const out: Reply[] = [];
    await Promise.all(
      sidecars.map(async (s) => {
        for (let done = 0; done < n; done += concurrency) {
          const batch = await Promise.all(
            Array.from({ length: Math.min(concurrency, n - done) }, () => call(`${s.base}/v1/a`, { headers: { 'x-api-key': apiKey } })),
          );
          out.push(...batch);
        }
      }),
    );
    return out;
  }

  t.test('every sidecar counts three lessees', async (t) => {
    await waitFor(() => sidecars.every((s) => s.sidecar.leases!.peers === 3), { timeoutMs: 10_000, what: 'three lessees' });
    t.pass('peers = 3 on each: a lease is at most 600 / (4 × 3) = 50 tokens');
  });

  t.test('a flood on an approximate quota: mostly local, never above the burst, everything given back', async (t) => {
    const replies = await flood(APPROX, 300);
    const admitted = replies.filter((r) => r.status === 200);
    t.same(
      replies.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.status),
      [],
      'only 200 and 429',
    );
    t.ok(admitted.length <= BURST, `${admitted.length} admitted of 900, never above the burst of ${BURST}`);
    t.ok(admitted.length >= BURST - 3 * 50, `${admitted.length} admitted: at most the three leases' tokens held back at the end`);
    const metrics = await Promise.all(sidecars.map(async (s) => parseMetrics((await call(`${s.admin}/metrics`)).text)));
    const local = metrics.reduce((sum, m) => sum + metricSum(m, 'ratelimit_lease_local_admits'), 0);
    const taken = metrics.reduce((sum, m) => sum + metricSum(m, 'ratelimit_lease_tokens', { op: 'taken' }), 0);
    t.ok(local >= admitted.length / 2, `${local} of ${admitted.length} admissions answered from leases, without a round trip`);
    t.ok(taken >= admitted.length, `${taken} tokens taken in leases`);
    t.same(
      admitted.filter((r) => r.headers['x-ratelimit-limit'] !== String(BURST) || !(Number(r.headers['x-ratelimit-remaining']) <= BURST)),
      [],
      'every admission carries the limit and a remaining within it',
    );

    // Past the TTL (1 s), the sweeps give the unspent tokens back.
    await waitFor(async () => admitted.length + (await inRedis(APPROX)) === BURST, {
      timeoutMs: 10_000,
      what: 'every unspent lease token back in Redis',
    });
    t.pass(`admitted + Redis's remaining = ${BURST}: the leases' unspent tokens are back`);
    const returned = (await Promise.all(sidecars.map(async (s) => parseMetrics((await call(`${s.admin}/metrics`)).text)))).reduce(
      (sum, m) => sum + metricSum(m, 'ratelimit_lease_tokens', { op: 'returned' }),
      0,
    );
    t.equal(returned, taken - admitted.length, 'ratelimit_lease_tokens{op="returned"} counts them');

    // Draining what is left: exactly the burst in all.
    let total = admitted.length;
    for (let round = 0; round < 10 && total < BURST; round++) {
      total += (await flood(APPROX, 60, 10)).filter((r) => r.status === 200).length;
      await waitFor(async () => total + (await inRedis(APPROX)) === BURST, { timeoutMs: 10_000, what: 'the leases given back again' });
    }
    t.equal(total, BURST, `exactly the burst of ${BURST} admitted in all`);
  });

  t.test('an exact quota on the same sidecars takes no lease', async (t) => {
    const takes = async () =>
      (await Promise.all(sidecars.map(async (s) => parseMetrics((await call(`${s.admin}/metrics`)).text)))).reduce(
        (sum, m) => sum + metricSum(m, 'ratelimit_lease_takes'),
        0,
      );
    const before = await takes();
    const replies = await flood(EXACT, 300);
    t.equal(replies.filter((r) => r.status === 200).length, BURST, `exactly ${BURST} of 900`);
    t.same(
      sidecars.map((s) => s.sidecar.leases!.book.get(keySubject(EXACT))),
      [undefined, undefined, undefined],
      'no lease for it',
    );
    t.equal(await takes(), before, 'no lease taken (ratelimit_lease_takes unchanged)');
  });
}

t.test('three sidecars on one Redis', async (t) => {
  const redis = new Redis(testRedisUrl());
  t.teardown(() => redis.quit());
  await run(t, 'approx', { REDIS_URL: testRedisUrl() }, redis, 1);
});

t.test('three sidecars on a Redis Cluster (16 global shards)', async (t) => {
  const nodes = testRedisClusterNodes();
  const cluster = new Cluster(
    nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(':')), port: Number(n.slice(n.lastIndexOf(':') + 1)) })),
    { lazyConnect: true },
  );
  await cluster.connect();
  t.teardown(() => cluster.quit());
  await run(t, 'approxc', { REDIS_CLUSTER_NODES: nodes.join(',') }, cluster, 16);
});
