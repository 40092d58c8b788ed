/**
 * One throttle for every surface that checks a password: `POST /auth/login`, the sign-in page
 * (`POST /authorize`) and the device page (`POST /auth/device`) count on the same per-account and
 * per-address counters (`login_failures`), so guesses spread over them add up, and a throttled
 * account or address is refused on each of them, right password or not. The reproduction:
 * the sign-in page took 30 wrong passwords for an account already throttled on /auth/login and
 * then issued a code; the device page took 10. And the answer does not say whether the account
 * exists: an unknown email gets the same status, headers and page as a known one.
 */
import t, { type Test } from 'tap';
import { validateRegistration } from '../../../identity/clients/client.js';
import { registerClient } from '../../../identity/clients/client-store.js';
import { browserApproveDevice, browserSignIn, postForm, type SignInResult } from '../oauth/helpers.js';
import { startTestIdentity, type TestIdentity } from './helpers.js';

const PASSWORD = 'correct horse battery staple';
const WRONG = 'not the password at all';
const SECRET = 'sign-in-throttle-service-secret';
const REDIRECT = 'https://app.example/cb';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

/** Headers as the sidecar forwards a request from `ip` (the throttle's client address). */
const from = (ip: string): Record<string, string> => ({ 'x-subject-secret': SECRET, 'x-subject-address': ip });

async function clients(id: TestIdentity): Promise<void> {
  for (const reg of [
    { client_id: 'web-app', client_type: 'public', redirect_uris: [REDIRECT], scope: 'openid' },
    { client_id: 'tv-app', client_type: 'public', grant_types: [DEVICE_GRANT], scope: 'openid' },
  ]) {
    await registerClient(id.pool, validateRegistration(reg), id.clock.now());
  }
}

function authorizeUrl(id: TestIdentity): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'web-app',
    redirect_uri: REDIRECT,
    scope: 'openid',
    state: 'st',
    code_challenge: CHALLENGE,
    code_challenge_method: 'S256',
  });
  return `${id.base}/authorize?${q.toString()}`;
}

const login = (id: TestIdentity, email: string, password: string, ip: string) =>
  id.call('POST', '/auth/login', { body: { email, password }, headers: from(ip) });
const page = (id: TestIdentity, email: string, password: string, ip: string): Promise<SignInResult> =>
  browserSignIn(authorizeUrl(id), email, password, 'approve', from(ip));

async function device(id: TestIdentity): Promise<{ deviceCode: string; userCode: string }> {
  const r = await postForm(`${id.base}/auth/device_authorization`, { client_id: 'tv-app', scope: 'openid' });
  if (r.status !== 200) throw new Error(r.text);
  return { deviceCode: r.json.device_code as string, userCode: r.json.user_code as string };
}
const approve = (id: TestIdentity, userCode: string, email: string, password: string, ip: string): Promise<SignInResult> =>
  browserApproveDevice(id.base, userCode, email, password, 'approve', from(ip));
const pollError = async (id: TestIdentity, deviceCode: string): Promise<unknown> =>
  (await postForm(`${id.base}/token`, { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: 'tv-app' })).json.error;

/** A page with what differs between two requests (the form token, the typed email) blanked. */
function normalised(body: string, email: string): string {
  return body
    .replace(/name="csrf_token" value="[A-Za-z0-9_-]{43}"/g, 'name="csrf_token" value="…"')
    .split(email)
    .join('EMAIL');
}

function throttledPage(t: Test, r: SignInResult, what: string): void {
  t.equal(r.status, 429, `${what}: 429`);
  t.equal(r.location, undefined, `${what}: no redirect, no code`);
  t.match(r.headers.get('retry-after'), /^[1-9][0-9]*$/, `${what}: Retry-After`);
  t.match(r.body, 'Too many failed sign-ins.', `${what}: the page says so`);
}

