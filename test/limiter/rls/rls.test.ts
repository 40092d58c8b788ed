// @tier: pure
/**
 * Envoy's rate limit service on a real sidecar with in-process counters, called by a grpc-js client
 * generated from the Envoy contracts: the descriptor rule of limiter/rls/README.md, hits_addend,
 * the quotas, route rules, decoy, shadow mode and counters the HTTP side uses (one bucket, two
 * protocols), the answer's statuses and headers, and INVALID_ARGUMENT for malformed or oversized
 * requests, never a crash.
 */
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import {
  RateLimitResponse_Code as Code,
  RateLimitResponse_RateLimit_Unit as Unit,
} from '../../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { startUpstream } from '../../harness/upstream.js';
import { client, fixedQuota, keySubject, metricSum, newApiKey, parseMetrics, RATE_LIMIT_HEADERS } from '../fixtures/sidecar.js';
import { failure, headersOf, rawShouldRateLimit, rlsClient, shouldRateLimit, startRlsSidecar, type Descriptor } from './fixtures.js';

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const K = {
  a: newApiKey('a'),
  b: newApiKey('b'),
  c: newApiKey('c'),
  rules: newApiKey('rules'),
  d: newApiKey('d'),
  spent: newApiKey('spent'),
  shadow: newApiKey('shadow'),
};
const quotas = [
  fixedQuota(keySubject(K.a), 3, { plan: 'gold' }),
  fixedQuota(keySubject(K.b), 4, { plan: 'gold' }),
  fixedQuota(keySubject(K.c), 10, { plan: 'gold' }),
  fixedQuota(keySubject(K.rules), 10, { plan: 'gold', routes: [{ path_prefix: '/v1/sms', methods: ['POST'], cost: 3 }] }),
  fixedQuota(keySubject(K.d), 5, { plan: 'gold' }),
  fixedQuota(keySubject(K.spent), 1, { plan: 'silver' }),
  fixedQuota(keySubject(K.shadow), 1, { plan: 'gold', shadow: true }),
  fixedQuota('tenant:acme', 2, { plan: 'team' }),
  fixedQuota('plan:team', 5),
];
const s = await startRlsSidecar(t, { upstream: up.url, quotas, env: { LIMITER_IP_RATE: '1', LIMITER_IP_BURST: '2' } });
const rls = rlsClient(t, s.rls);
const ask = (descriptors: Descriptor[], hits = 0) => shouldRateLimit(rls, descriptors, hits);

t.test('api_key: the quota burst, then OVER_LIMIT, with statuses and headers as Envoy reads them', async (t) => {
  const answers = [];
  for (let i = 0; i < 4; i++) answers.push(await ask([[['api_key', K.a]]]));
  t.same(
    answers.map((r) => [r.overallCode, r.statuses[0]!.code, r.statuses[0]!.limitRemaining]),
    [
      [Code.OK, Code.OK, 2],
      [Code.OK, Code.OK, 1],
      [Code.OK, Code.OK, 0],
      [Code.OVER_LIMIT, Code.OVER_LIMIT, 0],
    ],
    'burst 3: three OK, then OVER_LIMIT',
  );
  const first = answers[0]!.statuses[0]!;
  t.equal(first.currentLimit?.name, 'gold', 'current_limit names the plan');
  t.equal(first.currentLimit?.requestsPerUnit, 3, 'the X-RateLimit-Limit figure');
  t.equal(first.currentLimit?.unit, Unit.HOUR, 'a 3 600 000 ms interval is HOUR');
  t.ok(first.durationUntilReset !== undefined && first.durationUntilReset.seconds > 0n, 'duration_until_reset is set');

  const ok = headersOf(answers[0]!);
  t.same(Object.keys(ok).sort(), [...RATE_LIMIT_HEADERS].sort(), 'an admission carries the five rate-limit headers');
  t.equal(ok['x-ratelimit-limit'], '3');
  t.equal(ok['x-ratelimit-remaining'], '2');
  t.equal(ok['ratelimit-policy'], '"gold";q=3;w=3600');
  const over = headersOf(answers[3]!);
  t.match(over['retry-after'], /^[1-9]\d*$/, 'a refusal adds Retry-After');
  t.equal(over['x-ratelimit-remaining'], '0');
});

