/**
 * `ratelimit_decision_duration_seconds` on the admin port: a histogram per store of the time from
 * a request's arrival in the data plane's callback to its admission decision. Counted once per
 * decision, under the store that answered (memory; redis, or local when the sidecar answered for
 * Redis without a round trip; none for an unknown key's decoy), and never for a request refused
 * before its quota is consulted. Buckets are fine below 2 ms, the seed's decision budget.
 */
import t from 'tap';
import { testRedisUrl } from '../harness/env.js';
import { accessClaims, sign } from '../harness/tokens.js';
import { startUpstream } from '../harness/upstream.js';
import { client, fixedQuota, keySubject, metricSum, newApiKey, parseMetrics, startTestSidecar } from './fixtures/sidecar.js';

const NAME = 'ratelimit_decision_duration_seconds';
const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

/** The histogram's series for one store: cumulative buckets by `le`, sum, count. */
function series(text: string, store: string): { buckets: Map<string, number>; sum: number; count: number } {
  const buckets = new Map<string, number>();
  let sum = NaN;
  let count = NaN;
  for (const line of text.split('\n')) {
    if (!line.startsWith(NAME) || !line.includes(`store="${store}"`)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.startsWith(`${NAME}_bucket`)) buckets.set(/le="([^"]+)"/.exec(line)![1]!, value);
    else if (line.startsWith(`${NAME}_sum`)) sum = value;
    else if (line.startsWith(`${NAME}_count`)) count = value;
  }
  return { buckets, sum, count };
}

t.test('in-process counters: one observation per decision, under memory or none', async (t) => {
  const KEY = newApiKey('latency');
  const UNKNOWN = newApiKey('latency-unknown');
  const s = await startTestSidecar(t, { upstream: up.url, quotas: [fixedQuota(keySubject(KEY), 3, { plan: 'lat' })] });
  const TOKEN = sign(accessClaims({ nowMs: s.clock.now() }, { sub: 'lat-user', user_id: 'lat-user' }), { key: s.key });

  const before = await call(`${s.admin}/metrics`);
  t.match(before.text, new RegExp(`^# TYPE ${NAME} histogram$`, 'm'), 'declared as a histogram before any decision');
  t.equal(series(before.text, 'memory').buckets.size, 0, 'no series before any decision');

  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await call(`${s.base}/v1/x`, { headers: { 'x-api-key': KEY } })).status);
  t.same(statuses, [200, 200, 200, 429, 429]);
  t.equal(
    (await call(`${s.base}/v1/x`, { headers: { authorization: `Bearer ${TOKEN}` } })).status,
    200,
    'a token, decided after verification',
  );
  t.equal((await call(`${s.base}/v1/x`, { headers: { 'x-api-key': UNKNOWN } })).status, 429, 'an unknown key: the decoy');
  t.equal((await call(`${s.base}/v1/x`)).status, 401, 'no credentials: refused before any decision');
  t.equal((await call(`${s.base}/nowhere`, { headers: { 'x-api-key': KEY } })).status, 404, 'no route: refused before any decision');

  const text = (await call(`${s.admin}/metrics`)).text;
  const memory = series(text, 'memory');
  t.equal(memory.count, 6, 'five key decisions and one token decision');
  t.equal(memory.buckets.get('+Inf'), 6, 'the +Inf bucket holds every observation');
  t.equal(series(text, 'none').count, 1, 'the decoy, under none');
  t.equal(series(text, 'redis').buckets.size, 0, 'no redis series on an in-process sidecar');
  t.ok(memory.sum > 0 && memory.sum < 60, `a sum in seconds (${memory.sum})`);
  const les = [...memory.buckets.keys()];
  for (const le of ['0.0001', '0.0005', '0.001', '0.0015', '0.002', '+Inf']) t.ok(les.includes(le), `a bucket at le=${le}`);
  t.ok(les.filter((le) => le !== '+Inf' && Number(le) <= 0.002).length >= 10, 'at least ten buckets up to 2 ms');
  const counts = [...memory.buckets.values()];
  t.ok(
    counts.every((c, i) => i === 0 || c >= counts[i - 1]!),
    'cumulative buckets never decrease',
  );
  t.equal(metricSum(parseMetrics(text), `${NAME}_count`), 7, 'seven decisions in all');
});

t.test('Redis counters: every decision under redis or local', async (t) => {
  const KEY = newApiKey('latency-redis');
  const s = await startTestSidecar(t, {
    upstream: up.url,
    quotas: [fixedQuota(keySubject(KEY), 2, { plan: 'lat' })],
    env: { REDIS_URL: testRedisUrl(), LIMITER_REDIS_TIMEOUT: '2s', LIMITER_REDIS_PREFIX: `lat${process.pid}` },
  });
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await call(`${s.base}/v1/x`, { headers: { 'x-api-key': KEY } })).status);
  t.same(statuses, [200, 200, 429, 429]);
  const text = (await call(`${s.admin}/metrics`)).text;
  const redis = series(text, 'redis');
  const local = series(text, 'local');
  // Refusals may be answered locally once Redis's own figures show the bucket empty (refusal-cache.ts).
  t.ok(redis.count >= 2, `the admissions went to Redis (${redis.count})`);
  t.equal(redis.count + (Number.isNaN(local.count) ? 0 : local.count), 4, 'four decisions, each counted once');
  t.equal(series(text, 'memory').buckets.size, 0, 'no memory series on a Redis sidecar');
});
