/**
 * The shared access-token verifier: every JWT attack it refuses (README, "Who is calling") as its
 * own named test,
 * the time rules under a fake clock, and the JWKS refetch rules against a real HTTP server.
 *
 * Each refusal test first shows that the same token without the attack is accepted, so the test
 * fails if the refusal came from anything other than the attack it names.
 */
import { generateKeyPairSync } from 'node:crypto';
import { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import { jwtVerify, importJWK } from 'jose';
import { createLogger } from '../../shared/log.js';
import {
  createVerifier,
  quotaSubjectOf,
  TokenError,
  type TokenRejectReason,
  type Verifier,
  type VerifierOptions,
} from '../../shared/jwt/index.js';
import {
  accessClaims,
  generateTestKey,
  jwksOf,
  randomKid,
  sign,
  startJwksServer,
  TEST_AUDIENCE,
  TEST_ISSUER,
  type JwksServer,
  type TestKey,
} from '../harness/tokens.js';

const T0 = Date.UTC(2025, 0, 15, 12, 0, 0);
const COOLDOWN = 30_000;
const MAX_AGE = 600_000;

interface FakeClock {
  now(): number;
  advance(ms: number): void;
}

function fakeClock(start = T0): FakeClock {
  let now = start;
  return {
    now: () => now,
    advance(ms) {
      now += ms;
    },
  };
}

const es = await generateTestKey('ES256', 'es-1');
const rs = await generateTestKey('RS256', 'rs-1');
const attacker = await generateTestKey('ES256', 'evil-1');

function staticVerifier(t: Test, clock: FakeClock = fakeClock(), extra: Partial<VerifierOptions> = {}): Verifier {
  const v = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(es, rs), clock, ...extra });
  t.teardown(() => v.close());
  return v;
}

async function remoteSetup(
  t: Test,
  keys: TestKey[] = [es],
  extra: Partial<VerifierOptions> = {},
): Promise<{ v: Verifier; server: JwksServer; clock: FakeClock }> {
  const server = await startJwksServer(jwksOf(...keys));
  t.teardown(() => server.close());
  const clock = fakeClock();
  const v = createVerifier({
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    jwksUrl: server.url,
    jwksCooldownMs: COOLDOWN,
    jwksMaxAgeMs: MAX_AGE,
    // Fetch counts are asserted exactly: no timer (key-set-refresh.test.ts covers it).
    jwksRefreshIntervalMs: 0,
    clock,
    ...extra,
  });
  t.teardown(() => v.close());
  await v.ready();
  t.equal(server.fetches, 1, 'the first load is one fetch');
  return { v, server, clock };
}

const claimsAt = (clock: FakeClock, overrides: Record<string, unknown> = {}): Record<string, unknown> =>
  accessClaims({ nowMs: clock.now() }, overrides);

async function refusal(v: Verifier, token: string): Promise<TokenError> {
  const err: unknown = await v.verifyAccessToken(token).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof TokenError)) throw new Error(`expected a TokenError, got ${err === undefined ? 'acceptance' : String(err)}`);
  return err;
}

/** Asserts a refusal with the given reason and code, and that the detail echoes no part of the token. */
async function refuses(
  t: Test,
  v: Verifier,
  token: string,
  reason: TokenRejectReason,
  detail?: string | RegExp,
  code = 'invalid_token',
): Promise<TokenError> {
  const err = await refusal(v, token);
  t.equal(err.reason, reason, `refused: ${reason}`);
  t.equal(err.code, code);
  t.equal(err.status, code === 'dependency_unavailable' ? 503 : 401);
  if (detail !== undefined) t.match(err.detail, detail);
  for (const part of String(token).split('.')) {
    if (part.length >= 8) t.notOk(String(err.detail).includes(part) || err.message.includes(part), 'the detail never echoes the token');
  }
  return err;
}

async function accepts(t: Test, v: Verifier, token: string, what = 'accepted'): Promise<void> {
  const claims = await v.verifyAccessToken(token);
  t.equal(typeof claims.sub, 'string', what);
}

// ── happy paths ───────────────────────────────────────────────────────────────

