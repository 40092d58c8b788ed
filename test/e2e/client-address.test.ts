/**
 * One source of truth for the caller's address (README, "Trust of the client address"), against
 * a real sidecar in front of a real identity.
 *
 * The sidecar decides who the client is (the peer, or with LIMITER_TRUST_PROXY the last
 * X-Forwarded-For entry, the one the trusted proxy appended) and tells identity in
 * X-Subject-Address, believed only with X-Subject-Secret. Identity throttles sign-in by that and
 * nothing else: never by X-Forwarded-For, whose last entry behind a trusted proxy is the sidecar's
 * peer, one address for every client.
 *
 * Issue 24, item 1, reproduced: behind a trusted proxy, 20 wrong passwords from one client used to
 * throttle every client of that proxy for 15 minutes, right passwords included, on /auth/login,
 * the sign-in page and the device page; `login_failures` held the proxy's address with 20.
 *
 * The tests here send as a trusted load balancer would: the client's own (spoofable) entries
 * first, then the address the load balancer saw, last.
 */
import t, { type Test } from 'tap';
import { fetch } from 'undici';
import { validateRegistration } from '../../identity/clients/client.js';
import { registerClient } from '../../identity/clients/client-store.js';
import { useSidecar } from '../harness/services.js';
import { AUDIENCE, startTestIdentity } from '../identity/accounts/helpers.js';
import { browserApproveDevice, browserSignIn, postForm, type SignInResult } from '../identity/oauth/helpers.js';

const SECRET = 'e2e-client-address-service-secret';
const PASSWORD = 'correct horse battery staple';
const WRONG = 'not the password at all';
const REDIRECT = 'https://app.example/cb';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
/** IDENTITY_LOGIN_MAX_FAILURES_PER_IP's default. */
const PER_IP = 20;

const id = await startTestIdentity(t, 'e2e_client_address', {
  SERVICE_SECRET: SECRET,
  IDENTITY_LOGIN_MAX_FAILURES_PER_IP: String(PER_IP),
  IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT: '5',
});
const sidecarEnv = {
  HOST: '127.0.0.1',
  IDENTITY_URL: id.base,
  JWT_ISSUER: id.issuer,
  JWT_AUDIENCE: AUDIENCE,
  SERVICE_SECRET: SECRET,
  // The sidecar's own per-IP cap is not what is tested: every 429 below is identity's.
  LIMITER_IP_BURST: '100000',
  LIMITER_DECISION_SAMPLE_RATE: '0',
};
/** Behind one load balancer the operator trusts. */
const trusted = await useSidecar(t, { ...sidecarEnv, LIMITER_TRUST_PROXY: 'true' });
/** Reached by clients directly (the default). */
const plain = await useSidecar(t, sidecarEnv);

for (const reg of [
  { client_id: 'web-app', client_type: 'public', redirect_uris: [REDIRECT], scope: 'openid' },
  { client_id: 'tv-app', client_type: 'public', grant_types: [DEVICE_GRANT], scope: 'openid' },
]) {
  await registerClient(id.pool, validateRegistration(reg), id.clock.now());
}

interface Answer {
  status: number;
  code: string | undefined;
}

