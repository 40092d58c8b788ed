/**
 * One sidecar on a real 3-master Redis Cluster (REDIS_CLUSTER_NODES), end to end: exact
 * admissions, and the global bucket split into slot-local shards with its documented bound — one
 * hot subject gets 1/S of the global limit, and spread over many subjects the shards together
 * admit exactly Σ min(shard capacity, subjects in that shard), never more than the global burst.
 *
 * The cluster is TEST_REDIS_CLUSTER_NODES when set (npm test starts one); run by hand without it,
 * this file starts its own from redis-server (test/harness/redis-server.ts) rather than skip.
 */
import t from 'tap';
import { Cluster } from 'ioredis';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { shardOf } from '../../limiter/admission/key-layout.js';
import { findRedisServer, REDIS_SERVER_MISSING, startRedisCluster } from '../harness/redis-server.js';
import { startUpstream } from '../harness/upstream.js';
import { client, fixedQuota, keySubject, newApiKey, startTestSidecar, type QuotaJson, type Reply } from './fixtures/sidecar.js';

let nodes = (process.env.TEST_REDIS_CLUSTER_NODES ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
if (nodes.length === 0) {
  const bin = findRedisServer();
  if (!bin) throw new Error(`TEST_REDIS_CLUSTER_NODES is not set and ${REDIS_SERVER_MISSING}`);
  const cluster = await startRedisCluster(bin, 3);
  t.teardown(() => cluster.stop());
  nodes = cluster.nodes;
}

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const SHARDS = 16;
const EXACT = newApiKey('cluster-exact');
// A hot key in a different shard from EXACT's, so its shard starts full.
let HOT = newApiKey('cluster-hot');
while (shardOf(keySubject(HOT), SHARDS) === shardOf(keySubject(EXACT), SHARDS)) HOT = newApiKey('cluster-hot');
const MANY = Array.from({ length: 48 }, (_, i) => newApiKey(`cluster-many${i}`));
const quotas: QuotaJson[] = [
  fixedQuota(keySubject(HOT), 100),
  fixedQuota(keySubject(EXACT), 5),
  ...MANY.map((k) => fixedQuota(keySubject(k), 10)),
];

const s = await startTestSidecar(t, {
  upstream: up.url,
  quotas,
  env: {
    REDIS_CLUSTER_NODES: nodes.join(','),
    LIMITER_GLOBAL_SHARDS: String(SHARDS),
    // Global burst 32 over 16 shards: 2 per shard. A slow rate, so nothing refills mid-test.
    LIMITER_GLOBAL_RATE: '1',
    LIMITER_GLOBAL_BURST: '32',
    LIMITER_REDIS_TIMEOUT: '2s',
  },
});
const store = s.sidecar.store as RedisCounterStore;
await store.ready(10_000);

// No key-prefix setting: the global shards are the sidecar's fixed `rl:` keys. Start them empty
// and leave nothing behind.
const admin = new Cluster(
  nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(':')), port: Number(n.slice(n.lastIndexOf(':') + 1)) })),
  { lazyConnect: true },
);
await admin.connect();
const ourKeys = [
  ...Array.from({ length: SHARDS }, (_, i) => store.globalShardKey('global', i)),
  ...[HOT, EXACT, ...MANY].map((k) => store.bucketKey(keySubject(k))),
];
const clean = () => Promise.all(ourKeys.map((k) => admin.del(k)));
await clean();
t.teardown(async () => {
  await clean();
  await admin.quit();
});

const get = (key: string, path = '/v1/c') => call(`${s.base}${path}`, { headers: { 'x-api-key': key } });

t.test('exact admissions through the cluster', async (t) => {
  const rs: Reply[] = [];
  for (let i = 0; i < 7; i++) rs.push(await get(EXACT));
  // EXACT's shard: its own 5 would pass, but its global shard holds 2.
  t.same(
    rs.map((r) => r.status),
    [200, 200, 429, 429, 429, 429, 429],
    'key bucket 5, global shard 2: the shard binds',
  );
  t.same(
    rs.slice(0, 2).map((r) => r.headers['x-ratelimit-remaining']),
    ['4', '3'],
    'the key’s own figures',
  );
  t.equal(rs[2]!.headers['x-ratelimit-limit'], '5', 'a global denial still reports the key’s limit');
  t.equal(up.requests.filter((r) => r.headers['x-subject'] === keySubject(EXACT)).length, 2, 'two reached the upstream');
});

t.test('one hot subject gets 1/S of the global bucket, and keeps its own tokens', async (t) => {
  const rs: Reply[] = [];
  for (let i = 0; i < 5; i++) rs.push(await get(HOT));
  t.same(
    rs.map((r) => r.status),
    [200, 200, 429, 429, 429],
    'its shard holds 32/16 = 2',
  );
  t.same(
    rs.slice(0, 2).map((r) => r.headers['x-ratelimit-remaining']),
    ['99', '98'],
    'charged to its own bucket only when admitted',
  );
  s.clock.advance(60_000);
  const later = await get(HOT);
  t.equal(later.status, 429, 'the shard refills from Redis TIME, not the sidecar’s clock');
});

t.test('spread over many subjects: exactly Σ min(2, subjects per shard), never over the global burst', async (t) => {
  const used = new Map<number, number>();
  used.set(shardOf(keySubject(EXACT), SHARDS), 2);
  used.set(shardOf(keySubject(HOT), SHARDS), 2);
  const perShard = new Map<number, number>();
  for (const k of MANY) {
    const sh = shardOf(keySubject(k), SHARDS);
    perShard.set(sh, (perShard.get(sh) ?? 0) + 1);
  }
  let expected = 0;
  for (let sh = 0; sh < SHARDS; sh++) expected += Math.min(Math.max(0, 2 - (used.get(sh) ?? 0)), perShard.get(sh) ?? 0);
  const replies = await Promise.all(MANY.map((k) => get(k)));
  const admitted = replies.filter((r) => r.status === 200).length;
  t.equal(admitted, expected, `admitted ${admitted}, as the shard arithmetic says`);
  t.ok(admitted + 4 <= 32, 'the global burst is never exceeded');
  t.equal(replies.filter((r) => r.status !== 200 && r.status !== 429).length, 0, 'only 200 and 429');
});
