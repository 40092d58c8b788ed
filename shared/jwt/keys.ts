/**
 * Public signing keys with their algorithm pinned by the key itself.
 *
 * A key's algorithm comes from its type: an EC P-256 key verifies ES256 and nothing else, an RSA
 * key RS256 and nothing else. A JWK's own `alg` member, when present, must agree or the key is
 * skipped. The token header's `alg` is only ever compared against this pinned value, never used
 * to choose how to verify. Symmetric (`oct`) keys are never loaded, so no token can be checked
 * with an HMAC, and the public key can never double as an HMAC secret.
 *
 * Keys are imported once (jose's `importJWK`, which validates the JWK for the algorithm) and kept
 * as node `KeyObject`s, so the hot path is one synchronous `crypto.verify` with no re-import.
 */
import { KeyObject, constants, verify as cryptoVerify, type VerifyKeyObjectInput } from 'node:crypto';
import { importJWK, type JWK } from 'jose';
import { InternalError } from '../errors.js';

export type PinnedAlg = 'ES256' | 'RS256';

/** A JSON Web Key Set document (RFC 7517 §5). */
export interface JwksDocument {
  keys: readonly JWK[] | readonly Record<string, unknown>[];
}

/** An imported public key, ready to verify exactly one algorithm. */
export interface PinnedKey {
  readonly kid: string;
  readonly alg: PinnedAlg;
  /** The public members in canonical order; equal fingerprints mean the same key. */
  readonly fingerprint: string;
  /** Prebuilt `crypto.verify` key argument, so a verification allocates nothing for it. */
  readonly verifyInput: VerifyKeyObjectInput;
}

export const MIN_RSA_BITS = 2048;
export const MAX_KID_LENGTH = 128;

/**
 * A kid is an opaque map key, never a path or URL. We still refuse odd ones outright (empty, over
 * 128 characters, anything outside printable ASCII, `/`, `\`, `..`) so nothing downstream that
 * logs or indexes by kid can be steered, and so a flood of junk kids is refused before any lookup.
 */
export function isAcceptableKid(kid: unknown): kid is string {
  if (typeof kid !== 'string' || kid.length === 0 || kid.length > MAX_KID_LENGTH) return false;
  for (let i = 0; i < kid.length; i++) {
    const c = kid.charCodeAt(i);
    if (c < 0x21 || c > 0x7e || c === 0x2f /* / */ || c === 0x5c /* \ */) return false;
  }
  return !kid.includes('..');
}

/** The algorithm a JWK's type pins it to, or undefined for a key type we never verify with. */
export function pinnedAlgOf(jwk: { kty?: unknown; crv?: unknown }): PinnedAlg | undefined {
  if (jwk.kty === 'EC' && jwk.crv === 'P-256') return 'ES256';
  if (jwk.kty === 'RSA') return 'RS256';
  return undefined;
}

/** Why a JWK was not loaded (`key_import_failed`); logged by kid, never fatal for the rest of the set. */
export class KeyImportError extends InternalError<'key_import_failed'> {
  constructor(message: string) {
    super('key_import_failed', message);
    this.name = 'KeyImportError';
  }
}

function publicMembers(jwk: Record<string, unknown>, alg: PinnedAlg): JWK {
  // Only the public members are imported: a private `d` published by mistake is dropped, not used.
  if (alg === 'ES256') return { kty: 'EC', crv: 'P-256', x: jwk.x as string, y: jwk.y as string };
  return { kty: 'RSA', n: jwk.n as string, e: jwk.e as string };
}

/** Imports one JWK as a verification key with its algorithm pinned. Throws `KeyImportError`. */
export async function importPinnedKey(input: unknown): Promise<PinnedKey> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw new KeyImportError('key is not an object');
  const jwk = input as Record<string, unknown>;
  if (!isAcceptableKid(jwk.kid)) throw new KeyImportError('key has no acceptable kid');
  const alg = pinnedAlgOf(jwk);
  if (!alg) throw new KeyImportError(`key type ${String(jwk.kty)}/${String(jwk.crv ?? '-')} is not accepted for verification`);
  if (jwk.alg !== undefined && jwk.alg !== alg) throw new KeyImportError(`key alg ${String(jwk.alg)} disagrees with its type (${alg})`);
  if (jwk.use !== undefined && jwk.use !== 'sig') throw new KeyImportError('key use is not sig');
  if (jwk.key_ops !== undefined && !(Array.isArray(jwk.key_ops) && jwk.key_ops.includes('verify'))) {
    throw new KeyImportError('key_ops does not allow verify');
  }
  const members = publicMembers(jwk, alg);
  let keyObject: KeyObject;
  try {
    const imported = await importJWK(members, alg);
    if (imported instanceof Uint8Array) throw new KeyImportError('key is symmetric');
    keyObject = KeyObject.from(imported);
  } catch (err) {
    if (err instanceof KeyImportError) throw err;
    throw new KeyImportError('key material is invalid');
  }
  if (keyObject.type !== 'public') throw new KeyImportError('key is not a public key');
  if (alg === 'RS256' && (keyObject.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_RSA_BITS) {
    throw new KeyImportError(`RSA key is shorter than ${MIN_RSA_BITS} bits`);
  }
  const fingerprint =
    alg === 'ES256' ? `ES256|${String(members.x)}|${String(members.y)}` : `RS256|${String(members.n)}|${String(members.e)}`;
  const verifyInput: VerifyKeyObjectInput =
    alg === 'ES256' ? { key: keyObject, dsaEncoding: 'ieee-p1363' } : { key: keyObject, padding: constants.RSA_PKCS1_PADDING };
  return Object.freeze({ kid: jwk.kid, alg, fingerprint, verifyInput });
}

/** ES256 signatures are r‖s, 32 bytes each (RFC 7518 §3.4); nothing else is an ES256 signature. */
const ES256_SIGNATURE_BYTES = 64;

/** Verifies a signature with the key's pinned algorithm. Never throws: a bad signature is `false`. */
export function verifyWithPinnedKey(key: PinnedKey, signingInput: Buffer, signature: Buffer): boolean {
  if (key.alg === 'ES256' && signature.length !== ES256_SIGNATURE_BYTES) return false;
  try {
    return cryptoVerify('sha256', signingInput, key.verifyInput, signature);
  } catch {
    return false;
  }
}
