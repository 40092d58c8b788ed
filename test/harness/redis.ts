/**
 * Redis for tests: every test file works under its own key prefix on the run's shared Redis
 * (REDIS_URL) and Redis Cluster (TEST_REDIS_CLUSTER_NODES), so files never touch each other's keys.
 * Code under test should be given the prefix (every counter store takes one).
 *
 * Same policy as the databases: at teardown the prefix's keys are deleted when the test passed and
 * kept (the prefix printed) when it failed; the client is closed either way.
 */
import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { testRedisClusterNodes, testRedisUrl } from './env.js';
import type { TestContext } from './db.js';

/** `test:<label>:<8 hex>:`, unique per call; only [a-z0-9_-] and colons, so it is safe in a SCAN pattern. */
export function testKeyPrefix(label: string): string {
  const clean = label
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  return `test:${clean || 'redis'}:${randomBytes(4).toString('hex')}:`;
}

/** Deletes every key starting with `prefix` from one node (SCAN, then UNLINK one key at a time: cluster-safe). */
async function deleteOnNode(node: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) {
      const pipe = node.pipeline();
      for (const k of keys) pipe.unlink(k);
      await pipe.exec();
      deleted += keys.length;
    }
  } while (cursor !== '0');
  return deleted;
}

/** Deletes every key under `prefix`, on a standalone server or on every master of a cluster. */
export async function deleteKeys(client: Redis | Cluster, prefix: string): Promise<number> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const counts = await Promise.all(nodes.map((n) => deleteOnNode(n, prefix)));
  return counts.reduce((a, b) => a + b, 0);
}

function parseNode(hostPort: string): { host: string; port: number } {
  const i = hostPort.lastIndexOf(':');
  return { host: hostPort.slice(0, i), port: Number(hostPort.slice(i + 1)) };
}

/** A cluster client to TEST_REDIS_CLUSTER_NODES, resolved once it is ready (slots known). */
export async function connectTestCluster(): Promise<Cluster> {
  const cluster = new Cluster(testRedisClusterNodes().map(parseNode), { lazyConnect: true });
  await cluster.connect();
  return cluster;
}

function registerCleanup(t: TestContext, client: Redis | Cluster, prefix: string): void {
  t.teardown(async () => {
    try {
      if (t.passing()) await deleteKeys(client, prefix);
      else process.stderr.write(`# kept Redis keys under ${prefix} for inspection\n`);
    } finally {
      await client.quit().catch(() => client.disconnect());
    }
  });
}

export interface TestRedis {
  /** A client to REDIS_URL (no key prefix applied: use `prefix` yourself). */
  redis: Redis;
  /** This file's key prefix. */
  prefix: string;
  url: string;
}

/** A client to the run's Redis and a fresh key prefix; cleaned up at `t`'s teardown. */
export async function useRedis(t: TestContext, label: string): Promise<TestRedis> {
  const url = testRedisUrl();
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  const prefix = testKeyPrefix(label);
  registerCleanup(t, redis, prefix);
  return { redis, prefix, url };
}

export interface TestRedisCluster {
  /** A cluster client to TEST_REDIS_CLUSTER_NODES (no key prefix applied). */
  cluster: Cluster;
  prefix: string;
  /** The seed nodes, host:port. */
  nodes: string[];
}

/** A client to the run's Redis Cluster and a fresh key prefix; cleaned up at `t`'s teardown. */
export async function useRedisCluster(t: TestContext, label: string): Promise<TestRedisCluster> {
  const cluster = await connectTestCluster();
  const prefix = testKeyPrefix(label);
  registerCleanup(t, cluster, prefix);
  return { cluster, prefix, nodes: testRedisClusterNodes() };
}
