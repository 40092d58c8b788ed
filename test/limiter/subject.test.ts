// @tier: pure
/**
 * Who the sidecar says is calling, end to end: API keys (hashed, never forwarded), unknown keys
 * (a decoy denial indistinguishable from a real one), bearer access tokens (subject, plan, and
 * every way a token can be bad), the per-IP cap on routes without credentials, isolation of one
 * subject's numbers from another's, and the /api/v1/users/{id} ownership rule.
 */
import t, { type Test } from 'tap';
import { accessClaims, generateTestKey, jwksOf, sign, startJwksServer, TEST_AUDIENCE, type TestKey } from '../harness/tokens.js';
import { startUpstream, type Echo } from '../harness/upstream.js';
import {
  client,
  fixedQuota,
  keySubject,
  newApiKey,
  RATE_LIMIT_HEADERS,
  startTestSidecar,
  type QuotaJson,
  type Reply,
} from './fixtures/sidecar.js';

const HOUR = 3_600_000;
const up = await startUpstream();
t.teardown(() => up.close());

const KNOWN = newApiKey('known');
const KEY_A = newApiKey('a');
const KEY_B = newApiKey('b');
const quotas: QuotaJson[] = [
  { subject_id: 'plan:default', algorithm: 'token_bucket', rate: 1, burst: 3, interval_ms: HOUR, plan: 'default' },
  { subject_id: 'plan:pro', algorithm: 'token_bucket', rate: 1, burst: 7, interval_ms: HOUR, plan: 'pro' },
  // A key on the default plan: its denial must look exactly like an unknown key's.
  { subject_id: keySubject(KNOWN), rate: 0, plan: 'default' },
  fixedQuota(keySubject(KEY_A), 5, { plan: 'gold' }),
  fixedQuota(keySubject(KEY_B), 9, { plan: 'gold' }),
  fixedQuota('user:carol', 5, { plan: 'carol' }),
];
const sc = await startTestSidecar(t, {
  upstream: up.url,
  quotas,
  env: { LIMITER_IP_RATE: '1', LIMITER_IP_BURST: '3' },
});
const call = client(t);
const now = (): number => sc.clock.now();
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const token = (overrides: Record<string, unknown> = {}, key: TestKey = sc.key): string =>
  sign(accessClaims({ nowMs: now() }, overrides), { key });

function isProblem(t: Test, r: Reply, status: number, code: string): void {
  t.equal(r.status, status, `status ${status}`);
  t.match(r.headers['content-type'], /^application\/problem\+json/, 'problem+json');
  t.equal(r.json<{ code: string }>().code, code, `code ${code}`);
}

t.test('an API key reaches the upstream only as key:<sha256 hex>', async (t) => {
  const r = await call(`${sc.base}/v1/who`, { headers: { 'x-api-key': KEY_A } });
  t.equal(r.status, 200);
  const echo = r.json<Echo>();
  t.equal(echo.headers['x-subject'], keySubject(KEY_A));
  t.match(echo.headers['x-subject'], /^key:[0-9a-f]{64}$/);
  t.notOk('x-api-key' in echo.headers, 'X-API-Key is not forwarded');
});

t.test('an unknown key is denied exactly like a known key that has spent its quota (no existence oracle)', async (t) => {
  let known: Reply | undefined;
  for (let i = 0; i < 10 && known?.status !== 429; i++) known = await call(`${sc.base}/v1/oracle`, { headers: { 'x-api-key': KNOWN } });
  t.equal(known!.status, 429, 'the known key is denied once its plan is spent');
  const before = up.requests.length;
  const unknown = await call(`${sc.base}/v1/oracle`, { headers: { 'x-api-key': newApiKey('nobody') } });
  t.equal(unknown.status, 429, 'an unknown key: 429');
  t.equal(up.requests.length, before, 'an unknown key never reaches the upstream');
  const names = (r: Reply) => Object.keys(r.headers).sort();
  t.same(names(unknown), names(known!), 'the same header names');
  t.same(Object.keys(unknown.json()).sort(), Object.keys(known!.json()).sort(), 'the same body keys');
  t.same(unknown.json(), known!.json(), 'the same body');
  for (const h of [
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
    'ratelimit-policy',
    'ratelimit',
    'retry-after',
    'content-type',
  ]) {
    t.equal(unknown.headers[h], known!.headers[h], `the same ${h}`);
  }
  const again = await call(`${sc.base}/v1/oracle`, { headers: { 'x-api-key': newApiKey('nobody') } });
  t.equal(again.status, 429, 'every unknown key, every time');
});

