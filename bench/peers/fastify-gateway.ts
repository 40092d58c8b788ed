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
 */
import Fastify, { type FastifyInstance } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import replyFrom from '@fastify/reply-from';
import { Redis } from 'ioredis';

const [origin, admitPort, denyPort, abusePort, abuseWindow, redisUrl] = process.argv.slice(2);
if (!origin || !admitPort || !denyPort || !abusePort || !abuseWindow) {
  console.error('usage: fastify-gateway.js <upstream origin> <admit port> <deny port> <abuse port> <abuseWindowMs> [redis url]');
  process.exit(2);
}

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