t.test('per account, across /auth/login, the sign-in page and the device page', async (t) => {
  const id = await startTestIdentity(t, 'identity_sign_in_throttle', {
    IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT: '5',
    IDENTITY_LOGIN_MAX_FAILURES_PER_IP: '1000',
    SERVICE_SECRET: SECRET,
  });
  await clients(id);
  for (const name of ['alice', 'bob', 'carol', 'dave', 'erin', 'frank']) await id.signup(`${name}@example.com`, PASSWORD);

  await t.test('5 wrong on /auth/login, then the sign-in page with the right password: 429, no code', async (t) => {
    for (let i = 0; i < 5; i++) t.equal((await login(id, 'alice@example.com', WRONG, '10.1.0.1')).status, 401);
    throttledPage(t, await page(id, 'alice@example.com', PASSWORD, '10.1.0.2'), 'sign-in page');
    const codes = await id.pool.query('SELECT 1 FROM authorization_codes');
    t.equal(codes.rowCount, 0, 'no code was issued');
  });

  await t.test('5 wrong on the sign-in page, then /auth/login with the right password: 429', async (t) => {
    for (let i = 0; i < 5; i++) {
      const r = await page(id, 'bob@example.com', WRONG, '10.2.0.1');
      t.equal(r.status, 200);
      t.match(r.body, 'Wrong email or password.');
    }
    const r = await login(id, 'bob@example.com', PASSWORD, '10.2.0.2');
    t.equal(r.status, 429);
    t.equal(r.json?.code, 'login_throttled');
    throttledPage(t, await page(id, 'bob@example.com', PASSWORD, '10.2.0.3'), 'the page itself, after its own 5');
  });

  await t.test('the device page: throttled by /auth/login failures, and its failures throttle /auth/login', async (t) => {
    for (let i = 0; i < 5; i++) t.equal((await login(id, 'carol@example.com', WRONG, '10.3.0.1')).status, 401);
    const d = await device(id);
    throttledPage(t, await approve(id, d.userCode, 'carol@example.com', PASSWORD, '10.3.0.2'), 'device page');
    t.equal(await pollError(id, d.deviceCode), 'authorization_pending', 'the device was not approved');

    const d2 = await device(id);
    for (let i = 0; i < 5; i++) {
      const r = await approve(id, d2.userCode, 'dave@example.com', WRONG, '10.4.0.1');
      t.equal(r.status, 200);
      t.match(r.body, 'Wrong email or password.');
    }
    throttledPage(t, await approve(id, d2.userCode, 'dave@example.com', PASSWORD, '10.4.0.2'), 'device page, after its own 5');
    t.equal((await login(id, 'dave@example.com', PASSWORD, '10.4.0.3')).status, 429, '/auth/login');
    t.equal(await pollError(id, d2.deviceCode), 'authorization_pending');
  });

  await t.test('guesses spread over the three surfaces add up', async (t) => {
    const d = await device(id);
    t.equal((await login(id, 'erin@example.com', WRONG, '10.5.0.1')).status, 401);
    t.equal((await login(id, 'erin@example.com', WRONG, '10.5.0.2')).status, 401);
    t.equal((await page(id, 'erin@example.com', WRONG, '10.5.0.3')).status, 200);
    t.equal((await page(id, 'erin@example.com', WRONG, '10.5.0.4')).status, 200);
    t.equal((await approve(id, d.userCode, 'erin@example.com', WRONG, '10.5.0.5')).status, 200);
    t.equal((await login(id, 'erin@example.com', PASSWORD, '10.5.0.6')).status, 429);
    throttledPage(t, await page(id, 'erin@example.com', PASSWORD, '10.5.0.7'), 'sign-in page');
    throttledPage(t, await approve(id, d.userCode, 'erin@example.com', PASSWORD, '10.5.0.8'), 'device page');
  });

  await t.test('a success clears the account count on the pages as on /auth/login', async (t) => {
    for (let i = 0; i < 4; i++) t.equal((await login(id, 'frank@example.com', WRONG, '10.6.0.1')).status, 401);
    const ok = await page(id, 'frank@example.com', PASSWORD, '10.6.0.1');
    t.equal(ok.status, 303);
    t.ok(new URL(ok.location!).searchParams.get('code'));
    for (let i = 0; i < 4; i++) t.equal((await login(id, 'frank@example.com', WRONG, '10.6.0.1')).status, 401);
    t.equal((await login(id, 'frank@example.com', PASSWORD, '10.6.0.1')).status, 200, 'four more are allowed again');
  });

  await t.test('an unknown account gets the same answer as a known one, before and after the limit', async (t) => {
    await id.signup('grace@example.com', PASSWORD);
    const known = 'grace@example.com';
    const unknown = 'nobody-here@example.com';
    const d = await device(id);
    for (const [what, ask] of [
      ['sign-in page', (email: string) => page(id, email, WRONG, '10.7.0.1')],
      ['device page', (email: string) => approve(id, d.userCode, email, WRONG, '10.7.0.1')],
    ] as const) {
      const a = await ask(known);
      const b = await ask(unknown);
      t.equal(a.status, b.status, `${what}: same status for a wrong password`);
      t.equal(normalised(a.body, known), normalised(b.body, unknown), `${what}: same page`);
    }
    // Three more each on /auth/login: five failures for both addresses.
    for (let i = 0; i < 3; i++) {
      const a = await login(id, known, WRONG, '10.7.0.2');
      const b = await login(id, unknown, WRONG, '10.7.0.2');
      t.equal(a.status, 401);
      t.same(a.json, b.json);
    }
    const pages = [await page(id, known, PASSWORD, '10.7.0.3'), await page(id, unknown, PASSWORD, '10.7.0.3')] as const;
    throttledPage(t, pages[0], 'known account');
    throttledPage(t, pages[1], 'unknown account');
    t.equal(normalised(pages[0].body, known), normalised(pages[1].body, unknown), 'the same throttled page');
    const devices = [
      await approve(id, d.userCode, known, PASSWORD, '10.7.0.3'),
      await approve(id, d.userCode, unknown, PASSWORD, '10.7.0.3'),
    ] as const;
    t.equal(devices[0].status, 429);
    t.equal(devices[1].status, 429);
    t.equal(normalised(devices[0].body, known), normalised(devices[1].body, unknown), 'the same throttled device page');
  });
});

t.test('per client address: failures on other accounts from one address throttle the pages for any account', async (t) => {
  const id = await startTestIdentity(t, 'identity_sign_in_throttle_ip', {
    IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT: '100',
    IDENTITY_LOGIN_MAX_FAILURES_PER_IP: '3',
    SERVICE_SECRET: SECRET,
  });
  await clients(id);
  await id.signup('victim@example.com', PASSWORD);
  for (const email of ['a@example.com', 'b@example.com']) t.equal((await login(id, email, WRONG, '10.9.0.1')).status, 401);
  t.equal((await page(id, 'c@example.com', WRONG, '10.9.0.1')).status, 200, 'the third failure, on the page');
  throttledPage(t, await page(id, 'victim@example.com', PASSWORD, '10.9.0.1'), 'sign-in page from that address');
  const d = await device(id);
  throttledPage(t, await approve(id, d.userCode, 'victim@example.com', PASSWORD, '10.9.0.1'), 'device page from that address');
  t.equal((await login(id, 'victim@example.com', PASSWORD, '10.9.0.1')).status, 429, '/auth/login from that address');
  const elsewhere = await page(id, 'victim@example.com', PASSWORD, '10.9.0.2');
  t.equal(elsewhere.status, 303, 'another address is not throttled');
});
