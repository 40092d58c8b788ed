/**
 * The gateway a Node user would otherwise assemble (issue 17, item 8): fastify 5 +
 * @fastify/rate-limit + @fastify/reply-from, keyed on the API key header, in front of the bench's
 * upstream. Default settings wherever the bench has no reason to change them; counters in process
 * (the plugin's LRU, sized for the bench's 10,000 keys) or, given a Redis URL, on Redis through ioredis as the plugin's README advises
 * (short connect timeout, one try per request).
 *
 * Like the nginx peer, one process serves three servers, each with its own limit:
 *   admit: 10⁹ per second, no run can exhaust it;
 *   deny:  1 per hour, so nearly every request is refused;
 *   abuse: 1 per `abuseWindowMs` per key (the bench's 10,000-key abuse workload).
 * Responses carry the plugin's X-RateLimit-* headers (and Retry-After on a 429); the upstream
 * request gets X-Forwarded-For/-Proto, as nginx's and the sidecar's do.
 *
 *   node dist/bench/peers/fastify-gateway.js <upstream origin> <admit port> <deny port> <abuse port> <abuseWindowMs> [redis url]
 *
 * FASTIFY_WORKERS=N (bench/sidecar.ts `--workers N`): N processes under node:cluster, the Node
 * user's way to use N cores (the primary accepts and hands connections round-robin to the workers,
 * which each run the three servers); in-process counters are then per worker, not shared.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import replyFrom from '@fastify/reply-from';
import { Redis } from 'ioredis';
import cluster from 'node:cluster';

const [origin, admitPort, denyPort, abusePort, abuseWindow, redisUrl] = process.argv.slice(2);
if (!origin || !admitPort || !denyPort || !abusePort || !abuseWindow) {
  console.error('usage: fastify-gateway.js <upstream origin> <admit port> <deny port> <abuse port> <abuseWindowMs> [redis url]');
  process.exit(2);
}

const WORKERS = Number(process.env.FASTIFY_WORKERS ?? '1');
if (WORKERS > 1 && cluster.isPrimary) {
  for (let i = 0; i < WORKERS; i++) cluster.fork();
  console.log(`fastify gateway: ${WORKERS} cluster workers`);
  process.once('SIGTERM', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    cluster.on('exit', () => {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
    });
  });
} else await serve();

async function serve(): Promise<void> {
  const redis = redisUrl ? new Redis(redisUrl, { connectTimeout: 500, maxRetriesPerRequest: 1 }) : undefined;

  async function server(name: string, port: number, max: number, timeWindow: number): Promise<FastifyInstance> {
    const app = Fastify({ logger: false, keepAliveTimeout: 65_000 });
    await app.register(rateLimit, {
      global: true,
      max,
      timeWindow,
      keyGenerator: (req) => String(req.headers['x-api-key'] ?? req.ip),
      // The in-process store is an LRU of 5,000 keys by default: the 10,000 abuse keys would evict
      // each other and never be limited.
      cache: 100_000,
      ...(redis ? { redis, nameSpace: `bench-${name}-` } : {}),
    });
    await app.register(replyFrom, { base: origin!, undici: { connections: 128, pipelining: 1 } });
    app.all('/*', (req, reply) => {
      reply.from(req.url, {
        rewriteRequestHeaders: (r, headers) => ({
          ...headers,
          'x-forwarded-for': req.ip,
          'x-forwarded-proto': 'http',
        }),
      });
    });
    await app.listen({ host: '127.0.0.1', port });
    return app;
  }

  const apps = [
    await server('admit', Number(admitPort), 1_000_000_000, 1000),
    await server('deny', Number(denyPort), 1, 3_600_000),
    await server('abuse', Number(abusePort), 1, Number(abuseWindow)),
  ];
  console.log(`fastify gateway (${redis ? 'redis' : 'in-process'} counters) on ${admitPort}, ${denyPort}, ${abusePort} → ${origin}`);
  process.once('SIGTERM', () => {
    void Promise.all(apps.map((a) => a.close())).finally(() => {
      redis?.disconnect();
      process.exit(0);
    });
  });
}
