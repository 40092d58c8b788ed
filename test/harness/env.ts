/**
 * Where the test servers are. `npm test` (bin/test.mjs) starts them once per run and passes their
 * addresses to every test process through these variables; run a single file by hand with them
 * set (e.g. against the machine's own Postgres and Redis).
 *
 * A file marked `// @tier: pure` (test/harness/tiers.ts) runs without them: asking for one there
 * throws, naming the marker, so a wrong marker fails loudly instead of passing by luck.
 */
import { PURE_MARKER, TIER_ENV } from './tiers.js';

function need(name: string, hint: string): string {
  if (process.env[TIER_ENV] === 'pure') {
    throw new Error(
      `${name} is not set: this test file is marked \`${PURE_MARKER}\`, so \`npm test\` runs it without ` +
        `PostgreSQL, Redis or the Redis Cluster; remove the marker from its first line if it needs them`,
    );
  }
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the suite with \`npm test\`, or set ${name} (${hint})`);
  return v;
}

/** A PostgreSQL URL whose user may CREATE DATABASE. Each test file makes its own database from it. */
export const testDatabaseUrl = (): string => need('DATABASE_URL', 'e.g. postgres://postgres@127.0.0.1:5432/postgres');

/** A standalone Redis. Each test file uses its own key prefix. */
export const testRedisUrl = (): string => need('REDIS_URL', 'e.g. redis://127.0.0.1:6379');

/** Seed nodes (host:port) of a 3-master Redis Cluster. */
export const testRedisClusterNodes = (): string[] =>
  need('TEST_REDIS_CLUSTER_NODES', 'comma-separated host:port of a 3-node cluster')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
