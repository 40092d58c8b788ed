// @tier: pure
/**
 * Quotas and the rate-limit headers, end to end with the in-memory store and a FakeClock: the
 * headers on every response after admission, exact token-bucket admissions and refill, per-route
 * costs and override buckets, plan references, shadow mode (per quota and global), and the global
 * bucket charged both-or-neither with each key's bucket.
 */
import t, { type Test } from 'tap';
import { startUpstream } from '../harness/upstream.js';
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

const HOUR = 3_600_000;
const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const K = {
  tb: newApiKey('tb'),
  cost: newApiKey('cost'),
  methods: newApiKey('methods'),
  override: newApiKey('override'),
  ref: newApiKey('ref'),
  shadow: newApiKey('shadow'),
  headers: newApiKey('headers'),
  relay: newApiKey('relay'),
};
const quotas: QuotaJson[] = [
  { subject_id: keySubject(K.tb), algorithm: 'token_bucket', rate: 1, burst: 5, interval_ms: 1000, plan: 'basic' },
  fixedQuota(keySubject(K.cost), 10, { routes: [{ path_prefix: '/v1/search', cost: 5 }] }),
  fixedQuota(keySubject(K.methods), 10, { routes: [{ path_prefix: '/v1/write', methods: ['POST', 'PUT'], cost: 3 }] }),
  fixedQuota(keySubject(K.override), 10, { routes: [{ path_prefix: '/v1/upload', rate: 1, burst: 2 }] }),
  {
    subject_id: 'plan:gold',
    algorithm: 'token_bucket',
    rate: 1,
    burst: 4,
    interval_ms: HOUR,
    plan: 'gold',
    routes: [{ path_prefix: '/v1/expensive', cost: 2 }],
  },
  { subject_id: keySubject(K.ref), rate: 0, plan: 'gold' },
  fixedQuota(keySubject(K.shadow), 2, { shadow: true, plan: 'trial' }),
  fixedQuota(keySubject(K.headers), 2, { plan: 'basic' }),
  fixedQuota(keySubject(K.relay), 10, { plan: 'basic' }),
];

const sc = await startTestSidecar(t, { upstream: up.url, quotas });
const get = (s: TestSidecar, key: string, path = '/v1/x', method: 'GET' | 'POST' = 'GET') =>
  call(`${s.base}${path}`, { method, headers: { 'x-api-key': key } });
const remaining = (r: Reply) => Number(r.headers['x-ratelimit-remaining']);

/** Checks the headers every response after admission carries, and their agreement with each other. */
function checkHeaders(t: Test, r: Reply, nowMs: number, what: string): void {
  for (const h of RATE_LIMIT_HEADERS) t.ok(r.headers[h] !== undefined, `${what}: ${h}`);
  const limit = r.headers['x-ratelimit-limit']!;
  const rem = r.headers['x-ratelimit-remaining']!;
  const reset = r.headers['x-ratelimit-reset']!;
  t.match(limit, /^\d+$/, `${what}: limit is an integer`);
  t.match(rem, /^\d+$/, `${what}: remaining is a non-negative integer`);
  t.match(reset, /^\d+$/, `${what}: reset is an integer`);
  t.ok(Number(reset) >= Math.floor(nowMs / 1000), `${what}: reset is epoch seconds, not before now`);
  t.ok(Number(reset) < nowMs / 1000 + 86_400 * 366, `${what}: reset is epoch seconds, not a duration or ms`);
  const policy = /^"([A-Za-z0-9_.-]+)";q=(\d+);w=(\d+)$/.exec(r.headers['ratelimit-policy'] ?? '');
  t.ok(policy, `${what}: RateLimit-Policy is "name";q=<n>;w=<s> (${r.headers['ratelimit-policy']})`);
  const rl = /^"([A-Za-z0-9_.-]+)";r=(\d+);t=(\d+)$/.exec(r.headers['ratelimit'] ?? '');
  t.ok(rl, `${what}: RateLimit is "name";r=<n>;t=<s> (${r.headers['ratelimit']})`);
  if (policy && rl) {
    t.equal(policy[2], limit, `${what}: q = X-RateLimit-Limit`);
    t.equal(rl[1], policy[1], `${what}: the same policy name in both`);
    t.equal(rl[2], rem, `${what}: r = X-RateLimit-Remaining`);
    t.ok(Math.abs(Number(rl[3]) - (Number(reset) - nowMs / 1000)) <= 1, `${what}: t agrees with X-RateLimit-Reset`);
  }
  if (r.status === 429) {
    t.match(r.headers['retry-after'], /^[1-9]\d*$/, `${what}: Retry-After is an integer ≥ 1`);
    t.match(r.headers['content-type'], /^application\/problem\+json/, `${what}: problem+json`);
    t.equal(r.json<{ code: string }>().code, 'rate_limited', `${what}: code rate_limited`);
  } else {
    t.notOk('retry-after' in r.headers, `${what}: no Retry-After unless 429`);
  }
}