t.test('one bucket for both protocols: RLS and HTTP calls of one key share its counter and headers', async (t) => {
  const r1 = await ask([[['api_key', K.b]]]);
  t.equal(r1.statuses[0]!.limitRemaining, 3, 'RLS: 3 left');
  const h = await call(`${s.base}/v1/x`, { headers: { 'x-api-key': K.b } });
  t.equal(h.status, 200);
  t.equal(h.headers['x-ratelimit-remaining'], '2', 'HTTP: 2 left, after the RLS call');
  const r2 = await ask([[['api_key', K.b]]]);
  t.equal(r2.statuses[0]!.limitRemaining, 1, 'RLS: 1 left, after the HTTP call');
  const rlsHeaders = headersOf(r2);
  // The figures that do not move with the bucket's level (remaining and reset do).
  for (const name of ['x-ratelimit-limit', 'ratelimit-policy']) {
    t.equal(rlsHeaders[name], h.headers[name], `${name} as the HTTP side writes it`);
  }
  t.same(Object.keys(rlsHeaders).sort(), RATE_LIMIT_HEADERS.filter((n) => h.headers[n] !== undefined).sort(), 'the same header names');
});

t.test('hits_addend is the cost: 0 on the request means 1; set on a descriptor it wins, and 0 there only reads', async (t) => {
  const d = (hitsAddend?: bigint): Descriptor => ({ entries: [['api_key', K.c]], ...(hitsAddend === undefined ? {} : { hitsAddend }) });
  t.equal((await ask([d()], 4)).statuses[0]!.limitRemaining, 6, 'request hits_addend 4');
  const peek = await ask([d(0n)], 4);
  t.same([peek.statuses[0]!.code, peek.statuses[0]!.limitRemaining], [Code.OK, 6], 'descriptor hits_addend 0: read, nothing charged');
  t.equal((await ask([d()], 0)).statuses[0]!.limitRemaining, 5, 'request hits_addend 0 is 1');
  const big = await ask([d(7n)], 2);
  t.same(
    [big.statuses[0]!.code, big.statuses[0]!.limitRemaining],
    [Code.OVER_LIMIT, 5],
    'descriptor 7 beats request 2: refused, not charged',
  );
});

t.test('path and method select the quota’s route rules, as on HTTP', async (t) => {
  const post = await ask([
    [
      ['api_key', K.rules],
      ['path', '/v1/sms/send?to=1'],
      ['method', 'post'],
    ],
  ]);
  t.equal(post.statuses[0]!.limitRemaining, 7, 'POST /v1/sms/… costs 3 (query dropped, method upper-cased)');
  const get = await ask([
    [
      ['api_key', K.rules],
      ['path', '/v1/sms/send'],
      ['method', 'GET'],
    ],
  ]);
  t.equal(get.statuses[0]!.limitRemaining, 6, 'GET is not in the rule: cost 1');
  const none = await ask([
    [
      ['api_key', K.rules],
      ['path', '/v1/sms/send'],
    ],
  ]);
  t.equal(none.statuses[0]!.limitRemaining, 5, 'no method entry: only rules for every method apply');
});

t.test('subject, generic_key and plan name token-style subjects', async (t) => {
  const a = await ask([[['subject', 'tenant:acme']]]);
  t.same([a.statuses[0]!.limitRemaining, a.statuses[0]!.currentLimit?.name], [1, 'team'], 'tenant:acme has its own record');
  const b = await ask([
    [
      ['generic_key', 'tenant:acme'],
      ['destination_cluster', 'orders'],
    ],
  ]);
  t.equal(b.statuses[0]!.limitRemaining, 0, 'generic_key names the same bucket; other keys are ignored');
  t.equal((await ask([[['subject', 'tenant:acme']]])).overallCode, Code.OVER_LIMIT, 'then refused');
  const p = await ask([
    [
      ['subject', 'user:new-user'],
      ['plan', 'team'],
    ],
  ]);
  t.same([p.statuses[0]!.limitRemaining, p.statuses[0]!.currentLimit?.name], [4, 'team'], 'no record: the plan entry’s plan');
});