t.test('a valid ES256 access token: user:<sub>, or tenant:<tenant_id> when it names one', async (t) => {
  const u = await call(`${sc.base}/v1/who`, { headers: bearer(token({ sub: 'alice', user_id: 'alice' })) });
  t.equal(u.status, 200);
  t.equal(u.json<Echo>().headers['x-subject'], 'user:alice');
  t.equal(u.json<Echo>().headers['x-subject-role'], 'customer', 'the token’s role');
  const tn = await call(`${sc.base}/v1/who`, { headers: bearer(token({ sub: 'bob', user_id: 'bob', tenant_id: 'acme' })) });
  t.equal(tn.status, 200);
  t.equal(tn.json<Echo>().headers['x-subject'], 'tenant:acme');
  t.equal(tn.json<Echo>().headers.authorization?.startsWith('Bearer '), true, 'the token itself travels on, for upstreams that verify it');
});

t.test('the token’s quota: its own record, else its plan claim’s, else the default plan', async (t) => {
  const own = await call(`${sc.base}/v1/q`, { headers: bearer(token({ sub: 'carol', user_id: 'carol', plan: 'pro' })) });
  t.equal(own.headers['x-ratelimit-limit'], '5', 'user:carol has a record of her own (5), which beats the plan claim');
  const pro = await call(`${sc.base}/v1/q`, { headers: bearer(token({ sub: 'dave', user_id: 'dave', plan: 'pro' })) });
  t.equal(pro.status, 200);
  t.equal(pro.headers['x-ratelimit-limit'], '7', 'the pro plan’s burst');
  t.match(pro.headers['ratelimit-policy'], /^"pro";q=7;/, 'RateLimit-Policy names the plan');
  const none = await call(`${sc.base}/v1/q`, { headers: bearer(token({ sub: 'erin', user_id: 'erin' })) });
  t.equal(none.headers['x-ratelimit-limit'], '3', 'no plan claim: the default plan');
  const unknownPlan = await call(`${sc.base}/v1/q`, { headers: bearer(token({ sub: 'fay', user_id: 'fay', plan: 'platinum' })) });
  t.equal(unknownPlan.headers['x-ratelimit-limit'], '3', 'a plan the sidecar does not know: the default plan');
});

