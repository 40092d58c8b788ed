/**
 * Exact local refusals (limiter/admission/refusal-cache.ts), end to end: three sidecars on one real
 * Redis, and on a real 3-master Redis Cluster, refuse locally only what Redis would refuse, and
 * admit nothing Redis would not.
 *
 * How "what Redis would have answered" is known exactly. The driver sends one request at a time,
 * round robin over the three sidecars, and brackets each by two probes: a read-only script that
 * returns Redis TIME and the subject's and the global bucket's states, just before and just after.
 * Nothing else charges these buckets, so Redis held the "before" state for the whole request, at a
 * Redis time between the two probes' times (`n1 ≤ τ ≤ n2 + 1`, TIME being truncated to ms). The
 * algorithms are pure and admit more as time passes, so:
 * - a local refusal is wrong only if Redis admits the request at `n1` already: counted, must be 0;
 * - it is right for certain if Redis refuses it at `n2 + 1`; otherwise the request fell within a
 *   millisecond of its token coming due (counted, reported);
 * - an admission is wrong if Redis refuses the request even at `n2 + 1`: must be 0;
 * - a local refusal's headers: the limit exactly; remaining below the cost and never below Redis's,
 *   Retry-After never later than Redis's (the cache's state predates the other sidecars' charges:
 *   its remaining may be higher than Redis's, its wait shorter, never the other way).
 * Each sidecar's cache is stale by construction (the other two charged the bucket since), which is
 * the case the "others can only lower the tokens" argument covers. Costs 1 and 2 interleave (a
 * refusal at cost 2 must not refuse a cost-1 request that fits), and a second subject is bound
 * by the global bucket (refusals with `binding: global`).
 */
import t, { type Test } from 'tap';
import { Cluster, Redis } from 'ioredis';
import { decide, newAdmission, type BucketState, type LimitParams } from '../../limiter/admission/index.js';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { shardOf } from '../../limiter/admission/key-layout.js';
import { testRedisClusterNodes, testRedisUrl } from '../harness/env.js';
import { deleteKeys, testKeyPrefix } from '../harness/redis.js';
import { startUpstream } from '../harness/upstream.js';
import {
  client,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  startTestSidecar,
  writeQuotaFile,
  type TestSidecar,
} from './fixtures/sidecar.js';

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const PROBE = `
local t = redis.call('TIME')
local r = { tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) }
for _, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  local tag, a, b, c = 0, 0, 0, 0
  if v then tag, a, b, c = string.match(v, '^(%d+):([^:]+):([^:]+):([^:]+)$') end
  r[#r + 1] = tonumber(tag); r[#r + 1] = tonumber(a); r[#r + 1] = tonumber(b); r[#r + 1] = tonumber(c)
end
return r
`;

const state = (r: number[], at: number): BucketState | undefined =>
  r[at] === 0 ? undefined : { alg: r[at] as BucketState['alg'], a: r[at + 1]!, b: r[at + 2]!, c: r[at + 3]! };

/** The subject's own limit (a token bucket of 10/s, burst 2) and the global one (8/s, burst 2 per shard). */
const OWN: LimitParams = { algorithm: 'token_bucket', rate: 10, burst: 2, intervalMs: 1000 };
const WIDE: LimitParams = { algorithm: 'token_bucket', rate: 1000, burst: 1000, intervalMs: 1000 };

interface Tally {
  requests: number;
  admitted: number;
  refusedByRedis: number;
  local: number;
  localCertain: number;
  localWithinMs: number;
  localGlobal: number;
  wrongRefusals: string[];
  wrongAdmissions: string[];
  badHeaders: string[];
}