t.test('happy path: an ES256 access token verifies and yields its claims', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const claims = claimsAt(clock, { tenant_id: 'acme', plan: 'pro', role: 'admin' });
  const token = sign(claims, { key: es });
  const got = await v.verifyAccessToken(token);
  t.same(got, {
    iss: TEST_ISSUER,
    sub: 'user-1',
    user_id: 'user-1',
    role: 'admin',
    scope: 'read:orders',
    aud: TEST_AUDIENCE,
    exp: claims.exp,
    iat: claims.iat,
    nbf: claims.nbf,
    jti: claims.jti,
    tenant_id: 'acme',
    plan: 'pro',
  });
  t.ok(Object.isFrozen(got), 'claims are frozen (the cache may hand out the same object)');
  t.equal(quotaSubjectOf(got), 'tenant:acme');
  // jose, checking the same rules, agrees.
  const jose = await jwtVerify(token, await importJWK(es.publicJwk, 'ES256'), {
    algorithms: ['ES256'],
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    typ: 'at+jwt',
    currentDate: new Date(clock.now()),
  });
  t.equal(jose.payload.jti, got.jti, 'jose accepts the token too');
});

t.test('an empty scope claim is no scope, as an absent one (identity writes it for OpenID-only grants)', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const got = await v.verifyAccessToken(sign(claimsAt(clock, { scope: '' }), { key: rs }));
  t.equal(got.scope, '');
  await t.rejects(v.verifyAccessToken(sign(claimsAt(clock, { scope: 42 as unknown as string }), { key: rs })), {
    code: 'invalid_token',
    message: /scope/,
  });
});

t.test('happy path: an RS256 access token verifies', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const claims = claimsAt(clock, { user_id: undefined, scope: undefined });
  const token = sign(claims, { key: rs });
  const got = await v.verifyAccessToken(token);
  t.equal(got.sub, 'user-1');
  t.equal(got.user_id, 'user-1', 'user_id is filled from sub when absent');
  t.equal(got.scope, '', 'no scope claim → empty scope');
  t.equal(quotaSubjectOf(got), 'user:user-1');
  const jose = await jwtVerify(token, await importJWK(rs.publicJwk, 'RS256'), {
    algorithms: ['RS256'],
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    typ: 'at+jwt',
    currentDate: new Date(clock.now()),
  });
  t.equal(jose.payload.sub, 'user-1', 'jose accepts the token too');
});

t.test('typ at+jwt is matched case-insensitively and with the application/ prefix', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  for (const typ of ['at+jwt', 'AT+JWT', 'application/at+jwt', 'Application/At+JWT']) {
    await accepts(t, v, sign(claimsAt(clock), { key: es, typ }), `typ ${typ} accepted`);
  }
});

t.test('an aud array that contains our audience is accepted', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const got = await v.verifyAccessToken(sign(claimsAt(clock, { aud: ['https://other.test', TEST_AUDIENCE] }), { key: es }));
  t.same(got.aud, ['https://other.test', TEST_AUDIENCE]);
});

// ── algorithm attacks ─────────────────────────────────────────────────────────

t.test('attack: alg none is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const claims = claimsAt(clock);
  await accepts(t, v, sign(claims, { key: es }), 'control: the signed token is accepted');
  for (const alg of ['none', 'None', 'NONE', 'nOnE']) {
    // The classic form, with an empty signature segment.
    await refuses(t, v, sign(claims, { alg, kid: es.kid }), 'malformed');
    // With a signature segment, so the refusal is the algorithm's and not the shape's.
    const withSig = sign(claims, { alg, kid: es.kid }) + 'AAAA';
    await refuses(t, v, withSig, 'alg_not_allowed', 'token algorithm is not accepted');
  }
});

t.test('attack: HS256 signed with the public key as the HMAC secret is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const claims = claimsAt(clock);
  for (const key of [es, rs]) {
    for (const secret of [
      key.publicPem,
      JSON.stringify(key.publicJwk),
      Buffer.from(key.publicPem.replace(/-----[^-]+-----|\s/g, ''), 'base64'),
    ]) {
      for (const alg of ['HS256', 'HS384', 'HS512']) {
        await refuses(t, v, sign(claims, { key, alg, hmacSecret: secret }), 'alg_not_allowed', 'token algorithm is not accepted');
      }
    }
  }
});