t.test('every admitted and denied response carries the rate-limit headers; Retry-After only on 429', async (t) => {
  const rs: Reply[] = [];
  for (let i = 0; i < 4; i++) rs.push(await get(sc, K.headers));
  t.same(
    rs.map((r) => r.status),
    [200, 200, 429, 429],
  );
  rs.forEach((r, i) => checkHeaders(t, r, sc.clock.now(), `request ${i + 1} (${r.status})`));
  const upstreamError = await call(`${sc.base}/v1/x?status=503`, { headers: { 'x-api-key': K.relay } });
  t.equal(upstreamError.status, 503, 'an upstream 503 is relayed');
  checkHeaders(t, upstreamError, sc.clock.now(), 'relayed upstream 503');
});

t.test('token bucket: exactly burst at one instant, then refill at rate, capped at burst', async (t) => {
  const clock = sc.clock;
  const t0 = clock.now();
  const first: Reply[] = [];
  for (let i = 0; i < 8; i++) first.push(await get(sc, K.tb));
  t.same(
    first.map((r) => r.status),
    [200, 200, 200, 200, 200, 429, 429, 429],
    'burst 5: five admitted',
  );
  t.same(first.slice(0, 5).map(remaining), [4, 3, 2, 1, 0], 'remaining counts down');
  t.equal(first[5]!.headers['retry-after'], '1', 'one token per second: retry after 1 s');
  t.equal(first[5]!.headers['x-ratelimit-reset'], String(Math.ceil((t0 + 5000) / 1000)), 'full again in 5 s');
  clock.advance(500);
  const half = await get(sc, K.tb);
  t.equal(half.status, 429, 'half a token is not a token');
  t.equal(half.headers['retry-after'], '1', 'Retry-After never says 0');
  clock.advance(500);
  t.equal((await get(sc, K.tb)).status, 200, 'one token after one second');
  t.equal((await get(sc, K.tb)).status, 429, 'and only one');
  clock.advance(60_000);
  const again: number[] = [];
  for (let i = 0; i < 7; i++) again.push((await get(sc, K.tb)).status);
  t.same(again, [200, 200, 200, 200, 200, 429, 429], 'a long idle refills to burst, not beyond');
});

t.test('per-route cost from the quota’s route rules', async (t) => {
  const s1 = await get(sc, K.cost, '/v1/search?q=a');
  t.same([s1.status, remaining(s1)], [200, 5], '/v1/search costs 5');
  const s2 = await get(sc, K.cost, '/v1/search/deep');
  t.same([s2.status, remaining(s2)], [200, 0], 'a sub-path matches the rule');
  const s3 = await get(sc, K.cost, '/v1/search');
  t.equal(s3.status, 429, 'no 5 tokens left');
  const other = await get(sc, K.cost, '/v1/searching');
  t.equal(other.status, 429, '/v1/searching is not under /v1/search but the bucket is empty');

  const g = await get(sc, K.methods, '/v1/write');
  t.equal(remaining(g), 9, 'GET is not in the rule’s methods: cost 1');
  const p = await get(sc, K.methods, '/v1/write', 'POST');
  t.equal(remaining(p), 6, 'POST: cost 3');
  const o = await get(sc, K.methods, '/v1/writer', 'POST');
  t.equal(remaining(o), 5, '/v1/writer is not under /v1/write: cost 1');
});

t.test('a route rule with its own rate and burst counts in a bucket of its own', async (t) => {
  const up1 = await get(sc, K.override, '/v1/upload');
  const up2 = await get(sc, K.override, '/v1/upload/b');
  const up3 = await get(sc, K.override, '/v1/upload');
  t.same([up1.status, up2.status, up3.status], [200, 200, 429], 'the override bucket holds 2');
  t.equal(up1.headers['x-ratelimit-limit'], '2', 'its headers report the override');
  t.same([remaining(up1), remaining(up2)], [1, 0]);
  const main = await get(sc, K.override, '/v1/other');
  t.equal(main.status, 200, 'the key’s main bucket is separate');
  t.equal(main.headers['x-ratelimit-limit'], '10', 'the main bucket’s limit');
  t.equal(remaining(main), 9, 'untouched by the upload bucket');
});

t.test('a plan reference (rate 0 + plan) takes the plan’s limits and route rules', async (t) => {
  const r1 = await get(sc, K.ref, '/v1/expensive');
  t.equal(r1.status, 200);
  t.equal(r1.headers['x-ratelimit-limit'], '4', 'the plan’s burst');
  t.match(r1.headers['ratelimit-policy'], /^"gold";/, 'the plan’s name');
  t.equal(remaining(r1), 2, 'the plan’s route rule: cost 2');
  const r2 = await get(sc, K.ref, '/v1/cheap');
  const r3 = await get(sc, K.ref, '/v1/cheap');
  const r4 = await get(sc, K.ref, '/v1/cheap');
  t.same([r2.status, r3.status, r4.status], [200, 200, 429]);
});

