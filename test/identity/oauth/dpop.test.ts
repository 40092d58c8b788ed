/**
 * DPoP at the authorization server (RFC 9449), with oauth4webapi's DPoP support as the client
 * (`allowInsecureRequests`: the test server speaks plain HTTP), over real HTTP and PostgreSQL:
 * the nonce dance at /token and /userinfo, a DPoP-bound access token (`token_type: DPoP`,
 * `cnf.jkt` = the key's thumbprint) used at /userinfo, refused as Bearer, refused with another
 * key's proof, a replayed proof refused; the refresh-token family of a public client bound to the
 * key; a client registered as requiring DPoP; client credentials and the device grant with DPoP;
 * discovery and introspection. Then the identity DPoP core against the database: nonces off,
 * and a proof replayed to another replica refused.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import { SignJWT, exportJWK, calculateJwkThumbprint } from 'jose';
import { migrate } from '../../../shared/migrate.js';
import { migrationsDir } from '../../../shared/paths.js';
import { FakeClock } from '../../../shared/clock.js';
import { accessTokenHash, type DpopError } from '../../../shared/dpop/index.js';
import type { RequestContext } from '../../../shared/http.js';
import { createIdentityDpop } from '../../../identity/oauth/dpop.js';
import { OAuthError } from '../../../identity/oauth/oauth-error.js';
import { useTestDatabase } from '../../harness/db.js';
import { basic, browserApproveDevice, browserSignIn, decodeJwt, postForm, startOAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/callback';
const PASSWORD = 'correct horse battery staple';
const INSECURE = { [oauth.allowInsecureRequests]: true } as const;
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

async function newKeyPair(): Promise<oauth.CryptoKeyPair> {
  return await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']);
}

/** A DPoP proof made by hand (for the refusals oauth4webapi would never produce). */
async function proofOf(
  kp: oauth.CryptoKeyPair,
  htm: string,
  htu: string,
  extra: { ath?: string; nonce?: string | null | undefined; jti?: string } = {},
): Promise<string> {
  const jwk = await exportJWK(kp.publicKey);
  const payload: Record<string, unknown> = { htm, htu, jti: extra.jti ?? randomBytes(16).toString('base64url') };
  if (extra.ath !== undefined) payload.ath = extra.ath;
  if (extra.nonce) payload.nonce = extra.nonce;
  return new SignJWT(payload).setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk }).setIssuedAt().sign(kp.privateKey);
}

/** Runs an oauth4webapi request + processing pair, once more when the server asks for a nonce. */
async function withNonceRetry<T>(run: () => Promise<T>, sawNonceError?: () => void): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!oauth.isDPoPNonceError(err)) throw err;
    sawNonceError?.();
    return run();
  }
}

