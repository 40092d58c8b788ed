/**
 * DPoP at the edge (RFC 9449 §7): raw HTTP requests to real sidecars with `Authorization: DPoP`
 * and a `DPoP` proof. Accepted: a proof of the token's key for this method and URI (a public
 * origin from LIMITER_PUBLIC_ORIGIN plus the canonical path). Refused, each by its code: a bound
 * token sent as Bearer, no proof, two proofs, another origin, path, method or token, a stale
 * proof, another key, an unbound token under the DPoP scheme, a replay (in process), and a replay
 * to another sidecar sharing Redis; DPoP refused altogether without LIMITER_PUBLIC_ORIGIN.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { SignJWT, exportJWK, calculateJwkThumbprint, generateKeyPair, type CryptoKey } from 'jose';
import { accessTokenHash } from '../../shared/dpop/index.js';
import { testRedisUrl } from '../harness/env.js';
import { accessClaims, sign, type TestKey } from '../harness/tokens.js';
import { startUpstream } from '../harness/upstream.js';
import { rawBody, rawRequest } from './fixtures/raw.js';
import { startTestSidecar, type TestSidecar } from './fixtures/sidecar.js';

const ORIGIN = 'https://api.example.com';
const up = await startUpstream();
t.teardown(() => up.close());

interface Holder {
  privateKey: CryptoKey;
  jwk: Record<string, unknown>;
  jkt: string;
}
async function holder(): Promise<Holder> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = (await exportJWK(publicKey)) as Record<string, unknown>;
  return { privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

async function proof(
  h: Holder,
  sc: TestSidecar,
  o: { htm?: string; htu?: string; token?: string; iatSec?: number; jti?: string } = {},
): Promise<string> {
  const payload: Record<string, unknown> = {
    htm: o.htm ?? 'GET',
    htu: o.htu ?? `${ORIGIN}/v1/things`,
    jti: o.jti ?? randomBytes(16).toString('base64url'),
    iat: o.iatSec ?? Math.floor(sc.clock.now() / 1000),
  };
  if (o.token !== undefined) payload.ath = accessTokenHash(o.token);
  return new SignJWT(payload).setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: h.jwk }).sign(h.privateKey);
}

function token(sc: TestSidecar, key: TestKey, extra: Record<string, unknown> = {}): string {
  return sign(accessClaims({ nowMs: sc.clock.now() }, extra), { key });
}

interface Answer {
  status: number;
  code: unknown;
  challenge: string;
  body: Record<string, unknown>;
}

/** One raw HTTP/1.1 request; `headers` may repeat a name. */
async function send(sc: TestSidecar, path: string, headers: [string, string][], method = 'GET'): Promise<Answer> {
  const head = [`${method} ${path} HTTP/1.1`, 'host: api.example.com', 'connection: close', ...headers.map(([k, v]) => `${k}: ${v}`)].join(
    '\r\n',
  );
  const r = await rawRequest(sc.sidecar.port, head);
  const headBlock = r.raw.slice(0, r.raw.indexOf('\r\n\r\n'));
  const challenge = /\r\nwww-authenticate: ([^\r]*)/i.exec(headBlock)?.[1] ?? '';
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(rawBody(r)) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: r.status, code: body.code, challenge, body };
}

