/**
 * Minting access tokens for tests, including the malformed and malicious ones.
 *
 * `sign` builds the compact JWS by hand rather than through jose's SignJWT, because tests need
 * tokens no well-behaved library will produce: `alg: none`, HS256 keyed with a public key,
 * an RS256 signature under an ES256 kid, embedded `jwk`/`jku` headers, odd kids.
 *
 * `startJwksServer` is a real HTTP server on port 0 serving a JWKS document; it counts fetches and
 * can be told to fail, so tests can assert refetch and outage behaviour.
 */
import { createHmac, KeyObject, randomBytes, sign as cryptoSign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK } from 'jose';

export type TestAlg = 'ES256' | 'RS256';

export interface TestKey {
  readonly kid: string;
  readonly alg: TestAlg;
  readonly privateKey: KeyObject;
  /** The public JWK as identity publishes it: kty and key members, kid, alg, use. */
  readonly publicJwk: JWK;
  /** The public key as SPKI PEM: the "secret" of the classic RS/ES → HS256 confusion attack. */
  readonly publicPem: string;
}

export interface JwksDoc {
  keys: JWK[];
}

export const TEST_ISSUER = 'https://identity.test';
export const TEST_AUDIENCE = 'https://api.test';

export function randomKid(): string {
  return randomBytes(9).toString('base64url');
}

/** A fresh key pair with its public JWK. */
export async function generateTestKey(alg: TestAlg = 'ES256', kid: string = randomKid()): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
  const jwk = await exportJWK(publicKey);
  const pem = KeyObject.from(publicKey).export({ type: 'spki', format: 'pem' });
  return Object.freeze({
    kid,
    alg,
    privateKey: KeyObject.from(privateKey),
    publicJwk: { ...jwk, kid, alg, use: 'sig' },
    publicPem: String(pem),
  });
}

export function jwksOf(...keys: TestKey[]): JwksDoc {
  return { keys: keys.map((k) => ({ ...k.publicJwk })) };
}

export interface SignOptions {
  /** The key that signs (and whose kid and alg go in the header unless overridden). */
  key?: TestKey;
  /** Header kid; `null` leaves it out. Default: the key's kid. */
  kid?: string | null;
  /** Header alg. Default: the key's alg. `none` signs nothing; `HS*` signs with `hmacSecret`. */
  alg?: string;
  /** Header typ; `null` leaves it out. Default `at+jwt`. */
  typ?: string | null;
  /** Extra header members, applied last (an `undefined` value removes the member). */
  header?: Record<string, unknown>;
  /** The HMAC secret for an `HS*` alg (e.g. the public key's PEM). */
  hmacSecret?: string | Uint8Array;
  /** Sign with this method regardless of the header alg (e.g. an RS256 signature under `alg: ES256`). */
  signAs?: TestAlg | 'HS256' | 'none';
}

const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

/** Builds and signs a compact JWS with exactly the header asked for. */
export function sign(claims: Record<string, unknown>, opts: SignOptions): string {
  const alg = opts.alg ?? opts.key?.alg ?? 'none';
  const header: Record<string, unknown> = { alg };
  const kid = opts.kid === undefined ? opts.key?.kid : opts.kid;
  if (kid !== null && kid !== undefined) header.kid = kid;
  const typ = opts.typ === undefined ? 'at+jwt' : opts.typ;
  if (typ !== null) header.typ = typ;
  for (const [k, v] of Object.entries(opts.header ?? {})) {
    if (v === undefined) delete header[k];
    else header[k] = v;
  }
  const input = `${b64(header)}.${b64(claims)}`;
  const method = opts.signAs ?? (alg.toUpperCase().startsWith('HS') ? 'HS256' : alg.toLowerCase() === 'none' ? 'none' : alg);
  let sig: Buffer;
  if (method === 'none') sig = Buffer.alloc(0);
  else if (method === 'HS256') {
    if (opts.hmacSecret === undefined) throw new Error('sign: HS256 needs hmacSecret');
    sig = createHmac('sha256', opts.hmacSecret).update(input).digest();
  } else {
    if (!opts.key) throw new Error(`sign: ${method} needs a key`);
    const data = Buffer.from(input);
    sig =
      method === 'ES256'
        ? cryptoSign('sha256', data, { key: opts.key.privateKey, dsaEncoding: 'ieee-p1363' })
        : cryptoSign('sha256', data, opts.key.privateKey);
  }
  return `${input}.${sig.toString('base64url')}`;
}

export interface ClaimsOptions {
  /** Clock time, epoch ms. */
  nowMs: number;
  ttlSec?: number;
  issuer?: string;
  audience?: string;
}

/**
 * A valid access-token claim set at `nowMs` (README, "Tokens"), with overrides; `undefined` removes
 * a claim.
 */
export function accessClaims(opts: ClaimsOptions, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const iat = Math.floor(opts.nowMs / 1000);
  const claims: Record<string, unknown> = {
    iss: opts.issuer ?? TEST_ISSUER,
    sub: 'user-1',
    user_id: 'user-1',
    role: 'customer',
    scope: 'read:orders',
    aud: opts.audience ?? TEST_AUDIENCE,
    iat,
    nbf: iat,
    exp: iat + (opts.ttlSec ?? 900),
    jti: randomBytes(12).toString('base64url'),
  };
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete claims[k];
    else claims[k] = v;
  }
  return claims;
}

/** How the JWKS server answers: normally, with a 500, with invalid JSON, or never (hang). */
export type JwksServerMode = 'ok' | 'error' | 'garbage' | 'hang';

export interface JwksServer {
  readonly url: string;
  /** Requests received so far. */
  readonly fetches: number;
  setKeys(doc: JwksDoc): void;
  setMode(mode: JwksServerMode): void;
  close(): Promise<void>;
}

/** A real HTTP JWKS endpoint on 127.0.0.1, port 0. Register `close` with `t.teardown` at once. */
export async function startJwksServer(initial: JwksDoc): Promise<JwksServer> {
  let doc = initial;
  let mode: JwksServerMode = 'ok';
  let fetches = 0;
  const server: Server = createServer((req, res) => {
    fetches++;
    if (mode === 'hang') return; // never answers; the client's timeout must fire
    if (mode === 'error') {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
      return;
    }
    const body = mode === 'garbage' ? '{"keys": [' : JSON.stringify(doc);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/.well-known/jwks.json`,
    get fetches() {
      return fetches;
    },
    setKeys(next) {
      doc = next;
    },
    setMode(next) {
      mode = next;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
