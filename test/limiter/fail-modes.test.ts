// @tier: pure
/**
 * When the counter store fails, against real Redis processes: a Redis that is not there at all,
 * and one that dies under a running sidecar and comes back. The circuit opens after
 * LIMITER_BREAKER_MIN_VOLUME failures; fail_mode `open` (set on the quota, or the default for
 * ordinary routes) admits up to LIMITER_EMERGENCY_FACTOR × the limit, counted in process;
 * `closed` (set on the quota, or the default for auth/payment routes like /checkout) answers
 * LIMITER_FAIL_CLOSED_STATUS problem+json with Retry-After; never a 500. Once Redis is back, the
 * half-open probes restore exact admission without a restart.
 */
import t, { type Test } from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { freePort } from '../harness/ports.js';
import { findRedisServer, REDIS_SERVER_MISSING, spawnRedisServer, type RedisProcess } from '../harness/redis-server.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import {
  client,
  fixedQuota,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  RATE_LIMIT_HEADERS,
  startTestSidecar,
  type QuotaJson,
  type Reply,
  type TestSidecar,
} from './fixtures/sidecar.js';

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const K = { open: newApiKey('open'), closed: newApiKey('closed'), plain: newApiKey('plain'), fresh: newApiKey('fresh') };
const quotas: QuotaJson[] = [
  fixedQuota(keySubject(K.open), 2, { fail_mode: 'open', plan: 'p' }),
  fixedQuota(keySubject(K.closed), 5, { fail_mode: 'closed', plan: 'p' }),
  fixedQuota(keySubject(K.plain), 2, { plan: 'p' }),
  fixedQuota(keySubject(K.fresh), 3, { plan: 'p' }),
];
const BREAKER = {
  LIMITER_BREAKER_MIN_VOLUME: '3',
  LIMITER_BREAKER_THRESHOLD: '0.5',
  LIMITER_BREAKER_COOLDOWN: '5s',
  LIMITER_REDIS_CONNECT_TIMEOUT: '300ms',
};
const get = (s: TestSidecar, key: string, path = '/v1/x') => call(`${s.base}${path}`, { headers: { 'x-api-key': key } });
const metrics = async (s: TestSidecar) => parseMetrics((await call(`${s.admin}/metrics`)).text);

function failClosed(t: Test, r: Reply, status: number, what: string): void {
  t.equal(r.status, status, `${what}: ${status}`);
  t.match(r.headers['content-type'], /^application\/problem\+json/, `${what}: problem+json`);
  t.equal(r.json<{ code: string }>().code, status === 503 ? 'limiter_unavailable' : 'rate_limited', `${what}: code`);
  t.match(r.headers['retry-after'], /^[1-9]\d*$/, `${what}: Retry-After ≥ 1`);
  for (const h of RATE_LIMIT_HEADERS) t.ok(r.headers[h] !== undefined, `${what}: ${h}`);
}

t.test('Redis unreachable: the circuit opens; open admits to the emergency cap, closed refuses with 503', async (t) => {
  const dead = await freePort();
  const s = await startTestSidecar(t, { upstream: up.url, quotas, env: { REDIS_URL: `redis://127.0.0.1:${dead}`, ...BREAKER } });
  const statuses: number[] = [];

  const open: Reply[] = [];
  for (let i = 0; i < 13; i++) open.push(await get(s, K.open));
  statuses.push(...open.map((r) => r.status));
  t.same(
    open.map((r) => r.status),
    [...Array(10).fill(200), 429, 429, 429],
    'fail_mode open: 5 × burst 2 = 10 admitted, then 429',
  );
  t.match(open[10]!.headers['retry-after'], /^[1-9]\d*$/, 'the emergency-cap denial has a Retry-After');
  t.equal(s.sidecar.breaker.state, 'open', 'the circuit is open');

  const closed = await get(s, K.closed);
  statuses.push(closed.status);
  failClosed(t, closed, 503, 'fail_mode closed');

  const checkout = await get(s, K.plain, '/checkout');
  statuses.push(checkout.status);
  failClosed(t, checkout, 503, 'a payment route with no fail_mode on the quota');
  const login = await call(`${s.base}/auth/login`, { method: 'POST', body: '{}' });
  statuses.push(login.status);
  failClosed(t, login, 503, 'an auth route under the per-IP cap');

  const plain: number[] = [];
  for (let i = 0; i < 11; i++) plain.push((await get(s, K.plain)).status);
  statuses.push(...plain);
  t.same(plain, [...Array(10).fill(200), 429], 'an ordinary route with no fail_mode fails open, to the cap');

  t.notOk(
    statuses.some((x) => x >= 500 && x !== 503),
    `never a 500 (saw ${[...new Set(statuses)].join(', ')})`,
  );
  const m = await metrics(s);
  t.equal(metricSum(m, 'ratelimit_failmode_trips'), 1, 'one trip counted');
  t.ok(metricSum(m, 'ratelimit_decisions', { result: 'fail_open' }) >= 20, 'fail_open decisions counted');
  t.ok(metricSum(m, 'ratelimit_decisions', { result: 'fail_closed' }) >= 2, 'fail_closed decisions counted');
});