async function run(t: Test, label: string, redisEnv: Record<string, string>, probeClient: Redis | Cluster, shards: number): Promise<void> {
  // LIMITER_REDIS_PREFIX allows letters, digits, _ . - only: `test.<label>.<hex>`.
  const prefix = testKeyPrefix(label).slice(0, -1).replace(/:/g, '.');
  t.teardown(() => deleteKeys(probeClient, prefix + ':'));
  const own = newApiKey('own');
  const wide = newApiKey('wide');
  const quotaFile = await writeQuotaFile(t, [
    {
      subject_id: keySubject(own),
      algorithm: 'token_bucket',
      rate: 10,
      burst: 2,
      interval_ms: 1000,
      routes: [{ path_prefix: '/v1/heavy', cost: 2 }],
    },
    { subject_id: keySubject(wide), algorithm: 'token_bucket', rate: 1000, burst: 1000, interval_ms: 1000 },
  ]);
  const globalBurst = 2 * shards;
  const env = {
    ...redisEnv,
    LIMITER_REDIS_PREFIX: prefix,
    LIMITER_QUOTA_FILE: quotaFile,
    LIMITER_REDIS_TIMEOUT: '2s',
    LIMITER_GLOBAL_RATE: String(8 * shards),
    LIMITER_GLOBAL_BURST: String(globalBurst),
  };
  const sidecars: TestSidecar[] = [];
  for (let i = 0; i < 3; i++) sidecars.push(await startTestSidecar(t, { upstream: up.url, env }));
  const store = sidecars[0]!.sidecar.store as RedisCounterStore;
  await Promise.all(sidecars.map((s) => s.sidecar.store.ready(5_000)));
  t.equal(store.shards, shards, `${shards} global shard(s)`);
  const GLOBAL: LimitParams = { algorithm: 'token_bucket', rate: 8 * shards, burst: globalBurst, intervalMs: 1000 };
  probeClient.defineCommand('probe', { lua: PROBE, numberOfKeys: 2 });
  const probe = (subject: string) => {
    const shard = shards === 1 ? 0 : shardOf(subject, shards);
    return (probeClient as unknown as { probe(k: string, g: string): Promise<number[]> }).probe(
      store.bucketKey(subject),
      store.globalShardKey('global', shard),
    );
  };

  const tally: Tally = {
    requests: 0,
    admitted: 0,
    refusedByRedis: 0,
    local: 0,
    localCertain: 0,
    localWithinMs: 0,
    localGlobal: 0,
    wrongRefusals: [],
    wrongAdmissions: [],
    badHeaders: [],
  };
  const at = (limit: LimitParams, s: BucketState | undefined, g: BucketState | undefined, now: number, cost: number) =>
    decide({ params: limit, state: s }, { params: GLOBAL, state: g, costScale: shards }, now, cost, newAdmission());

  // Until both kinds of local refusal and enough admissions across refill boundaries have been seen.
  for (let i = 0; i < 20_000; i++) {
    if (tally.local >= 300 && tally.localGlobal >= 50 && tally.admitted >= 24 && tally.localCertain >= 100) break;
    const s = sidecars[i % 3]!;
    const useWide = i % 5 === 4;
    const heavy = !useWide && i % 4 === 1;
    const apiKey = useWide ? wide : own;
    const subject = keySubject(apiKey);
    const limit = useWide ? WIDE : OWN;
    const cost = heavy ? 2 : 1;
    const before = await probe(subject);
    const local0 = s.sidecar.local!.localRefusals;
    const r = await call(`${s.base}${heavy ? '/v1/heavy' : '/v1/x'}`, { headers: { 'x-api-key': apiKey } });
    const wasLocal = s.sidecar.local!.localRefusals > local0;
    const after = await probe(subject);
    tally.requests++;
    const n1 = before[0]!;
    const n2 = after[0]! + 1;
    const S = state(before, 1);
    const G = state(before, 5);
    const early = at(limit, S, G, n1, cost);
    const late = at(limit, S, G, n2, cost);
    const what = `request ${i} (sidecar ${i % 3}, ${useWide ? 'wide' : 'own'}, cost ${cost}, Redis ${n1}..${n2})`;
    if (r.status === 200) {
      tally.admitted++;
      if (wasLocal) tally.wrongAdmissions.push(`${what}: counted as a local refusal but admitted`);
      if (!late.allowed) tally.wrongAdmissions.push(`${what}: admitted, but Redis refuses it even at ${n2}`);
      continue;
    }
    if (r.status !== 429) {
      tally.wrongRefusals.push(`${what}: status ${r.status}`);
      continue;
    }
    if (!wasLocal) {
      tally.refusedByRedis++;
      continue;
    }
    tally.local++;
    if (early.allowed) tally.wrongRefusals.push(`${what}: refused locally, but Redis admits it at ${n1} already`);
    else if (!late.allowed) tally.localCertain++;
    else tally.localWithinMs++;
    if (!early.allowed && early.binding === 'global') tally.localGlobal++;
    // The headers: the limit exactly; never less remaining nor a later Retry-After than Redis's own
    // answer at the bracket's start (the cache's state predates the other sidecars' charges, so its
    // remaining may be higher, never lower), and a refusal's remaining is below its cost.
    const remaining = Number(r.headers['x-ratelimit-remaining']);
    const retry = Number(r.headers['retry-after']);
    const retrySec = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
    if (
      r.headers['x-ratelimit-limit'] !== String(early.limit) ||
      // (0 is also what a refusal bound by the global bucket reports: a stale key state may leave
      // the global bucket binding locally where Redis's key bucket binds first.)
      !((remaining >= early.remaining || remaining === 0) && remaining < cost) ||
      !(retry >= 1 && retry <= retrySec(early.retryAfterMs))
    ) {
      tally.badHeaders.push(
        `${what}: limit ${r.headers['x-ratelimit-limit']} remaining ${remaining} retry-after ${retry}; Redis at ${n1}: ${JSON.stringify({ ...early, key: undefined, global: undefined })}`,
      );
    }
  }

  t.comment(
    JSON.stringify({
      ...tally,
      wrongRefusals: tally.wrongRefusals.length,
      wrongAdmissions: tally.wrongAdmissions.length,
      badHeaders: tally.badHeaders.length,
    }),
  );
  t.same(tally.wrongRefusals, [], 'no request refused locally that Redis would have admitted');
  t.same(tally.wrongAdmissions, [], 'no request admitted that Redis would have refused');
  t.same(tally.badHeaders.slice(0, 5), [], "local refusals carry headers consistent with Redis's answer");
  t.ok(tally.local >= 300, `${tally.local} of ${tally.requests} requests refused locally`);
  t.ok(tally.localCertain >= 100, `${tally.localCertain} of them refused for certain (the rest within a millisecond of a token)`);
  t.ok(tally.localGlobal >= 50, `${tally.localGlobal} local refusals bound by the global bucket`);
  t.ok(tally.admitted >= 24, `${tally.admitted} admitted by Redis as tokens came due, between local refusals`);
  t.ok(tally.refusedByRedis > 0, `${tally.refusedByRedis} refusals came from Redis (the ones that build the cache)`);
  for (const [i, s] of sidecars.entries()) {
    const m = parseMetrics((await call(`${s.admin}/metrics`)).text);
    t.equal(metricSum(m, 'ratelimit_local_refusals'), s.sidecar.local!.localRefusals, `sidecar ${i}: ratelimit_local_refusals`);
  }
}

t.test('three sidecars on one Redis', async (t) => {
  const redis = new Redis(testRedisUrl());
  t.teardown(() => redis.quit());
  await run(t, 'lr', { REDIS_URL: testRedisUrl() }, redis, 1);
});

t.test('three sidecars on a Redis Cluster (16 global shards, each node its own clock)', async (t) => {
  const nodes = testRedisClusterNodes();
  const cluster = new Cluster(
    nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(':')), port: Number(n.slice(n.lastIndexOf(':') + 1)) })),
    { lazyConnect: true },
  );
  await cluster.connect();
  t.teardown(() => cluster.quit());
  await run(t, 'lrc', { REDIS_CLUSTER_NODES: nodes.join(',') }, cluster, 16);
});