async function login(base: string, email: string, password: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(`${base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ email, password }),
  });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code };
}

function authorizeUrl(base: string): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'web-app',
    redirect_uri: REDIRECT,
    scope: 'openid',
    state: 'st',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
  });
  return `${base}/authorize?${q.toString()}`;
}

async function deviceCode(base: string): Promise<string> {
  const r = await postForm(`${base}/auth/device_authorization`, { client_id: 'tv-app', scope: 'openid' });
  if (r.status !== 200) throw new Error(r.text);
  return r.json.user_code as string;
}

/** The client-address rows of `login_failures`, as `address=failures`. */
async function ipRows(): Promise<string[]> {
  const { rows } = await id.pool.query<{ key: string; failures: number }>(
    `SELECT key, failures FROM login_failures WHERE scope = 'ip' ORDER BY key`,
  );
  return rows.map((r) => `${r.key}=${r.failures}`);
}

async function fresh(): Promise<void> {
  await id.pool.query('DELETE FROM login_failures');
}

function throttledPage(t: Test, r: SignInResult, what: string): void {
  t.equal(r.status, 429, `${what}: 429`);
  t.equal(r.location, undefined, `${what}: no redirect, no code`);
  t.match(r.body, 'Too many failed sign-ins.', `${what}: the page says so`);
}

const ABUSER = '203.0.113.66';
const OTHERS = Array.from({ length: 29 }, (_v, i) => `203.0.113.${i + 1}`);

t.test("the issue's reproduction: 20 wrong passwords from 20 clients of a trusted proxy throttle none of the others", async (t) => {
  await fresh();
  await id.signup('repro@example.com', PASSWORD);
  for (let i = 1; i <= PER_IP; i++) {
    const r = await login(trusted.url, `repro${i}@example.com`, WRONG, { 'x-forwarded-for': `203.0.113.${i}` });
    t.equal(r.status, 401);
  }
  const next = await login(trusted.url, 'repro@example.com', PASSWORD, { 'x-forwarded-for': '203.0.113.200' });
  t.equal(next.status, 200, 'a right password from another client signs in (was 429 login_throttled)');
  const rows = await ipRows();
  t.equal(rows.length, PER_IP, 'one row per client');
  t.ok(
    rows.every((r) => /^203\.0\.113\.\d+=1$/.test(r)),
    'each with its one failure; none for the source address (was 127.0.0.1=20)',
  );
});

t.test('behind a trusted proxy, 30 client addresses: the one abuser is throttled, the others sign in', async (t) => {
  await fresh();
  t.equal(OTHERS.length + 1, 30, '30 addresses');
  const accounts = OTHERS.map((_a, i) => `client${i}@example.com`);
  // A few at a time: the test database's pool is small.
  const emails = [...accounts, 'abuser@example.com'];
  for (let i = 0; i < emails.length; i += 3) await Promise.all(emails.slice(i, i + 3).map((email) => id.signup(email, PASSWORD)));

  // The abuser writes an X-Forwarded-For of its own (another client's address, a different one
  // each time) and a forged X-Subject-Address; the load balancer appends the address it saw.
  for (let i = 0; i < PER_IP; i++) {
    const r = await login(trusted.url, `guess${i}@example.com`, WRONG, {
      'x-forwarded-for': `${OTHERS[i % OTHERS.length]!}, ${ABUSER}`,
      'x-subject-address': OTHERS[(i + 1) % OTHERS.length]!,
      'x-subject-secret': SECRET,
    });
    t.equal(r.status, 401, `wrong password ${i + 1}: 401`);
  }
  t.same(await ipRows(), [`${ABUSER}=${PER_IP}`], "login_failures counts the abuser's address, and only it");

  const abuser = await login(trusted.url, 'abuser@example.com', PASSWORD, { 'x-forwarded-for': ABUSER });
  t.same(abuser, { status: 429, code: 'login_throttled' }, 'the abuser: 429, right password or not');

  // Every other client, some of them claiming to be the abuser in the part of the chain they write.
  for (const [i, address] of OTHERS.entries()) {
    const chain = i % 2 === 0 ? `${ABUSER}, ${address}` : address;
    const r = await login(trusted.url, accounts[i]!, PASSWORD, { 'x-forwarded-for': chain });
    t.equal(r.status, 200, `${address} signs in`);
  }
  t.same(await ipRows(), [`${ABUSER}=${PER_IP}`], 'nothing counted against the others or the proxy');

  // The sign-in page and the device page share the counters, and the address.
  const d = await deviceCode(trusted.url);
  const fromAbuser = { 'x-forwarded-for': ABUSER };
  throttledPage(
    t,
    await browserSignIn(authorizeUrl(trusted.url), 'abuser@example.com', PASSWORD, 'approve', fromAbuser),
    'sign-in page, abuser',
  );
  throttledPage(
    t,
    await browserApproveDevice(trusted.url, d, 'abuser@example.com', PASSWORD, 'approve', fromAbuser),
    'device page, abuser',
  );
  const fromOther = { 'x-forwarded-for': `${ABUSER}, ${OTHERS[0]!}` };
  const page = await browserSignIn(authorizeUrl(trusted.url), accounts[0]!, PASSWORD, 'approve', fromOther);
  t.equal(page.status, 303, 'sign-in page, another client: signed in');
  t.ok(page.location && new URL(page.location).searchParams.get('code'), 'with a code');
  const device = await browserApproveDevice(trusted.url, d, accounts[1]!, PASSWORD, 'approve', fromOther);
  t.equal(device.status, 200, 'device page, another client: approved');
  t.match(device.body, 'Device connected');
});

t.test('through a sidecar without LIMITER_TRUST_PROXY, spoofed chains change nothing: the peer is the address', async (t) => {
  await fresh();
  for (let i = 0; i < PER_IP; i++) {
    const r = await login(plain.url, `plain${i}@example.com`, WRONG, {
      'x-forwarded-for': `198.51.100.${i}, 203.0.113.${i}`,
      'x-subject-address': `192.0.2.${i}`,
      'x-subject-secret': SECRET,
    });
    t.equal(r.status, 401);
  }
  t.same(await ipRows(), [`127.0.0.1=${PER_IP}`], 'all counted against the peer, whatever each request claimed');
  const next = await login(plain.url, 'plain-next@example.com', PASSWORD, { 'x-forwarded-for': '198.51.100.200' });
  t.same(next, { status: 429, code: 'login_throttled' }, 'a fresh spoofed chain does not escape the throttle');
});

t.test('through a trusted sidecar, a forged X-Subject-Address is replaced by the last X-Forwarded-For entry', async (t) => {
  await fresh();
  for (let i = 0; i < 3; i++) {
    const r = await login(trusted.url, `forged${i}@example.com`, WRONG, {
      'x-forwarded-for': '192.0.2.1, 203.0.113.9',
      'x-subject-address': '192.0.2.250',
      'X-Subject-Address': '192.0.2.251',
      'x-subject-secret': SECRET,
    });
    t.equal(r.status, 401);
  }
  t.same(await ipRows(), ['203.0.113.9=3'], 'the address the trusted proxy appended');
});

t.test('directly to identity: X-Subject-Address is believed only with the right secret; X-Forwarded-For never', async (t) => {
  await fresh();
  const direct = (email: string, headers: Record<string, string>) => login(id.base, email, WRONG, headers);
  t.equal((await direct('d1@example.com', { 'x-subject-address': '192.0.2.10' })).status, 401, 'forged address, no secret');
  t.equal(
    (await direct('d2@example.com', { 'x-subject-address': '192.0.2.11', 'x-subject-secret': 'guess' })).status,
    401,
    'a wrong secret',
  );
  t.equal(
    (await direct('d3@example.com', { 'x-forwarded-for': '192.0.2.12, 192.0.2.13', 'x-subject-secret': SECRET })).status,
    401,
    'an X-Forwarded-For chain with the right secret',
  );
  t.equal((await direct('d4@example.com', { 'x-forwarded-for': '192.0.2.14' })).status, 401, 'an X-Forwarded-For chain alone');
  t.same(await ipRows(), ['127.0.0.1=4'], 'each counted against the socket address');
  t.equal((await direct('d5@example.com', { 'x-subject-address': '192.0.2.15', 'x-subject-secret': SECRET })).status, 401);
  t.same(await ipRows(), ['127.0.0.1=4', '192.0.2.15=1'], 'with the right secret, the address the sidecar would vouch for');
});