t.test('attack: a symmetric (oct) key in the JWKS is never loaded, so HS256 under its kid is refused', async (t) => {
  const clock = fakeClock();
  const secret = Buffer.from('a shared secret that must never verify tokens!!');
  const v = createVerifier({
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    keys: { keys: [{ kty: 'oct', kid: 'sym-1', alg: 'HS256', k: secret.toString('base64url') }, es.publicJwk] },
    clock,
  });
  t.teardown(() => v.close());
  await v.ready();
  t.same(v.stats().keyIds, [es.kid], 'only the EC key is loaded');
  await refuses(t, v, sign(claimsAt(clock), { alg: 'HS256', kid: 'sym-1', hmacSecret: secret }), 'alg_not_allowed');
  await refuses(t, v, sign(claimsAt(clock), { key: es, kid: 'sym-1' }), 'kid_unknown');
});

t.test('attack: an RS256 token under an ES256-pinned kid is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const claims = claimsAt(clock);
  await accepts(t, v, sign(claims, { key: rs }), 'control: the RS256 token under its own kid is accepted');
  await refuses(t, v, sign(claims, { key: rs, kid: es.kid }), 'alg_mismatch', 'token algorithm does not match its signing key');
  // And the reverse: an ES256 token under the RSA kid.
  await refuses(t, v, sign(claims, { key: es, kid: rs.kid }), 'alg_mismatch');
  // A header that claims ES256 over an RSA signature is simply a bad signature.
  await refuses(t, v, sign(claims, { key: rs, kid: es.kid, alg: 'ES256', signAs: 'RS256' }), 'signature_invalid');
});

t.test('attack: a JWK whose alg member disagrees with its key type is not loaded', async (t) => {
  const clock = fakeClock();
  const v = createVerifier({
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    keys: { keys: [{ ...es.publicJwk, alg: 'HS256' }, { ...rs.publicJwk, alg: 'ES256' }, attacker.publicJwk] },
    clock,
  });
  t.teardown(() => v.close());
  await v.ready();
  t.same(v.stats().keyIds, [attacker.kid], 'both disagreeing keys are skipped');
  await refuses(t, v, sign(claimsAt(clock), { key: es }), 'kid_unknown');
});

t.test('attack: an RSA key shorter than 2048 bits is not loaded', async (t) => {
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  const weak = { ...publicKey.export({ format: 'jwk' }), kid: 'weak-1' };
  const v = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: { keys: [weak, es.publicJwk] } });
  t.teardown(() => v.close());
  await v.ready();
  t.same(v.stats().keyIds, [es.kid]);
});

// ── header attacks ────────────────────────────────────────────────────────────

t.test('attack: an embedded jwk header is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const claims = claimsAt(clock);
  await accepts(t, v, sign(claims, { key: es }), 'control');
  // The attacker signs with their own key and embeds it, under their kid and under ours.
  for (const kid of [attacker.kid, es.kid]) {
    await refuses(t, v, sign(claims, { key: attacker, kid, header: { jwk: attacker.publicJwk } }), 'forbidden_header', '(jwk)');
  }
  // Even our own key embedded, with a valid signature, is refused: the header never supplies keys.
  await refuses(t, v, sign(claims, { key: es, header: { jwk: es.publicJwk } }), 'forbidden_header', '(jwk)');
});

t.test('attack: a jku header is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const claims = claimsAt(clock);
  await accepts(t, v, sign(claims, { key: es }), 'control');
  await refuses(t, v, sign(claims, { key: es, header: { jku: 'https://evil.test/jwks.json' } }), 'forbidden_header', '(jku)');
});

t.test('attack: an x5u header is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  await refuses(t, v, sign(claimsAt(clock), { key: es, header: { x5u: 'https://evil.test/cert.pem' } }), 'forbidden_header', '(x5u)');
});

t.test('attack: an x5c header is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  await refuses(t, v, sign(claimsAt(clock), { key: es, header: { x5c: ['MIIB'] } }), 'forbidden_header', '(x5c)');
});

t.test('attack: a crit header is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  await refuses(t, v, sign(claimsAt(clock), { key: es, header: { crit: ['exp'] } }), 'crit_unsupported');
  await refuses(t, v, sign(claimsAt(clock), { key: es, header: { b64: false } }), 'forbidden_header', '(b64)');
});

