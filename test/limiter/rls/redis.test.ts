// @tier: pure
/**
 * The RLS over Redis counters, against real redis-server processes started here: two sidecars on
 * one Redis share a bucket whichever protocol charges it; Redis paused (CLIENT PAUSE: calls hang
 * until LIMITER_REDIS_TIMEOUT) and Redis killed give each quota its fail mode exactly as on HTTP:
 * `open` admits up to the emergency cap, `closed` (on the quota, or a payment route's default)
 * refuses with OVER_LIMIT, and no call fails.
 */
import t, { type Test } from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RateLimitResponse_Code as Code, type RateLimitResponse } from '../../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { freePort } from '../../harness/ports.js';
import { findRedisServer, REDIS_SERVER_MISSING, spawnRedisServer, type RedisProcess } from '../../harness/redis-server.js';
import { startUpstream } from '../../harness/upstream.js';
import { client, fixedQuota, keySubject, metricSum, newApiKey, parseMetrics, startTestSidecar } from '../fixtures/sidecar.js';
import { headersOf, rlsClient, shouldRateLimit, startRlsSidecar, type Descriptor } from './fixtures.js';

const bin = findRedisServer();
if (!bin) throw new Error(REDIS_SERVER_MISSING);
const dir = await mkdtemp(join(tmpdir(), 'limiter-rls-redis-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

async function redisServer(t: Test): Promise<RedisProcess> {
  const r = await spawnRedisServer({ bin: bin!, dir, choosePort: freePort });
  t.teardown(() => r.stop());
  return r;
}

const K = { shared: newApiKey('shared'), open: newApiKey('open'), closed: newApiKey('closed'), plain: newApiKey('plain') };
const quotas = [
  fixedQuota(keySubject(K.shared), 4, { plan: 'p' }),
  fixedQuota(keySubject(K.open), 2, { plan: 'p', fail_mode: 'open' }),
  fixedQuota(keySubject(K.closed), 5, { plan: 'p', fail_mode: 'closed' }),
  fixedQuota(keySubject(K.plain), 2, { plan: 'p' }),
];
const BREAKER = {
  LIMITER_BREAKER_MIN_VOLUME: '3',
  LIMITER_BREAKER_THRESHOLD: '0.5',
  LIMITER_BREAKER_COOLDOWN: '60s',
  LIMITER_REDIS_TIMEOUT: '300ms',
  LIMITER_REDIS_CONNECT_TIMEOUT: '300ms',
};

t.test('two sidecars on one Redis: RLS and HTTP calls charge one bucket', async (t) => {
  const redis = await redisServer(t);
  const env = { REDIS_URL: `redis://127.0.0.1:${redis.port}` };
  const a = await startRlsSidecar(t, { upstream: up.url, quotas, env });
  const b = await startTestSidecar(t, { upstream: up.url, quotas, env });
  const rls = rlsClient(t, a.rls);
  const ask = () => shouldRateLimit(rls, [[['api_key', K.shared]]]);
  t.equal((await ask()).statuses[0]!.limitRemaining, 3, 'RLS on A');
  t.equal((await ask()).statuses[0]!.limitRemaining, 2, 'RLS on A');
  const h = await call(`${b.base}/v1/x`, { headers: { 'x-api-key': K.shared } });
  t.same([h.status, h.headers['x-ratelimit-remaining']], [200, '1'], 'HTTP on B sees both RLS calls');
  t.equal((await ask()).statuses[0]!.limitRemaining, 0, 'RLS on A sees the HTTP call');
  const over = await ask();
  t.same([over.overallCode, over.statuses[0]!.limitRemaining], [Code.OVER_LIMIT, 0], 'then OVER_LIMIT');
  t.equal((await call(`${b.base}/v1/x`, { headers: { 'x-api-key': K.shared } })).status, 429, 'and 429 on B');
});

/** What the RLS answers under a failing store, checked as fail-modes.test.ts checks HTTP. */
async function failModes(t: Test, ask: (d: Descriptor[]) => Promise<RateLimitResponse>) {
  const open = [];
  for (let i = 0; i < 11; i++) open.push((await ask([[['api_key', K.open]]])).overallCode);
  t.same(
    open,
    [...Array(10).fill(Code.OK), Code.OVER_LIMIT],
    'fail_mode open: admitted to the emergency cap (5 × burst 2), then OVER_LIMIT',
  );
  const closed = await ask([[['api_key', K.closed]]]);
  t.equal(closed.overallCode, Code.OVER_LIMIT, 'fail_mode closed: OVER_LIMIT');
  t.match(headersOf(closed)['retry-after'], /^[1-9]\d*$/, 'with Retry-After');
  t.equal(headersOf(closed)['x-ratelimit-limit'], '5', 'and the quota’s own limit');
  const checkout = await ask([
    [
      ['api_key', K.plain],
      ['path', '/checkout'],
    ],
  ]);
  t.equal(checkout.overallCode, Code.OVER_LIMIT, 'a payment route with no fail_mode on the quota fails closed');
  const plain = await ask([
    [
      ['api_key', K.plain],
      ['path', '/v1/x'],
    ],
  ]);
  t.equal(plain.overallCode, Code.OK, 'an ordinary route fails open');
}

t.test('Redis paused: every answer in time, each quota’s fail mode, no error', async (t) => {
  const redis = await redisServer(t);
  const s = await startRlsSidecar(t, { upstream: up.url, quotas, env: { REDIS_URL: `redis://127.0.0.1:${redis.port}`, ...BREAKER } });
  const rls = rlsClient(t, s.rls);
  t.equal((await shouldRateLimit(rls, [[['api_key', K.open]]])).statuses[0]!.limitRemaining, 1, 'Redis answers first');
  const admin = new Redis(redis.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
  await admin.connect();
  t.teardown(() => admin.disconnect());
  // Paused for longer than the test runs; a paused Redis does not stop on SIGTERM (its stop() in the
  // teardown waited 5 s for the harness's SIGKILL), so it is killed first, before the sidecar closes.
  t.teardown(() => redis.kill());
  await admin.call('CLIENT', 'PAUSE', '120000', 'ALL');
  await failModes(t, (d) => shouldRateLimit(rls, d));
  t.equal(s.sidecar.breaker.state, 'open', 'the circuit opened');
  const m = parseMetrics((await call(`${s.admin}/metrics`)).text);
  t.ok(metricSum(m, 'ratelimit_decisions', { result: 'fail_open' }) >= 9, 'fail_open decisions counted');
  t.ok(metricSum(m, 'ratelimit_decisions', { result: 'fail_closed' }) >= 2, 'fail_closed decisions counted');
  t.equal(metricSum(m, 'ratelimit_rls_requests', { code: 'error' }), 0, 'no RLS call failed');
});

t.test('Redis killed: the same fail modes, no error', async (t) => {
  const redis = await redisServer(t);
  const s = await startRlsSidecar(t, { upstream: up.url, quotas, env: { REDIS_URL: `redis://127.0.0.1:${redis.port}`, ...BREAKER } });
  const rls = rlsClient(t, s.rls);
  t.equal((await shouldRateLimit(rls, [[['api_key', K.plain]]])).statuses[0]!.limitRemaining, 1, 'Redis answers first');
  await redis.stop();
  await failModes(t, (d) => shouldRateLimit(rls, d));
  t.equal(s.sidecar.breaker.state, 'open', 'the circuit opened');
  const m = parseMetrics((await call(`${s.admin}/metrics`)).text);
  t.equal(metricSum(m, 'ratelimit_rls_requests', { code: 'error' }), 0, 'no RLS call failed');
});
