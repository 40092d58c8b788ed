/**
 * The orders API under the DPoP scheme (RFC 9449 §7), as /userinfo: the whole identity app (OAuth
 * routes and orders API on one port, JWT_ISSUER = its own URL) over real HTTP and PostgreSQL, with
 * oauth4webapi as the client. A DPoP-bound access token from the authorization-code flow places
 * and reads orders with `Authorization: DPoP` and a proof; the same token as Bearer is refused and
 * told about DPoP; a replayed proof, a missing proof, another key's proof and a proof without the
 * nonce are refused with DPoP challenges; a token without `cnf` still works as Bearer.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import { SignJWT, exportJWK } from 'jose';
import { accessTokenHash } from '../../../shared/dpop/index.js';
import { validateRegistration } from '../../../identity/clients/client.js';
import { registerClient } from '../../../identity/clients/client-store.js';
import { waitFor } from '../../harness/wait.js';
import { startTestIdentity } from '../accounts/helpers.js';
import { browserSignIn, decodeJwt } from '../oauth/helpers.js';

const REDIRECT = 'https://app.example/callback';
const PASSWORD = 'correct horse battery staple';
const INSECURE = { [oauth.allowInsecureRequests]: true } as const;

async function newKeyPair(): Promise<oauth.CryptoKeyPair> {
  return crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']);
}

/** A DPoP proof made by hand (for the refusals oauth4webapi would never produce). */
async function proofOf(kp: oauth.CryptoKeyPair, htm: string, htu: string, extra: { ath?: string; nonce?: string } = {}): Promise<string> {
  const jwk = await exportJWK(kp.publicKey);
  const payload: Record<string, unknown> = { htm, htu, jti: randomBytes(16).toString('base64url') };
  if (extra.ath !== undefined) payload.ath = extra.ath;
  if (extra.nonce !== undefined) payload.nonce = extra.nonce;
  return new SignJWT(payload).setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk }).setIssuedAt().sign(kp.privateKey);
}

/** Runs an oauth4webapi request + processing pair, once more when the server asks for a nonce. */
async function withNonceRetry<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!oauth.isDPoPNonceError(err)) throw err;
    return run();
  }
}