t.test('authorization code + DPoP with oauth4webapi: bound tokens, userinfo, refusals, refresh bound to the key', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_dpop_code');
  await srv.publicClient('spa', [REDIRECT], { scope: 'openid email offline_access read:orders' });
  await srv.user('u-dpop', 'dpop@example.com', PASSWORD);

  const issuer = new URL(srv.issuer);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, INSECURE));
  t.ok(as.dpop_signing_alg_values_supported?.includes('ES256'), 'discovery advertises dpop_signing_alg_values_supported');
  t.notOk(
    as.dpop_signing_alg_values_supported?.some((a) => a === 'none' || a.startsWith('HS')),
    'asymmetric algorithms only',
  );

  const client: oauth.Client = { client_id: 'spa' };
  const kp = await newKeyPair();
  const DPoP = oauth.DPoP(client, kp);
  const jkt = await DPoP.calculateThumbprint();

  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(as.authorization_endpoint!);
  url.search = new URLSearchParams({
    client_id: 'spa',
    response_type: 'code',
    redirect_uri: REDIRECT,
    scope: 'openid email offline_access read:orders',
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
  }).toString();
  const signIn = await browserSignIn(url, 'dpop@example.com', PASSWORD);
  t.equal(signIn.status, 303, 'signed in');
  const params = oauth.validateAuthResponse(as, client, new URL(signIn.location!), state);

  // The nonce dance: the first proof has no nonce, the server answers use_dpop_nonce with one, and
  // the code is not spent by that refusal.
  let nonceErrors = 0;
  const tokens = await withNonceRetry(
    async () =>
      oauth.processAuthorizationCodeResponse(
        as,
        client,
        await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, REDIRECT, verifier, { DPoP, ...INSECURE }),
      ),
    () => nonceErrors++,
  );
  t.equal(nonceErrors, 1, 'the first token request was answered use_dpop_nonce');
  t.equal(tokens.token_type, 'dpop', 'token_type DPoP');
  const at = decodeJwt(tokens.access_token);
  t.same(at.payload.cnf, { jkt }, 'the access token is bound to the key (cnf.jkt = RFC 7638 thumbprint)');
  t.type(tokens.refresh_token, 'string');

  // userinfo with the DPoP scheme and a proof (oauth4webapi kept the nonce from the token response).
  nonceErrors = 0;
  const info = await withNonceRetry(
    async () =>
      oauth.processUserInfoResponse(
        as,
        client,
        at.payload.sub as string,
        await oauth.userInfoRequest(as, client, tokens.access_token, { DPoP, ...INSECURE }),
      ),
    () => nonceErrors++,
  );
  t.equal(info.sub, 'u-dpop');
  t.equal(info.email, 'dpop@example.com');
  t.equal(nonceErrors, 0, 'the nonce from the token response was good for userinfo');

  const userinfo = `${srv.issuer}/userinfo`;
  const call = async (
    headers: Record<string, string>,
  ): Promise<{ status: number; challenge: string; code: unknown; nonce: string | null }> => {
    const res = await fetch(userinfo, { headers });
    const body = (await res.json()) as { code?: unknown };
    return {
      status: res.status,
      challenge: res.headers.get('www-authenticate') ?? '',
      code: body.code,
      nonce: res.headers.get('dpop-nonce'),
    };
  };

  // As a bearer token: refused, and told to use DPoP.
  const asBearer = await call({ authorization: `Bearer ${tokens.access_token}` });
  t.equal(asBearer.status, 401, 'a DPoP-bound token sent as Bearer is refused');
  t.equal(asBearer.code, 'invalid_token');
  t.match(asBearer.challenge, /DPoP algs="/, 'the challenge names the DPoP scheme');

  // Under the DPoP scheme without a proof.
  const noProof = await call({ authorization: `DPoP ${tokens.access_token}` });
  t.equal(noProof.status, 401);
  t.equal(noProof.code, 'dpop_proof_invalid');
  t.match(noProof.challenge, /^DPoP error="invalid_dpop_proof"/);

  // A proof without the nonce: use_dpop_nonce and a DPoP-Nonce to retry with.
  const ath = accessTokenHash(tokens.access_token);
  const noNonce = await call({ authorization: `DPoP ${tokens.access_token}`, dpop: await proofOf(kp, 'GET', userinfo, { ath }) });
  t.equal(noNonce.status, 401);
  t.equal(noNonce.code, 'dpop_nonce_required');
  t.match(noNonce.challenge, /^DPoP error="use_dpop_nonce"/);
  t.type(noNonce.nonce, 'string', 'DPoP-Nonce is sent');
  const nonce = noNonce.nonce!;

  // A good proof works once; the same proof again is a replay.
  const good = await proofOf(kp, 'GET', userinfo, { ath, nonce });
  t.equal((await call({ authorization: `DPoP ${tokens.access_token}`, dpop: good })).status, 200, 'a hand-made proof of the key works');
  const replay = await call({ authorization: `DPoP ${tokens.access_token}`, dpop: good });
  t.equal(replay.status, 401, 'a replayed proof is refused');
  t.equal(replay.code, 'dpop_proof_invalid');

  // Another key's valid proof: the token is not bound to it.
  const other = await newKeyPair();
  const otherKey = await call({
    authorization: `DPoP ${tokens.access_token}`,
    dpop: await proofOf(other, 'GET', userinfo, { ath, nonce }),
  });
  t.equal(otherKey.status, 401, "another key's proof is refused");
  t.equal(otherKey.code, 'invalid_token');
  t.match(otherKey.challenge, /^DPoP error="invalid_token"/);

  // A proof for another URI, method or token.
  for (const [name, p] of [
    ['htu', await proofOf(kp, 'GET', `${srv.issuer}/token`, { ath, nonce })],
    ['htm', await proofOf(kp, 'POST', userinfo, { ath, nonce })],
    ['ath', await proofOf(kp, 'GET', userinfo, { ath: accessTokenHash('another token'), nonce })],
    ['two proofs', `${await proofOf(kp, 'GET', userinfo, { ath, nonce })}, ${await proofOf(kp, 'GET', userinfo, { ath, nonce })}`],
  ] as const) {
    const r = await call({ authorization: `DPoP ${tokens.access_token}`, dpop: p });
    t.equal(r.status, 401, `${name}: refused`);
    t.equal(r.code, 'dpop_proof_invalid', `${name}: dpop_proof_invalid`);
  }

  // The refresh token of this public client is bound to the key.
  const noDpop = await postForm(`${srv.issuer}/token`, {
    grant_type: 'refresh_token',
    refresh_token: tokens.refresh_token!,
    client_id: 'spa',
  });
  t.equal(noDpop.status, 400);
  t.equal(noDpop.json.error, 'invalid_dpop_proof', 'a refresh without a proof is refused');
  const otherDPoP = oauth.DPoP(client, other);
  const withOther = await withNonceRetry(async () =>
    oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, { DPoP: otherDPoP, ...INSECURE }),
    ),
  ).catch((e: unknown) => e);
  t.match(withOther, { name: 'ResponseBodyError', error: 'invalid_grant' }, 'a refresh with another key is refused');
  const refreshed = await withNonceRetry(async () =>
    oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, { DPoP, ...INSECURE }),
    ),
  );
  t.equal(refreshed.token_type, 'dpop', 'the refused attempts neither rotated nor revoked the family: the key holder refreshes');
  t.same(decodeJwt(refreshed.access_token).payload.cnf, { jkt });
  t.same(srv.alerts, [], 'no reuse alert');

  // Introspection reports the binding (RFC 9449 §6.2).
  const rs = await srv.confidentialClient('rs-introspect', { scope: 'read:orders' });
  const intro = await postForm(
    `${srv.issuer}/auth/introspect`,
    { token: refreshed.access_token },
    { authorization: basic(rs.clientId, rs.clientSecret) },
  );
  t.match(intro.json, { active: true, token_type: 'DPoP', cnf: { jkt } });
});

