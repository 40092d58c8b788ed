// @tier: pure
/**
 * DPoP proof validation (shared/dpop, RFC 9449 §4.3): one case per refusal, each asserting its
 * reason and the RFC error it is sent as, plus the thumbprint (RFC 7638's own example), the htu
 * normalisation, the replay store under a fake clock, the server nonces, and the binding rule in
 * the shared access-token verifier (a `cnf.jkt` token refused as Bearer, accepted only with a proof
 * of its key).
 */
import t, { type Test } from 'tap';
import { createHash, generateKeyPairSync, randomBytes, sign as cryptoSign, createHmac, type KeyObject } from 'node:crypto';
import { FakeClock } from '../../shared/clock.js';
import {
  DpopError,
  MemoryReplayStore,
  RedisReplayStore,
  accessTokenHash,
  checkDpopProof,
  createDpopVerifier,
  createNonceSource,
  expectedHtu,
  jwkThumbprint,
  normaliseHtu,
  singleDpopHeader,
  type DpopRequest,
} from '../../shared/dpop/index.js';
import type { TokenError } from '../../shared/jwt/index.js';
import { createVerifier } from '../../shared/jwt/index.js';

const b64 = (v: unknown): string => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

type Kind = 'EC256' | 'EC384' | 'Ed25519' | 'RSA' | 'RSA1024';
function keyPair(kind: Kind): { priv: KeyObject; jwk: Record<string, unknown> } {
  const { privateKey, publicKey } =
    kind === 'EC256'
      ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : kind === 'EC384'
        ? generateKeyPairSync('ec', { namedCurve: 'P-384' })
        : kind === 'Ed25519'
          ? generateKeyPairSync('ed25519')
          : generateKeyPairSync('rsa', { modulusLength: kind === 'RSA' ? 2048 : 1024 });
  return { priv: privateKey, jwk: publicKey.export({ format: 'jwk' }) };
}

function signJws(alg: string, priv: KeyObject | undefined, header: Record<string, unknown>, payload: Record<string, unknown>): string {
  const input = `${b64(header)}.${b64(payload)}`;
  let sig: Buffer;
  if (alg === 'none') sig = Buffer.from('no signature');
  else if (alg.startsWith('HS')) sig = createHmac('sha256', 'secret').update(input).digest();
  else if (alg === 'EdDSA' || alg === 'Ed25519') sig = cryptoSign(null, Buffer.from(input), priv!);
  else if (alg.startsWith('ES')) sig = cryptoSign(`sha${alg.slice(2)}`, Buffer.from(input), { key: priv!, dsaEncoding: 'ieee-p1363' });
  else if (alg.startsWith('PS'))
    sig = cryptoSign(`sha${alg.slice(2)}`, Buffer.from(input), { key: priv!, padding: 6 /* PSS */, saltLength: Number(alg.slice(2)) / 8 });
  else sig = cryptoSign(`sha${alg.slice(2)}`, Buffer.from(input), priv!);
  return `${input}.${sig.toString('base64url')}`;
}

const NOW = 1_800_000_000_000;
const HTU = 'https://api.example.com/v1/things';
const k256 = keyPair('EC256');

function proof(
  over: { header?: Record<string, unknown>; payload?: Record<string, unknown>; alg?: string; priv?: KeyObject; drop?: string[] } = {},
): string {
  const alg = over.alg ?? 'ES256';
  const header: Record<string, unknown> = { typ: 'dpop+jwt', alg, jwk: k256.jwk, ...over.header };
  const payload: Record<string, unknown> = {
    jti: randomBytes(16).toString('base64url'),
    htm: 'GET',
    htu: HTU,
    iat: NOW / 1000,
    ...over.payload,
  };
  for (const d of over.drop ?? []) delete payload[d];
  return signJws(alg, over.priv ?? k256.priv, header, payload);
}

const REQ: DpopRequest = { method: 'GET', htu: HTU };

function refuses(t: Test, p: string, req: DpopRequest, reason: string, rfc = 'invalid_dpop_proof', now = NOW): void {
  t.throws(() => checkDpopProof(p, req, now), { name: 'DpopError', reason, rfcError: rfc }, reason);
}

