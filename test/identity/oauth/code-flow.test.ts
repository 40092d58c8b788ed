/**
 * The authorization code + PKCE flow end to end, driven by openid-client 6 as a real external
 * client (discovery, authorization URL, code exchange with id-token validation, refresh, userinfo),
 * over real HTTP against real PostgreSQL. openid-client refuses plain HTTP unless told otherwise:
 * these tests use its `allowInsecureRequests` because the test server has no TLS certificate.
 */
import t from 'tap';
import * as client from 'openid-client';
import { create } from '@bufbuild/protobuf';
import { AccessTokenClaimsSchema, IdTokenClaimsSchema } from '../../../proto/gen/identity/v1/identity_pb.js';
import { fromJson } from '../../../shared/proto-json.js';
import { createVerifier } from '../../../shared/jwt/index.js';
import { listSecurityEvents } from '../../../identity/tokens/security-events.js';
import { browserSignIn, decodeJwt, postForm, startOAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/callback';
const PASSWORD = 'correct horse battery staple';

t.test('authorization code + PKCE with openid-client: tokens, refresh, userinfo, shared verifier', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_code_flow');
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid profile email offline_access read:orders write:orders' });
  const userId = await srv.user('user-42', 'Alice@Example.com', PASSWORD, 'customer', 'Alice');

  const config = await client.discovery(new URL(srv.issuer), 'web-app', { redirect_uris: [REDIRECT] }, client.None(), {
    execute: [client.allowInsecureRequests],
  });
  t.equal(config.serverMetadata().issuer, srv.issuer, 'discovery advertises the issuer it was fetched from');
  t.same(config.serverMetadata().code_challenge_methods_supported, ['S256']);

  const verifier = client.randomPKCECodeVerifier();
  const challenge = await client.calculatePKCECodeChallenge(verifier);
  const state = client.randomState();
  const nonce = client.randomNonce();
  const authUrl = client.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT,
    scope: 'openid profile email read:orders',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    nonce,
  });

  const signIn = await browserSignIn(authUrl, 'alice@example.com', PASSWORD);
  t.equal(signIn.status, 303, 'the sign-in form redirects');
  const callback = new URL(signIn.location!);
  t.equal(`${callback.origin}${callback.pathname}`, REDIRECT, 'back to the registered redirect URI exactly');
  t.equal(callback.searchParams.get('state'), state, 'state is echoed');
  t.equal(callback.searchParams.get('iss'), srv.issuer, 'the RFC 9207 iss parameter names us');

  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier,
    expectedState: state,
    expectedNonce: nonce,
    idTokenExpected: true,
  });
  t.equal(tokens.token_type, 'bearer');
  t.equal(tokens.expires_in, 900, 'access tokens live 15 minutes by default');
  t.equal(tokens.scope, 'openid profile email read:orders');
  t.type(tokens.refresh_token, 'string');

  const id = tokens.claims()!;
  t.equal(id.sub, userId);
  t.equal(id.aud, 'web-app', 'the id token is for the client');
  t.equal(id.nonce, nonce);
  t.type(id.auth_time, 'number');
  t.equal(id.email, 'alice@example.com');
  t.equal(id.name, 'Alice');
  t.equal(decodeJwt(tokens.id_token!).header.typ, 'JWT');
  // The id token's claims are the contract's (proto identity.v1 IdTokenClaims) plus sid.
  t.doesNotThrow(() => fromJson(IdTokenClaimsSchema, decodeJwt(tokens.id_token!).payload, { ignoreUnknownFields: true }));

  const at = decodeJwt(tokens.access_token);
  t.equal(at.header.typ, 'at+jwt');
  t.equal(at.header.alg, 'ES256', 'ES256 by default');
  t.match(at.payload, {
    iss: srv.issuer,
    sub: userId,
    user_id: userId,
    role: 'customer',
    scope: 'read:orders',
    aud: 'edge-api',
    client_id: 'web-app',
  });
  t.equal((at.payload.exp as number) - (at.payload.iat as number), 900);
  t.type(at.payload.jti, 'string');
  t.type(at.payload.nbf, 'number');
  const contract = fromJson(AccessTokenClaimsSchema, at.payload, { ignoreUnknownFields: true });
  t.equal(contract.role, create(AccessTokenClaimsSchema, { role: 1 }).role, 'role maps onto the contract enum (customer)');

  // The shared resource-server verifier (what the sidecar runs) against our published JWKS.
  const rs = createVerifier({ issuer: srv.issuer, audience: 'edge-api', jwksUrl: `${srv.issuer}/.well-known/jwks.json` });
  t.teardown(() => rs.close());
  const claims = await rs.verifyAccessToken(tokens.access_token);
  t.equal(claims.sub, userId);
  t.equal(claims.scope, 'read:orders');
  await t.rejects(
    rs.verifyAccessToken(tokens.id_token!),
    { name: 'TokenError', reason: 'typ_not_access_token' },
    'the id token is never a bearer token',
  );

  const info = await client.fetchUserInfo(config, tokens.access_token, id.sub);
  t.equal(info.sub, id.sub, 'userinfo sub equals the id token sub');
  t.equal(info.email, 'alice@example.com');
  t.equal(info.name, 'Alice');

  const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
  t.not(refreshed.refresh_token, tokens.refresh_token, 'the refresh token rotated');
  t.not(refreshed.access_token, tokens.access_token);
  const refreshedId = refreshed.claims()!;
  t.equal(refreshedId.sub, id.sub);
  t.equal(refreshedId.auth_time, id.auth_time, 'auth_time stays the sign-in time');
  t.equal(refreshedId.nonce, undefined, 'no nonce on a refreshed id token');
  t.equal((await client.fetchUserInfo(config, refreshed.access_token, id.sub)).sub, id.sub);

  // A narrower scope on refresh is allowed, a wider one is not.
  const narrow = await client.refreshTokenGrant(config, refreshed.refresh_token!, { scope: 'openid' });
  t.equal(narrow.scope, 'openid');
  t.equal(decodeJwt(narrow.access_token).payload.scope, '');
  await t.rejects(client.refreshTokenGrant(config, narrow.refresh_token!, { scope: 'openid write:orders' }), {
    name: 'ResponseBodyError',
    error: 'invalid_scope',
  });
});

