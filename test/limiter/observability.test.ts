/**
 * What the sidecar tells its operators, with a real Redis behind it: /healthz, /readyz and
 * /metrics on the admin port with the metric names and labels of README, "Observability"; sampled
 * decision events in
 * the log with a hashed subject; and no raw API key (nor a bearer token) in any log line or in the
 * metrics output.
 */
import t from 'tap';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { hashSubject } from '../../shared/log.js';
import { testRedisUrl } from '../harness/env.js';
import { accessClaims, sign } from '../harness/tokens.js';
import { startUpstream } from '../harness/upstream.js';
import { Redis } from 'ioredis';
import { client, fixedQuota, keySubject, metricSum, newApiKey, parseMetrics, startTestSidecar } from './fixtures/sidecar.js';

const url = testRedisUrl();
const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const KEY = newApiKey('obs');
const BUSY = newApiKey('obs-busy');
const UNKNOWN = newApiKey('obs-unknown');
const s = await startTestSidecar(t, {
  upstream: up.url,
  quotas: [fixedQuota(keySubject(KEY), 3, { plan: 'obs' }), fixedQuota(keySubject(BUSY), 1000, { plan: 'busy' })],
  env: { REDIS_URL: url, LIMITER_DECISION_SAMPLE_RATE: '1', LIMITER_REDIS_TIMEOUT: '2s', LOG_LEVEL: 'debug' },
});
const store = s.sidecar.store as RedisCounterStore;
await store.ready(5_000);
const redis = new Redis(url, { lazyConnect: true });
await redis.connect();
t.teardown(async () => {
  await redis.del(store.bucketKey(keySubject(KEY)), store.bucketKey(keySubject(BUSY)), store.bucketKey('ip:127.0.0.1'));
  await redis.quit();
});

const TOKEN = sign(accessClaims({ nowMs: s.clock.now() }, { sub: 'obs-user', user_id: 'obs-user' }), { key: s.key });
const BAD_TOKEN = sign(accessClaims({ nowMs: s.clock.now() }, { aud: 'nope' }), { key: s.key });

t.test('/healthz and /readyz', async (t) => {
  const h = await call(`${s.admin}/healthz`);
  t.equal(h.status, 200);
  const r = await call(`${s.admin}/readyz`);
  t.equal(r.status, 200, 'ready: the quota file is loaded');
  t.match(r.json(), { status: 'ready', checks: { quotas: 'ok' } });
  const dataPlane = await call(`${s.base}/healthz`, { headers: { 'x-api-key': KEY } });
  t.equal(dataPlane.status, 404, 'the admin endpoints are not on the data port');
});

t.test('traffic of every kind', async (t) => {
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await call(`${s.base}/v1/obs`, { headers: { 'x-api-key': KEY } })).status);
  t.same(statuses, [200, 200, 200, 429, 429]);
  for (let i = 0; i < 20; i++) await call(`${s.base}/v1/busy`, { headers: { 'x-api-key': BUSY } });
  t.equal((await call(`${s.base}/v1/obs`, { headers: { 'x-api-key': UNKNOWN } })).status, 429, 'unknown key');
  t.equal((await call(`${s.base}/v1/obs`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200, 'token');
  t.equal((await call(`${s.base}/v1/obs`, { headers: { authorization: `Bearer ${BAD_TOKEN}` } })).status, 401, 'bad token');
  t.equal((await call(`${s.base}/auth/login`, { method: 'POST', body: '{}' })).status, 200, 'per-IP');
});

t.test('/metrics has the seed’s metrics', async (t) => {
  s.clock.advance(10_000); // closes the hot-key window
  const res = await call(`${s.admin}/metrics`);
  t.equal(res.status, 200);
  t.match(res.headers['content-type'], /^text\/plain/);
  const text = res.text;
  const m = parseMetrics(text);
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'allow', tenant: 'obs', route: '/v1' }), 3, 'allow{tenant=obs,route=/v1}');
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'deny', tenant: 'obs', route: '/v1' }), 2, 'deny{tenant=obs,route=/v1}');
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'decoy', route: '/v1' }), 1, 'the unknown key');
  t.equal(metricSum(m, 'ratelimit_decisions', { route: '/auth' }), 1, 'the per-IP decision, under its route');
  t.ok(metricSum(m, 'ratelimit_redis_rtt_ms_count') >= 25, 'ratelimit_redis_rtt_ms observed for each Redis decision');
  t.match(text, /^# TYPE ratelimit_redis_rtt_ms histogram$/m, 'ratelimit_redis_rtt_ms is a histogram');
  t.ok(metricSum(m, 'ratelimit_redis_rtt_ms_bucket', { le: '+Inf' }) >= 25, 'with buckets');
  t.match(text, /^ratelimit_failmode_trips(\{[^}]*\})? 0$/m, 'ratelimit_failmode_trips, 0 with Redis up');
  t.ok(metricSum(m, 'remaining_tokens_count') >= 1, 'remaining_tokens sampled');
  const busy = hashSubject(keySubject(BUSY));
  t.equal(metricSum(m, 'ratelimit_hot_key_ops', { subject: busy }), 20, 'ratelimit_hot_key_ops for the busiest subject, hashed');
  t.ok(metricSum(m, 'ratelimit_hot_key_share', { subject: busy }) > 0.6, 'and its share of evaluations');
  for (const raw of [KEY, BUSY, UNKNOWN]) {
    t.notOk(text.includes(raw), 'no raw API key in /metrics');
    t.notOk(text.includes(keySubject(raw).slice(4)), 'no API key hash in /metrics either');
  }
  t.notOk(text.includes('obs-user'), 'no user id in /metrics');
});

t.test('logs: sampled decision events with a hashed subject, and no secrets anywhere', async (t) => {
  const lines = s.logs.join('');
  for (const raw of [KEY, BUSY, UNKNOWN]) t.notOk(lines.includes(raw), 'no raw API key in any log line');
  t.notOk(lines.includes(TOKEN), 'no bearer token in any log line');
  t.notOk(lines.includes(BAD_TOKEN.split('.')[2]!), 'not even a refused one’s signature');
  t.notOk(lines.includes(keySubject(KEY)), 'the quota subject is hashed in logs, not written as key:<sha256>');
  const events = s.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === 'decision');
  t.ok(events.length >= 25, `sampled decision events at rate 1 (${events.length})`);
  const mine = events.filter((e) => e.subject_id === hashSubject(keySubject(KEY)));
  t.equal(mine.length, 5, 'five events for the key, under its hashed subject');
  t.same(
    mine.map((e) => e.allowed),
    [true, true, true, false, false],
  );
  t.same(
    mine.map((e) => e.remaining),
    [2, 1, 0, 0, 0],
  );
  for (const e of mine) {
    t.equal(e.route, '/v1');
    t.type(e.ts, 'number');
    t.ok(Math.abs((e.ts as number) - s.clock.now() / 1000) < 60, 'ts is epoch seconds');
  }
  t.ok(
    events.some((e) => e.subject_id === hashSubject('user:obs-user')),
    'token subjects are hashed too',
  );
});
