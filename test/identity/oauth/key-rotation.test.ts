/**
 * Signing-key rotation: the schedule as pure functions, then the whole lifecycle on a real server
 * and database with the injected clock: publish the new key, sign with it one JWKS cache lifetime
 * later, retire the old one once the longest token it signed has expired; an algorithm change
 * (ES256 → RS256) goes through the same schedule; the shared verifier follows along.
 */
import t from 'tap';
import { createVerifier } from '../../../shared/jwt/index.js';
import { KeyRing } from '../../../identity/keys/key-ring.js';
import { planRotation, publishedKeysAt, signingKeyAt, type KeyRecord, type RotationPolicy } from '../../../identity/keys/key-schedule.js';
import { TokenIssuer } from '../../../identity/tokens/token-issuer.js';
import { rotationPolicy } from '../../../identity/oauth/settings.js';
import { createOAuthRuntime, signingKeysCheck } from '../../../identity/oauth/index.js';
import { basic, decodeJwt, postForm, startOAuthServer, type OAuthServer } from './helpers.js';

const MIN = 60_000;
const DAY = 86_400_000;
const POLICY: RotationPolicy = { alg: 'ES256', rotationIntervalMs: 30 * DAY, jwksMaxAgeMs: 15 * MIN, retireAfterMs: 61 * MIN };
const key = (kid: string, createdAt: number, activateAt: number, retireAt?: number, alg: 'ES256' | 'RS256' = 'ES256'): KeyRecord => ({
  kid,
  alg,
  createdAt,
  activateAt,
  retireAt,
});

t.test('planRotation: the schedule', async (t) => {
  t.same(planRotation([], 0, POLICY), [{ type: 'create', alg: 'ES256', activateAt: 0 }], 'first key signs at once');
  const k1 = key('k1', 0, 0);
  t.same(planRotation([k1], 30 * DAY - 1, POLICY), [], 'nothing before the rotation interval');
  t.same(
    planRotation([k1], 30 * DAY, POLICY),
    [{ type: 'create', alg: 'ES256', activateAt: 30 * DAY + 15 * MIN }],
    'the new key signs one cache lifetime later',
  );
  const k2 = key('k2', 30 * DAY, 30 * DAY + 15 * MIN);
  t.same(planRotation([k1, k2], 30 * DAY, POLICY), [{ type: 'schedule_retire', kid: 'k1', retireAt: 30 * DAY + 15 * MIN + 61 * MIN }]);
  const k1r = key('k1', 0, 0, 30 * DAY + 76 * MIN);
  t.same(planRotation([k1r, k2], 30 * DAY + 5 * MIN, POLICY), [], 'while the new key is pending, no second one');
  t.equal(signingKeyAt([k1r, k2], 30 * DAY + 15 * MIN - 1)!.kid, 'k1');
  t.equal(signingKeyAt([k1r, k2], 30 * DAY + 15 * MIN)!.kid, 'k2', 'switch exactly at activateAt');
  t.same(
    publishedKeysAt([k1r, k2], 30 * DAY + 75 * MIN).map((k) => k.kid),
    ['k1', 'k2'],
    'the old key is published while tokens it signed can be alive',
  );
  t.same(
    publishedKeysAt([k1r, k2], 30 * DAY + 76 * MIN).map((k) => k.kid),
    ['k2'],
    'and not after',
  );
  t.same(planRotation([k1r, k2], 30 * DAY + 76 * MIN, POLICY), [{ type: 'delete', kid: 'k1' }]);
  t.same(
    planRotation([k1], DAY, { ...POLICY, alg: 'RS256' }),
    [{ type: 'create', alg: 'RS256', activateAt: DAY + 15 * MIN }],
    'an algorithm change rotates',
  );
  t.same(planRotation([k1], 400 * DAY, { ...POLICY, rotationIntervalMs: 0 }), [], 'interval 0: never on time alone');
  t.same(
    planRotation([key('old', 0, 0, 10)], 20, POLICY),
    [
      { type: 'create', alg: 'ES256', activateAt: 20 },
      { type: 'delete', kid: 'old' },
    ],
    'everything retired: a new key at once',
  );
});

t.test('rotationPolicy: a key retires after the longest token lifetime (1 h login tokens) plus the skew', async (t) => {
  const p = rotationPolicy({
    issuer: 'x',
    audience: 'a',
    clockSkewSec: 60,
    accessTokenTtlMs: 15 * MIN,
    idTokenTtlMs: 15 * MIN,
    refreshTokenTtlMs: 14 * DAY,
    refreshGraceMs: 0,
    authCodeTtlMs: MIN,
    deviceCodeTtlMs: 10 * MIN,
    devicePollIntervalMs: 5000,
    signingAlg: 'ES256',
    keyRotationIntervalMs: 30 * DAY,
    jwksMaxAgeMs: 15 * MIN,
    adminToken: undefined,
    loginThrottle: { perAccount: 5, perIp: 20, windowMs: 15 * MIN },
    serviceSecret: undefined,
  });
  t.equal(p.retireAfterMs, 61 * MIN);
});

async function ccToken(srv: OAuthServer, secret: string): Promise<string> {
  const r = await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('svc', secret) });
  return r.json.access_token as string;
}

