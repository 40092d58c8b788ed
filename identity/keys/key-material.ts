/**
 * Signing-key material: generating a key pair, its public JWK, and importing the stored private
 * key for signing. The private key exists as PKCS#8 PEM in the database row and as a `KeyObject`
 * in memory; `SigningKey` keeps it in a non-enumerable slot so that logging or serialising a key
 * (by mistake) shows only the kid and algorithm.
 */
import { createPrivateKey, generateKeyPair, randomBytes, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import type { SigningAlg } from './key-schedule.js';

const generate = promisify(generateKeyPair);

/** A public JWK as published in the JWKS. */
export interface PublicJwk {
  kty: 'EC' | 'RSA';
  kid: string;
  alg: SigningAlg;
  use: 'sig';
  crv?: 'P-256';
  x?: string;
  y?: string;
  n?: string;
  e?: string;
}

export interface GeneratedKey {
  readonly kid: string;
  readonly alg: SigningAlg;
  readonly publicJwk: PublicJwk;
  /** PKCS#8 PEM. Goes to the database and nowhere else. */
  readonly privatePkcs8: string;
}

/**
 * A kid: 16 random bytes, base64url (22 characters of A–Z a–z 0–9 - _), well inside what the
 * shared verifier accepts (1–128 printable characters without / \ or ..).
 */
export function newKid(): string {
  return randomBytes(16).toString('base64url');
}

/** Generates a P-256 (ES256) or RSA-2048 (RS256) key pair. */
export async function generateSigningKey(alg: SigningAlg, kid: string = newKid()): Promise<GeneratedKey> {
  const pair =
    alg === 'ES256'
      ? await generate('ec', { namedCurve: 'P-256' })
      : await generate('rsa', { modulusLength: 2048, publicExponent: 0x10001 });
  const jwk = pair.publicKey.export({ format: 'jwk' });
  const publicJwk: PublicJwk =
    alg === 'ES256'
      ? { kty: 'EC', crv: 'P-256', x: String(jwk.x), y: String(jwk.y), kid, alg, use: 'sig' }
      : { kty: 'RSA', n: String(jwk.n), e: String(jwk.e), kid, alg, use: 'sig' };
  const privatePkcs8 = String(pair.privateKey.export({ format: 'pem', type: 'pkcs8' }));
  return { kid, alg, publicJwk, privatePkcs8 };
}

/** A key ready to sign: the kid, the algorithm and the precomputed protected headers. */
export class SigningKey {
  readonly kid: string;
  readonly alg: SigningAlg;
  /** base64url of the protected header for an access token (`typ: at+jwt`). */
  readonly accessTokenHeader: string;
  /** base64url of the protected header for an id token (`typ: JWT`). */
  readonly idTokenHeader: string;
  declare readonly privateKey: KeyObject;

  constructor(kid: string, alg: SigningAlg, privateKey: KeyObject) {
    this.kid = kid;
    this.alg = alg;
    this.accessTokenHeader = Buffer.from(JSON.stringify({ alg, typ: 'at+jwt', kid })).toString('base64url');
    this.idTokenHeader = Buffer.from(JSON.stringify({ alg, typ: 'JWT', kid })).toString('base64url');
    Object.defineProperty(this, 'privateKey', { value: privateKey, enumerable: false, writable: false });
  }

  toJSON(): { kid: string; alg: SigningAlg } {
    return { kid: this.kid, alg: this.alg };
  }
}

/** Imports a stored private key; throws when the PEM is not a key of `alg`'s type. */
export function importSigningKey(kid: string, alg: SigningAlg, privatePkcs8: string): SigningKey {
  const key = createPrivateKey({ key: privatePkcs8, format: 'pem' });
  const type = key.asymmetricKeyType;
  if (
    (alg === 'ES256' && (type !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')) ||
    (alg === 'RS256' && type !== 'rsa')
  ) {
    throw new Error(`signing key ${kid}: stored key is not an ${alg} key`);
  }
  return new SigningKey(kid, alg, key);
}