t.test('a client registered as requiring DPoP; client credentials and the device grant with DPoP', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_dpop_clients', { IDENTITY_DEVICE_POLL_INTERVAL: '1s' });
  const svc = await srv.confidentialClient('svc-dpop', { scope: 'read:orders', dpop_bound_access_tokens: true });
  const plain = await srv.confidentialClient('svc-plain', { scope: 'read:orders' });
  const issuer = new URL(srv.issuer);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, INSECURE));

  const noProof = await postForm(
    `${srv.issuer}/token`,
    { grant_type: 'client_credentials' },
    { authorization: basic(svc.clientId, svc.clientSecret) },
  );
  t.equal(noProof.status, 400);
  t.equal(noProof.json.error, 'invalid_dpop_proof', 'a client that requires DPoP cannot get a bearer token');

  const kp = await newKeyPair();
  const client: oauth.Client = { client_id: svc.clientId };
  const DPoP = oauth.DPoP(client, kp);
  const cc = await withNonceRetry(async () =>
    oauth.processClientCredentialsResponse(
      as,
      client,
      await oauth.clientCredentialsGrantRequest(
        as,
        client,
        oauth.ClientSecretBasic(svc.clientSecret),
        { scope: 'read:orders' },
        { DPoP, ...INSECURE },
      ),
    ),
  );
  t.equal(cc.token_type, 'dpop');
  t.same(decodeJwt(cc.access_token).payload.cnf, { jkt: await calculateJwkThumbprint(await exportJWK(kp.publicKey)) });

  // A client that does not require it still gets a bearer token without a proof, a bound one with.
  const bearer = await postForm(
    `${srv.issuer}/token`,
    { grant_type: 'client_credentials' },
    { authorization: basic(plain.clientId, plain.clientSecret) },
  );
  t.equal(bearer.json.token_type, 'Bearer');
  t.equal(decodeJwt(bearer.json.access_token as string).payload.cnf, undefined);

  // The device grant with DPoP (public client): the token and the refresh family are bound.
  await srv.publicClient('tv-dpop', [], { grant_types: [DEVICE_GRANT, 'refresh_token'], scope: 'openid read:orders' });
  await srv.user('u-tv', 'tv@example.com', PASSWORD);
  const tv: oauth.Client = { client_id: 'tv-dpop' };
  const tvDPoP = oauth.DPoP(tv, kp);
  const da = await oauth.processDeviceAuthorizationResponse(
    as,
    tv,
    await oauth.deviceAuthorizationRequest(as, tv, oauth.None(), { scope: 'openid read:orders' }, INSECURE),
  );
  const approved = await browserApproveDevice(srv.issuer, da.user_code, 'tv@example.com', PASSWORD, 'approve');
  t.equal(approved.status, 200, 'the person approved on the device page');
  const dev = await withNonceRetry(async () =>
    oauth.processDeviceCodeResponse(
      as,
      tv,
      await oauth.deviceCodeGrantRequest(as, tv, oauth.None(), da.device_code, { DPoP: tvDPoP, ...INSECURE }),
    ),
  );
  t.equal(dev.token_type, 'dpop');
  t.same(decodeJwt(dev.access_token).payload.cnf, { jkt: await tvDPoP.calculateThumbprint() });
  const unbound = await postForm(`${srv.issuer}/token`, {
    grant_type: 'refresh_token',
    refresh_token: dev.refresh_token!,
    client_id: 'tv-dpop',
  });
  t.equal(unbound.json.error, 'invalid_dpop_proof', "the device grant's refresh family is bound to the key");
});

