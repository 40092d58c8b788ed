/**
 * The public key a DPoP proof carries in its `jwk` header: refused when it holds any private
 * member, imported with node:crypto, matched against the proof's `alg`, and identified by its
 * RFC 7638 thumbprint (`jkt`: base64url SHA-256 of the required members in lexicographic order).
 *
 * Imports are cached (bounded LRU, keyed by the canonical members), because one client signs many
 * proofs with one key and an import costs more than the signature check.
 */
import {
  createHash,
  createPublicKey,
  constants,
  verify as cryptoVerify,
  type JsonWebKey,
  type KeyObject,
  type VerifyKeyObjectInput,
} from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { DpopError, type DpopAlg } from './errors.js';

/** Members that only a private (or symmetric) JWK has: any of them refuses the proof. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;
export const MIN_RSA_BITS = 2048;

export interface ProofKey {
  /** RFC 7638 thumbprint, base64url. */
  readonly jkt: string;
  readonly kty: 'EC' | 'RSA' | 'OKP';
  /** EC and OKP curve name. */
  readonly crv: string | undefined;
  readonly key: KeyObject;
}

interface AlgSpec {
  hash: string | null;
  kty: 'EC' | 'RSA' | 'OKP';
  crv?: readonly string[];
  sigBytes?: number;
  pss?: boolean;
}

const ALGS: Record<DpopAlg, AlgSpec> = {
  ES256: { hash: 'sha256', kty: 'EC', crv: ['P-256'], sigBytes: 64 },
  ES384: { hash: 'sha384', kty: 'EC', crv: ['P-384'], sigBytes: 96 },
  ES512: { hash: 'sha512', kty: 'EC', crv: ['P-521'], sigBytes: 132 },
  EdDSA: { hash: null, kty: 'OKP', crv: ['Ed25519', 'Ed448'] },
  Ed25519: { hash: null, kty: 'OKP', crv: ['Ed25519'] },
  RS256: { hash: 'sha256', kty: 'RSA' },
  RS384: { hash: 'sha384', kty: 'RSA' },
  RS512: { hash: 'sha512', kty: 'RSA' },
  PS256: { hash: 'sha256', kty: 'RSA', pss: true },
  PS384: { hash: 'sha384', kty: 'RSA', pss: true },
  PS512: { hash: 'sha512', kty: 'RSA', pss: true },
};

export function isSupportedAlg(alg: string): alg is DpopAlg {
  return Object.hasOwn(ALGS, alg);
}

function str(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= 2048;
}

/**
 * The canonical JSON of a JWK's required members (RFC 7638 §3.2), or undefined when the key is
 * not a public EC, RSA or OKP key.
 */
export function thumbprintInput(jwk: Record<string, unknown>): string | undefined {
  switch (jwk.kty) {
    case 'EC':
      if (!str(jwk.crv) || !str(jwk.x) || !str(jwk.y)) return undefined;
      return JSON.stringify({ crv: jwk.crv, kty: 'EC', x: jwk.x, y: jwk.y });
    case 'RSA':
      if (!str(jwk.e) || !str(jwk.n)) return undefined;
      return JSON.stringify({ e: jwk.e, kty: 'RSA', n: jwk.n });
    case 'OKP':
      if (!str(jwk.crv) || !str(jwk.x)) return undefined;
      return JSON.stringify({ crv: jwk.crv, kty: 'OKP', x: jwk.x });
    default:
      return undefined;
  }
}

/** RFC 7638 thumbprint (SHA-256, base64url) of a public JWK. Throws `DpopError('jwk_invalid')`. */
export function jwkThumbprint(jwk: Record<string, unknown>): string {
  const input = thumbprintInput(jwk);
  if (input === undefined) throw new DpopError('jwk_invalid', 'the DPoP proof key is not a public EC, RSA or OKP key');
  return createHash('sha256').update(input).digest('base64url');
}

const cache = new LRUCache<string, ProofKey>({ max: 10_000 });

/** Imports the `jwk` header of a proof. Throws `DpopError`. */
export function importProofKey(jwk: unknown): ProofKey {
  if (jwk === undefined) throw new DpopError('jwk_missing', 'the DPoP proof header has no jwk');
  if (jwk === null || typeof jwk !== 'object' || Array.isArray(jwk))
    throw new DpopError('jwk_invalid', 'the DPoP proof jwk is not an object');
  const j = jwk as Record<string, unknown>;
  for (const m of PRIVATE_MEMBERS) {
    if (Object.hasOwn(j, m)) throw new DpopError('jwk_private', 'the DPoP proof jwk contains private key material');
  }
  const input = thumbprintInput(j);
  if (input === undefined) throw new DpopError('jwk_invalid', 'the DPoP proof key is not a public EC, RSA or OKP key');
  const hit = cache.get(input);
  if (hit) return hit;
  let key: KeyObject;
  try {
    key = createPublicKey({ key: JSON.parse(input) as JsonWebKey, format: 'jwk' });
  } catch {
    throw new DpopError('jwk_invalid', 'the DPoP proof key cannot be imported');
  }
  if (key.type !== 'public') throw new DpopError('jwk_invalid', 'the DPoP proof key is not a public key');
  if (j.kty === 'RSA' && (key.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_RSA_BITS) {
    throw new DpopError('jwk_invalid', `the DPoP proof RSA key is shorter than ${MIN_RSA_BITS} bits`);
  }
  const out: ProofKey = Object.freeze({
    jkt: createHash('sha256').update(input).digest('base64url'),
    kty: j.kty as ProofKey['kty'],
    crv: typeof j.crv === 'string' ? j.crv : undefined,
    key,
  });
  cache.set(input, out);
  return out;
}

/** Checks that `alg` fits the key (type and curve). Throws `DpopError('jwk_alg_mismatch')`. */
export function checkAlgFitsKey(alg: DpopAlg, key: ProofKey): void {
  const spec = ALGS[alg];
  if (spec.kty !== key.kty || (spec.crv !== undefined && !spec.crv.includes(key.crv ?? ''))) {
    throw new DpopError('jwk_alg_mismatch', `the DPoP proof algorithm ${alg} does not fit its key`);
  }
}

/** Verifies a JWS signature with `alg`. Never throws: a bad signature is `false`. */
export function verifyProofSignature(alg: DpopAlg, key: ProofKey, signingInput: Buffer, signature: Buffer): boolean {
  const spec = ALGS[alg];
  if (spec.sigBytes !== undefined && signature.length !== spec.sigBytes) return false;
  const input: VerifyKeyObjectInput =
    spec.kty === 'EC'
      ? { key: key.key, dsaEncoding: 'ieee-p1363' }
      : spec.kty === 'RSA'
        ? spec.pss
          ? { key: key.key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }
          : { key: key.key, padding: constants.RSA_PKCS1_PADDING }
        : { key: key.key };
  try {
    return cryptoVerify(spec.hash, signingInput, input, signature);
  } catch {
    return false;
  }
}