t.test('remote_address: the per-IP cap, and a route’s own cap when path names it', async (t) => {
  const codes = [];
  for (let i = 0; i < 3; i++) codes.push((await ask([[['remote_address', '203.0.113.7']]])).overallCode);
  t.same(codes, [Code.OK, Code.OK, Code.OVER_LIMIT], 'LIMITER_IP_BURST 2');
  const hook = await ask([
    [
      ['remote_address', '203.0.113.7'],
      ['path', '/api/v1/webhooks/ses'],
    ],
  ]);
  t.same([hook.overallCode, hook.statuses[0]!.limitRemaining], [Code.OK, 4999], 'the webhook route’s own bucket (burst 5 000)');
  const v6 = await ask([[['remote_address', '[2001:db8::1]']]]);
  t.equal(v6.overallCode, Code.OK, 'a bracketed IPv6 address');
});

t.test('several descriptors: every one decided, OVER_LIMIT if any is, the headers of the refused one', async (t) => {
  await ask([[['api_key', K.spent]]]);
  const r = await ask([[['api_key', K.d]], [['header_match', 'x']], [['api_key', K.spent]]]);
  t.equal(r.overallCode, Code.OVER_LIMIT);
  t.same(
    r.statuses.map((x) => x.code),
    [Code.OK, Code.OK, Code.OVER_LIMIT],
  );
  t.equal(r.statuses[1]!.currentLimit, undefined, 'a descriptor naming no subject limits nothing');
  t.equal(r.statuses[0]!.limitRemaining, 4, 'the OK descriptor was charged too');
  const h = headersOf(r);
  t.equal(h['ratelimit-policy'], '"silver";q=1;w=3600', 'the refused descriptor’s headers');
  t.ok(h['retry-after'] !== undefined, 'with Retry-After');
});

t.test('an unknown API key gets the decoy denial; shadow mode admits what it would refuse', async (t) => {
  const unknown = await ask([[['api_key', newApiKey('nobody')]]]);
  t.same([unknown.overallCode, unknown.statuses[0]!.limitRemaining], [Code.OVER_LIMIT, 0], 'unknown key: OVER_LIMIT');
  await ask([[['api_key', K.shadow]]]);
  const shadow = await ask([[['api_key', K.shadow]]]);
  t.same([shadow.overallCode, shadow.statuses[0]!.limitRemaining], [Code.OK, 0], 'shadow: spent, but OK');
  t.equal(headersOf(shadow)['retry-after'], undefined, 'no Retry-After on a shadow denial');
  const m = parseMetrics((await call(`${s.admin}/metrics`)).text);
  t.ok(metricSum(m, 'ratelimit_decisions', { result: 'shadow_deny' }) >= 1, 'counted as shadow_deny');
  t.ok(metricSum(m, 'ratelimit_decisions', { result: 'decoy' }) >= 1, 'counted as decoy');
  t.ok(metricSum(m, 'ratelimit_rls_requests', { code: 'over_limit' }) >= 1, 'RLS answers counted');
});

t.test('global shadow mode (LIMITER_SHADOW): a spent key is OK, an unknown key is still OVER_LIMIT (the decoy)', async (t) => {
  const spent = newApiKey('gshadow');
  const g = await startRlsSidecar(t, { upstream: up.url, quotas: [fixedQuota(keySubject(spent), 1)], env: { LIMITER_SHADOW: 'true' } });
  const c = rlsClient(t, g.rls);
  await shouldRateLimit(c, [[['api_key', spent]]]);
  const over = await shouldRateLimit(c, [[['api_key', spent]]]);
  t.same([over.overallCode, over.statuses[0]!.limitRemaining], [Code.OK, 0], 'a known key past its quota: OK in shadow mode');
  const unknown = await shouldRateLimit(c, [[['api_key', newApiKey('nobody')]]]);
  t.same([unknown.overallCode, unknown.statuses[0]!.code], [Code.OVER_LIMIT, Code.OVER_LIMIT], 'an unknown key: OVER_LIMIT');
  t.ok(Number(headersOf(unknown)['retry-after']) >= 1, 'with the decoy’s Retry-After');
});