t.test('attack: kid path traversal and other odd kids are refused without a JWKS fetch', async (t) => {
  const { v, server, clock } = await remoteSetup(t);
  clock.advance(COOLDOWN + 1); // a fetch would be allowed now, so "no fetch" means the kid was refused first
  const claims = claimsAt(clock);
  const odd: unknown[] = [
    '../../../../etc/passwd',
    '..',
    '/dev/null',
    'keys/es-1',
    'es-1\\..\\x',
    'file:///etc/passwd',
    'es-1\u0000',
    'es-1\n',
    'es 1',
    'ключ',
    'k'.repeat(129),
    '',
    42,
    { $ne: null },
    null,
  ];
  for (const kid of odd) {
    await refuses(t, v, sign(claims, { key: es, kid: null, header: { kid } }), 'kid_invalid', 'token key id (kid) is missing or malformed');
  }
  await refuses(t, v, sign(claims, { key: es, kid: null }), 'kid_invalid');
  t.equal(server.fetches, 1, 'no odd kid caused a fetch');
  await accepts(t, v, sign(claims, { key: es }), 'control: the proper kid still verifies');
});

t.test('attack: an id token (typ JWT) is refused as an access token', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  // The worst case: an id token that even carries our audience and a role.
  const idClaims = claimsAt(clock, { nonce: 'n-1', auth_time: Math.floor(clock.now() / 1000) });
  await refuses(t, v, sign(idClaims, { key: es, typ: 'JWT' }), 'typ_not_access_token', 'token is not an access token (typ must be at+jwt)');
  await refuses(t, v, sign(idClaims, { key: es, typ: 'jwt' }), 'typ_not_access_token');
  await refuses(t, v, sign(idClaims, { key: es, typ: 'at+jwt+x' }), 'typ_not_access_token');
});

t.test('attack: a token without typ is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  await refuses(t, v, sign(claimsAt(clock), { key: es, typ: null }), 'typ_not_access_token');
});

// ── signature ────────────────────────────────────────────────────────────────

t.test('attack: a tampered signature is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  for (const key of [es, rs]) {
    const token = sign(claimsAt(clock), { key });
    await accepts(t, v, token, 'control');
    const sig = token.slice(token.lastIndexOf('.') + 1);
    const flipped = (sig[5] === 'A' ? 'B' : 'A') + '';
    const tampered = token.slice(0, token.lastIndexOf('.') + 1) + sig.slice(0, 5) + flipped + sig.slice(6);
    await refuses(t, v, tampered, 'signature_invalid', 'token signature is invalid');
    // A signature of the wrong length (a DER-encoded ECDSA signature is longer than r‖s).
    await refuses(t, v, token + 'AAAA', 'signature_invalid');
  }
});

t.test('attack: a tampered payload (role raised to admin) is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const token = sign(claimsAt(clock), { key: es });
  const [h, , s] = token.split('.');
  const forged = Buffer.from(JSON.stringify(claimsAt(clock, { role: 'admin' }))).toString('base64url');
  await refuses(t, v, `${h}.${forged}.${s}`, 'signature_invalid');
});

t.test('a token signed by an unpublished key under a published kid is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  await refuses(t, v, sign(claimsAt(clock), { key: attacker, kid: es.kid }), 'signature_invalid');
});

// ── claims ───────────────────────────────────────────────────────────────────

t.test('attack: a wrong aud is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  for (const aud of ['https://other.test', TEST_AUDIENCE + '/', TEST_AUDIENCE.toUpperCase(), ['https://other.test'], [], 42]) {
    await refuses(t, v, sign(claimsAt(clock, { aud }), { key: es }), 'aud_mismatch', 'token audience is not accepted');
  }
});

t.test('attack: a missing aud is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  await refuses(t, v, sign(claimsAt(clock, { aud: undefined }), { key: es }), 'aud_missing', 'token has no audience');
});

t.test('attack: a wrong iss is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  for (const iss of ['https://evil.test', TEST_ISSUER + '/', undefined, 7]) {
    await refuses(t, v, sign(claimsAt(clock, { iss }), { key: es }), 'iss_mismatch', 'token issuer is not accepted');
  }
});

t.test('a token expired beyond the skew is refused with token_expired', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const now = Math.floor(clock.now() / 1000);
  const err = await refuses(t, v, sign(claimsAt(clock, { exp: now - 61 }), { key: es }), 'expired', 'token has expired', 'token_expired');
  t.equal(err.headers?.['www-authenticate'], 'Bearer error="invalid_token"');
  // Exactly at the edge: exp + 60 s == now is expired.
  await refuses(t, v, sign(claimsAt(clock, { exp: now - 60 }), { key: es }), 'expired', undefined, 'token_expired');
});

