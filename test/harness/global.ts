/**
 * The servers of one `npm test` run, started once by the runner (bin/test.mjs) before tap and
 * stopped after it; their addresses reach every test process through the environment
 * (test/harness/env.ts reads them).
 *
 * - DATABASE_URL: the user's if set (checked reachable), else an embedded PostgreSQL in a fresh
 *   temp data dir on a free port, tuned for throwaway data (no fsync), deleted at teardown. The
 *   runner points TMPDIR into memory when it can (test/harness/throwaway-dir.ts says why).
 * - REDIS_URL: the user's if set (checked reachable), else a redis-server on a free port.
 * - TEST_REDIS_CLUSTER_NODES: the user's if set, else a 3-master Redis Cluster from the same
 *   redis-server binary.
 * - TEST_DATABASE_TEMPLATE: the user's if set, else a database on that PostgreSQL with every
 *   service's migrations applied, built once for the run (test/harness/template-db.ts) and dropped
 *   at teardown; each test file's database is a copy of it.
 *
 * The three start in parallel (the template is built as soon as PostgreSQL answers, while the
 * cluster still starts); if one fails, the others are stopped and the error says which.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import { startEmbeddedPostgres } from '../../shared/embedded-postgres.js';
import { findRedisServer, REDIS_SERVER_MISSING, startRedisCluster, startRedisServer } from './redis-server.js';
import { buildTemplateDatabase, TEMPLATE_ENV } from './template-db.js';

export interface GlobalServers {
  /** DATABASE_URL, REDIS_URL, TEST_REDIS_CLUSTER_NODES and TEST_DATABASE_TEMPLATE for the test processes. */
  env: Record<string, string>;
  /** Stops whatever setupGlobal started (nothing for servers the user provided). */
  teardown(): Promise<void>;
}

interface Started {
  env: Record<string, string>;
  stop?: () => Promise<void>;
}

/** host:port of the URL, without credentials, for messages. */
function where(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 'default port'}`;
  } catch {
    return 'an unparsable URL';
  }
}

async function userPostgres(url: string): Promise<Started> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new Error(`DATABASE_URL (${where(url)}) is not reachable: ${(err as Error).message}`);
  } finally {
    await client.end().catch(() => {});
  }
  return { env: { DATABASE_URL: url } };
}

async function embeddedPostgres(): Promise<Started> {
  const dataDir = await mkdtemp(join(tmpdir(), 'edge-test-pg-'));
  try {
    const db = await startEmbeddedPostgres({ dataDir, ephemeral: true, settings: { max_connections: '200' } });
    return {
      env: { DATABASE_URL: db.url },
      async stop() {
        await db.stop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * PostgreSQL (the user's or an embedded one) with the run's migrated template on it, unless the
 * user names one. If the template cannot be built, the server is stopped again.
 */
async function postgresWithTemplate(pg: Started, givenTemplate: string | undefined): Promise<Started> {
  if (givenTemplate) return { env: { ...pg.env, [TEMPLATE_ENV]: givenTemplate }, stop: pg.stop };
  const url = pg.env.DATABASE_URL ?? '';
  let template;
  try {
    template = await buildTemplateDatabase(url);
  } catch (err) {
    await pg.stop?.().catch(() => {});
    throw err;
  }
  return {
    env: { ...pg.env, [TEMPLATE_ENV]: template.name },
    async stop() {
      // An embedded server's data dir goes as a whole; on the user's server, the template is dropped.
      if (pg.stop) await pg.stop();
      else await template.drop();
    },
  };
}

async function userRedis(url: string): Promise<Started> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 5_000 });
  // connect() rejects with a bare "Connection is closed"; the socket's own error says why.
  let cause: Error | undefined;
  client.on('error', (err: Error) => (cause ??= err));
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    throw new Error(`REDIS_URL (${where(url)}) is not reachable: ${(cause ?? (err as Error)).message}`);
  } finally {
    client.disconnect();
  }
  return { env: { REDIS_URL: url } };
}

function redisBin(): string {
  const bin = findRedisServer();
  if (!bin) throw new Error(REDIS_SERVER_MISSING);
  return bin;
}

async function spawnedRedis(): Promise<Started> {
  const server = await startRedisServer(redisBin());
  return { env: { REDIS_URL: server.url }, stop: () => server.stop() };
}

async function spawnedCluster(): Promise<Started> {
  const cluster = await startRedisCluster(redisBin(), 3);
  return { env: { TEST_REDIS_CLUSTER_NODES: cluster.nodes.join(',') }, stop: () => cluster.stop() };
}

/** Starts (or checks) the run's PostgreSQL, Redis and Redis Cluster. Call once per run. */
export async function setupGlobal(): Promise<GlobalServers> {
  const env = process.env;
  const tasks: Array<[string, () => Promise<Started>]> = [
    [
      'PostgreSQL',
      async () => postgresWithTemplate(await (env.DATABASE_URL ? userPostgres(env.DATABASE_URL) : embeddedPostgres()), env[TEMPLATE_ENV]),
    ],
    ['Redis', () => (env.REDIS_URL ? userRedis(env.REDIS_URL) : spawnedRedis())],
    [
      'Redis Cluster',
      () =>
        env.TEST_REDIS_CLUSTER_NODES
          ? Promise.resolve({ env: { TEST_REDIS_CLUSTER_NODES: env.TEST_REDIS_CLUSTER_NODES } })
          : spawnedCluster(),
    ],
  ];
  const results = await Promise.allSettled(tasks.map(([, start]) => start()));
  const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const teardown = async (): Promise<void> => {
    const errors: string[] = [];
    await Promise.all(
      started.map(async (s) => {
        try {
          await s.stop?.();
        } catch (err) {
          errors.push((err as Error).message);
        }
      }),
    );
    if (errors.length) throw new Error(`teardown: ${errors.join('; ')}`);
  };
  // Several servers failing for the same reason (no redis-server) is said once.
  const failures = new Map<string, string[]>();
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') return;
    const reason = messageOf(r.reason);
    failures.set(reason, [...(failures.get(reason) ?? []), tasks[i]?.[0] ?? '?']);
  });
  if (failures.size) {
    await teardown().catch(() => {});
    throw new Error([...failures].map(([reason, names]) => `${names.join(', ')}: ${reason}`).join('; '));
  }
  return { env: Object.assign({}, ...started.map((s) => s.env)) as Record<string, string>, teardown };
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