t.test('malformed or oversized requests: INVALID_ARGUMENT naming the field, and the server keeps serving', async (t) => {
  const long = 'x'.repeat(4097);
  const cases: Array<[string, Descriptor[], number, string]> = [
    ['no descriptors', [], 0, 'descriptors'],
    [
      '17 descriptors (LIMITER_RLS_MAX_DESCRIPTORS 16)',
      Array.from({ length: 17 }, () => [['api_key', K.d]] as Descriptor),
      0,
      'descriptors',
    ],
    ['a descriptor without entries', [[]], 0, 'descriptors[0].entries'],
    [
      '17 entries (LIMITER_RLS_MAX_ENTRIES 16)',
      [Array.from({ length: 17 }, (_v, i) => [`k${i}`, 'v'] as [string, string])],
      0,
      'descriptors[0].entries',
    ],
    ['a value over 4 kb', [[['other', long]]], 0, 'descriptors[0].entries[0].value'],
    ['a key over 4 kb', [[[long, 'v']]], 0, 'descriptors[0].entries[0].key'],
    ['an empty key', [[['', 'v']]], 0, 'descriptors[0].entries[0].key'],
    ['a subject that is no subject form', [[['subject', 'admin']]], 0, 'descriptors[0].entries[0].value'],
    ['a plan subject', [[['generic_key', 'plan:gold']]], 0, 'descriptors[0].entries[0].value'],
    ['an address that is not one', [[['remote_address', '10.0.0.300']]], 0, 'descriptors[0].entries[0].value'],
    [
      'a path that cannot be canonical',
      [
        [
          ['api_key', K.d],
          ['path', 'relative'],
        ],
      ],
      0,
      'descriptors[0].path',
    ],
    [
      'a key given twice',
      [
        [
          ['api_key', K.d],
          ['api_key', K.a],
        ],
      ],
      0,
      'descriptors[0].entries[1].key',
    ],
    ['hits_addend above 2^31', [{ entries: [['api_key', K.d]], hitsAddend: 2n ** 40n }], 0, 'descriptors[0].hits_addend'],
    // The request's own hits_addend is a uint32: 2^32 − 1 was capped into a charge of 2^31 (OVER_LIMIT).
    ['the request’s hits_addend 2^32 − 1', [[['api_key', K.d]]], 2 ** 32 - 1, 'hits_addend'],
    ['the request’s hits_addend 2^31 + 1', [[['api_key', K.d]]], 2 ** 31 + 1, 'hits_addend'],
  ];
  for (const [what, descriptors, hits, field] of cases) {
    const f = await failure(ask(descriptors, hits));
    t.same([f.code, f.errorCode, f.field], [grpc.status.INVALID_ARGUMENT, 'invalid_field', field], what);
  }
  // { descriptors: [{ entries: [{ key: "api_key", value: <K.d> }] }], hits_addend: 0xFFFFFFFF }, by hand.
  const entry = [0x0a, 7, ...Buffer.from('api_key'), 0x12, K.d.length, ...Buffer.from(K.d)];
  const descriptor = [0x0a, entry.length, ...entry];
  const maxHits = [0x12, descriptor.length, ...descriptor, 0x18, 0xff, 0xff, 0xff, 0xff, 0x0f];
  for (const [what, bytes] of [
    ['the request’s hits_addend 2^32 − 1 (varint ff ff ff ff 0f)', maxHits],
    ['a truncated field', [0x0a, 0x10, 0x61]],
    ['a wire type 7', [0x0f]],
    ['a varint that never ends', [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
    ['a descriptor whose entry overruns it', [0x12, 0x03, 0x0a, 0x05, 0x0a]],
  ] as const) {
    const r = await rawShouldRateLimit(t, s.rls, new Uint8Array(bytes));
    t.equal(r.error?.code, grpc.status.INVALID_ARGUMENT, `bytes: ${what}`);
  }
  const still = await ask([[['api_key', K.d]]]);
  t.equal(still.overallCode, Code.OK, 'still serving');
  const m = parseMetrics((await call(`${s.admin}/metrics`)).text);
  t.equal(metricSum(m, 'ratelimit_rls_requests', { code: 'invalid_argument' }), cases.length + 5, 'each refusal counted');
  t.equal(metricSum(m, 'ratelimit_rls_requests', { code: 'error' }), 0, 'no unexpected error');
});