t.test('a token expired within the skew is accepted', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const now = Math.floor(clock.now() / 1000);
  await accepts(t, v, sign(claimsAt(clock, { exp: now - 30 }), { key: es }));
  await accepts(t, v, sign(claimsAt(clock, { exp: now - 59 }), { key: es }));
});

t.test('the skew is configurable: with 30 s a token 45 s past exp is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock, { clockToleranceSec: 30 });
  const now = Math.floor(clock.now() / 1000);
  await refuses(t, v, sign(claimsAt(clock, { exp: now - 45 }), { key: es }), 'expired', undefined, 'token_expired');
  await accepts(t, v, sign(claimsAt(clock, { exp: now - 29 }), { key: es }));
});

t.test('a token with nbf in the future beyond the skew is refused; within the skew accepted', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const now = Math.floor(clock.now() / 1000);
  await refuses(t, v, sign(claimsAt(clock, { nbf: now + 61 }), { key: es }), 'not_yet_valid', 'token is not valid yet (nbf)');
  await accepts(t, v, sign(claimsAt(clock, { nbf: now + 30 }), { key: es }));
});

t.test('a token with iat in the future beyond the skew is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const now = Math.floor(clock.now() / 1000);
  await refuses(t, v, sign(claimsAt(clock, { iat: now + 120, nbf: now }), { key: es }), 'iat_future');
  await accepts(t, v, sign(claimsAt(clock, { iat: now + 30, nbf: now }), { key: es }));
});

t.test('a token without exp is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  await refuses(t, v, sign(claimsAt(clock, { exp: undefined }), { key: es }), 'exp_missing', 'token has no expiry (exp)');
  await refuses(t, v, sign(claimsAt(clock, { exp: '9999999999' }), { key: es }), 'claim_invalid');
});

t.test('required claims sub, iat, role and jti: missing or mistyped is refused', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const cases: [string, unknown][] = [
    ['sub', undefined],
    ['sub', ''],
    ['sub', 123],
    ['iat', undefined],
    ['iat', 'yesterday'],
    ['role', undefined],
    ['role', ['admin']],
    ['jti', undefined],
    ['tenant_id', 5],
    ['plan', {}],
    ['scope', ['read:orders']],
  ];
  for (const [claim, value] of cases) {
    const err = await refuses(t, v, sign(claimsAt(clock, { [claim]: value }), { key: es }), 'claim_invalid');
    t.match(err.detail, claim, `the detail names ${claim}`);
  }
  await refuses(t, v, sign(claimsAt(clock, { user_id: 'someone-else' }), { key: es }), 'claim_invalid', 'user_id does not match sub');
});

// ── malformed input ──────────────────────────────────────────────────────────

t.test('malformed tokens are refused as invalid_token, never a crash', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const good = sign(claimsAt(clock), { key: es });
  const [h, p, s] = good.split('.') as [string, string, string];
  await refuses(t, v, '', 'malformed');
  await refuses(t, v, 'abc', 'malformed');
  await refuses(t, v, `${h}.${p}`, 'malformed');
  await refuses(t, v, `${h}.${p}.${s}.${s}`, 'malformed');
  await refuses(t, v, `${h}.${p}.${s} `, 'malformed');
  await refuses(t, v, `${h}==.${p}.${s}`, 'malformed');
  await refuses(t, v, `Bearer ${good}`, 'malformed');
  await refuses(t, v, `${Buffer.from('not json').toString('base64url')}.${p}.${s}`, 'header_malformed');
  await refuses(t, v, `${Buffer.from('[1,2]').toString('base64url')}.${p}.${s}`, 'header_malformed');
  await refuses(t, v, 'a'.repeat(9000), 'too_large');
  await refuses(t, v, undefined as unknown as string, 'malformed');
  // A correctly signed payload that is not JSON.
  const input = `${h}.${Buffer.from('not json').toString('base64url')}`;
  const { sign: nodeSign } = await import('node:crypto');
  const sig = nodeSign('sha256', Buffer.from(input), { key: es.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url');
  await refuses(t, v, `${input}.${sig}`, 'malformed', 'token payload is not a JSON object');
});

// ── key set: refetch, cooldown, outage ───────────────────────────────────────

t.test('an unknown kid triggers exactly one refetch, then the rotated-in key verifies', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es]);
  const next = await generateTestKey('ES256', 'es-2');
  await accepts(t, v, sign(claimsAt(clock), { key: es }), 'the current key verifies');
  t.equal(server.fetches, 1, 'a known kid costs no fetch');

  server.setKeys(jwksOf(es, next)); // identity publishes the new key
  clock.advance(COOLDOWN);
  await accepts(t, v, sign(claimsAt(clock), { key: next }), 'the new key verifies after one refetch');
  t.equal(server.fetches, 2, 'exactly one refetch');
  await accepts(t, v, sign(claimsAt(clock), { key: next }), 'and again without fetching');
  await accepts(t, v, sign(claimsAt(clock), { key: es }), 'the old key still verifies while published');
  t.equal(server.fetches, 2, 'no further fetch');
});