t.test('bad tokens get 401 problem+json and never reach the upstream', async (t) => {
  const other = await generateTestKey('ES256');
  const rsa = await generateTestKey('RS256');
  const claims = (o: Record<string, unknown> = {}) => accessClaims({ nowMs: now() }, o);
  const cases: Array<[string, string, string]> = [
    ['alg none', `Bearer ${sign(claims(), { key: sc.key, alg: 'none' })}`, 'invalid_token'],
    [
      'HS256 keyed with the public key',
      `Bearer ${sign(claims(), { key: sc.key, alg: 'HS256', hmacSecret: sc.key.publicPem })}`,
      'invalid_token',
    ],
    ['wrong audience', `Bearer ${sign(claims({ aud: 'https://other.test' }), { key: sc.key })}`, 'invalid_token'],
    [
      'expired',
      `Bearer ${sign(claims({ exp: Math.floor(now() / 1000) - 3600, iat: Math.floor(now() / 1000) - 7200, nbf: undefined }), { key: sc.key })}`,
      'token_expired',
    ],
    ['an id token (typ JWT)', `Bearer ${sign(claims(), { key: sc.key, typ: 'JWT' })}`, 'invalid_token'],
    ['an id token (no typ)', `Bearer ${sign(claims(), { key: sc.key, typ: null })}`, 'invalid_token'],
    ['signed by a key the sidecar does not trust', `Bearer ${sign(claims(), { key: other })}`, 'invalid_token'],
    [
      'an RS256 signature under the ES256 kid',
      `Bearer ${sign(claims(), { key: rsa, kid: sc.key.kid, alg: 'ES256', signAs: 'RS256' })}`,
      'invalid_token',
    ],
    ['wrong issuer', `Bearer ${sign(claims({ iss: 'https://evil.test' }), { key: sc.key })}`, 'invalid_token'],
    ['not a JWS', 'Bearer not-a-token', 'invalid_token'],
    ['a tampered payload', `Bearer ${tamper(sign(claims(), { key: sc.key }))}`, 'invalid_token'],
    ['Basic instead of Bearer', 'Basic dXNlcjpwYXNz', 'invalid_token'],
    ['Bearer with no token', 'Bearer', 'invalid_token'],
    ['Bearer with only spaces', 'Bearer    ', 'invalid_token'],
  ];
  const before = up.requests.length;
  for (const [name, authorization, code] of cases) {
    const r = await call(`${sc.base}/v1/secret`, { headers: { authorization } });
    t.equal(r.status, 401, `${name}: 401`);
    t.match(r.headers['content-type'], /^application\/problem\+json/, `${name}: problem+json`);
    t.equal(r.json<{ code: string }>().code, code, `${name}: ${code}`);
    t.match(r.headers['www-authenticate'], /^Bearer/, `${name}: WWW-Authenticate`);
    t.notMatch(r.text, authorization.slice(7, 40) || '\u0000', `${name}: the token is not echoed`);
  }
  t.equal(up.requests.length, before, 'none reached the upstream');
});

