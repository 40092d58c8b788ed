/**
 * The admin API of a real control plane over real PostgreSQL, through both transports: gRPC
 * QuotaAdminService (a grpc-js client built from the contract) and the internal HTTP API.
 * Validation names the field, auth separates missing, wrong, non-admin and admin credentials,
 * the raw API key never reaches the store, the responses or the logs.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import type { Algorithm } from '../../proto/gen/quota/v1/quota_pb.js';
import {
  DeleteRequestSchema,
  FailMode,
  GetRequestSchema,
  ListRequestSchema,
  PutRequestSchema,
  RouteRuleSchema,
  Unit,
  type Quota,
} from '../../proto/gen/quota/v1/quota_pb.js';
import { unaryCall } from '../../shared/grpc.js';
import { useTestDatabase } from '../harness/db.js';
import { accessClaims, generateTestKey, jwksOf, sign, startJwksServer, TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';
import { ADMIN_TOKEN, adminClient, bearer, capturingLogger, grpcFailure, metricLines, put, quota, useControlPlane } from './helpers.js';

const db = await useTestDatabase(t, 'cp_admin_api');
const key = await generateTestKey('ES256');
const jwks = await startJwksServer(jwksOf(key));
t.teardown(() => jwks.close());
const captured = capturingLogger();
const cp = await useControlPlane(
  t,
  db.url,
  { JWKS_URL: jwks.url, JWT_ISSUER: TEST_ISSUER, JWT_AUDIENCE: TEST_AUDIENCE, CONTROL_PLANE_ACK_TIMEOUT: '100ms' },
  captured.log,
);
const client = adminClient(t, cp.grpc);

const RAW_KEY = 'sk_live_raw-key-that-must-never-be-logged-7f3a9c';
const KEY_SUBJECT = `key:${createHash('sha256').update(RAW_KEY).digest('hex')}`;
const token = (role: string): string => sign(accessClaims({ nowMs: Date.now() }, { role }), { key });

const ADMIN = `Bearer ${ADMIN_TOKEN}`;

async function http(method: string, path: string, body?: unknown, auth: string | null = ADMIN) {
  const headers: Record<string, string> = {};
  if (auth !== null) headers.authorization = auth;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${cp.http}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

t.test('gRPC: put, get, list (paged) and delete, with versions assigned by the store', async (t) => {
  const plan = await put(client, quota('plan:gold', { rate: 100, burst: 200, unit: Unit.MINUTE }));
  t.equal(plan.quota?.plan, 'gold', 'a plan record carries its own name');
  t.equal(plan.quota?.intervalMs, 60_000, 'unit minute resolves to interval_ms');
  t.equal(plan.quota?.unit, Unit.UNSPECIFIED, 'the stored record has no unit');
  t.equal(plan.quota?.cost, 1, 'cost 0 resolves to 1');
  t.equal(plan.quota?.version, plan.version);
  t.ok(plan.quota!.updatedAt > 1_600_000_000, 'updated_at is epoch seconds');

  const ref = await put(client, quota(KEY_SUBJECT, { algorithm: 0, rate: 0, burst: 0, plan: 'gold', shadow: true }));
  t.equal(ref.version, plan.version + 1n, 'the next write takes the next version');
  const got = await unaryCall(client, 'get', create(GetRequestSchema, { subjectId: KEY_SUBJECT }), { metadata: bearer() });
  t.equal(got.quota?.plan, 'gold');
  t.equal(got.quota?.rate, 0);
  t.equal(got.quota?.shadow, true);

  for (let i = 0; i < 5; i++) await put(client, quota(`user:u${i}`, { rate: 5 + i, burst: 5 + i, failMode: FailMode.CLOSED }));
  const seen: string[] = [];
  let pageToken = '';
  let pages = 0;
  do {
    const page = await unaryCall(client, 'list', create(ListRequestSchema, { pageSize: 3, pageToken }), { metadata: bearer() });
    seen.push(...page.quotas.map((q) => q.subjectId));
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken !== '' && pages < 10);
  t.equal(pages, 3, '7 records in pages of 3');
  t.same(seen, [...seen].sort(), 'in subject_id order');
  t.same(new Set(seen), new Set([KEY_SUBJECT, 'plan:gold', 'user:u0', 'user:u1', 'user:u2', 'user:u3', 'user:u4']));

  const bad = await grpcFailure(unaryCall(client, 'list', create(ListRequestSchema, { pageToken: 'not-a-token' }), { metadata: bearer() }));
  t.equal(bad.code, grpc.status.INVALID_ARGUMENT);
  t.equal(bad.field, 'page_token');

  const del = await unaryCall(client, 'delete', create(DeleteRequestSchema, { subjectId: 'user:u0' }), { metadata: bearer() });
  t.equal(del.deleted, true);
  const again = await unaryCall(client, 'delete', create(DeleteRequestSchema, { subjectId: 'user:u0' }), { metadata: bearer() });
  t.same([again.deleted, again.version], [false, del.version], 'deleting nothing takes no version');
  const gone = await grpcFailure(unaryCall(client, 'get', create(GetRequestSchema, { subjectId: 'user:u0' }), { metadata: bearer() }));
  t.equal(gone.code, grpc.status.NOT_FOUND);
  t.equal(gone.errorCode, 'not_found');

  const inUse = await grpcFailure(
    unaryCall(client, 'delete', create(DeleteRequestSchema, { subjectId: 'plan:gold' }), { metadata: bearer() }),
  );
  t.equal(inUse.code, grpc.status.INVALID_ARGUMENT, 'a plan that keys reference cannot be deleted');
  t.equal(inUse.field, 'subject_id');
  t.match(inUse.details, /referenced by 1 quota/);
});

t.test('gRPC: INVALID_ARGUMENT names the field', async (t) => {
  const cases: [string, Quota | undefined, string][] = [
    ['no quota', undefined, 'quota'],
    ['no subject', quota(''), 'quota.subject_id'],
    ['raw-looking key', quota('key:NOT-A-HASH'), 'quota.subject_id'],
    ['unknown subject form', quota('ip:10.0.0.1'), 'quota.subject_id'],
    ['too long', quota(`user:${'x'.repeat(124)}`), 'quota.subject_id'],
    ['no algorithm', quota('user:a', { algorithm: 0 }), 'quota.algorithm'],
    ['unknown algorithm', quota('user:a', { algorithm: 42 as Algorithm }), 'quota.algorithm'],
    ['unknown fail mode', quota('user:a', { failMode: 9 as FailMode }), 'quota.fail_mode'],
    ['unit and interval disagree', quota('user:a', { unit: Unit.SECOND, intervalMs: 5000 }), 'quota.unit'],
    ['interval too long', quota('user:a', { intervalMs: 4_000_000_000 }), 'quota.interval_ms'],
    ['cost above burst', quota('user:a', { cost: 50 }), 'quota.cost'],
    ['reference without plan', quota('user:a', { algorithm: 0, rate: 0, burst: 0 }), 'quota.plan'],
    ['reference to a missing plan', quota('user:a', { algorithm: 0, rate: 0, burst: 0, plan: 'platinum' }), 'quota.plan'],
    ['reference with a burst', quota('user:a', { algorithm: 0, rate: 0, burst: 5, plan: 'gold' }), 'quota.burst'],
    ['plan without a rate', quota('plan:free', { algorithm: 0, rate: 0, burst: 0, plan: 'gold' }), 'quota.rate'],
    ['plan named otherwise', quota('plan:free', { plan: 'gold' }), 'quota.plan'],
    ['route without prefix', quota('user:a', { routes: [create(RouteRuleSchema, { cost: 1 })] }), 'quota.routes[0].path_prefix'],
    [
      'route with a lower-case method',
      quota('user:a', { routes: [create(RouteRuleSchema, { pathPrefix: '/v1', methods: ['get'] })] }),
      'quota.routes[0].methods[0]',
    ],
    ['route rate 0', quota('user:a', { routes: [create(RouteRuleSchema, { pathPrefix: '/v1', rate: 0 })] }), 'quota.routes[0].rate'],
  ];
  for (const [name, q, field] of cases) {
    const f = await grpcFailure(unaryCall(client, 'put', create(PutRequestSchema, { quota: q }), { metadata: bearer() }));
    t.equal(f.code, grpc.status.INVALID_ARGUMENT, `${name}: INVALID_ARGUMENT`);
    t.equal(f.errorCode, 'invalid_field', `${name}: code`);
    t.equal(f.field, field, `${name}: names ${field}`);
    t.match(f.details, field, `${name}: the message names it too`);
  }
  const timeout = await grpcFailure(
    unaryCall(client, 'put', create(PutRequestSchema, { quota: quota('user:a'), ackTimeoutMs: 600_000 }), { metadata: bearer() }),
  );
  t.equal(timeout.field, 'ack_timeout_ms');
});

t.test('gRPC auth: missing, wrong, non-admin and admin credentials', async (t) => {
  const call = (md: grpc.Metadata) => unaryCall(client, 'get', create(GetRequestSchema, { subjectId: 'plan:gold' }), { metadata: md });
  const none = await grpcFailure(call(new grpc.Metadata()));
  t.same([none.code, none.errorCode], [grpc.status.UNAUTHENTICATED, 'credentials_required'], 'no token');
  const wrong = await grpcFailure(call(bearer('test-admin-token-0123456789abcdeX')));
  t.same([wrong.code, wrong.errorCode], [grpc.status.UNAUTHENTICATED, 'invalid_token'], 'a wrong admin token');
  const garbage = await grpcFailure(call(bearer('eyJhbGciOiJFUzI1NiJ9.e30.c2ln')));
  t.same([garbage.code, garbage.errorCode], [grpc.status.UNAUTHENTICATED, 'invalid_token'], 'a JWT that does not verify');
  const user = await grpcFailure(call(bearer(token('customer'))));
  t.same([user.code, user.errorCode], [grpc.status.PERMISSION_DENIED, 'forbidden'], 'a valid token without role admin');
  const ok = await call(bearer(token('admin')));
  t.equal(ok.quota?.subjectId, 'plan:gold', 'an access token with role admin');
  const ok2 = await call(bearer());
  t.equal(ok2.quota?.subjectId, 'plan:gold', 'the admin token');
});

t.test('HTTP: PUT creates (201) then replaces (200), GET, DELETE; the key is stored hashed', async (t) => {
  const path = `/internal/quotas/${encodeURIComponent(RAW_KEY)}`;
  await http('DELETE', path, undefined, ADMIN);
  const created = await http('PUT', path, { algorithm: 'sliding_window', rate: 5, burst: 8, unit: 'second', fail_mode: 'closed' }, ADMIN);
  t.equal(created.status, 201);
  const q = created.json!.quota as Record<string, unknown>;
  t.equal(q.subject_id, KEY_SUBJECT, 'shown as key:<sha256 hex>');
  t.same(
    {
      algorithm: q.algorithm,
      rate: q.rate,
      burst: q.burst,
      interval_ms: q.interval_ms,
      fail_mode: q.fail_mode,
      shadow: q.shadow,
      plan: q.plan,
      routes: q.routes,
    },
    { algorithm: 'sliding_window', rate: 5, burst: 8, interval_ms: 1000, fail_mode: 'closed', shadow: false, plan: '', routes: [] },
  );
  t.equal(created.json!.version, q.version, 'the write version, as a JSON number');
  t.same(created.json!.acked_sidecar_ids, []);
  t.same(created.json!.lagging_sidecar_ids, []);

  const replaced = await http('PUT', `${path}?ack_timeout_ms=50`, { algorithm: 'token_bucket', rate: 7, burst: 7, unit: 'hour' }, ADMIN);
  t.equal(replaced.status, 200);
  const r = replaced.json!.quota as Record<string, unknown>;
  t.same([r.rate, r.interval_ms, r.fail_mode], [7, 3_600_000, undefined], 'PUT replaces the whole record: fail_mode back to unset');
  t.ok((replaced.json!.version as number) > (created.json!.version as number));

  const got = await http('GET', path, undefined, ADMIN);
  t.equal(got.status, 200);
  t.same((got.json!.quota as Record<string, unknown>).rate, 7);
  const missing = await http('GET', '/internal/quotas/no-such-key-anywhere', undefined, ADMIN);
  t.equal(missing.status, 404);
  t.equal(missing.headers.get('content-type'), 'application/problem+json');
  t.equal(missing.json!.code, 'not_found');

  const del = await http('DELETE', path, undefined, ADMIN);
  t.equal(del.status, 204);
  t.ok(Number(del.headers.get('quota-version')) > 0);
  t.equal((await http('DELETE', path, undefined, ADMIN)).status, 404);
  t.equal((await http('GET', path, undefined, ADMIN)).status, 404);

  const rows = await db.pool.query<{ subject_id: string }>('SELECT subject_id FROM quota_changes UNION ALL SELECT subject_id FROM quotas');
  t.notOk(JSON.stringify(rows.rows).includes(RAW_KEY), 'the raw key is nowhere in the database');
});

t.test('HTTP: a plan reference needs only rate 0 and the plan', async (t) => {
  const res = await http('PUT', '/internal/quotas/ref-key-1', { rate: 0, plan: 'gold' }, ADMIN);
  t.equal(res.status, 201);
  t.same((res.json!.quota as Record<string, unknown>).plan, 'gold');
  const bad = await http('PUT', '/internal/quotas/ref-key-2', { rate: 0, plan: 'nope' }, ADMIN);
  t.same([bad.status, bad.json!.field], [400, 'plan']);
});

t.test('HTTP: 400 problem+json naming the field', async (t) => {
  const cases: [string, unknown, string][] = [
    ['missing rate', { algorithm: 'token_bucket', burst: 1, unit: 'second' }, 'rate'],
    ['missing algorithm', { rate: 1, burst: 1, unit: 'second' }, 'algorithm'],
    ['missing burst', { algorithm: 'token_bucket', rate: 1, unit: 'second' }, 'burst'],
    ['missing unit', { algorithm: 'token_bucket', rate: 1, burst: 1 }, 'unit'],
    ['unknown unit', { algorithm: 'token_bucket', rate: 1, burst: 1, unit: 'fortnight' }, 'unit'],
    ['unknown algorithm', { algorithm: 'magic', rate: 1, burst: 1, unit: 'second' }, 'algorithm'],
    ['negative rate', { algorithm: 'token_bucket', rate: -1, burst: 1, unit: 'second' }, 'rate'],
    ['fractional burst', { algorithm: 'token_bucket', rate: 1, burst: 1.5, unit: 'second' }, 'burst'],
    ['string rate', { algorithm: 'token_bucket', rate: '10', burst: 1, unit: 'second' }, 'rate'],
    ['bad fail_mode', { algorithm: 'token_bucket', rate: 1, burst: 1, unit: 'second', fail_mode: 'sideways' }, 'fail_mode'],
    ['unknown field', { algorithm: 'token_bucket', rate: 1, burst: 1, unit: 'second', colour: 'red' }, 'colour'],
    ['subject in body', { subject_id: 'user:x', algorithm: 'token_bucket', rate: 1, burst: 1, unit: 'second' }, 'subject_id'],
    [
      'bad route',
      { algorithm: 'token_bucket', rate: 1, burst: 1, unit: 'second', routes: [{ path_prefix: 'v1' }] },
      'routes[0].path_prefix',
    ],
    ['not an object', [1, 2], 'body'],
  ];
  for (const [name, body, field] of cases) {
    const res = await http('PUT', '/internal/quotas/some-key', body, ADMIN);
    t.equal(res.status, 400, `${name}: 400`);
    t.equal(res.headers.get('content-type'), 'application/problem+json', `${name}: problem+json`);
    t.equal(res.json?.field, field, `${name}: names ${field}`);
  }
  const notJson = await fetch(`${cp.http}/internal/quotas/some-key`, {
    method: 'PUT',
    headers: { authorization: ADMIN, 'content-type': 'application/json' },
    body: '{',
  });
  t.equal(notJson.status, 400);
  t.equal(((await notJson.json()) as { code: string }).code, 'invalid_json');
  const longKey = await http('GET', `/internal/quotas/${'k'.repeat(300)}`, undefined, ADMIN);
  t.same([longKey.status, longKey.json!.field], [400, 'api_key']);
});

t.test('HTTP auth: 401 without or with a wrong token, 403 without role admin, 200 with it', async (t) => {
  await http('PUT', '/internal/quotas/auth-key', { algorithm: 'token_bucket', rate: 1, burst: 1, unit: 'second' }, ADMIN);
  const none = await http('GET', '/internal/quotas/auth-key', undefined, null);
  t.same([none.status, none.json!.code], [401, 'credentials_required']);
  t.match(none.headers.get('www-authenticate'), /^Bearer/);
  const wrong = await http('GET', '/internal/quotas/auth-key', undefined, 'Bearer not-the-admin-token-at-all');
  t.same([wrong.status, wrong.json!.code], [401, 'invalid_token']);
  const basic = await http('GET', '/internal/quotas/auth-key', undefined, 'Basic YWRtaW46YWRtaW4=');
  t.same([basic.status, basic.json!.code], [401, 'invalid_token']);
  const user = await http(
    'PUT',
    '/internal/quotas/auth-key',
    { algorithm: 'token_bucket', rate: 9, burst: 9, unit: 'second' },
    `Bearer ${token('customer')}`,
  );
  t.same([user.status, user.json!.code], [403, 'forbidden']);
  const admin = await http('GET', '/internal/quotas/auth-key', undefined, `Bearer ${token('admin')}`);
  t.equal(admin.status, 200);
  t.equal((admin.json!.quota as Record<string, unknown>).rate, 1, "the non-admin's PUT changed nothing");
});

t.test('metrics: admin calls by method, transport and code; sync gauges', async (t) => {
  const text = await (await fetch(`${cp.http}/metrics`)).text();
  t.ok(
    metricLines(text, 'quota_admin_calls_total').some((l) => /method="put".*transport="grpc".*code="ok"/.test(l)),
    'gRPC puts counted',
  );
  t.ok(
    metricLines(text, 'quota_admin_calls_total').some((l) => /method="put".*transport="http".*code="invalid_field"/.test(l)),
    'HTTP 400s counted by code',
  );
  t.ok(
    metricLines(text, 'quota_admin_calls_total').some((l) => /method="get".*transport="grpc".*code="forbidden"/.test(l)),
    'denials counted',
  );
  t.equal(metricLines(text, 'quota_connected_sidecars').length, 1);
  t.match(text, /# TYPE quota_propagation_seconds histogram/);
  t.match(text, /# TYPE quota_sidecar_applied_version gauge/);
  const version = Number(/^quota_table_version\{[^}]*\} (\d+)/m.exec(text)?.[1]);
  const current = await db.pool.query<{ version: string }>('SELECT version FROM quota_table_version');
  t.equal(version, Number(current.rows[0]!.version), 'quota_table_version follows the store');
});

t.test('the raw API key never appears in the logs', async (t) => {
  // Exercise the key through every path once more, including errors, then read everything logged.
  const path = `/internal/quotas/${encodeURIComponent(RAW_KEY)}`;
  await http('PUT', path, { algorithm: 'token_bucket', rate: 3, burst: 3, unit: 'second' }, ADMIN);
  await http('PUT', path, { algorithm: 'token_bucket', rate: -3, burst: 3, unit: 'second' }, ADMIN);
  await http('GET', path, undefined, null);
  await http('DELETE', path, undefined, ADMIN);
  await http('GET', path, undefined, ADMIN);
  const logged = captured.text();
  t.ok(logged.includes('quota put'), 'the writes were logged (the capture works)');
  t.notOk(logged.includes(RAW_KEY), 'no raw key');
  t.notOk(logged.includes(KEY_SUBJECT.slice(4)), 'not even its full hash: subjects are logged as a short tag');
});
