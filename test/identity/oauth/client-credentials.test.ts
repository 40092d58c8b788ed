/**
 * Confidential clients end to end: client credentials through openid-client 6 (client_secret_basic
 * and client_secret_post; `allowInsecureRequests` because the test server speaks plain HTTP), the
 * tokens' claims and the shared verifier's verdict, introspection (RFC 7662) for confidential
 * clients only, and the client registry's admin API with its server-generated secrets.
 */
import t from 'tap';
import * as client from 'openid-client';
import { createVerifier } from '../../../shared/jwt/index.js';
import { hashClientSecret } from '../../../identity/clients/client-secret.js';
import { s256 } from '../../../identity/oauth/pkce.js';
import { ADMIN_TOKEN, basic, browserSignIn, decodeJwt, postForm, startOAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/cb';
const PASSWORD = 'correct horse battery staple';

t.test('client credentials, introspection and the admin API', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_cc');
  const admin = (path: string, init: RequestInit = {}, token = ADMIN_TOKEN): Promise<Response> =>
    fetch(`${srv.issuer}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
    });

  // Registered through the admin API, as an operator would.
  const created = await admin('/auth/admin/clients', {
    method: 'POST',
    body: JSON.stringify({
      client_id: 'billing',
      client_type: 'confidential',
      name: 'Billing service',
      scope: 'read:orders write:refunds',
      tenant_id: 'acme',
      plan: 'pro',
    }),
  });
  t.equal(created.status, 201);
  t.equal(created.headers.get('cache-control'), 'no-store');
  const reg = (await created.json()) as Record<string, unknown>;
  const secret = reg.client_secret as string;
  t.match(secret, /^[A-Za-z0-9_-]{43}$/, 'a server-generated 256-bit secret (base64url)');
  t.match(reg, {
    client_id: 'billing',
    client_type: 'confidential',
    grant_types: ['client_credentials'],
    token_endpoint_auth_method: 'client_secret_basic',
  });
  const { rows } = await srv.pool.query<{ secret_sha256: Buffer }>('SELECT secret_sha256 FROM oauth_clients WHERE client_id = $1', [
    'billing',
  ]);
  t.same(rows[0]!.secret_sha256, hashClientSecret(secret), 'only the SHA-256 of the secret is stored');

  await t.test('openid-client: client_secret_basic and client_secret_post', async (t) => {
    for (const [name, auth] of [
      ['basic', client.ClientSecretBasic(secret)],
      ['post', client.ClientSecretPost(secret)],
    ] as const) {
      const config = await client.discovery(new URL(srv.issuer), 'billing', {}, auth, { execute: [client.allowInsecureRequests] });
      const tokens = await client.clientCredentialsGrant(config, { scope: 'read:orders' });
      t.equal(tokens.token_type, 'bearer', `${name}: bearer`);
      t.equal(tokens.scope, 'read:orders', `${name}: scope`);
      t.equal(tokens.refresh_token, undefined, `${name}: no refresh token`);
      t.equal(tokens.id_token, undefined, `${name}: no id token`);
      const { header, payload } = decodeJwt(tokens.access_token);
      t.equal(header.typ, 'at+jwt');
      t.match(payload, {
        sub: 'billing',
        user_id: 'billing',
        client_id: 'billing',
        role: 'service',
        tenant_id: 'acme',
        plan: 'pro',
        aud: 'edge-api',
      });
      t.equal(payload.sid, undefined, 'no grant: not revocable, short-lived');
    }
    const config = await client.discovery(new URL(srv.issuer), 'billing', {}, client.ClientSecretBasic(secret), {
      execute: [client.allowInsecureRequests],
    });
    const all = await client.clientCredentialsGrant(config);
    t.equal(all.scope, 'read:orders write:refunds', 'no scope asked: every scope the client may have');
    const bad = await client.discovery(new URL(srv.issuer), 'billing', {}, client.ClientSecretBasic('wrong'), {
      execute: [client.allowInsecureRequests],
    });
    // A 401 with WWW-Authenticate: openid-client surfaces the Basic challenge we send (RFC 6749 §5.2).
    const err = (await client.clientCredentialsGrant(bad).then(
      () => undefined,
      (e: unknown) => e,
    )) as { name?: string; status?: number; cause?: { scheme: string }[] };
    t.equal(err?.name, 'WWWAuthenticateChallengeError');
    t.equal(err?.status, 401);
    t.equal(err?.cause?.[0]?.scheme, 'basic');
  });

  await t.test('the shared verifier accepts client-credentials tokens (quota subject tenant:acme)', async (t) => {
    const res = await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('billing', secret) });
    const v = createVerifier({ issuer: srv.issuer, audience: 'edge-api', jwksUrl: `${srv.issuer}/.well-known/jwks.json` });
    t.teardown(() => v.close());
    const claims = await v.verifyAccessToken(res.json.access_token as string);
    t.equal(claims.tenant_id, 'acme');
    t.equal(claims.plan, 'pro');
    t.equal(claims.role, 'service');
  });

  await t.test('introspection: confidential clients only; access and refresh tokens; never an id token', async (t) => {
    await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
    await srv.user('u1', 'u1@example.com', PASSWORD);
    const verifier = 'v'.repeat(43);
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: 'web-app',
      redirect_uri: REDIRECT,
      scope: 'openid read:orders',
      code_challenge: s256(verifier),
      code_challenge_method: 'S256',
    });
    const cb = await browserSignIn(`${srv.issuer}/authorize?${q.toString()}`, 'u1@example.com', PASSWORD);
    const user = await postForm(`${srv.issuer}/token`, {
      grant_type: 'authorization_code',
      code: new URL(cb.location!).searchParams.get('code')!,
      redirect_uri: REDIRECT,
      client_id: 'web-app',
      code_verifier: verifier,
    });
    const config = await client.discovery(new URL(srv.issuer), 'billing', {}, client.ClientSecretBasic(secret), {
      execute: [client.allowInsecureRequests],
    });

    const active = await client.tokenIntrospection(config, user.json.access_token as string);
    t.match(active, { active: true, sub: 'u1', client_id: 'web-app', scope: 'read:orders', token_type: 'Bearer', iss: srv.issuer });
    t.type(active.exp, 'number');
    t.same(await client.tokenIntrospection(config, user.json.id_token as string), { active: false }, 'an id token is not an access token');
    t.same(await client.tokenIntrospection(config, 'garbage'), { active: false });
    t.same(
      await client.tokenIntrospection(config, user.json.refresh_token as string),
      { active: false },
      "another client's refresh token tells nothing",
    );

    const pub = await postForm(`${srv.issuer}/auth/introspect`, { token: user.json.access_token as string, client_id: 'web-app' });
    t.equal(pub.status, 401, 'a public client cannot introspect');
    t.equal(pub.json.error, 'invalid_client');
    const anon = await postForm(`${srv.issuer}/auth/introspect`, { token: user.json.access_token as string });
    t.equal(anon.status, 401, 'nor an anonymous caller');
    const noToken = await postForm(`${srv.issuer}/auth/introspect`, {}, { authorization: basic('billing', secret) });
    t.equal(noToken.json.error, 'invalid_request');

    // A confidential client with a refresh token of its own sees it active.
    const { clientSecret: s2 } = await srv.confidentialClient('portal', {
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: [REDIRECT],
      scope: 'openid read:orders',
    });
    const cb2 = await browserSignIn(
      `${srv.issuer}/authorize?${new URLSearchParams({ ...Object.fromEntries(q), client_id: 'portal' }).toString()}`,
      'u1@example.com',
      PASSWORD,
    );
    const portal = await postForm(
      `${srv.issuer}/token`,
      {
        grant_type: 'authorization_code',
        code: new URL(cb2.location!).searchParams.get('code')!,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
      },
      { authorization: basic('portal', s2) },
    );
    t.equal(portal.status, 200, 'a confidential client redeems its code with basic auth');
    const own = await postForm(
      `${srv.issuer}/auth/introspect`,
      { token: portal.json.refresh_token as string },
      { authorization: basic('portal', s2) },
    );
    t.match(own.json, { active: true, token_type: 'refresh_token', client_id: 'portal', sub: 'u1' });
  });

  await t.test('admin API: list, read, rotate the secret, delete; never a secret or hash in a read', async (t) => {
    const list = await admin('/auth/admin/clients');
    const text = await list.text();
    t.equal(list.status, 200);
    t.notOk(text.includes(secret), 'no secret in the list');
    t.notOk(text.includes('secret_sha256'), 'no hash in the list');
    const one = (await (await admin('/auth/admin/clients/billing')).json()) as Record<string, unknown>;
    t.equal(one.client_secret, undefined);
    t.equal((await admin('/auth/admin/clients/nope')).status, 404);

    const rotated = (await (await admin('/auth/admin/clients/billing/secret', { method: 'POST' })).json()) as Record<string, unknown>;
    const next = rotated.client_secret as string;
    t.not(next, secret);
    t.equal(
      (await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('billing', secret) })).status,
      401,
      'the old secret is dead',
    );
    t.equal(
      (await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('billing', next) })).status,
      200,
    );

    const bad = await admin('/auth/admin/clients', {
      method: 'POST',
      body: JSON.stringify({ client_type: 'public', redirect_uris: ['https://x.example/*'] }),
    });
    t.equal(bad.status, 400);
    t.match(await bad.json(), { code: 'invalid_field', field: 'redirect_uris[0]' });
    const aud = await admin('/auth/admin/clients', {
      method: 'POST',
      body: JSON.stringify({ client_id: 'edge-api', client_type: 'confidential' }),
    });
    t.match(await aud.json(), { code: 'invalid_field', field: 'client_id' }, 'a client id equal to the API audience is refused');
    const dup = await admin('/auth/admin/clients', {
      method: 'POST',
      body: JSON.stringify({ client_id: 'billing', client_type: 'confidential' }),
    });
    t.match(await dup.json(), { code: 'invalid_field', field: 'client_id' });

    t.equal((await admin('/auth/admin/clients/billing', { method: 'DELETE' })).status, 204);
    t.equal(
      (await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('billing', next) })).status,
      401,
    );
  });

  await t.test('admin API: no token is 401, a customer token 403, an admin-role token works', async (t) => {
    const none = await fetch(`${srv.issuer}/auth/admin/clients`);
    t.equal(none.status, 401);
    t.match(await none.json(), { code: 'credentials_required' });
    const garbage = await admin('/auth/admin/clients', {}, 'not-the-token');
    t.equal(garbage.status, 401);
    t.match(await garbage.json(), { code: 'invalid_token' });

    const svc = await srv.confidentialClient('ops', { scope: 'manage:clients' });
    const svcToken = await postForm(
      `${srv.issuer}/token`,
      { grant_type: 'client_credentials' },
      { authorization: basic('ops', svc.clientSecret) },
    );
    const forbidden = await admin('/auth/admin/clients', {}, svcToken.json.access_token as string);
    t.equal(forbidden.status, 403, 'role service is not admin');

    const adm = await srv.confidentialClient('root-automation', { role: 'admin', scope: 'manage:clients' });
    const admToken = await postForm(
      `${srv.issuer}/token`,
      { grant_type: 'client_credentials' },
      { authorization: basic('root-automation', adm.clientSecret) },
    );
    t.equal((await admin('/auth/admin/clients', {}, admToken.json.access_token as string)).status, 200, 'role admin');
  });
});
