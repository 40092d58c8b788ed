/**
 * Login CSRF on the sign-in page (`POST /authorize`) and the device page (`POST /auth/device`),
 * the reproduction in its exact header equivalent: another site auto-posting the form
 * with the attacker's credentials (`Sec-Fetch-Site: cross-site`, `Origin: https://evil.example`)
 * must not get a code or an approval, and neither must a post without the page's anti-forgery
 * token (missing, made up, another browser's, another request's, expired, used). Both refusals
 * come before the password is checked: a wrong password refused this way is not counted by the
 * throttle. The genuine flow (open the page, post its form) still ends in tokens.
 */
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { waitFor } from '../../harness/wait.js';
import { browserApproveDevice, browserSignIn, cookieOf, hiddenInputs, postForm, startOAuthServer, type OAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/cb';
const PASSWORD = 'correct horse battery staple';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const EVIL = { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' };
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

function authorizeUrl(srv: OAuthServer, challenge: string, state = 'st-1'): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'web-app',
    redirect_uri: REDIRECT,
    scope: 'openid read:orders',
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  return `${srv.issuer}/authorize?${q.toString()}`;
}

interface OpenedPage {
  /** The form as the page would post it (hidden inputs, then the credentials). */
  form: URLSearchParams;
  /** The browser's form cookie (`name=value`). */
  cookie: string;
  setCookie: string;
}

async function openSignIn(url: string, cookie?: string): Promise<OpenedPage> {
  const page = await fetch(url, { headers: cookie ? { cookie } : {} });
  const html = await page.text();
  if (page.status !== 200) throw new Error(`sign-in page: ${page.status} ${html}`);
  const form = hiddenInputs(html);
  return { form, cookie: cookieOf(page), setCookie: page.headers.get('set-cookie') ?? '' };
}

function withCredentials(form: URLSearchParams, email: string, password: string): URLSearchParams {
  const f = new URLSearchParams(form);
  f.set('email', email);
  f.set('password', password);
  f.set('action', 'approve');
  return f;
}

interface Posted {
  status: number;
  location: string | undefined;
  contentType: string;
  headers: Headers;
  body: string;
}

async function post(srv: OAuthServer, path: string, form: URLSearchParams, headers: Record<string, string>): Promise<Posted> {
  const res = await fetch(`${srv.issuer}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: BROWSER_ACCEPT, ...headers },
    body: form.toString(),
    redirect: 'manual',
  });
  return {
    status: res.status,
    location: res.headers.get('location') ?? undefined,
    contentType: res.headers.get('content-type') ?? '',
    headers: res.headers,
    body: await res.text(),
  };
}

async function count(srv: OAuthServer, table: 'authorization_codes' | 'login_failures'): Promise<number> {
  const { rows } = await srv.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0]!.n;
}

function sameOrigin(srv: OAuthServer, cookie: string): Record<string, string> {
  return { 'sec-fetch-site': 'same-origin', origin: srv.issuer, cookie };
}

t.test('the sign-in page', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_login_csrf');
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
  await srv.user('victim', 'victim@example.com', PASSWORD);
  await srv.user('attacker', 'attacker@example.com', PASSWORD);

  await t.test('a cross-site post is refused with 403 before anything, even carrying a valid token and cookie', async (t) => {
    const { challenge } = pkce();
    // The worst case: the post carries everything a genuine one would, except where it came from.
    const page = await openSignIn(authorizeUrl(srv, challenge));
    const attack = withCredentials(page.form, 'attacker@example.com', PASSWORD);
    const r = await post(srv, '/authorize', attack, { ...EVIL, cookie: page.cookie });
    t.equal(r.status, 403);
    t.equal(r.location, undefined, 'no redirect: no code for the attacker account reaches the callback');
    t.match(r.contentType, /^text\/html/, 'an HTML page for a browser');
    t.equal(r.headers.get('x-frame-options'), 'DENY');
    t.match(r.headers.get('content-security-policy'), /default-src 'none'/);
    t.equal(await count(srv, 'authorization_codes'), 0, 'no code was issued');

    const sameSite = await post(srv, '/authorize', attack, { 'sec-fetch-site': 'same-site', cookie: page.cookie });
    t.equal(sameSite.status, 403, 'Sec-Fetch-Site: same-site (a sibling subdomain) is refused too');
    const json = await post(srv, '/authorize', attack, { ...EVIL, cookie: page.cookie, accept: 'application/json' });
    t.equal(json.status, 403);
    t.match(JSON.parse(json.body), { code: 'cross_site_request', status: 403 }, 'problem+json for an API client');

    const wrong = await post(srv, '/authorize', withCredentials(page.form, 'victim@example.com', 'a guess'), {
      ...EVIL,
      cookie: page.cookie,
    });
    t.equal(wrong.status, 403);
    t.equal(await count(srv, 'login_failures'), 0, 'the password was not checked: no failure counted');
    t.equal(await count(srv, 'authorization_codes'), 0);
  });

  await t.test('without Sec-Fetch-Site, an Origin other than the issuer (or null) is refused; the issuer origin is accepted', async (t) => {
    const { challenge } = pkce();
    const page = await openSignIn(authorizeUrl(srv, challenge));
    const form = withCredentials(page.form, 'victim@example.com', PASSWORD);
    for (const origin of ['https://evil.example', 'null', `${srv.issuer}.evil.example`, 'not a url']) {
      const r = await post(srv, '/authorize', form, { origin, cookie: page.cookie });
      t.equal(r.status, 403, `Origin: ${origin}`);
      t.equal(r.location, undefined);
    }
    t.equal(await count(srv, 'authorization_codes'), 0);
    const ok = await post(srv, '/authorize', form, { origin: srv.issuer, cookie: page.cookie });
    t.equal(ok.status, 303, 'our own origin, with the token');
    t.ok(new URL(ok.location!).searchParams.get('code'));
  });

  await t.test('a missing or wrong anti-forgery token is refused (403) before the password is checked', async (t) => {
    const before = await count(srv, 'authorization_codes');
    const { challenge } = pkce();
    const victimPage = await openSignIn(authorizeUrl(srv, challenge));
    const genuine = withCredentials(victimPage.form, 'attacker@example.com', PASSWORD);

    const missing = new URLSearchParams(genuine);
    missing.delete('csrf_token');
    const madeUp = new URLSearchParams(genuine);
    madeUp.set('csrf_token', randomBytes(32).toString('base64url'));
    // The attacker opens the same authorization request in their own browser: a token bound to their cookie.
    const attackerPage = await openSignIn(authorizeUrl(srv, challenge));
    t.not(attackerPage.cookie, victimPage.cookie, 'each browser gets its own cookie');
    const attackersToken = new URLSearchParams(genuine);
    attackersToken.set('csrf_token', attackerPage.form.get('csrf_token')!);
    // A token of another authorization request (another state) in this browser.
    const otherRequest = await openSignIn(authorizeUrl(srv, challenge, 'st-other'), victimPage.cookie);
    t.equal(otherRequest.cookie, victimPage.cookie, 'the browser keeps its cookie across pages');
    const otherRequestsToken = new URLSearchParams(genuine);
    otherRequestsToken.set('csrf_token', otherRequest.form.get('csrf_token')!);

    const cases: [string, URLSearchParams, string][] = [
      ['no token', missing, victimPage.cookie],
      ['a made-up token', madeUp, victimPage.cookie],
      ["another browser's token", attackersToken, victimPage.cookie],
      ['the right token without its cookie', genuine, ''],
      ["another request's token", otherRequestsToken, victimPage.cookie],
    ];
    for (const [name, form, cookie] of cases) {
      const r = await post(srv, '/authorize', form, { 'sec-fetch-site': 'same-origin', origin: srv.issuer, cookie });
      t.equal(r.status, 403, name);
      t.equal(r.location, undefined, `${name}: no redirect`);
      t.match(r.contentType, /^text\/html/, `${name}: an HTML page`);
      t.match(
        r.body,
        /<a href="\/authorize\?[^"]*client_id=web-app[^"]*">Start signing in again<\/a>/,
        `${name}: a way back to a fresh form`,
      );
    }
    const json = await post(srv, '/authorize', missing, { ...sameOrigin(srv, victimPage.cookie), accept: 'application/json' });
    t.match(JSON.parse(json.body), { code: 'invalid_form_token', status: 403 });
    t.equal(await count(srv, 'authorization_codes'), before, 'no code for any of them');

    const failures = await count(srv, 'login_failures');
    const wrongPassword = withCredentials(missing, 'victim@example.com', 'a guess');
    t.equal((await post(srv, '/authorize', wrongPassword, sameOrigin(srv, victimPage.cookie))).status, 403);
    t.equal(await count(srv, 'login_failures'), failures, 'the password was not checked: no failure counted');

    const ok = await post(srv, '/authorize', genuine, sameOrigin(srv, victimPage.cookie));
    t.equal(ok.status, 303, 'the genuine post of that same page still works');
    const again = await post(srv, '/authorize', genuine, sameOrigin(srv, victimPage.cookie));
    t.equal(again.status, 403, 'a used form cannot be posted again');
  });

  await t.test('an expired form is refused', async (t) => {
    const { challenge } = pkce();
    const page = await openSignIn(authorizeUrl(srv, challenge));
    srv.clock.advance(30 * 60_000 + 1000);
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    const r = await post(srv, '/authorize', withCredentials(page.form, 'victim@example.com', PASSWORD), sameOrigin(srv, page.cookie));
    t.equal(r.status, 403);
    t.equal(r.location, undefined);
  });

  await t.test('the genuine flow: open the page, post its form with its token, exchange the code', async (t) => {
    const { verifier, challenge } = pkce();
    const page = await openSignIn(authorizeUrl(srv, challenge));
    t.match(page.setCookie, /^identity-form=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=1800$/);
    t.match(page.form.get('csrf_token'), /^[A-Za-z0-9_-]{43}$/, 'the page embeds its token');
    const r = await browserSignIn(authorizeUrl(srv, challenge), 'victim@example.com', PASSWORD);
    t.equal(r.status, 303);
    const cb = new URL(r.location!);
    t.equal(cb.searchParams.get('state'), 'st-1');
    const tokens = await postForm(`${srv.issuer}/token`, {
      grant_type: 'authorization_code',
      code: cb.searchParams.get('code')!,
      redirect_uri: REDIRECT,
      client_id: 'web-app',
      code_verifier: verifier,
    });
    t.equal(tokens.status, 200);
    t.type(tokens.json.access_token, 'string');
    t.type(tokens.json.id_token, 'string');

    const cancel = await browserSignIn(authorizeUrl(srv, challenge), '', '', 'deny');
    t.equal(new URL(cancel.location!).searchParams.get('error'), 'access_denied', 'cancel still works with the token');
  });
  await t.test('expired form tokens are purged by a later page; live ones stay', async (t) => {
    const { challenge } = pkce();
    const old = await openSignIn(authorizeUrl(srv, challenge));
    srv.clock.advance(31 * 60_000);
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    const fresh = await openSignIn(authorizeUrl(srv, challenge));
    const rowOf = async (token: string): Promise<number> =>
      (await srv.pool.query('SELECT 1 FROM sign_in_forms WHERE token_sha256 = $1', [createHash('sha256').update(token).digest()]))
        .rowCount ?? 0;
    await waitFor(async () => (await rowOf(old.form.get('csrf_token')!)) === 0, { what: 'the expired token to be purged' });
    const expired = await srv.pool.query('SELECT 1 FROM sign_in_forms WHERE expires_at <= $1', [new Date(srv.clock.now())]);
    t.equal(expired.rowCount, 0, 'no expired token is left');
    t.equal(await rowOf(fresh.form.get('csrf_token')!), 1, 'the live one stays');
  });
});

t.test('the device page', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_device_csrf');
  await srv.publicClient('tv-app', [], { grant_types: [DEVICE_GRANT], scope: 'openid read:orders' });
  await srv.user('victim', 'victim@example.com', PASSWORD);
  await srv.user('attacker', 'attacker@example.com', PASSWORD);

  const start = async (): Promise<{ deviceCode: string; userCode: string }> => {
    const r = await postForm(`${srv.issuer}/auth/device_authorization`, { client_id: 'tv-app', scope: 'openid' });
    return { deviceCode: r.json.device_code as string, userCode: r.json.user_code as string };
  };
  const poll = async (deviceCode: string): Promise<unknown> =>
    (await postForm(`${srv.issuer}/token`, { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: 'tv-app' })).json.error;
  const open = async (userCode: string, cookie?: string): Promise<OpenedPage> => {
    const page = await fetch(`${srv.issuer}/auth/device?user_code=${encodeURIComponent(userCode)}`, { headers: cookie ? { cookie } : {} });
    const form = hiddenInputs(await page.text());
    if (!form.has('csrf_token')) throw new Error(`no approval form: ${page.status}`);
    return { form, cookie: cookieOf(page), setCookie: page.headers.get('set-cookie') ?? '' };
  };

  await t.test('a cross-site post is refused; the device stays pending', async (t) => {
    const d = await start();
    const page = await open(d.userCode);
    const r = await post(srv, '/auth/device', withCredentials(page.form, 'attacker@example.com', PASSWORD), {
      ...EVIL,
      cookie: page.cookie,
    });
    t.equal(r.status, 403);
    t.match(r.contentType, /^text\/html/);
    t.equal(await poll(d.deviceCode), 'authorization_pending', 'not approved');
    const nullOrigin = await post(srv, '/auth/device', withCredentials(page.form, 'attacker@example.com', PASSWORD), {
      origin: 'null',
      cookie: page.cookie,
    });
    t.equal(nullOrigin.status, 403, 'Origin: null without Sec-Fetch-Site');
    t.equal(await count(srv, 'login_failures'), 0);
  });

  await t.test('a missing token, or one bound to another device code, is refused before the password', async (t) => {
    const d = await start();
    const other = await start();
    const page = await open(d.userCode);
    const otherPage = await open(other.userCode, page.cookie);
    const missing = withCredentials(page.form, 'attacker@example.com', PASSWORD);
    missing.delete('csrf_token');
    const otherToken = withCredentials(page.form, 'attacker@example.com', PASSWORD);
    otherToken.set('csrf_token', otherPage.form.get('csrf_token')!);
    const noCookie = withCredentials(page.form, 'attacker@example.com', PASSWORD);
    for (const [name, form, cookie] of [
      ['no token', missing, page.cookie],
      ["another device code's token", otherToken, page.cookie],
      ['no cookie', noCookie, ''],
    ] as const) {
      const r = await post(srv, '/auth/device', form, { 'sec-fetch-site': 'same-origin', cookie });
      t.equal(r.status, 403, name);
      t.match(r.body, /Start again/);
    }
    const guess = withCredentials(missing, 'victim@example.com', 'a guess');
    t.equal((await post(srv, '/auth/device', guess, { 'sec-fetch-site': 'same-origin', cookie: page.cookie })).status, 403);
    t.equal(await count(srv, 'login_failures'), 0, 'no password was checked');
    t.equal(await poll(d.deviceCode), 'authorization_pending');
    t.equal(await poll(other.deviceCode), 'authorization_pending');
  });

  await t.test('the genuine flow approves the device', async (t) => {
    const d = await start();
    const r = await browserApproveDevice(srv.issuer, d.userCode, 'victim@example.com', PASSWORD);
    t.equal(r.status, 200);
    t.match(r.body, 'Device connected');
    const tokens = await postForm(`${srv.issuer}/token`, { grant_type: DEVICE_GRANT, device_code: d.deviceCode, client_id: 'tv-app' });
    t.equal(tokens.status, 200);
    t.type(tokens.json.access_token, 'string');
  });
});
