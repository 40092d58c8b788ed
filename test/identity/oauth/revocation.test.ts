/**
 * Token revocation (RFC 7009, `POST /revoke`) and the revocation list
 * (`/.well-known/revoked-tokens.json`), over real HTTP and PostgreSQL: client authentication as at
 * /token, `token_type_hint` (a wrong hint still finds the token), 200 for anything unknown, a client
 * revokes only its own tokens, a refresh token ends its family and an access token itself, the
 * list publishes both with their expiry and answers 304 to its ETag; openid-client's
 * `tokenRevocation` against it. What reaches the sidecar: test/e2e/token-revocation.test.ts.
 */
import t from 'tap';
import * as client from 'openid-client';
import { s256 } from '../../../identity/oauth/pkce.js';
import { listRevoked } from '../../../identity/tokens/revocation-store.js';
import { revocationDocument } from '../../../identity/oauth/revocation-list.js';
import { basic, browserSignIn, decodeJwt, postForm, startOAuthServer, type OAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/cb';
const PASSWORD = 'correct horse battery staple';
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';

interface Tokens {
  access: string;
  refresh: string;
  sid: string;
  jti: string;
}

/** A sign-in of u1 through the sign-in page and the code exchange, for a public or confidential client. */
async function signIn(srv: OAuthServer, clientId: string, secret?: string): Promise<Tokens> {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    scope: 'openid read:orders',
    code_challenge: s256(VERIFIER),
    code_challenge_method: 'S256',
  });
  const r = await browserSignIn(`${srv.issuer}/authorize?${q.toString()}`, 'u1@example.com', PASSWORD);
  const code = new URL(r.location!).searchParams.get('code')!;
  const form: Record<string, string> = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: VERIFIER };
  if (secret === undefined) form.client_id = clientId;
  const res = await postForm(`${srv.issuer}/token`, form, secret === undefined ? {} : { authorization: basic(clientId, secret) });
  if (res.status !== 200) throw new Error(`exchange failed: ${res.text}`);
  const access = res.json.access_token as string;
  const claims = decodeJwt(access).payload;
  return { access, refresh: res.json.refresh_token as string, sid: claims.sid as string, jti: claims.jti as string };
}

const userinfo = async (srv: OAuthServer, token: string): Promise<number> => {
  const r = await fetch(`${srv.issuer}/userinfo`, { headers: { authorization: `Bearer ${token}` } });
  await r.arrayBuffer();
  return r.status;
};

async function refreshStatus(srv: OAuthServer, token: string, clientId: string, secret?: string): Promise<number> {
  const form: Record<string, string> = { grant_type: 'refresh_token', refresh_token: token };
  if (secret === undefined) form.client_id = clientId;
  return (await postForm(`${srv.issuer}/token`, form, secret === undefined ? {} : { authorization: basic(clientId, secret) })).status;
}