t.test('orders API: a DPoP-bound token with a proof is accepted; as Bearer, replayed or without a proof it is refused', async (t) => {
  const srv = await startTestIdentity(t, 'identity_orders_dpop');
  const reg = validateRegistration({ client_id: 'spa', client_type: 'public', redirect_uris: [REDIRECT], scope: 'openid read:orders' });
  await registerClient(srv.pool, reg, srv.clock.now());
  const userId = await srv.signup('dpop-orders@example.com', PASSWORD);

  // A DPoP-bound access token through the authorization-code flow, with the nonce dance at /token.
  const issuer = new URL(srv.issuer);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, INSECURE));
  const client: oauth.Client = { client_id: 'spa' };
  const kp = await newKeyPair();
  const DPoP = oauth.DPoP(client, kp);
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(as.authorization_endpoint!);
  url.search = new URLSearchParams({
    client_id: 'spa',
    response_type: 'code',
    redirect_uri: REDIRECT,
    scope: 'openid read:orders',
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
  }).toString();
  const signIn = await browserSignIn(url, 'dpop-orders@example.com', PASSWORD);
  t.equal(signIn.status, 303, 'signed in');
  const params = oauth.validateAuthResponse(as, client, new URL(signIn.location!), state);
  const tokens = await withNonceRetry(async () =>
    oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, REDIRECT, verifier, { DPoP, ...INSECURE }),
    ),
  );
  t.equal(tokens.token_type, 'dpop');
  const at = tokens.access_token;
  t.same(decodeJwt(at).payload.cnf, { jkt: await DPoP.calculateThumbprint() }, 'the access token is DPoP-bound');
  t.equal(decodeJwt(at).payload.sub, userId);

  // Every request oauth4webapi sends, to replay one of its proofs.
  const sent: { url: string; dpop: string | null }[] = [];
  const recording = {
    ...INSECURE,
    DPoP,
    [oauth.customFetch]: (u: string, init: oauth.CustomFetchOptions<string, oauth.ProtectedResourceRequestBody>) => {
      sent.push({ url: u, dpop: new Headers(init.headers).get('dpop') });
      return fetch(u, init);
    },
  };
  const resource = (method: string, path: string, body?: unknown): Promise<Response> =>
    withNonceRetry(() =>
      oauth.protectedResourceRequest(
        at,
        method,
        new URL(path, srv.base),
        new Headers(body === undefined ? {} : { 'content-type': 'application/json' }),
        body === undefined ? null : JSON.stringify(body),
        recording,
      ),
    );

  // Accepted under the DPoP scheme: checkout, then the order read back and the list.
  const checkout = await resource('POST', '/checkout', { items: [{ sku: 'BOOK-1', quantity: 1, price: 10 }], pay: false });
  t.equal(checkout.status, 201, 'checkout with Authorization: DPoP and a proof is accepted');
  const orderId = ((await checkout.json()) as { order_id: string }).order_id;
  t.type(orderId, 'string');
  const read = await resource('GET', `/order/${orderId}?consistent=true`);
  t.equal(read.status, 200, 'the order is read back under the DPoP scheme');
  const listed = await waitFor(
    async () => {
      const r = await resource('GET', '/orders');
      if (r.status !== 200) throw new Error(`GET /orders: ${r.status} ${await r.text()}`);
      const list = (await r.json()) as { order_id: string }[];
      return list.some((o) => o.order_id === orderId) && list;
    },
    { what: 'the order in the DPoP caller’s list' },
  );
  t.equal(listed.length, 1, 'the list of the DPoP caller has its order');

  // The same token as Bearer: refused, and the challenge names the DPoP scheme.
  const asBearer = await srv.call('GET', '/orders', { token: at });
  t.equal(asBearer.status, 401, 'the bound token as Bearer is refused');
  t.equal(asBearer.json?.code, 'invalid_token');
  t.match(asBearer.headers.get('www-authenticate'), /^Bearer error="invalid_token", DPoP algs="/);

  // The last proof oauth4webapi sent, replayed.
  const last = sent.at(-1)!;
  t.equal(new URL(last.url).pathname, '/orders');
  t.type(last.dpop, 'string', 'oauth4webapi sent a DPoP proof');
  const replay = await srv.call('GET', '/orders', { headers: { authorization: `DPoP ${at}`, dpop: last.dpop! } });
  t.equal(replay.status, 401, 'a replayed proof is refused');
  t.equal(replay.json?.code, 'dpop_proof_invalid');
  t.match(replay.headers.get('www-authenticate'), /^DPoP error="invalid_dpop_proof"/);

  // The DPoP scheme without a proof.
  const noProof = await srv.call('GET', '/orders', { headers: { authorization: `DPoP ${at}` } });
  t.equal(noProof.status, 401);
  t.equal(noProof.json?.code, 'dpop_proof_invalid');
  t.match(noProof.headers.get('www-authenticate'), /^DPoP error="invalid_dpop_proof"/);

  // A proof without the nonce (nonces are required by default): use_dpop_nonce, with the nonce.
  const ordersUrl = `${srv.issuer}/orders`;
  const ath = accessTokenHash(at);
  const noNonce = await srv.call('GET', '/orders', {
    headers: { authorization: `DPoP ${at}`, dpop: await proofOf(kp, 'GET', ordersUrl, { ath }) },
  });
  t.equal(noNonce.status, 401);
  t.equal(noNonce.json?.code, 'dpop_nonce_required');
  t.match(noNonce.headers.get('www-authenticate'), /^DPoP error="use_dpop_nonce"/);
  const nonce = noNonce.headers.get('dpop-nonce');
  t.type(nonce, 'string', 'DPoP-Nonce is sent');

  // With the nonce, a hand-made proof of the key works; another key's proof, or one for another URI, does not.
  const good = await srv.call('GET', '/orders', {
    headers: { authorization: `DPoP ${at}`, dpop: await proofOf(kp, 'GET', ordersUrl, { ath, nonce: nonce! }) },
  });
  t.equal(good.status, 200, 'a proof with the nonce is accepted');
  const otherKey = await srv.call('GET', '/orders', {
    headers: { authorization: `DPoP ${at}`, dpop: await proofOf(await newKeyPair(), 'GET', ordersUrl, { ath, nonce: nonce! }) },
  });
  t.equal(otherKey.status, 401, "another key's proof is refused");
  t.equal(otherKey.json?.code, 'invalid_token');
  t.match(otherKey.headers.get('www-authenticate'), /^DPoP error="invalid_token"/);
  const otherUri = await srv.call('GET', '/orders', {
    headers: { authorization: `DPoP ${at}`, dpop: await proofOf(kp, 'GET', `${srv.issuer}/userinfo`, { ath, nonce: nonce! }) },
  });
  t.equal(otherUri.status, 401, 'a proof for another URI is refused');
  t.equal(otherUri.json?.code, 'dpop_proof_invalid');

  // A token without cnf is still a bearer token here.
  const bearer = await srv.login('dpop-orders@example.com', PASSWORD);
  t.equal(decodeJwt(bearer).payload.cnf, undefined, 'the sign-in token is not bound');
  const plain = await srv.call('GET', '/orders', { token: bearer });
  t.equal(plain.status, 200, 'a Bearer token without cnf is accepted');
  t.same(
    (plain.json as unknown as { order_id: string }[]).map((o) => o.order_id),
    [orderId],
  );
  const unboundAsDpop = await srv.call('GET', '/orders', {
    headers: {
      authorization: `DPoP ${bearer}`,
      dpop: await proofOf(kp, 'GET', ordersUrl, { ath: accessTokenHash(bearer), nonce: nonce! }),
    },
  });
  t.equal(unboundAsDpop.status, 401, 'an unbound token under the DPoP scheme is refused');
  t.equal(unboundAsDpop.json?.code, 'invalid_token');
});
