/**
 * Every JWT attack the verifier refuses (README, "Who is calling"), each as its own named test,
 * against tokens identity really
 * issued and its real published JWKS (fetched over HTTP), through the shared resource-server
 * verifier the sidecar runs. Forged tokens start from a genuine token's claims; tokens with wrong
 * claims are signed with identity's real signing key, as a mis-issued token would be.
 */
import { createPublicKey } from 'node:crypto';
import t from 'tap';
import { createVerifier, type Verifier } from '../../../shared/jwt/index.js';
import { signJwt } from '../../../identity/tokens/jws.js';
import { TokenIssuer } from '../../../identity/tokens/token-issuer.js';
import { generateTestKey, jwksOf, sign, startJwksServer } from '../../harness/tokens.js';
import { basic, decodeJwt, postForm, startOAuthServer, type OAuthServer } from './helpers.js';

let srv: OAuthServer;
let verifier: Verifier;
let genuine: string;
let claims: Record<string, unknown>;
let kid: string;
let publicPem: string;

t.before(async () => {
  srv = await startOAuthServer(t, 'oauth_jwt_attacks');
  const { clientSecret } = await srv.confidentialClient('svc', { scope: 'read:orders' });
  const res = await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('svc', clientSecret) });
  genuine = res.json.access_token as string;
  claims = decodeJwt(genuine).payload;
  kid = decodeJwt(genuine).header.kid as string;
  const jwks = (await (await fetch(`${srv.issuer}/.well-known/jwks.json`)).json()) as { keys: Record<string, string>[] };
  publicPem = String(createPublicKey({ key: jwks.keys[0]!, format: 'jwk' }).export({ type: 'spki', format: 'pem' }));
  // No refresh timer: a test below asserts that no fetch happened.
  verifier = createVerifier({
    issuer: srv.issuer,
    audience: 'edge-api',
    jwksUrl: `${srv.issuer}/.well-known/jwks.json`,
    clock: srv.clock,
    jwksRefreshIntervalMs: 0,
  });
  t.teardown(() => verifier.close());
});

/** Signs `payload` with identity's real current signing key (a token identity could have issued). */
function signedByUs(payload: Record<string, unknown>, typ: 'at+jwt' | 'JWT' = 'at+jwt'): string {
  return signJwt(srv.running.runtime.keys.signingKey(), typ, payload);
}

function issuerWith(opts: { audience?: string; issuer?: string; clockOffsetMs?: number }): TokenIssuer {
  const clock = { now: () => srv.clock.now() + (opts.clockOffsetMs ?? 0) };
  return new TokenIssuer(srv.running.runtime.keys, clock, {
    issuer: opts.issuer ?? srv.issuer,
    audience: opts.audience ?? 'edge-api',
    accessTokenTtlMs: 15 * 60_000,
    idTokenTtlMs: 15 * 60_000,
  });
}

const req = { sub: 'u1', role: 'customer', scope: 'read:orders', clientId: 'svc' };

t.test('baseline: the genuine token verifies (so every refusal below is the attack, not the setup)', async (t) => {
  t.equal((await verifier.verifyAccessToken(genuine)).sub, 'svc');
  t.equal(
    (await verifier.verifyAccessToken(signedByUs({ ...claims, jti: 'fresh' }))).sub,
    'svc',
    'and re-signing its claims with our key too',
  );
});

t.test('attack: alg none is refused', async (t) => {
  for (const alg of ['none', 'None', 'NONE', 'nOnE']) {
    const forged = sign({ ...claims, role: 'admin' }, { alg, kid, signAs: 'none' });
    // The classic form has an empty signature segment, refused for its shape.
    await t.rejects(
      verifier.verifyAccessToken(forged),
      { name: 'TokenError', reason: 'malformed', code: 'invalid_token' },
      `${alg}, empty signature`,
    );
    // With a signature segment, the refusal is the algorithm's.
    await t.rejects(
      verifier.verifyAccessToken(`${forged}AAAA`),
      { name: 'TokenError', reason: 'alg_not_allowed', code: 'invalid_token' },
      `${alg}, any signature`,
    );
  }
});

t.test('attack: ES256 → HS256 confusion, HMAC keyed with our public key, is refused', async (t) => {
  for (const secret of [publicPem, publicPem.trim(), Buffer.from(publicPem)]) {
    const forged = sign({ ...claims, role: 'admin' }, { alg: 'HS256', kid, hmacSecret: secret });
    await t.rejects(verifier.verifyAccessToken(forged), { name: 'TokenError', reason: 'alg_not_allowed' });
  }
});

t.test('attack: RS256 signed by an attacker key under our ES256 kid is refused', async (t) => {
  const attacker = await generateTestKey('RS256');
  const forged = sign({ ...claims, role: 'admin' }, { key: attacker, kid });
  await t.rejects(verifier.verifyAccessToken(forged), { name: 'TokenError', reason: 'alg_mismatch' });
});

t.test('attack: ES256 signed by an attacker key under our kid is refused', async (t) => {
  const attacker = await generateTestKey('ES256');
  await t.rejects(verifier.verifyAccessToken(sign({ ...claims, role: 'admin' }, { key: attacker, kid })), {
    name: 'TokenError',
    reason: 'signature_invalid',
  });
});

t.test('attack: an embedded jwk header (the attacker key inline) is refused', async (t) => {
  const attacker = await generateTestKey('ES256');
  for (const k of [kid, attacker.kid]) {
    const forged = sign({ ...claims, role: 'admin' }, { key: attacker, kid: k, header: { jwk: attacker.publicJwk } });
    await t.rejects(verifier.verifyAccessToken(forged), { name: 'TokenError', reason: 'forbidden_header' });
  }
});