t.test('POST /revoke (RFC 7009)', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_revoke');
  await srv.user('u1', 'u1@example.com', PASSWORD);
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
  await srv.publicClient('other-app', [REDIRECT], { scope: 'openid read:orders' });
  const conf = await srv.confidentialClient('backend', {
    redirect_uris: [REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    scope: 'openid read:orders',
  });
  const revoke = (form: Record<string, string>, headers: Record<string, string> = {}) => postForm(`${srv.issuer}/revoke`, form, headers);
  const introspect = async (token: string): Promise<boolean> => {
    const r = await postForm(`${srv.issuer}/auth/introspect`, { token }, { authorization: basic(conf.clientId, conf.clientSecret) });
    return r.json.active === true;
  };

  await t.test('discovery advertises the endpoint and its client authentication methods', async (t) => {
    const meta = (await (await fetch(`${srv.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    t.equal(meta.revocation_endpoint, `${srv.issuer}/revoke`);
    t.same(meta.revocation_endpoint_auth_methods_supported, ['client_secret_basic', 'client_secret_post', 'none']);
  });

  await t.test('errors: no token is invalid_request, bad client authentication is invalid_client', async (t) => {
    const none = await revoke({ client_id: 'web-app' });
    t.equal(none.status, 400);
    t.equal(none.json.error, 'invalid_request');
    t.match(none.json.error_description, /token/);
    const wrongSecret = await revoke({ token: 'x' }, { authorization: basic(conf.clientId, 'not-the-secret') });
    t.equal(wrongSecret.status, 401);
    t.equal(wrongSecret.json.error, 'invalid_client');
    t.match(wrongSecret.headers.get('www-authenticate'), /^Basic /, 'with a Basic challenge');
    const unknown = await revoke({ token: 'x', client_id: 'nobody' });
    t.equal(unknown.status, 401);
    t.equal(unknown.json.error, 'invalid_client');
    const confidentialWithoutSecret = await revoke({ token: 'x', client_id: conf.clientId });
    t.equal(confidentialWithoutSecret.status, 401, 'a confidential client must authenticate');
    const noClient = await revoke({ token: 'x' });
    t.equal(noClient.status, 401, 'no client at all');
    const form = await fetch(`${srv.issuer}/revoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    t.equal(form.status, 400, 'the body must be a form');
  });

  await t.test('unknown, malformed and foreign-issuer tokens: 200, nothing changes', async (t) => {
    for (const token of ['not-a-token', 'A'.repeat(43), 'eyJhbGciOiJFUzI1NiJ9.e30.c2ln', 'a.b.c']) {
      const r = await revoke({ token, client_id: 'web-app' });
      t.equal(r.status, 200, `${token.slice(0, 12)}…: 200`);
      t.equal(r.text, '', 'no body');
      t.equal(r.headers.get('cache-control'), 'no-store');
    }
    for (const hint of ['access_token', 'refresh_token', 'something_else']) {
      t.equal((await revoke({ token: 'not-a-token', token_type_hint: hint, client_id: 'web-app' })).status, 200, `hint ${hint}`);
    }
  });

  await t.test('a refresh token revokes its family: every refresh token and every access token of it', async (t) => {
    const a = await signIn(srv, 'web-app');
    const rotated = await postForm(`${srv.issuer}/token`, { grant_type: 'refresh_token', refresh_token: a.refresh, client_id: 'web-app' });
    t.equal(rotated.status, 200);
    const current = rotated.json.refresh_token as string;
    const second = rotated.json.access_token as string;
    t.equal(await userinfo(srv, a.access), 200, 'the access token works before');
    const r = await revoke({ token: current, token_type_hint: 'refresh_token', client_id: 'web-app' });
    t.equal(r.status, 200);
    t.equal(await refreshStatus(srv, current, 'web-app'), 400, 'the current refresh token is dead');
    t.equal(await userinfo(srv, a.access), 401, 'the first access token of the family is refused');
    t.equal(await userinfo(srv, second), 401, 'and the second');
    t.notOk(await introspect(second), 'introspection: inactive');
    t.equal((await revoke({ token: current, client_id: 'web-app' })).status, 200, 'revoking again is a harmless 200');
  });

  await t.test('a rotated-out refresh token of the family revokes it too (the client asked to end that grant)', async (t) => {
    const a = await signIn(srv, 'web-app');
    const rotated = await postForm(`${srv.issuer}/token`, { grant_type: 'refresh_token', refresh_token: a.refresh, client_id: 'web-app' });
    const current = rotated.json.refresh_token as string;
    t.equal((await revoke({ token: a.refresh, client_id: 'web-app' })).status, 200);
    t.equal(await refreshStatus(srv, current, 'web-app'), 400, 'the family is revoked');
  });

  await t.test('an access token revokes itself only, not its family', async (t) => {
    const a = await signIn(srv, 'web-app');
    t.equal((await revoke({ token: a.access, token_type_hint: 'access_token', client_id: 'web-app' })).status, 200);
    t.equal(await userinfo(srv, a.access), 401, 'the revoked access token is refused at userinfo');
    t.notOk(await introspect(a.access), 'introspection: inactive');
    const rotated = await postForm(`${srv.issuer}/token`, { grant_type: 'refresh_token', refresh_token: a.refresh, client_id: 'web-app' });
    t.equal(rotated.status, 200, 'the refresh token still works');
    t.equal(await userinfo(srv, rotated.json.access_token as string), 200, 'and its new access token too');
  });

  await t.test('a wrong hint still finds the token (the other kind is searched)', async (t) => {
    const a = await signIn(srv, 'web-app');
    t.equal((await revoke({ token: a.access, token_type_hint: 'refresh_token', client_id: 'web-app' })).status, 200);
    t.equal(await userinfo(srv, a.access), 401, 'an access token sent with hint refresh_token is revoked');
    const b = await signIn(srv, 'web-app');
    t.equal((await revoke({ token: b.refresh, token_type_hint: 'access_token', client_id: 'web-app' })).status, 200);
    t.equal(await refreshStatus(srv, b.refresh, 'web-app'), 400, 'a refresh token sent with hint access_token is revoked');
    t.equal(await userinfo(srv, b.access), 401, 'with its family');
  });

  await t.test("another client's tokens: 200 and no effect (RFC 7009 §2.1)", async (t) => {
    const a = await signIn(srv, 'web-app');
    t.equal((await revoke({ token: a.refresh, client_id: 'other-app' })).status, 200);
    t.equal((await revoke({ token: a.access, client_id: 'other-app' })).status, 200);
    t.equal((await revoke({ token: a.access }, { authorization: basic(conf.clientId, conf.clientSecret) })).status, 200);
    t.equal(await userinfo(srv, a.access), 200, 'the access token still works');
    t.equal(await refreshStatus(srv, a.refresh, 'web-app'), 200, 'the refresh token still works');
  });

  await t.test('/auth/login tokens belong to no client: no client revokes them', async (t) => {
    // A login-shaped token: issued by the same issuer, without client_id or sid.
    await srv.running.runtime.tokens.ready();
    const login = srv.running.runtime.tokens.accessToken({ sub: 'u1', role: 'customer', scope: '' });
    t.equal((await revoke({ token: login.token, client_id: 'web-app' })).status, 200);
    const { rowCount } = await srv.pool.query('SELECT 1 FROM revoked_access_tokens WHERE jti = $1', [login.jti]);
    t.equal(rowCount, 0, 'nothing recorded');
  });

  await t.test('a confidential client: client_secret_basic and client_secret_post', async (t) => {
    const a = await signIn(srv, conf.clientId, conf.clientSecret);
    t.equal((await revoke({ token: a.access }, { authorization: basic(conf.clientId, conf.clientSecret) })).status, 200);
    t.notOk(await introspect(a.access), 'revoked with client_secret_basic');
    t.equal((await revoke({ token: a.refresh, client_id: conf.clientId, client_secret: conf.clientSecret })).status, 200);
    t.equal(await refreshStatus(srv, a.refresh, conf.clientId, conf.clientSecret), 400, 'revoked with client_secret_post');
  });

  await t.test("openid-client's tokenRevocation", async (t) => {
    const pub = await client.discovery(new URL(srv.issuer), 'web-app', { redirect_uris: [REDIRECT] }, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    const a = await signIn(srv, 'web-app');
    await client.tokenRevocation(pub, a.refresh, { token_type_hint: 'refresh_token' });
    t.equal(await refreshStatus(srv, a.refresh, 'web-app'), 400, 'a public client revoked its refresh token');
    await client.tokenRevocation(pub, 'whatever-unknown-token');
    t.pass('an unknown token resolves');

    const confidential = await client.discovery(
      new URL(srv.issuer),
      conf.clientId,
      { redirect_uris: [REDIRECT] },
      client.ClientSecretBasic(conf.clientSecret),
      { execute: [client.allowInsecureRequests] },
    );
    const b = await signIn(srv, conf.clientId, conf.clientSecret);
    await client.tokenRevocation(confidential, b.access);
    t.notOk(await introspect(b.access), 'a confidential client revoked its access token (client_secret_basic)');
    t.ok(await introspect(b.refresh), 'its refresh token is untouched');

    const wrong = await client.discovery(new URL(srv.issuer), conf.clientId, {}, client.ClientSecretBasic('wrong'), {
      execute: [client.allowInsecureRequests],
    });
    // 401 invalid_client with a Basic challenge: openid-client surfaces the challenge, as it does at /token.
    await t.rejects(client.tokenRevocation(wrong, b.refresh), { name: 'WWWAuthenticateChallengeError', status: 401 });
  });
});

t.test('the revocation list: revoked families and access tokens with their expiry, ETag and 304', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_revocation_list');
  await srv.user('u1', 'u1@example.com', PASSWORD);
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
  const list = async (etag?: string) => {
    const r = await fetch(`${srv.issuer}/.well-known/revoked-tokens.json`, { headers: etag ? { 'if-none-match': etag } : {} });
    const text = await r.text();
    return { status: r.status, etag: r.headers.get('etag') ?? '', cache: r.headers.get('cache-control'), text };
  };

  const empty = await list();
  t.equal(empty.status, 200);
  t.same(JSON.parse(empty.text), { iss: srv.issuer, complete: true, sid: {}, jti: {} });
  t.equal(empty.cache, 'no-cache', 'caches must ask again every time');
  t.match(empty.etag, /^"[A-Za-z0-9_-]+"$/, 'a strong ETag');
  const notModified = await list(empty.etag);
  t.equal(notModified.status, 304, 'the same list: 304');
  t.equal(notModified.text, '', 'without a body');

  const a = await signIn(srv, 'web-app');
  const b = await signIn(srv, 'web-app');
  await postForm(`${srv.issuer}/revoke`, { token: a.refresh, client_id: 'web-app' });
  await postForm(`${srv.issuer}/revoke`, { token: b.access, client_id: 'web-app' });
  const after = await list(empty.etag);
  t.equal(after.status, 200, 'a revocation changes the list at once on the replica that made it');
  const doc = JSON.parse(after.text) as { sid: Record<string, number>; jti: Record<string, number> };
  t.same(Object.keys(doc.sid), [a.sid], 'the revoked family, by the tokens’ sid');
  t.same(Object.keys(doc.jti), [b.jti], 'the revoked access token, by its jti');
  t.equal(doc.jti[b.jti], decodeJwt(b.access).payload.exp, 'an access token is listed until its own exp');
  const nowS = Date.now() / 1000;
  t.ok(
    doc.sid[a.sid]! >= nowS + 900 && doc.sid[a.sid]! <= nowS + 900 + 60 + 5,
    'a family until its last token can expire (TTL + 60 s margin)',
  );
  t.not(after.etag, empty.etag);

  // Both leave once every token they name has expired (plus the 60 s skew).
  // (The replica's cached document is older than a second by that clock, so it is rebuilt.)
  srv.clock.advance(16 * 60_000 + 61_000 + 1_000);
  const later = JSON.parse((await list()).text) as { sid: Record<string, number>; jti: Record<string, number> };
  t.same(later, { iss: srv.issuer, complete: true, sid: {}, jti: {} }, 'expired entries drop out');
});

t.test('the list is bounded: families first, newest first, complete=false beyond the bound', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_revocation_bound');
  const now = Date.now();
  for (let i = 0; i < 3; i++) {
    await srv.pool.query(
      `INSERT INTO oauth_grants (grant_id, user_id, client_id, scope, auth_time, created_at, rotation_ipad, rotation_opad, revoked_at)
       VALUES (gen_random_uuid(), 'u', 'c', '', now(), now(), '\\x00', '\\x00', $1)`,
      [new Date(now - i * 1000)],
    );
    await srv.pool.query(`INSERT INTO revoked_access_tokens (jti, client_id, expires_at, revoked_at) VALUES ($1, 'c', $2, $3)`, [
      `jti-${i}`,
      new Date(now + 600_000),
      new Date(now - i * 1000),
    ]);
  }
  const o = { nowMs: now, familyLifetimeMs: 960_000, skewMs: 60_000 };
  const all = await listRevoked(srv.pool, { ...o, max: 10 });
  t.equal(all.families.length, 3);
  t.equal(all.tokens.length, 3);
  t.ok(all.complete);
  const four = await listRevoked(srv.pool, { ...o, max: 4 });
  t.equal(four.families.length, 3, 'every family first');
  t.same(
    four.tokens.map((x) => x.id),
    ['jti-0'],
    'then the newest access token',
  );
  t.notOk(four.complete, 'and the list says it is incomplete');
  t.notOk(revocationDocument('x', four).complete);
});

t.test('the sidecar-facing claim: user tokens carry their family as sid, client tokens none', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_revocation_claims');
  await srv.user('u1', 'u1@example.com', PASSWORD);
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
  const a = await signIn(srv, 'web-app');
  const { rows } = await srv.pool.query<{ grant_id: string }>('SELECT grant_id FROM oauth_grants');
  t.same(
    rows.map((r) => r.grant_id),
    [a.sid],
    'sid is the grant: the family a refresh token belongs to',
  );
});