t.test(
  'a userinfo request with an id token, no token, a garbage or malformed token is refused with a Bearer challenge that names its error',
  async (t) => {
    const srv = await startOAuthServer(t, 'oauth_userinfo');
    await srv.publicClient('web-app', [REDIRECT]);
    await srv.user('u1', 'u1@example.com', PASSWORD);
    const config = await client.discovery(new URL(srv.issuer), 'web-app', { redirect_uris: [REDIRECT] }, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    const verifier = client.randomPKCECodeVerifier();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT,
      scope: 'openid',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const cb = await browserSignIn(url, 'u1@example.com', PASSWORD);
    const tokens = await client.authorizationCodeGrant(config, new URL(cb.location!), { pkceCodeVerifier: verifier });

    for (const [name, auth, status, error] of [
      ['none', undefined, 401, undefined],
      ['garbage', 'Bearer abc.def.ghi', 401, 'invalid_token'],
      ['id token', `Bearer ${tokens.id_token}`, 401, 'invalid_token'],
      ['another scheme', 'Basic dTE6cA==', 401, 'invalid_request'],
      ['a malformed bearer', 'Bearer two words', 401, 'invalid_request'],
      ['an empty bearer', 'Bearer ', 401, 'invalid_request'],
    ] as const) {
      const res = await fetch(`${srv.issuer}/userinfo`, { headers: auth ? { authorization: auth } : {} });
      t.equal(res.status, status, `${name}: ${status}`);
      const challenge = res.headers.get('www-authenticate') ?? '';
      t.match(challenge, /^Bearer/, `${name}: Bearer challenge`);
      // RFC 6750 §3.1: an error code after presented credentials, none when there were none.
      if (error === undefined) t.notMatch(challenge, /error=/, `${name}: no error code`);
      else t.match(challenge, new RegExp(`error="${error}"`), `${name}: error="${error}"`);
      t.match(res.headers.get('content-type'), /problem\+json/, `${name}: problem+json`);
    }
  },
);

t.test('reuse of an authorization code revokes the tokens it issued and records an alert', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_code_reuse');
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
  const { clientId, clientSecret } = await srv.confidentialClient('rs', { scope: 'read:orders' });
  await srv.user('u7', 'u7@example.com', PASSWORD);
  const config = await client.discovery(new URL(srv.issuer), 'web-app', { redirect_uris: [REDIRECT] }, client.None(), {
    execute: [client.allowInsecureRequests],
  });
  const verifier = client.randomPKCECodeVerifier();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT,
    scope: 'openid read:orders',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
  });
  const cb = new URL((await browserSignIn(url, 'u7@example.com', PASSWORD)).location!);
  const tokens = await client.authorizationCodeGrant(config, cb, { pkceCodeVerifier: verifier });

  const replay = await postForm(`${srv.issuer}/token`, {
    grant_type: 'authorization_code',
    code: cb.searchParams.get('code')!,
    redirect_uri: REDIRECT,
    client_id: 'web-app',
    code_verifier: verifier,
  });
  t.equal(replay.status, 400);
  t.equal(replay.json.error, 'invalid_grant');
  t.equal(replay.headers.get('cache-control'), 'no-store');

  const refresh = await postForm(`${srv.issuer}/token`, {
    grant_type: 'refresh_token',
    refresh_token: tokens.refresh_token!,
    client_id: 'web-app',
  });
  t.equal(refresh.json.error, 'invalid_grant', 'the refresh token the code issued is revoked');
  const info = await fetch(`${srv.issuer}/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
  t.equal(info.status, 401, 'its access token is refused at userinfo');
  const intro = await postForm(
    `${srv.issuer}/auth/introspect`,
    { token: tokens.access_token },
    { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}` },
  );
  t.same(intro.json, { active: false }, 'and inactive at introspection');

  const events = await listSecurityEvents(srv.pool, 'u7');
  t.equal(events.length, 1);
  t.equal(events[0]!.eventType, 'AuthorizationCodeReuseDetected');
  t.equal(srv.alerts.length, 1, 'the alert hook was called');
});