function ctxOf(headers: Record<string, string>, path = '/token', method = 'post'): RequestContext {
  return {
    method,
    path,
    query: new URLSearchParams(),
    headers,
    params: [],
    remoteAddress: '127.0.0.1',
    body: Buffer.alloc(0),
    aborted: () => false,
  };
}

t.test('identity DPoP core: nonces off; a proof is used once across replicas (Postgres); nonces shared by replicas', async (t) => {
  const db = await useTestDatabase(t, 'identity_dpop_core');
  await migrate(db.pool, { service: 'identity', dir: migrationsDir('identity') });
  const clock = new FakeClock(Date.now());
  const issuer = 'https://id.example';
  const kp = await newKeyPair();

  const off = createIdentityDpop(db.pool, issuer, { nonce: 'off', iatWindowSec: 60 }, clock);
  t.equal(await off.tokenRequestProof(ctxOf({}), '/token'), undefined, 'no DPoP header: no proof');
  const p1 = await proofOf(kp, 'POST', `${issuer}/token`);
  const checked = await off.tokenRequestProof(ctxOf({ dpop: p1 }), '/token');
  t.equal(checked?.jkt, await calculateJwkThumbprint(await exportJWK(kp.publicKey)), 'nonces off: accepted without a nonce');
  t.same(await off.answerHeaders(), {}, 'and no DPoP-Nonce is sent');

  // A second replica on the same database refuses the same proof.
  const replica = createIdentityDpop(db.pool, issuer, { nonce: 'off', iatWindowSec: 60 }, clock);
  const replayed = await replica.tokenRequestProof(ctxOf({ dpop: p1 }), '/token').catch((e: unknown) => e);
  t.ok(replayed instanceof OAuthError, 'an OAuth error at the token endpoint');
  t.match(replayed, { error: 'invalid_dpop_proof', description: /already used/ });
  const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM dpop_proofs');
  t.equal(rows[0]!.n, '1', 'one used proof recorded');

  // Nonces required: refused without one, with the nonce to use; another replica's nonce is good.
  const a = createIdentityDpop(db.pool, issuer, { nonce: 'required', iatWindowSec: 60 }, clock);
  const b = createIdentityDpop(db.pool, issuer, { nonce: 'required', iatWindowSec: 60 }, clock);
  const need = (await a
    .tokenRequestProof(ctxOf({ dpop: await proofOf(kp, 'POST', `${issuer}/token`) }), '/token')
    .catch((e: unknown) => e)) as OAuthError;
  t.match(need, { error: 'use_dpop_nonce' });
  const nonce = need.headers['dpop-nonce'];
  t.type(nonce, 'string');
  t.equal((await b.answerHeaders())['dpop-nonce'], nonce, 'both replicas issue the same nonce (one secret in Postgres)');
  t.ok(
    await b.tokenRequestProof(ctxOf({ dpop: await proofOf(kp, 'POST', `${issuer}/token`, { nonce }) }), '/token'),
    "replica b accepts a's nonce",
  );

  // A resource proof: errors are 401 problems carrying the nonce.
  const noNonce = await proofOf(kp, 'GET', `${issuer}/userinfo`, { ath: accessTokenHash('tok') });
  const res = (await a
    .resourceProof(ctxOf({ dpop: noNonce }, '/userinfo', 'get'), '/userinfo', 'tok')
    .catch((e: unknown) => e)) as DpopError;
  t.match(res, { name: 'DpopError', code: 'dpop_nonce_required', status: 401, reason: 'nonce_missing' });
  t.equal(res.headers?.['dpop-nonce'], nonce);
  const ok = await a.resourceProof(
    ctxOf({ dpop: await proofOf(kp, 'GET', `${issuer}/userinfo`, { nonce, ath: accessTokenHash('tok') }) }, '/userinfo', 'get'),
    '/userinfo',
    'tok',
  );
  t.ok(ok.jkt);
});