t.test('an unknown kid within the cooldown is refused without a fetch', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es]);
  const next = await generateTestKey('ES256', 'es-2');
  server.setKeys(jwksOf(es, next));
  clock.advance(COOLDOWN - 1);
  await refuses(t, v, sign(claimsAt(clock), { key: next }), 'kid_unknown', 'token signing key is unknown');
  t.equal(server.fetches, 1, 'still within the cooldown of the first load');
  clock.advance(1);
  await accepts(t, v, sign(claimsAt(clock), { key: next }), 'once the cooldown has passed, one refetch finds it');
  t.equal(server.fetches, 2);
});

t.test('concurrent verifications with a new kid share one fetch (single flight)', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es]);
  const next = await generateTestKey('RS256', 'rs-2');
  server.setKeys(jwksOf(es, next));
  clock.advance(COOLDOWN);
  const tokens = Array.from({ length: 50 }, () => sign(claimsAt(clock), { key: next }));
  const results = await Promise.all(tokens.map((tok) => v.verifyAccessToken(tok)));
  t.equal(results.length, 50);
  t.equal(server.fetches, 2, 'fifty concurrent unknown-kid verifications, one fetch');
});

t.test('a flood of 1,000 random kids causes at most one fetch per cooldown window', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es]);
  const claims = claimsAt(clock);
  const flood = (): Promise<PromiseSettledResult<unknown>[]> =>
    Promise.allSettled(Array.from({ length: 1000 }, () => v.verifyAccessToken(sign(claims, { key: attacker, kid: randomKid() }))));

  let results = await flood();
  t.ok(
    results.every((r) => r.status === 'rejected' && (r.reason as TokenError).reason === 'kid_unknown'),
    'every random kid is refused',
  );
  t.equal(server.fetches, 1, 'within the first window: no fetch beyond the initial load');

  clock.advance(COOLDOWN);
  results = await flood();
  t.equal(server.fetches, 2, 'a new window: exactly one fetch for the whole flood');
  clock.advance(COOLDOWN / 2);
  results = await flood();
  t.equal(server.fetches, 2, 'half a window later: still one');
  t.equal(results.filter((r) => r.status === 'fulfilled').length, 0);
  clock.advance(COOLDOWN / 2);
  await flood();
  t.equal(server.fetches, 3, 'next window: one more');
  await accepts(t, v, sign(claims, { key: es }), 'legitimate tokens still verify during the flood');
});

t.test('JWKS server down: known kids still verify from the cache', async (t) => {
  const lines: string[] = [];
  const log = createLogger({
    service: 'test',
    level: 'warn',
    destination: new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    }),
  });
  const { v, server, clock } = await remoteSetup(t, [es], { log });
  const token = sign(claimsAt(clock, { exp: Math.floor(clock.now() / 1000) + 3600 }), { key: es });
  await accepts(t, v, token);

  server.setMode('error');
  clock.advance(MAX_AGE + 1); // the set is stale: the next verification starts a background refresh
  await accepts(t, v, sign(claimsAt(clock), { key: es }), 'verifies while the refresh is in flight');
  // An unknown kid joins the refresh in flight, so awaiting it waits for the failure.
  await refuses(t, v, sign(claimsAt(clock), { key: attacker }), 'kid_unknown');
  t.equal(server.fetches, 2, 'one refresh attempt');
  t.equal(v.stats().fetchFailures, 1, 'it failed');
  await accepts(t, v, sign(claimsAt(clock), { key: es }), 'known kid verifies after the failed refresh');
  await accepts(t, v, token, 'and a cached token too');

  await server.close(); // now truly down: connection refused
  clock.advance(COOLDOWN);
  await accepts(t, v, sign(claimsAt(clock), { key: es }));
  await refuses(t, v, sign(claimsAt(clock), { key: attacker }), 'kid_unknown');
  t.equal(v.stats().fetchFailures, 2);
  t.same(v.stats().keyIds, [es.kid], 'the last good set is kept');
  t.ok(
    lines.some((l) => l.includes('jwks: fetch failed')),
    'the failure is logged',
  );
  t.notOk(
    lines.some((l) => l.includes(token.split('.')[2]!)),
    'no token in the log',
  );
});