t.test('a valid proof is accepted and names the RFC 7638 thumbprint of its key', async (t) => {
  const c = checkDpopProof(proof(), REQ, NOW);
  t.equal(c.jkt, jwkThumbprint(k256.jwk));
  t.equal(c.iat, NOW / 1000);
  t.equal(c.replayTtlMs, 61_000 + 0, 'remembered until iat + window (60 s) plus a second');
  for (const [kind, alg] of [
    ['EC384', 'ES384'],
    ['Ed25519', 'EdDSA'],
    ['Ed25519', 'Ed25519'],
    ['RSA', 'RS256'],
    ['RSA', 'PS256'],
  ] as const) {
    const k = keyPair(kind);
    const c2 = checkDpopProof(proof({ alg, priv: k.priv, header: { jwk: k.jwk } }), REQ, NOW);
    t.equal(c2.jkt, jwkThumbprint(k.jwk), `${alg} accepted`);
  }
  const token = 'eyJ.token.value';
  t.ok(checkDpopProof(proof({ payload: { ath: accessTokenHash(token) } }), { ...REQ, accessToken: token }, NOW), 'ath of the token');
});

t.test('RFC 7638 §3.1 example thumbprint', async (t) => {
  const jwk = {
    kty: 'RSA',
    n: '0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw',
    e: 'AQAB',
    alg: 'RS256',
    kid: '2011-04-29',
  };
  t.equal(jwkThumbprint(jwk), 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs');
});

t.test('every refusal, by its reason', async (t) => {
  const rsaSmall = keyPair('RSA1024');
  const ed = keyPair('Ed25519');
  refuses(t, '', REQ, 'missing');
  refuses(t, 'x'.repeat(9000), REQ, 'too_large');
  refuses(t, 'not.a.jws!', REQ, 'malformed');
  refuses(t, `${b64('[1]')}.${b64({})}.c2ln`, REQ, 'header_malformed');
  refuses(t, proof({ header: { typ: 'JWT' } }), REQ, 'typ_invalid');
  refuses(t, proof({ header: { typ: undefined } }), REQ, 'typ_invalid');
  refuses(t, proof({ alg: 'none' }), REQ, 'alg_not_allowed');
  refuses(t, proof({ alg: 'HS256' }), REQ, 'alg_not_allowed');
  refuses(t, proof({ header: { crit: ['exp'] } }), REQ, 'crit_unsupported');
  refuses(t, proof({ header: { jwk: undefined } }), REQ, 'jwk_missing');
  refuses(t, proof({ header: { jwk: 'abc' } }), REQ, 'jwk_invalid');
  const privateJwk = k256.priv.export({ format: 'jwk' });
  refuses(t, proof({ header: { jwk: privateJwk } }), REQ, 'jwk_private');
  refuses(t, proof({ header: { jwk: { kty: 'oct', k: 'c2VjcmV0' } } }), REQ, 'jwk_private');
  refuses(t, proof({ header: { jwk: { kty: 'EC', crv: 'P-256', x: 'AAAA', y: 'AAAA' } } }), REQ, 'jwk_invalid');
  refuses(t, proof({ alg: 'RS256', priv: rsaSmall.priv, header: { jwk: rsaSmall.jwk } }), REQ, 'jwk_invalid');
  refuses(t, proof({ alg: 'ES384' }), REQ, 'jwk_alg_mismatch');
  refuses(t, proof({ alg: 'EdDSA', priv: ed.priv }), REQ, 'jwk_alg_mismatch');
  // Signed by another key than the one in the header.
  refuses(t, proof({ priv: keyPair('EC256').priv }), REQ, 'signature_invalid');
  const good = proof();
  const [h, , s] = good.split('.');
  refuses(t, `${h}.${b64({ jti: 'x'.repeat(20), htm: 'GET', htu: HTU, iat: NOW / 1000 })}.${s}`, REQ, 'signature_invalid');
  refuses(t, proof({ payload: { jti: 'short' } }), REQ, 'claim_invalid');
  refuses(t, proof({ drop: ['jti'] }), REQ, 'claim_invalid');
  refuses(t, proof({ payload: { htm: 'POST' } }), REQ, 'htm_mismatch');
  refuses(t, proof({ payload: { htm: 'get' } }), REQ, 'htm_mismatch');
  refuses(t, proof({ payload: { htu: 'https://api.example.com/v1/other' } }), REQ, 'htu_mismatch');
  refuses(t, proof({ payload: { htu: 'https://evil.example.com/v1/things' } }), REQ, 'htu_mismatch');
  refuses(t, proof({ payload: { htu: 'http://api.example.com/v1/things' } }), REQ, 'htu_mismatch');
  refuses(t, proof({ drop: ['htu'] }), REQ, 'claim_invalid');
  refuses(t, proof({ drop: ['iat'] }), REQ, 'claim_invalid');
  refuses(t, proof({ payload: { iat: NOW / 1000 - 61 } }), REQ, 'iat_out_of_window');
  refuses(t, proof({ payload: { iat: NOW / 1000 + 61 } }), REQ, 'iat_out_of_window');
  const token = 'header.payload.sig';
  refuses(t, proof(), { ...REQ, accessToken: token }, 'ath_missing');
  refuses(t, proof({ payload: { ath: accessTokenHash('other') } }), { ...REQ, accessToken: token }, 'ath_mismatch');
  const nonceOk = (n: unknown): boolean => n === 'good-nonce';
  refuses(t, proof(), { ...REQ, nonce: nonceOk }, 'nonce_missing', 'use_dpop_nonce');
  refuses(t, proof({ payload: { nonce: 'stale' } }), { ...REQ, nonce: nonceOk }, 'nonce_invalid', 'use_dpop_nonce');
  t.ok(checkDpopProof(proof({ payload: { nonce: 'good-nonce' } }), { ...REQ, nonce: nonceOk }, NOW), 'the right nonce passes');
  // Only the allowed algorithms.
  t.throws(() => checkDpopProof(proof(), REQ, NOW, { algs: ['EdDSA'] }), { name: 'DpopError', reason: 'alg_not_allowed' });
  // A configurable window.
  t.ok(checkDpopProof(proof({ payload: { iat: NOW / 1000 - 200 } }), REQ, NOW, { iatWindowSec: 300 }));
  t.throws(() => checkDpopProof(proof({ payload: { iat: NOW / 1000 - 200 } }), REQ, NOW, { iatWindowSec: 120 }), {
    name: 'DpopError',
    reason: 'iat_out_of_window',
  });

  const e = new DpopError('replayed', 'x');
  t.equal(e.code, 'dpop_proof_invalid');
  t.equal(e.status, 401);
  t.match(e.headers?.['www-authenticate'], /^DPoP error="invalid_dpop_proof", algs="ES256 /);
  t.match(new DpopError('nonce_missing', 'x'), { code: 'dpop_nonce_required', headers: { 'www-authenticate': /error="use_dpop_nonce"/ } });
});

t.test('the DPoP header: exactly one', async (t) => {
  t.throws(() => singleDpopHeader(undefined), { name: 'DpopError', reason: 'missing' });
  t.throws(() => singleDpopHeader(' '), { name: 'DpopError', reason: 'missing' });
  t.throws(() => singleDpopHeader('a.b.c, d.e.f'), { name: 'DpopError', reason: 'multiple' });
  t.throws(() => singleDpopHeader(['a.b.c', 'd.e.f']), { name: 'DpopError', reason: 'multiple' });
  t.equal(singleDpopHeader(' a.b.c '), 'a.b.c');
});

t.test('htu is compared after RFC 3986 normalisation, without query and fragment', async (t) => {
  t.equal(normaliseHtu('HTTPS://API.Example.COM:443/v1/things?x=1#f'), HTU);
  t.equal(normaliseHtu('https://api.example.com/v1/%7Ethings'), 'https://api.example.com/v1/~things');
  t.equal(normaliseHtu('https://api.example.com/v1/a%2fb'), 'https://api.example.com/v1/a%2Fb');
  t.equal(normaliseHtu('https://api.example.com'), 'https://api.example.com/');
  t.equal(normaliseHtu('https://api.example.com:8443/x'), 'https://api.example.com:8443/x');
  t.equal(normaliseHtu('ftp://x/y'), undefined);
  t.equal(normaliseHtu('not a url'), undefined);
  t.equal(expectedHtu('https://api.example.com/', '/v1/things?x=1'), HTU);
  t.ok(checkDpopProof(proof({ payload: { htu: 'https://API.example.com:443/v1/things?q=1#frag' } }), REQ, NOW), 'equivalent forms pass');
});

t.test('the verifier accepts a proof once (memory store, fake clock); forgotten after its window', async (t) => {
  const clock = new FakeClock(NOW);
  const store = new MemoryReplayStore(clock);
  const v = createDpopVerifier({ clock, replay: store });
  const p = proof();
  t.ok(await v.verify(p, REQ));
  await t.rejects(v.verify(p, REQ), { name: 'DpopError', reason: 'replayed', code: 'dpop_proof_invalid' });
  // The same jti with another key is another proof.
  const other = keyPair('EC256');
  const jti = 'same-jti-0123456789';
  t.ok(await v.verify(proof({ payload: { jti } }), REQ));
  t.ok(await v.verify(proof({ payload: { jti }, priv: other.priv, header: { jwk: other.jwk } }), REQ));
  clock.advance(62_000);
  await t.rejects(v.verify(p, REQ), { name: 'DpopError', reason: 'iat_out_of_window' }, 'after the window the iat refuses it');

  // Generations: a key is kept at least its TTL and dropped after two generations.
  const gen = new MemoryReplayStore(clock, 1_000_000, 10_000);
  t.equal(gen.claimSync('a', 10_000), true);
  clock.advance(9_999);
  t.equal(gen.claimSync('a', 10_000), false, 'within its TTL: a replay');
  clock.advance(2);
  t.equal(gen.claimSync('b', 10_000), true, 'a rotation');
  t.equal(gen.size, 2, 'a is in the previous generation');
  clock.advance(10_000);
  t.equal(gen.claimSync('c', 10_000), true, 'another rotation drops the generation holding a');
  t.equal(gen.size, 2, 'b and c');
  t.equal(gen.claimSync('a', 10_000), true, 'a, long expired, is new again');
  clock.advance(50_000);
  t.equal(gen.claimSync('d', 10_000), true);
  t.equal(gen.size, 1, 'after a long idle both generations are dropped');
  const longer = new MemoryReplayStore(clock, 1_000_000, 1_000);
  t.equal(longer.claimSync('x', 5_000), true);
  clock.advance(4_000);
  t.equal(longer.claimSync('y', 5_000), true);
  t.equal(longer.claimSync('x', 5_000), false, 'a TTL longer than the generation stretches the generation');

  const full = new MemoryReplayStore(clock, 1);
  const vf = createDpopVerifier({ clock, replay: full });
  t.ok(await vf.verify(proof({ payload: { iat: clock.now() / 1000 } }), REQ));
  await t.rejects(
    vf.verify(proof({ payload: { iat: clock.now() / 1000 } }), REQ),
    { name: 'DpopError', reason: 'replay_store_unavailable', status: 503 },
    'a full store fails closed',
  );

  const down = createDpopVerifier({ clock, replay: { claim: () => Promise.reject(new Error('redis down')) } });
  await t.rejects(down.verify(proof({ payload: { iat: clock.now() / 1000 } }), REQ), {
    name: 'DpopError',
    reason: 'replay_store_unavailable',
    code: 'dependency_unavailable',
  });
});

t.test('the Redis store is one SET NX PX', async (t) => {
  const calls: unknown[][] = [];
  const seen = new Set<string>();
  const store = new RedisReplayStore({
    set(key, value, px, ttl, nx) {
      calls.push([key, value, px, ttl, nx]);
      if (seen.has(key)) return Promise.resolve(null);
      seen.add(key);
      return Promise.resolve('OK');
    },
  });
  t.equal(await store.claim('k', 1500.2), true);
  t.equal(await store.claim('k', 1500), false);
  t.same(calls[0], ['dpop:jti:k', '1', 'PX', 1501, 'NX']);
});

t.test('server nonces: valid in their window and the next, forged or old ones refused', async (t) => {
  const clock = new FakeClock(NOW);
  const secret = randomBytes(32);
  const n = createNonceSource(secret, clock, 60_000);
  const a = n.current();
  t.ok(n.isValid(a));
  t.equal(n.current(), a, 'the same nonce within a window');
  clock.advance(60_000);
  t.not(n.current(), a, 'a new window, a new nonce');
  t.ok(n.isValid(a), 'the previous window still passes');
  clock.advance(60_000);
  t.notOk(n.isValid(a), 'two windows later it does not');
  t.notOk(createNonceSource(randomBytes(32), clock, 60_000).isValid(n.current()), 'another secret: refused');
  t.notOk(n.isValid(undefined));
  t.notOk(n.isValid('x'.repeat(32)));
  const twin = createNonceSource(secret, clock, 60_000);
  t.ok(twin.isValid(n.current()), 'a replica with the same secret accepts it');
});

t.test('shared/jwt: a cnf.jkt token is refused as Bearer and accepted only with a proof of its key', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...(publicKey.export({ format: 'jwk' }) as Record<string, unknown>), kid: 'k1', alg: 'ES256', use: 'sig' };
  const clock = { now: () => NOW };
  const v = createVerifier({ issuer: 'https://id.example', audience: 'edge-api', keys: { keys: [jwk] }, clock });
  t.teardown(() => v.close());
  const at = (extra: Record<string, unknown>): string =>
    signJws(
      'ES256',
      privateKey,
      { typ: 'at+jwt', alg: 'ES256', kid: 'k1' },
      {
        iss: 'https://id.example',
        aud: 'edge-api',
        sub: 'u1',
        role: 'customer',
        iat: NOW / 1000,
        exp: NOW / 1000 + 600,
        jti: 'j1',
        ...extra,
      },
    );
  const jkt = jwkThumbprint(k256.jwk);
  const bound = at({ cnf: { jkt } });
  const plain = at({});

  await t.rejects(v.verifyAccessToken(bound), { name: 'TokenError', reason: 'dpop_bound_as_bearer', code: 'invalid_token' });
  // Twice: the second time from the cache, which must apply the same rule.
  await t.rejects(v.verifyAccessToken(bound), { name: 'TokenError', reason: 'dpop_bound_as_bearer' }, 'also from the token cache');
  const err = (await v.verifyAccessToken(bound).catch((e: unknown) => e)) as TokenError;
  t.match(err.headers?.['www-authenticate'], /DPoP algs=/, 'the challenge names the DPoP scheme');
  t.equal((await v.verifyAccessToken(bound, { jkt })).jkt, jkt, 'with a proof of its key');
  await t.rejects(v.verifyAccessToken(bound, { jkt: jwkThumbprint(keyPair('EC256').jwk) }), {
    name: 'TokenError',
    reason: 'dpop_key_mismatch',
  });
  await t.rejects(
    v.verifyAccessToken(plain, { jkt }),
    { name: 'TokenError', reason: 'dpop_not_bound' },
    'an unbound token under the DPoP scheme',
  );
  const expired = at({ cnf: { jkt }, iat: NOW / 1000 - 700, exp: NOW / 1000 - 100 });
  const dpopErr = (await v.verifyAccessToken(expired, { jkt }).catch((e: unknown) => e)) as TokenError;
  t.match(dpopErr, { name: 'TokenError', reason: 'expired', code: 'token_expired' });
  t.match(dpopErr.headers?.['www-authenticate'], /^DPoP error="invalid_token"/, 'under the DPoP scheme every refusal is a DPoP challenge');
  const bearerErr = (await v
    .verifyAccessToken(at({ iat: NOW / 1000 - 700, exp: NOW / 1000 - 100 }))
    .catch((e: unknown) => e)) as TokenError;
  t.match(bearerErr.headers?.['www-authenticate'], /^Bearer error="invalid_token"/, 'under Bearer a Bearer challenge');
  t.equal((await v.verifyAccessToken(plain)).jkt, undefined, 'an unbound token stays a bearer token');
  await t.rejects(
    v.verifyAccessToken(at({ cnf: { 'x5t#S256': 'abc' } })),
    { name: 'TokenError', reason: 'claim_invalid' },
    'another confirmation method',
  );
  await t.rejects(v.verifyAccessToken(at({ cnf: { jkt: 'short' } })), { name: 'TokenError', reason: 'claim_invalid' });
  await t.rejects(v.verifyAccessToken(at({ cnf: 'x' })), { name: 'TokenError', reason: 'claim_invalid' });
  t.equal(createHash('sha256').update('x').digest('base64url').length, 43);
});