t.test('shadow mode per quota: never denies, reports remaining 0, counts shadow_deny', async (t) => {
  const statuses: number[] = [];
  const rems: number[] = [];
  const rs: Reply[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await get(sc, K.shadow);
    rs.push(r);
    statuses.push(r.status);
    rems.push(remaining(r));
  }
  t.same(statuses, [200, 200, 200, 200, 200], 'every request forwarded');
  t.same(rems, [1, 0, 0, 0, 0], 'remaining says what enforcement would');
  t.notOk('retry-after' in rs[3]!.headers, 'no Retry-After on a 200 (only on 429)');
  const m = parseMetrics((await call(`${sc.admin}/metrics`)).text);
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'shadow_deny', tenant: 'trial' }), 3, 'three shadow denials counted');
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'allow', tenant: 'trial' }), 2, 'two allows');
});

t.test('global shadow mode (LIMITER_SHADOW): nothing is denied for quota; an unknown key still gets its decoy 429', async (t) => {
  const key = newApiKey('gshadow');
  const s = await startTestSidecar(t, { upstream: up.url, quotas: [fixedQuota(keySubject(key), 1)], env: { LIMITER_SHADOW: 'true' } });
  const rs: Reply[] = [];
  for (let i = 0; i < 3; i++) rs.push(await get(s, key));
  t.same(
    rs.map((r) => r.status),
    [200, 200, 200],
  );
  t.same(rs.map(remaining), [0, 0, 0]);
  const unknown = await get(s, newApiKey('nobody'));
  t.equal(unknown.status, 429, 'an unknown key is refused: shadow mode is about quota, not who is calling');
  t.equal(unknown.json<{ code: string }>().code, 'rate_limited', 'with the decoy');
  t.equal(remaining(unknown), 0);
  const m = parseMetrics((await call(`${s.admin}/metrics`)).text);
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'shadow_deny' }), 2, 'the two key denials counted as shadow_deny');
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'decoy' }), 1, 'the unknown key counted as decoy');
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'deny' }), 0, 'no real denials');
});

t.test('the global bucket: both or neither, never over its limit, and a global denial costs the key nothing', async (t) => {
  const A = newApiKey('ga');
  const B = newApiKey('gb');
  const C = newApiKey('gc');
  const D = newApiKey('gd');
  const s = await startTestSidecar(t, {
    upstream: up.url,
    quotas: [fixedQuota(keySubject(A), 5), fixedQuota(keySubject(B), 5), fixedQuota(keySubject(C), 10), fixedQuota(keySubject(D), 10)],
    env: { LIMITER_GLOBAL_RATE: '1', LIMITER_GLOBAL_BURST: '6' },
  });
  const a: number[] = [];
  const b: Reply[] = [];
  for (let i = 0; i < 5; i++) a.push((await get(s, A)).status);
  for (let i = 0; i < 5; i++) b.push(await get(s, B));
  t.same(a, [200, 200, 200, 200, 200], 'A takes 5 of the global 6');
  t.same(
    b.map((r) => r.status),
    [200, 429, 429, 429, 429],
    'B gets the last global token, then the global bucket denies',
  );
  t.equal(a.filter((x) => x === 200).length + b.filter((r) => r.status === 200).length, 6, 'exactly the global burst in total');
  t.equal(b[1]!.headers['x-ratelimit-limit'], '5', 'B’s denial reports B’s own limit, not the global one');
  t.ok(Number(b[1]!.headers['retry-after']) >= 1, 'with a Retry-After');

  s.clock.advance(10_000);
  const b2: number[] = [];
  for (let i = 0; i < 6; i++) b2.push((await get(s, B)).status);
  t.same(b2, [200, 200, 200, 200, 429, 429], 'B still has its own 4: the global denials took nothing from it');
  t.equal((await get(s, A)).status, 429, 'A is out of its own tokens');

  // Concurrent traffic from two fresh keys at one instant: the global bucket (full again: 6) binds.
  s.clock.advance(10_000);
  const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => get(s, i % 2 === 0 ? C : D)));
  const byKey = (k: string) => burst.filter((r, i) => r.status === 200 && (i % 2 === 0 ? C : D) === k).length;
  t.equal(burst.filter((r) => r.status === 200).length, 6, 'exactly the global burst admitted out of 20 concurrent');
  s.clock.advance(10_000);
  const c = await get(s, C);
  const d = await get(s, D);
  t.equal(remaining(c), 10 - byKey(C) - 1, 'C was charged only for its admitted requests');
  t.equal(remaining(d), 10 - byKey(D) - 1, 'D was charged only for its admitted requests');
});