t.test('a hanging JWKS server is cut off by the fetch timeout', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es], { fetchTimeoutMs: 200 });
  server.setMode('hang');
  clock.advance(COOLDOWN);
  // The server never answers: only the 200 ms fetch timeout can end this refusal (a hang would
  // run into tap's own timeout), and the failed fetch is counted.
  const started = performance.now();
  await refuses(t, v, sign(claimsAt(clock), { key: attacker }), 'kid_unknown');
  t.comment(`refused after ${Math.round(performance.now() - started)} ms`);
  t.equal(v.stats().fetchFailures, 1, 'the hanging fetch was cut off and counted as a failure');
  await accepts(t, v, sign(claimsAt(clock), { key: es }));
});

t.test('a JWKS answer that is not JSON keeps the last good set', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es]);
  server.setMode('garbage');
  clock.advance(COOLDOWN);
  await refuses(t, v, sign(claimsAt(clock), { key: attacker }), 'kid_unknown');
  t.equal(v.stats().fetchFailures, 1);
  await accepts(t, v, sign(claimsAt(clock), { key: es }));
});

t.test('a retired key stops verifying after the next refresh, cached tokens included', async (t) => {
  const next = await generateTestKey('ES256', 'es-2');
  const { v, server, clock } = await remoteSetup(t, [es, next]);
  const old = sign(claimsAt(clock, { exp: Math.floor(clock.now() / 1000) + 3600 }), { key: es });
  await accepts(t, v, old);
  t.equal(v.stats().cachedTokens, 1, 'the token is cached');

  server.setKeys(jwksOf(next)); // identity retires es-1
  clock.advance(MAX_AGE);
  await accepts(t, v, sign(claimsAt(clock), { key: next }), 'triggers the background refresh');
  await refuses(t, v, sign(claimsAt(clock), { key: attacker }), 'kid_unknown'); // waits for that refresh
  t.equal(server.fetches, 2);
  await refuses(t, v, old, 'kid_unknown', 'token signing key is unknown');
  t.same(v.stats().keyIds, [next.kid]);
});

t.test('a key replaced under the same kid invalidates cached tokens signed by the old material', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es]);
  const old = sign(claimsAt(clock, { exp: Math.floor(clock.now() / 1000) + 3600 }), { key: es });
  await accepts(t, v, old);
  const impostor = await generateTestKey('ES256', es.kid);
  server.setKeys(jwksOf(impostor));
  clock.advance(MAX_AGE);
  await accepts(t, v, old, 'still the old set while the refresh runs');
  await refuses(t, v, sign(claimsAt(clock), { key: attacker }), 'kid_unknown');
  await refuses(t, v, old, 'signature_invalid', 'token signature is invalid');
  await accepts(t, v, sign(claimsAt(clock), { key: impostor }));
});

t.test('an unchanged key keeps its cached tokens across a refresh', async (t) => {
  const { v, server, clock } = await remoteSetup(t, [es]);
  const token = sign(claimsAt(clock, { exp: Math.floor(clock.now() / 1000) + 3600 }), { key: es });
  await accepts(t, v, token);
  clock.advance(MAX_AGE);
  await accepts(t, v, token);
  await refuses(t, v, sign(claimsAt(clock), { key: attacker }), 'kid_unknown');
  t.equal(server.fetches, 2, 'refreshed');
  t.equal(v.stats().cachedTokens, 1, 'cache entry kept');
  await accepts(t, v, token);
});

t.test('the token cache never outlives the token: expiry holds on a cached token', async (t) => {
  for (const tokenCacheSize of [10_000, 0]) {
    const clock = fakeClock();
    const v = staticVerifier(t, clock, { tokenCacheSize });
    const exp = Math.floor(clock.now() / 1000) + 120;
    const token = sign(claimsAt(clock, { exp }), { key: es });
    await accepts(t, v, token);
    t.equal(v.stats().cachedTokens, tokenCacheSize > 0 ? 1 : 0);
    clock.advance((120 + 59) * 1000);
    await accepts(t, v, token, `cache ${tokenCacheSize}: within the skew after exp`);
    clock.advance(1000);
    await refuses(t, v, token, 'expired', undefined, 'token_expired');
    t.equal(v.stats().cachedTokens, 0, 'the expired entry is gone');
  }
});