t.test('one sidecar (replay cache in process)', async (t) => {
  const sc = await startTestSidecar(t, { upstream: up.url, env: { LIMITER_PUBLIC_ORIGIN: `${ORIGIN},http://127.0.0.1:8080` } });
  const h = await holder();
  const at = token(sc, sc.key, { cnf: { jkt: h.jkt } });
  const dpop = (p: string): [string, string][] => [
    ['authorization', `DPoP ${at}`],
    ['dpop', p],
  ];

  const p1 = await proof(h, sc, { token: at });
  const ok = await send(sc, '/v1/things', dpop(p1));
  t.equal(ok.status, 200, 'a proof of the bound key for this request is accepted');
  t.equal(ok.body.headers && (ok.body.headers as Record<string, string>)['x-subject'], 'user:user-1', 'the subject is the token user');
  t.equal((ok.body.headers as Record<string, string>).dpop, p1, 'the proof is forwarded upstream');

  const replay = await send(sc, '/v1/things', dpop(p1));
  t.equal(replay.status, 401, 'the same proof again is refused');
  t.equal(replay.code, 'dpop_proof_invalid');
  t.match(replay.challenge, /^DPoP error="invalid_dpop_proof"/);

  t.equal(
    (await send(sc, '/v1/things', dpop(await proof(h, sc, { token: at, htu: 'http://127.0.0.1:8080/v1/things' })))).status,
    200,
    'the second configured origin',
  );
  t.equal(
    (await send(sc, '/v1/./x/../things', dpop(await proof(h, sc, { token: at })))).status,
    200,
    'htu is compared with the canonical path',
  );
  t.equal((await send(sc, '/v1/things?page=2', dpop(await proof(h, sc, { token: at })))).status, 200, 'the query is not part of htu');

  const asBearer = await send(sc, '/v1/things', [['authorization', `Bearer ${at}`]]);
  t.equal(asBearer.status, 401, 'a DPoP-bound token sent as Bearer is refused');
  t.equal(asBearer.code, 'invalid_token');
  t.match(asBearer.challenge, /DPoP algs="/);

  for (const [name, headers, code] of [
    ['no proof', [['authorization', `DPoP ${at}`]], 'dpop_proof_invalid'],
    ['two DPoP headers', [...dpop(await proof(h, sc, { token: at })), ['dpop', await proof(h, sc, { token: at })]], 'dpop_proof_invalid'],
    ['another origin', dpop(await proof(h, sc, { token: at, htu: 'https://evil.example.com/v1/things' })), 'dpop_proof_invalid'],
    ['another path', dpop(await proof(h, sc, { token: at, htu: `${ORIGIN}/v1/other` })), 'dpop_proof_invalid'],
    ['another method', dpop(await proof(h, sc, { token: at, htm: 'POST' })), 'dpop_proof_invalid'],
    ['no ath', dpop(await proof(h, sc)), 'dpop_proof_invalid'],
    ['ath of another token', dpop(await proof(h, sc, { token: token(sc, sc.key, { cnf: { jkt: h.jkt } }) })), 'dpop_proof_invalid'],
    ['iat 2 minutes old', dpop(await proof(h, sc, { token: at, iatSec: Math.floor(sc.clock.now() / 1000) - 120 })), 'dpop_proof_invalid'],
    ['a proof of another key', dpop(await proof(await holder(), sc, { token: at })), 'invalid_token'],
    ['not a JWS', dpop('garbage'), 'dpop_proof_invalid'],
  ] as const) {
    const r = await send(sc, '/v1/things', headers as [string, string][]);
    t.equal(r.status, 401, `${name}: 401`);
    t.equal(r.code, code, `${name}: ${code}`);
  }

  // An unbound token under the DPoP scheme, even with a valid proof.
  const plain = token(sc, sc.key);
  const unbound = await send(sc, '/v1/things', [
    ['authorization', `DPoP ${plain}`],
    ['dpop', await proof(h, sc, { token: plain })],
  ]);
  t.equal(unbound.status, 401, 'an unbound token with the DPoP scheme is refused');
  t.equal(unbound.code, 'invalid_token');
  t.equal((await send(sc, '/v1/things', [['authorization', `Bearer ${plain}`]])).status, 200, 'an unbound bearer token still works');

  // The window follows the sidecar's clock.
  const early = await proof(h, sc, { token: at });
  sc.clock.advance(61_000);
  t.equal((await send(sc, '/v1/things', dpop(early))).code, 'dpop_proof_invalid', 'a proof older than DPOP_IAT_WINDOW is refused');
});

t.test('without LIMITER_PUBLIC_ORIGIN, DPoP-bound tokens are refused', async (t) => {
  const sc = await startTestSidecar(t, { upstream: up.url });
  const h = await holder();
  const at = token(sc, sc.key, { cnf: { jkt: h.jkt } });
  const r = await send(sc, '/v1/things', [
    ['authorization', `DPoP ${at}`],
    ['dpop', await proof(h, sc, { token: at })],
  ]);
  t.equal(r.status, 401);
  t.equal(r.code, 'dpop_proof_invalid');
  t.match(String(r.body.detail), /LIMITER_PUBLIC_ORIGIN/);
});

t.test('two sidecars sharing Redis: a proof accepted by one is refused by the other', async (t) => {
  const url = testRedisUrl();
  const prefix = `tdpop${randomBytes(4).toString('hex')}`;
  const env = { REDIS_URL: url, LIMITER_REDIS_PREFIX: prefix, LIMITER_PUBLIC_ORIGIN: ORIGIN, LIMITER_REDIS_TIMEOUT: '2s' };
  const a = await startTestSidecar(t, { upstream: up.url, env });
  const b = await startTestSidecar(t, { upstream: up.url, env, key: a.key, clock: a.clock });
  const redis = new Redis(url);
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });
  const h = await holder();
  const at = token(a, a.key, { cnf: { jkt: h.jkt } });
  const p = await proof(h, a, { token: at });
  const headers: [string, string][] = [
    ['authorization', `DPoP ${at}`],
    ['dpop', p],
  ];
  t.equal((await send(a, '/v1/things', headers)).status, 200, 'accepted by the first sidecar');
  const again = await send(b, '/v1/things', headers);
  t.equal(again.status, 401, 'the same proof at the second sidecar is a replay');
  t.equal(again.code, 'dpop_proof_invalid');
  t.match(String(again.body.detail), /already used/);
  const keys = await redis.keys(`${prefix}:dpop:*`);
  t.equal(keys.length, 1, 'one jti key in the shared Redis');
  const ttl = await redis.pttl(keys[0]!);
  t.ok(ttl > 0 && ttl <= 62_000, `it expires with the window (${ttl} ms)`);
  t.equal(
    (await send(b, '/v1/things', [headers[0]!, ['dpop', await proof(h, b, { token: at })]])).status,
    200,
    'a fresh proof works at the second',
  );
});
