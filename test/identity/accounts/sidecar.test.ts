import t from 'tap';
import { fetch } from 'undici';
import { useSidecar } from '../../harness/services.js';
import { AUDIENCE, startTestIdentity } from './helpers.js';

const SECRET = 'sidecar-accounts-secret';
const id = await startTestIdentity(t, 'identity_accounts_sidecar', { SERVICE_SECRET: SECRET, IDENTITY_LOGIN_MAX_FAILURES_PER_IP: '2' });
const sidecar = await useSidecar(t, {
  HOST: '127.0.0.1',
  IDENTITY_URL: id.base,
  JWT_ISSUER: id.issuer,
  JWT_AUDIENCE: AUDIENCE,
  SERVICE_SECRET: SECRET,
  LIMITER_DECISION_SAMPLE_RATE: '0',
});

async function post(path: string, body: unknown) {
  const res = await fetch(sidecar.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, unknown> };
}

t.test('signup and login through the sidecar, then GET /orders with the token', async (t) => {
  const signup = await post('/auth/signup', { email: 'edge@example.com', password: 'through the edge 123', name: 'Edge' });
  t.equal(signup.status, 201);
  const login = await post('/auth/login', { email: 'edge@example.com', password: 'through the edge 123' });
  t.equal(login.status, 200);
  t.match(login.json, { token_type: 'Bearer', expires_in: 3600 });
  const res = await fetch(`${sidecar.url}/orders`, { headers: { authorization: `Bearer ${String(login.json.access_token)}` } });
  t.equal(res.status, 200, "the sidecar verified identity's token against its JWKS and identity accepted it");
  t.same(await res.json(), []);
  t.ok(res.headers.get('x-ratelimit-limit'), 'X-RateLimit-Limit');
  t.ok(res.headers.get('x-ratelimit-remaining'), 'X-RateLimit-Remaining');
  const none = await fetch(`${sidecar.url}/orders`);
  t.equal(none.status, 401, 'no token: refused at the edge');
  await none.text();
});

t.test("behind the sidecar, the client's address is the one throttled (X-Subject-Address with the service secret)", async (t) => {
  for (let i = 0; i < 2; i++) t.equal((await post('/auth/login', { email: `x${i}@example.com`, password: 'wrong password' })).status, 401);
  const blocked = await post('/auth/login', { email: 'edge@example.com', password: 'through the edge 123' });
  t.equal(blocked.status, 429);
  t.equal(blocked.json.code, 'login_throttled');
  const keys = await id.pool.query<{ key: string }>(`SELECT key FROM login_failures WHERE scope = 'ip'`);
  t.same(
    keys.rows.map((r) => r.key),
    ['127.0.0.1'],
    'the peer address the sidecar saw',
  );
});