t.test('before any key set has loaded, tokens are refused as 503 dependency_unavailable', async (t) => {
  const server = await startJwksServer(jwksOf(es));
  t.teardown(() => server.close());
  server.setMode('error');
  const clock = fakeClock();
  const v = createVerifier({
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    jwksUrl: server.url,
    clock,
    jwksCooldownMs: COOLDOWN,
    jwksRefreshIntervalMs: 0,
  });
  t.teardown(() => v.close());
  await t.rejects(v.ready(), /JWKS endpoint answered 500/, 'ready() reports the failed first load');
  await refuses(t, v, sign(claimsAt(clock), { key: es }), 'keys_unavailable', undefined, 'dependency_unavailable');
  t.equal(server.fetches, 1, 'the cooldown holds even before the first success');
  server.setMode('ok');
  clock.advance(COOLDOWN);
  await v.ready();
  t.equal(server.fetches, 2);
  await accepts(t, v, sign(claimsAt(clock), { key: es }));
});

t.test('close() refuses further verifications', async (t) => {
  const clock = fakeClock();
  const v = staticVerifier(t, clock);
  const token = sign(claimsAt(clock), { key: es });
  await accepts(t, v, token);
  v.close();
  await refuses(t, v, token, 'verifier_closed', undefined, 'dependency_unavailable');
});

// ── configuration and helpers ────────────────────────────────────────────────

t.test('bad options are refused with config_invalid naming the option', async (t) => {
  const base = { issuer: TEST_ISSUER, audience: TEST_AUDIENCE };
  const refusedConfig = (opts: VerifierOptions, detail: RegExp): void => {
    let err: unknown;
    try {
      createVerifier(opts).close();
    } catch (e) {
      err = e;
    }
    t.match(err, { code: 'config_invalid', detail }, String(detail));
  };
  refusedConfig(base, /exactly one of jwksUrl and keys/);
  refusedConfig({ ...base, keys: jwksOf(es), jwksUrl: 'http://x.test/jwks' }, /exactly one of jwksUrl and keys/);
  refusedConfig({ ...base, jwksUrl: 'ftp://x.test/jwks' }, /jwksUrl must be http or https/);
  refusedConfig({ ...base, jwksUrl: 'not a url' }, /jwksUrl is not a URL/);
  refusedConfig({ ...base, keys: jwksOf(es), clockToleranceSec: 301 }, /clockToleranceSec must be between 0 and 300/);
  refusedConfig({ ...base, keys: jwksOf(es), clockToleranceSec: -1 }, /clockToleranceSec/);
  refusedConfig({ ...base, keys: jwksOf(es), jwksCooldownMs: Number.NaN }, /jwksCooldownMs/);
  refusedConfig({ ...base, audience: '', keys: jwksOf(es) }, /audience is required/);
  refusedConfig({ ...base, issuer: '', keys: jwksOf(es) }, /issuer is required/);
});

t.test('the default skew is 60 s', async (t) => {
  const clock = fakeClock();
  const v = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(es), clock });
  t.teardown(() => v.close());
  const now = Math.floor(clock.now() / 1000);
  await accepts(t, v, sign(claimsAt(clock, { exp: now - 59 }), { key: es }));
  await refuses(t, v, sign(claimsAt(clock, { exp: now - 60 }), { key: es }), 'expired', undefined, 'token_expired');
});

t.test('a static JWKS with no usable key fails ready()', async (t) => {
  const v = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: { keys: [{ kty: 'oct', kid: 'x', k: 'AAAA' }] } });
  t.teardown(() => v.close());
  await t.rejects(v.ready(), /no usable keys/);
});

t.test('quotaSubjectOf: tenant when present, else user', async (t) => {
  t.equal(quotaSubjectOf({ sub: 'u-9', tenant_id: 't-3' }), 'tenant:t-3');
  t.equal(quotaSubjectOf({ sub: 'u-9' }), 'user:u-9');
  t.equal(quotaSubjectOf({ sub: 'u-9', tenant_id: '' }), 'user:u-9');
});