t.test('LIMITER_FAIL_CLOSED_STATUS=429 answers fail-closed routes with 429', async (t) => {
  const dead = await freePort();
  const s = await startTestSidecar(t, {
    upstream: up.url,
    quotas,
    env: { REDIS_URL: `redis://127.0.0.1:${dead}`, ...BREAKER, LIMITER_FAIL_CLOSED_STATUS: '429' },
  });
  failClosed(t, await get(s, K.closed), 429, 'fail_mode closed');
  failClosed(t, await get(s, K.plain, '/checkout'), 429, '/checkout');
});

t.test('Redis dies and comes back: fail open meanwhile, then half-open probes restore exact admission', async (t) => {
  const bin = findRedisServer();
  if (!bin) {
    t.fail(REDIS_SERVER_MISSING);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'limiter-failmode-redis-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  let redis: RedisProcess = await spawnRedisServer({ bin, dir, choosePort: freePort });
  const port = redis.port;
  t.teardown(() => redis.stop());

  const s = await startTestSidecar(t, {
    upstream: up.url,
    quotas,
    env: { REDIS_URL: `redis://127.0.0.1:${port}`, ...BREAKER, LIMITER_REDIS_TIMEOUT: '1s' },
  });
  const store = s.sidecar.store as RedisCounterStore;
  await store.ready(5_000);

  const normal: number[] = [];
  for (let i = 0; i < 4; i++) normal.push((await get(s, K.plain)).status);
  t.same(normal, [200, 200, 429, 429], 'Redis up: exact (burst 2)');
  const m = await metrics(s);
  t.equal(
    metricSum(m, 'ratelimit_redis_rtt_ms_count') + metricSum(m, 'ratelimit_local_refusals'),
    4,
    'round trips measured (the refusals Redis certainly gives are answered locally: limiter/admission/refusal-cache.ts)',
  );

  await redis.stop();
  const during: Reply[] = [];
  for (let i = 0; i < 6; i++) during.push(await get(s, K.open));
  t.same(
    during.map((r) => r.status),
    [200, 200, 200, 200, 200, 200],
    'Redis down: fail open (cap 10)',
  );
  t.equal(s.sidecar.breaker.state, 'open', 'the circuit opened');
  t.equal(metricSum(await metrics(s), 'ratelimit_failmode_trips'), 1, 'the trip is counted');
  t.equal(during[5]!.headers['x-ratelimit-limit'], '2', 'headers keep the quota’s own limit while failing open');

  redis = await spawnRedisServer({ bin, dir, choosePort: async () => port });
  await waitFor(() => store.status === 'ready', { timeoutMs: 10_000, what: 'the sidecar’s Redis client to reconnect' });
  t.equal(s.sidecar.breaker.state, 'open', 'still open until the cool-down passes (no call reached Redis)');

  s.clock.advance(5_000);
  const after: number[] = [];
  for (let i = 0; i < 5; i++) after.push((await get(s, K.fresh)).status);
  t.same(after, [200, 200, 200, 429, 429], 'back to exact admission in Redis (burst 3), not the emergency cap of 15');
  t.equal(s.sidecar.breaker.state, 'closed', 'the probes closed the circuit, without a restart');
});