t.test('sign-in: a wrong password or unknown email shows one generic error and no code; cancel redirects access_denied', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_sign_in');
  await srv.publicClient('web-app', [REDIRECT]);
  await srv.user('u1', 'u1@example.com', PASSWORD);
  const url = new URL(`${srv.issuer}/authorize`);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: 'web-app',
    redirect_uri: REDIRECT,
    scope: 'openid',
    state: 's-1',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
  }).toString();
  const page = await fetch(url);
  t.equal(page.headers.get('x-frame-options'), 'DENY', 'the sign-in page cannot be framed');
  t.equal(page.headers.get('cache-control'), 'no-store');
  await page.text();

  const wrong = await browserSignIn(url, 'u1@example.com', 'not the password');
  const unknown = await browserSignIn(url, 'nobody@example.com', PASSWORD);
  for (const r of [wrong, unknown]) {
    t.equal(r.status, 200);
    t.equal(r.location, undefined, 'no redirect, no code');
    t.match(r.body, 'Wrong email or password.');
  }
  const cancel = await browserSignIn(url, '', '', 'deny');
  const loc = new URL(cancel.location!);
  t.equal(loc.searchParams.get('error'), 'access_denied');
  t.equal(loc.searchParams.get('state'), 's-1');
});

t.test('discovery advertises every endpoint under the issuer', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_discovery');
  const doc = (await (await fetch(`${srv.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
  t.match(doc, {
    issuer: srv.issuer,
    authorization_endpoint: `${srv.issuer}/authorize`,
    token_endpoint: `${srv.issuer}/token`,
    userinfo_endpoint: `${srv.issuer}/userinfo`,
    jwks_uri: `${srv.issuer}/.well-known/jwks.json`,
    device_authorization_endpoint: `${srv.issuer}/auth/device_authorization`,
    introspection_endpoint: `${srv.issuer}/auth/introspect`,
    code_challenge_methods_supported: ['S256'],
    response_types_supported: ['code'],
    id_token_signing_alg_values_supported: ['ES256', 'RS256'],
  });
  t.notOk((doc.grant_types_supported as string[]).includes('password'));
  t.notOk((doc.grant_types_supported as string[]).includes('implicit'));
  const jwks = await fetch(`${srv.issuer}/.well-known/jwks.json`);
  t.equal(jwks.headers.get('cache-control'), 'public, max-age=900', 'the JWKS cache lifetime (15 min)');
  const keys = ((await jwks.json()) as { keys: Record<string, unknown>[] }).keys;
  t.equal(keys.length, 1);
  t.match(keys[0], { kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
  t.notOk('d' in keys[0]!, 'no private member is published');
});