t.test('attack: a jku header pointing at the attacker JWKS is refused, and never fetched', async (t) => {
  const attacker = await generateTestKey('ES256');
  const evil = await startJwksServer(jwksOf(attacker));
  t.teardown(() => evil.close());
  const forged = sign({ ...claims, role: 'admin' }, { key: attacker, header: { jku: evil.url } });
  await t.rejects(verifier.verifyAccessToken(forged), { name: 'TokenError', reason: 'forbidden_header' });
  t.equal(evil.fetches, 0, 'the attacker server was never contacted');
});

t.test('attack: an x5u header is refused', async (t) => {
  const attacker = await generateTestKey('ES256');
  const forged = sign({ ...claims }, { key: attacker, header: { x5u: 'https://evil.example/cert.pem' } });
  await t.rejects(verifier.verifyAccessToken(forged), { name: 'TokenError', reason: 'forbidden_header' });
});

t.test('attack: kid path tricks are refused before any key lookup', async (t) => {
  const before = verifier.stats().fetches;
  for (const k of [
    '../../../../dev/null',
    '/etc/passwd',
    '..',
    'a/../b',
    'keys\\main',
    `${kid}/..`,
    '',
    'x'.repeat(129),
    'kid with space',
    'k\u0000id',
  ]) {
    const forged = sign({ ...claims, role: 'admin' }, { alg: 'HS256', kid: k, hmacSecret: '' });
    await t.rejects(verifier.verifyAccessToken(forged), { code: 'invalid_token' }, JSON.stringify(k));
    const signedTrick = signedByUs({ ...claims });
    const [, p, s] = signedTrick.split('.');
    const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid: k })).toString('base64url');
    await t.rejects(
      verifier.verifyAccessToken(`${header}.${p}.${s}`),
      { name: 'TokenError', reason: 'kid_invalid' },
      `${JSON.stringify(k)} with an ES256 header`,
    );
  }
  t.equal(verifier.stats().fetches, before, 'no JWKS fetch was triggered');
});

t.test('attack: a wrong aud (a token of ours for another API) is refused', async (t) => {
  const other = issuerWith({ audience: 'billing-api' }).accessToken(req).token;
  await t.rejects(verifier.verifyAccessToken(other), { name: 'TokenError', reason: 'aud_mismatch' });
  const list = signedByUs({ ...claims, aud: ['billing-api', 'reports-api'] });
  await t.rejects(verifier.verifyAccessToken(list), { name: 'TokenError', reason: 'aud_mismatch' });
});

t.test('attack: a missing aud is refused', async (t) => {
  const { aud: _aud, ...rest } = claims;
  await t.rejects(verifier.verifyAccessToken(signedByUs(rest)), { name: 'TokenError', reason: 'aud_missing' });
});

t.test('attack: a wrong iss is refused', async (t) => {
  await t.rejects(verifier.verifyAccessToken(issuerWith({ issuer: 'https://evil.example' }).accessToken(req).token), {
    name: 'TokenError',
    reason: 'iss_mismatch',
  });
});

t.test('attack: an expired token is refused (beyond the 60 s skew)', async (t) => {
  const expired = issuerWith({ clockOffsetMs: -(15 * 60_000 + 61_000) }).accessToken(req).token;
  await t.rejects(verifier.verifyAccessToken(expired), { name: 'TokenError', reason: 'expired', code: 'token_expired' });
  const withinSkew = issuerWith({ clockOffsetMs: -(15 * 60_000 + 30_000) }).accessToken(req).token;
  t.equal((await verifier.verifyAccessToken(withinSkew)).sub, 'u1', 'within the skew it is accepted');
});

t.test('attack: a token not yet valid (nbf in the future) is refused', async (t) => {
  const future = issuerWith({ clockOffsetMs: 5 * 60_000 }).accessToken(req).token;
  await t.rejects(verifier.verifyAccessToken(future), { name: 'TokenError', reason: 'not_yet_valid' });
});

t.test('attack: an id token used as an access token is refused', async (t) => {
  const idToken = issuerWith({}).idToken({
    sub: 'u1',
    clientId: 'edge-api',
    authTimeMs: srv.clock.now(),
    sid: 'g',
    profile: { role: 'admin' },
    scopes: ['openid'],
  });
  t.equal(decodeJwt(idToken).header.typ, 'JWT');
  await t.rejects(
    verifier.verifyAccessToken(idToken),
    { name: 'TokenError', reason: 'typ_not_access_token' },
    'even with aud set to the API audience',
  );
  const relabelled = signedByUs(decodeJwt(idToken).payload, 'JWT');
  await t.rejects(verifier.verifyAccessToken(relabelled), { name: 'TokenError', reason: 'typ_not_access_token' });
});

t.test('attack: a tampered payload (role raised to admin) is refused', async (t) => {
  const [h, , s] = genuine.split('.');
  const p = Buffer.from(JSON.stringify({ ...claims, role: 'admin' })).toString('base64url');
  await t.rejects(verifier.verifyAccessToken(`${h}.${p}.${s}`), { name: 'TokenError', reason: 'signature_invalid' });
});

t.test('attack: a crit header is refused', async (t) => {
  const [, p] = genuine.split('.');
  const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid, crit: ['exp'] })).toString('base64url');
  await t.rejects(verifier.verifyAccessToken(`${header}.${p}.${genuine.split('.')[2]}`), {
    name: 'TokenError',
    reason: 'crit_unsupported',
  });
});