async function jwksKids(srv: OAuthServer): Promise<string[]> {
  const doc = (await (await fetch(`${srv.issuer}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
  return doc.keys.map((k) => k.kid);
}

t.test('rotation on a real server with the injected clock', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_keys');
  const { clientSecret } = await srv.confidentialClient('svc', { scope: 'read:orders' });
  const verifierAt = (): ReturnType<typeof createVerifier> => {
    const v = createVerifier({
      issuer: srv.issuer,
      audience: 'edge-api',
      jwksUrl: `${srv.issuer}/.well-known/jwks.json`,
      clock: srv.clock,
      jwksCooldownMs: 0,
    });
    t.teardown(() => v.close());
    return v;
  };

  const [k1] = await jwksKids(srv);
  const t1 = await ccToken(srv, clientSecret);
  t.equal(decodeJwt(t1).header.kid, k1, 'the first key signs');

  srv.clock.advance(30 * DAY);
  await srv.running.tick();
  const kids = await jwksKids(srv);
  t.equal(kids.length, 2, 'the new key is published');
  const k2 = kids.find((k) => k !== k1)!;
  const t2 = await ccToken(srv, clientSecret);
  t.equal(decodeJwt(t2).header.kid, k1, 'but the old key still signs for one JWKS cache lifetime');
  const early = verifierAt();
  t.equal((await early.verifyAccessToken(t2)).sub, 'svc');

  srv.clock.advance(15 * MIN);
  const t3 = await ccToken(srv, clientSecret);
  t.equal(decodeJwt(t3).header.kid, k2, 'the new key signs once the cache lifetime has passed');
  t.equal((await early.verifyAccessToken(t3)).sub, 'svc', 'a verifier that cached the JWKS before the switch already has it');
  t.same((await jwksKids(srv)).sort(), [k1, k2].sort(), 'the old key stays published');
  t.equal((await verifierAt().verifyAccessToken(t2)).sub, 'svc', 'tokens it signed still verify');

  srv.clock.advance(61 * MIN);
  t.same(await jwksKids(srv), [k2], 'retired after the longest token lifetime');
  await srv.running.tick();
  const { rows } = await srv.pool.query<{ kid: string }>('SELECT kid FROM signing_keys');
  t.same(
    rows.map((r) => r.kid),
    [k2],
    'and its private key deleted',
  );
  const late = verifierAt();
  t.equal((await late.verifyAccessToken(await ccToken(srv, clientSecret))).sub, 'svc');
  await t.rejects(
    late.verifyAccessToken(t2),
    { name: 'TokenError', reason: 'kid_unknown' },
    'a token of the retired key no longer verifies',
  );
});

t.test('algorithm change: ES256 → RS256 through the same schedule, RS256 tokens verify', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_keys_alg');
  const policy: RotationPolicy = { ...rotationPolicy(srv.deps.settings), alg: 'RS256' };
  const ring = new KeyRing(srv.pool, policy, srv.clock);
  await ring.reload();
  const before = ring.describe();
  t.equal(before.length, 1);
  t.equal(before[0]!.alg, 'ES256');
  await ring.step();
  const pending = ring.describe().find((k) => k.alg === 'RS256');
  t.ok(pending, 'an RS256 key is published');
  t.equal(ring.signingKey().alg, 'ES256', 'not signing yet');
  srv.clock.advance(15 * MIN);
  t.equal(ring.signingKey().alg, 'RS256');
  const issuer = new TokenIssuer(ring, srv.clock, {
    issuer: srv.issuer,
    audience: 'edge-api',
    accessTokenTtlMs: 15 * MIN,
    idTokenTtlMs: 15 * MIN,
  });
  const token = issuer.accessToken({ sub: 'u1', role: 'customer', scope: 'read:orders', clientId: 'c' }).token;
  t.equal(decodeJwt(token).header.alg, 'RS256');
  const bounded = new TokenIssuer(ring, srv.clock, {
    issuer: srv.issuer,
    audience: 'edge-api',
    accessTokenTtlMs: 15 * MIN,
    idTokenTtlMs: 15 * MIN,
    maxTtlMs: 60 * MIN,
  });
  t.throws(
    () => bounded.accessToken({ sub: 'u1', role: 'customer', scope: '', ttlMs: 61 * MIN }),
    RangeError,
    'no token may outlive its key',
  );
  t.doesNotThrow(() => bounded.accessToken({ sub: 'u1', role: 'customer', scope: '', ttlMs: 60 * MIN }), 'a 1 h login token is fine');
  const v = createVerifier({ issuer: srv.issuer, audience: 'edge-api', keys: ring.jwks(), clock: srv.clock });
  t.equal((await v.verifyAccessToken(token)).sub, 'u1');
  const jwk = ring.jwks().keys.find((k) => k.alg === 'RS256')!;
  t.match(jwk, { kty: 'RSA', use: 'sig' });
  t.notOk('d' in jwk || 'p' in jwk, 'no private member');
});

t.test('two replicas running the step at once create one key', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_keys_race');
  srv.clock.advance(30 * DAY);
  const a = new KeyRing(srv.pool, rotationPolicy(srv.deps.settings), srv.clock);
  const b = new KeyRing(srv.pool, rotationPolicy(srv.deps.settings), srv.clock);
  const [ra, rb] = await Promise.all([a.step(), b.step()]);
  t.equal(ra.created.length + rb.created.length, 1);
  t.equal(a.describe().length, 2);
});

t.test('signingKeysCheck: /readyz fails until a signing key is loaded', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_keys_ready');
  await t.resolves(signingKeysCheck(srv.running.runtime).check(), 'ready once startOAuth has loaded the keys');
  const other = createOAuthRuntime(srv.pool, { ...srv.deps, registry: undefined });
  await t.rejects(signingKeysCheck(other).check(), /not loaded/, 'not ready for a runtime startOAuth has not loaded');
});
