/**
 * The OAuth 2.0 Security Best Current Practice (RFC 9700) checks and the RFC error forms, over
 * real HTTP: exact redirect_uri matching (every near-miss refused, never redirected to), PKCE
 * required and S256 only (downgrades refused), codes single-use, short-lived and bound to the
 * client, the redirect URI and the challenge; implicit and password refused; every OAuth error in
 * its RFC shape and status, with no token or secret in any error body or log line.
 */
import t from 'tap';
import { s256 } from '../../../identity/oauth/pkce.js';
import { basic, browserSignIn, postForm, startOAuthServer, type OAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/cb';
const PASSWORD = 'correct horse battery staple';
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const CHALLENGE = s256(VERIFIER);

function authorizeUrl(srv: OAuthServer, params: Record<string, string>): string {
  const base: Record<string, string> = {
    response_type: 'code',
    client_id: 'web-app',
    redirect_uri: REDIRECT,
    scope: 'openid read:orders',
    state: 'st-123',
    code_challenge: CHALLENGE,
    code_challenge_method: 'S256',
  };
  const merged = { ...base, ...params };
  for (const [k, v] of Object.entries(merged)) if (v === '') delete merged[k];
  return `${srv.issuer}/authorize?${new URLSearchParams(merged).toString()}`;
}

/** A code for the standard request (signed in through the page). */
async function code(srv: OAuthServer, params: Record<string, string> = {}): Promise<string> {
  const r = await browserSignIn(authorizeUrl(srv, params), 'u1@example.com', PASSWORD);
  const c = new URL(r.location!).searchParams.get('code');
  if (!c) throw new Error(`no code: ${r.location}`);
  return c;
}

async function exchange(srv: OAuthServer, form: Record<string, string>): ReturnType<typeof postForm> {
  return postForm(`${srv.issuer}/token`, {
    grant_type: 'authorization_code',
    client_id: 'web-app',
    redirect_uri: REDIRECT,
    code_verifier: VERIFIER,
    ...form,
  });
}

t.test('RFC 9700 over one server', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_rfc9700');
  await srv.publicClient('web-app', [REDIRECT, 'http://127.0.0.1:8765/cb', 'https://app.example/cb2?tenant=a'], {
    scope: 'openid profile read:orders',
  });
  await srv.publicClient('other-app', ['https://other.example/cb']);
  await srv.publicClient('tv-app', ['https://tv.example/cb'], { grant_types: ['urn:ietf:params:oauth:grant-type:device_code'] });
  const { clientId: confId, clientSecret: confSecret } = await srv.confidentialClient('svc', { scope: 'read:orders write:orders' });
  await srv.user('u1', 'u1@example.com', PASSWORD);
  const issued: string[] = [confSecret];

  await t.test('redirect_uri is matched exactly: every variant is refused with 400 and never redirected to', async (t) => {
    const variants: [string, string][] = [
      ['prefix (longer path)', 'https://app.example/cb/evil'],
      ['prefix (path segment)', 'https://app.example/cbx'],
      ['suffix on the host', 'https://app.example.evil.com/cb'],
      ['other host with our host as a prefix', 'https://app.exampleevil.com/cb'],
      ['path traversal', 'https://app.example/cb/../admin'],
      ['encoded path', 'https://app.example/%63b'],
      ['trailing slash', 'https://app.example/cb/'],
      ['added query', 'https://app.example/cb?next=https://evil.com'],
      ['query variant of a registered query', 'https://app.example/cb2?tenant=b'],
      ['registered query dropped', 'https://app.example/cb2'],
      ['fragment', 'https://app.example/cb#x'],
      ['scheme downgrade', 'http://app.example/cb'],
      ['upper-case host', 'https://APP.example/cb'],
      ['explicit default port', 'https://app.example:443/cb'],
      ['userinfo in authority', 'https://app.example@evil.com/cb'],
      ['loopback with another port', 'http://127.0.0.1:8766/cb'],
      ["another client's URI", 'https://other.example/cb'],
    ];
    for (const [name, uri] of variants) {
      const res = await fetch(authorizeUrl(srv, { redirect_uri: uri }), { redirect: 'manual' });
      const body = (await res.json()) as Record<string, unknown>;
      t.equal(res.status, 400, `${name}: 400`);
      t.equal(res.headers.get('location'), null, `${name}: no redirect`);
      t.match(res.headers.get('content-type'), /application\/problem\+json/, `${name}: problem+json`);
      t.match(body, { code: 'invalid_field', field: 'redirect_uri' }, `${name}: names redirect_uri`);
    }
    const missing = await fetch(authorizeUrl(srv, { redirect_uri: '' }), { redirect: 'manual' });
    t.equal(missing.status, 400, 'a missing redirect_uri is refused too (it is required)');
    const unknownClient = await fetch(authorizeUrl(srv, { client_id: 'nope' }), { redirect: 'manual' });
    t.match(await unknownClient.json(), { code: 'invalid_field', field: 'client_id' }, 'an unknown client is not redirected');
    const dupRedirect = `${authorizeUrl(srv, {})}&redirect_uri=${encodeURIComponent('https://evil.example/cb')}`;
    const dup = await fetch(dupRedirect, { redirect: 'manual' });
    t.equal(dup.status, 400, 'a second redirect_uri is refused, not redirected');
    // The registered forms themselves work, query included.
    for (const ok of ['http://127.0.0.1:8765/cb', 'https://app.example/cb2?tenant=a']) {
      const res = await fetch(authorizeUrl(srv, { redirect_uri: ok }), { redirect: 'manual' });
      t.equal(res.status, 200, `registered ${ok}: sign-in page`);
      await res.text();
    }
  });

  await t.test('the redirect keeps a registered query and adds code, state and iss', async (t) => {
    const r = await browserSignIn(authorizeUrl(srv, { redirect_uri: 'https://app.example/cb2?tenant=a' }), 'u1@example.com', PASSWORD);
    const u = new URL(r.location!);
    t.equal(u.searchParams.get('tenant'), 'a');
    t.equal(u.searchParams.get('state'), 'st-123');
    t.equal(u.searchParams.get('iss'), srv.issuer);
    t.match(u.searchParams.get('code'), /^[A-Za-z0-9_-]{43}$/);
  });

  await t.test('PKCE is required and S256 only: errors go back to the client with state', async (t) => {
    const cases: [string, Record<string, string>, string][] = [
      ['no code_challenge', { code_challenge: '', code_challenge_method: '' }, 'invalid_request'],
      ['challenge without a method (plain by default)', { code_challenge_method: '' }, 'invalid_request'],
      ['plain', { code_challenge_method: 'plain', code_challenge: VERIFIER }, 'invalid_request'],
      ['a challenge that is not S256-shaped', { code_challenge: 'short' }, 'invalid_request'],
    ];
    for (const [name, params, error] of cases) {
      const res = await fetch(authorizeUrl(srv, params), { redirect: 'manual' });
      t.equal(res.status, 303, `${name}: redirected to the client`);
      const u = new URL(res.headers.get('location')!);
      t.equal(`${u.origin}${u.pathname}`, REDIRECT);
      t.equal(u.searchParams.get('error'), error, `${name}: ${error}`);
      t.equal(u.searchParams.get('state'), 'st-123', `${name}: state echoed`);
      t.equal(u.searchParams.get('iss'), srv.issuer);
      t.equal(u.searchParams.get('code'), null);
      await res.text();
    }
  });

  await t.test('PKCE downgrade: a token request without code_verifier, or with a wrong one, is refused', async (t) => {
    const c = await code(srv);
    const none = await postForm(`${srv.issuer}/token`, {
      grant_type: 'authorization_code',
      client_id: 'web-app',
      redirect_uri: REDIRECT,
      code: c,
    });
    t.equal(none.status, 400);
    t.equal(none.json.error, 'invalid_request');
    const wrong = await exchange(srv, { code: c, code_verifier: 'x'.repeat(43) });
    t.equal(wrong.json.error, 'invalid_grant');
    t.equal(wrong.json.error_description, 'PKCE verification failed');
    const plainVerifier = await exchange(srv, { code: c, code_verifier: CHALLENGE });
    t.equal(plainVerifier.json.error, 'invalid_grant', 'sending the challenge itself as the verifier (plain) fails');
    const ok = await exchange(srv, { code: c });
    t.equal(ok.status, 200, 'failed attempts did not burn the code for the real client');
    issued.push(ok.json.access_token as string, ok.json.refresh_token as string, ok.json.id_token as string, c);
  });

  await t.test('the code is bound to the client and to the redirect_uri', async (t) => {
    const c = await code(srv);
    const otherClient = await exchange(srv, { code: c, client_id: 'other-app' });
    t.equal(otherClient.json.error, 'invalid_grant', 'another client');
    const otherRedirect = await exchange(srv, { code: c, redirect_uri: 'http://127.0.0.1:8765/cb' });
    t.equal(otherRedirect.json.error, 'invalid_grant', 'another registered redirect_uri');
    const noRedirect = await postForm(`${srv.issuer}/token`, {
      grant_type: 'authorization_code',
      client_id: 'web-app',
      code: c,
      code_verifier: VERIFIER,
    });
    t.equal(noRedirect.json.error, 'invalid_request', 'redirect_uri is required');
    t.equal((await exchange(srv, { code: c })).status, 200);
  });

  await t.test('codes are single-use: the second redemption is invalid_grant', async (t) => {
    const c = await code(srv);
    const first = await exchange(srv, { code: c });
    t.equal(first.status, 200);
    const second = await exchange(srv, { code: c });
    t.equal(second.status, 400);
    t.equal(second.json.error, 'invalid_grant');
  });

  await t.test('two concurrent redemptions of one code: exactly one wins', async (t) => {
    const c = await code(srv);
    const results = await Promise.all([exchange(srv, { code: c }), exchange(srv, { code: c })]);
    t.same(results.map((r) => r.status).sort(), [200, 400]);
  });

  await t.test('codes are short-lived: past IDENTITY_AUTH_CODE_TTL (60 s) the code is refused', async (t) => {
    const c = await code(srv);
    srv.clock.advance(61_000);
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    const res = await exchange(srv, { code: c });
    t.equal(res.json.error, 'invalid_grant');
    t.equal(res.json.error_description, 'the authorization code has expired');
  });

  await t.test('implicit and hybrid response types are refused (unsupported_response_type)', async (t) => {
    for (const rt of ['token', 'id_token', 'code id_token', 'code token']) {
      const res = await fetch(authorizeUrl(srv, { response_type: rt }), { redirect: 'manual' });
      t.equal(res.status, 303, `${rt}: redirected`);
      t.equal(
        new URL(res.headers.get('location')!).searchParams.get('error'),
        'unsupported_response_type',
        `${rt}: unsupported_response_type`,
      );
      await res.text();
    }
  });

  await t.test('the password and implicit grants, and unknown grants, are unsupported_grant_type', async (t) => {
    for (const g of ['password', 'implicit', 'urn:ietf:params:oauth:grant-type:jwt-bearer', 'nonsense']) {
      const res = await postForm(`${srv.issuer}/token`, {
        grant_type: g,
        username: 'u1@example.com',
        password: PASSWORD,
        client_id: 'web-app',
      });
      t.equal(res.status, 400, `${g}: 400`);
      t.same(Object.keys(res.json).sort(), ['error', 'error_description'], `${g}: RFC 6749 error body`);
      t.equal(res.json.error, 'unsupported_grant_type', `${g}: unsupported_grant_type`);
    }
  });

  await t.test('OAuth errors in their RFC form with the right status', async (t) => {
    const cases: [string, Record<string, string>, Record<string, string>, number, string][] = [
      ['no grant_type', { client_id: 'web-app' }, {}, 400, 'invalid_request'],
      ['unknown client', { grant_type: 'client_credentials', client_id: 'ghost' }, {}, 401, 'invalid_client'],
      ['wrong secret (post)', { grant_type: 'client_credentials', client_id: confId, client_secret: 'wrong' }, {}, 401, 'invalid_client'],
      ['wrong secret (basic)', { grant_type: 'client_credentials' }, { authorization: basic(confId, 'wrong') }, 401, 'invalid_client'],
      ['confidential client without its secret', { grant_type: 'client_credentials', client_id: confId }, {}, 401, 'invalid_client'],
      [
        'two auth methods',
        { grant_type: 'client_credentials', client_secret: confSecret },
        { authorization: basic(confId, confSecret) },
        400,
        'invalid_request',
      ],
      [
        'public client asking client_credentials',
        { grant_type: 'client_credentials', client_id: 'web-app' },
        {},
        400,
        'unauthorized_client',
      ],
      [
        'grant not registered for the client',
        { grant_type: 'refresh_token', refresh_token: 'x'.repeat(43) },
        { authorization: basic(confId, confSecret) },
        400,
        'unauthorized_client',
      ],
      [
        'scope not allowed',
        { grant_type: 'client_credentials', scope: 'delete:everything' },
        { authorization: basic(confId, confSecret) },
        400,
        'invalid_scope',
      ],
      [
        'malformed scope',
        { grant_type: 'client_credentials', scope: 'admin' },
        { authorization: basic(confId, confSecret) },
        400,
        'invalid_scope',
      ],
      [
        'unknown code',
        { grant_type: 'authorization_code', client_id: 'web-app', code: 'x'.repeat(43), redirect_uri: REDIRECT, code_verifier: VERIFIER },
        {},
        400,
        'invalid_grant',
      ],
      [
        'unknown refresh token',
        { grant_type: 'refresh_token', client_id: 'web-app', refresh_token: 'y'.repeat(43) },
        {},
        400,
        'invalid_grant',
      ],
    ];
    for (const [name, form, headers, status, error] of cases) {
      const res = await postForm(`${srv.issuer}/token`, form, headers);
      t.equal(res.status, status, `${name}: ${status}`);
      t.equal(res.json.error, error, `${name}: ${error}`);
      t.type(res.json.error_description, 'string', `${name}: described`);
      t.equal(res.headers.get('cache-control'), 'no-store', `${name}: no-store`);
      t.match(res.headers.get('content-type'), /^application\/json/, `${name}: JSON, not problem+json`);
      if (status === 401) t.match(res.headers.get('www-authenticate'), /^Basic realm="identity"/, `${name}: Basic challenge`);
    }
    const ct = await fetch(`${srv.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"grant_type":"client_credentials"}',
    });
    t.equal(ct.status, 400);
    t.match(await ct.json(), { error: 'invalid_request' }, 'a JSON body is invalid_request');
    const dup = await fetch(`${srv.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(confId, confSecret) },
      body: 'grant_type=client_credentials&scope=read:orders&scope=write:orders',
    });
    t.match(await dup.json(), { error: 'invalid_request' }, 'a repeated parameter is invalid_request');
  });

  await t.test('authorization errors after the redirect URI is known: invalid_scope, unauthorized_client, login_required', async (t) => {
    const scope = await fetch(authorizeUrl(srv, { scope: 'openid delete:everything' }), { redirect: 'manual' });
    t.equal(new URL(scope.headers.get('location')!).searchParams.get('error'), 'invalid_scope');
    await scope.text();
    const tv = await fetch(authorizeUrl(srv, { client_id: 'tv-app', redirect_uri: 'https://tv.example/cb' }), { redirect: 'manual' });
    t.equal(new URL(tv.headers.get('location')!).searchParams.get('error'), 'unauthorized_client', 'a client without the code grant');
    await tv.text();
    const prompt = await fetch(authorizeUrl(srv, { prompt: 'none' }), { redirect: 'manual' });
    t.equal(new URL(prompt.headers.get('location')!).searchParams.get('error'), 'login_required');
    await prompt.text();
    const dupState = await fetch(`${authorizeUrl(srv, {})}&code_challenge=${CHALLENGE}`, { redirect: 'manual' });
    t.equal(new URL(dupState.headers.get('location')!).searchParams.get('error'), 'invalid_request', 'a repeated parameter');
    await dupState.text();
  });

  await t.test('no token, code or secret appears in any error body or in any log line', async (t) => {
    const errors = [
      await exchange(srv, { code: issued[4] ?? 'x'.repeat(43) }),
      await postForm(`${srv.issuer}/token`, {
        grant_type: 'refresh_token',
        client_id: 'web-app',
        refresh_token: issued[2] ?? 'z'.repeat(43),
      }),
      await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials', client_id: confId, client_secret: `${confSecret}x` }),
    ];
    const logs = srv.logText();
    t.ok(logs.length > 0, 'something was logged');
    for (const secret of issued.filter((s) => s !== undefined && s.length > 0)) {
      for (const e of errors) t.notOk(e.text.includes(secret), 'not in an error body');
      t.notOk(logs.includes(secret), 'not in the log');
    }
    t.notOk(logs.includes(PASSWORD), 'no password in the log');
    t.notOk(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./.test(logs), 'no JWT in the log');
    t.notOk(logs.includes('PRIVATE KEY'), 'no private key in the log');
  });
});