function tamper(jws: string): string {
  const [h, p, s] = jws.split('.');
  const claims = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
  claims.role = 'admin';
  return `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
}

t.test('no credentials on a route that needs them: 401 credentials_required', async (t) => {
  const before = up.requests.length;
  const r = await call(`${sc.base}/v1/private`);
  isProblem(t, r, 401, 'credentials_required');
  t.match(r.headers['www-authenticate'], /^Bearer/);
  const orders = await call(`${sc.base}/orders`);
  isProblem(t, orders, 401, 'credentials_required');
  t.equal(up.requests.length, before, 'nothing reached the upstream');
});

t.test('routes without credentials get the per-IP cap: exactly LIMITER_IP_BURST, then 429', async (t) => {
  const statuses: number[] = [];
  let last: Reply | undefined;
  for (let i = 0; i < 6; i++) {
    last = await call(`${sc.base}/auth/login`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    statuses.push(last.status);
    if (last.status === 200) {
      t.equal(last.json<Echo>().headers['x-subject'], 'ip:127.0.0.1', 'counted by address');
      t.equal(last.json<Echo>().headers['x-subject-role'], 'anonymous');
      t.equal(last.json<Echo>().path, '/auth/login', 'routed to IDENTITY_URL');
    }
  }
  t.same(statuses, [200, 200, 200, 429, 429, 429], 'burst 3 at one instant');
  t.ok(Number(last!.headers['retry-after']) >= 1, 'Retry-After on the denial');
  const wk = await call(`${sc.base}/.well-known/openid-configuration`);
  t.equal(wk.status, 429, 'the cap is per address, across the routes without credentials');
  sc.clock.advance(1_000);
  const later = await call(`${sc.base}/auth/login`, { method: 'POST', body: '{}' });
  t.equal(later.status, 200, 'one more after a second (LIMITER_IP_RATE=1)');
  const signedIn = await call(`${sc.base}/auth/login`, { method: 'POST', body: '{}', headers: { 'x-api-key': KEY_B } });
  t.equal(signedIn.status, 200, 'a caller with credentials is counted as itself, not by address');
  t.equal(signedIn.json<Echo>().headers['x-subject'], keySubject(KEY_B));
});

t.test('a caller never sees another subject’s numbers', async (t) => {
  const a = async () => call(`${sc.base}/v1/iso`, { headers: { 'x-api-key': KEY_A } });
  const b = async () => call(`${sc.base}/v1/iso`, { headers: { 'x-api-key': KEY_B } });
  // KEY_A spent 1 in the first test, KEY_B 1 in the per-IP test.
  const a1 = await a();
  const a2 = await a();
  const b1 = await b();
  const a3 = await a();
  t.same([a1.headers['x-ratelimit-limit'], a1.headers['x-ratelimit-remaining']], ['5', '3']);
  t.same([a2.headers['x-ratelimit-limit'], a2.headers['x-ratelimit-remaining']], ['5', '2']);
  t.same([b1.headers['x-ratelimit-limit'], b1.headers['x-ratelimit-remaining']], ['9', '7'], 'B’s own figures, untouched by A');
  t.same([a3.headers['x-ratelimit-limit'], a3.headers['x-ratelimit-remaining']], ['5', '1'], 'A’s own figures, untouched by B');
  for (const r of [a1, b1]) t.notMatch(JSON.stringify(r.headers), /key:|[0-9a-f]{64}/, 'no subject in any header');
  for (const h of RATE_LIMIT_HEADERS) t.ok(b1.headers[h], `${h}`);
});

t.test('/api/v1/users/{id}/...: only that user, a service role, or an API key', async (t) => {
  const path = '/api/v1/users/u1/preferences';
  const asUser = (sub: string, role = 'customer') => bearer(token({ sub, user_id: sub, role }));
  const other = await call(`${sc.base}${path}`, { headers: asUser('u2') });
  isProblem(t, other, 403, 'forbidden');
  const otherBare = await call(`${sc.base}/api/v1/users/u1`, { headers: asUser('u2') });
  isProblem(t, otherBare, 403, 'forbidden');
  const prefix = await call(`${sc.base}/api/v1/users/u10/preferences`, { headers: asUser('u1') });
  isProblem(t, prefix, 403, 'forbidden');
  const self = await call(`${sc.base}${path}?x=1`, { headers: asUser('u1') });
  t.equal(self.status, 200, 'the user themself');
  t.equal(self.json<Echo>().path, path);
  t.equal(self.json<Echo>().headers['x-subject'], 'user:u1');
  const encoded = await call(`${sc.base}/api/v1/users/u%31/preferences`, { headers: asUser('u1') });
  t.equal(encoded.status, 200, 'a percent-encoded id is the same user');
  for (const role of ['service', 'admin']) {
    const r = await call(`${sc.base}${path}`, { headers: asUser(`svc-${role}`, role) });
    t.equal(r.status, 200, `role ${role}`);
    t.equal(r.json<Echo>().headers['x-subject-role'], role);
  }
  const key = await call(`${sc.base}${path}`, { headers: { 'x-api-key': KEY_B } });
  t.equal(key.status, 200, 'an API key (service)');
  const notUsers = await call(`${sc.base}/api/v1/notifications`, { headers: asUser('u2') });
  t.equal(notUsers.status, 200, 'other /api/v1 paths need no ownership');
});

t.test('tokens verified against a JWKS fetched from JWKS_URL', async (t) => {
  const key = await generateTestKey('ES256');
  const jwks = await startJwksServer(jwksOf(key));
  t.teardown(() => jwks.close());
  const s2 = await startTestSidecar(t, { upstream: up.url, quotas, env: { JWKS_URL: jwks.url }, fetchJwks: true, key });
  const r = await call(`${s2.base}/v1/who`, {
    headers: bearer(sign(accessClaims({ nowMs: s2.clock.now() }, { sub: 'gus', user_id: 'gus' }), { key })),
  });
  t.equal(r.status, 200);
  t.equal(r.json<Echo>().headers['x-subject'], 'user:gus');
  t.ok(jwks.fetches >= 1, 'the key set was fetched');
  const aud = await call(`${s2.base}/v1/who`, {
    headers: bearer(sign(accessClaims({ nowMs: s2.clock.now(), audience: TEST_AUDIENCE + '/x' }), { key })),
  });
  t.equal(aud.status, 401, 'and checked');
});
