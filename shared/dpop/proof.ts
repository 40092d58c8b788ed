/**
 * DPoP proof validation (RFC 9449 §4.3), the same for the token endpoint and every resource
 * server. `checkDpopProof` is pure (proof, request, time); `createDpopVerifier` adds the replay
 * store, so each proof is accepted once.
 *
 * Checks, cheapest and least trusting first: one compact JWS of bounded size; the header (`typ`
 * `dpop+jwt`, an asymmetric `alg` from the allowed list, no `crit`, a public `jwk` that fits the
 * `alg`); the signature with that key; then the claims: `jti` (16 to 256 characters), `htm` equal
 * to the method, `htu` equal to the request's URI after normalisation (htu.ts), `iat` within
 * ±`iatWindowSec` of now, `ath` = base64url(SHA-256(access token)) when an access token is
 * presented, and the server nonce when the request asks for one. Last, the replay store records
 * `<jkt>.<jti>` until `iat + iatWindowSec`, after which the proof is refused by its `iat` anyway.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import { DEFAULT_DPOP_ALGS, DpopError, type DpopAlg } from './errors.js';
import { normaliseHtu } from './htu.js';
import { checkAlgFitsKey, importProofKey, isSupportedAlg, verifyProofSignature } from './jwk.js';
import type { DpopReplayStore } from './replay-store.js';

export interface DpopRequest {
  /** The request method, as received (compared exactly with `htm`). */
  method: string;
  /**
   * The URI the server expects in `htu`, already in normal form (`normaliseHtu` / `expectedHtu`);
   * several when the server answers under several names (the sidecar's LIMITER_PUBLIC_ORIGIN list).
   */
  htu: string | readonly string[];
  /** The access token presented with the proof (resource requests): `ath` must be its hash. */
  accessToken?: string | undefined;
  /** When set, the proof must carry a nonce this accepts (else `use_dpop_nonce`). */
  nonce?: ((nonce: unknown) => boolean) | undefined;
}

export interface DpopCheckOptions {
  /** Accepted `alg` values; default every asymmetric one we support (DEFAULT_DPOP_ALGS). */
  algs?: readonly DpopAlg[];
  /** A proof's `iat` may be this far from now, either way, in seconds. Default 60. */
  iatWindowSec?: number;
  /** Longer proofs are refused unread. Default 8192 characters. */
  maxProofLength?: number;
}

export interface CheckedProof {
  /** RFC 7638 thumbprint of the proof key: what `cnf.jkt` must equal. */
  readonly jkt: string;
  readonly jti: string;
  /** Epoch seconds. */
  readonly iat: number;
  /** What the replay store records, and for how long. */
  readonly replayKey: string;
  readonly replayTtlMs: number;
}

export const DPOP_DEFAULTS = Object.freeze({ iatWindowSec: 60, maxProofLength: 8192 });

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

function decodeObject(segment: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** base64url(SHA-256(ASCII token)): the `ath` of a proof presented with `token`. */
export function accessTokenHash(token: string): string {
  return createHash('sha256').update(token, 'ascii').digest('base64url');
}

/**
 * The one DPoP header of a request (RFC 9449 §4.3: exactly one). `undefined` or empty: `missing`;
 * several (joined with commas by the HTTP layer): `multiple`.
 */
export function singleDpopHeader(value: string | readonly string[] | undefined): string {
  if (Array.isArray(value)) {
    if (value.length > 1) throw new DpopError('multiple', 'send exactly one DPoP header');
    value = value[0];
  }
  const v = typeof value === 'string' ? value.trim() : '';
  if (v === '') throw new DpopError('missing', 'a DPoP proof is required (the DPoP header)');
  if (v.includes(',')) throw new DpopError('multiple', 'send exactly one DPoP header');
  return v;
}

/** Validates a proof for a request at `nowMs`, without the replay check. Throws `DpopError`. */
export function checkDpopProof(proof: string, req: DpopRequest, nowMs: number, opts: DpopCheckOptions = {}): CheckedProof {
  const window = opts.iatWindowSec ?? DPOP_DEFAULTS.iatWindowSec;
  const algs = opts.algs ?? DEFAULT_DPOP_ALGS;
  if (typeof proof !== 'string' || proof.length === 0) throw new DpopError('missing', 'a DPoP proof is required (the DPoP header)');
  if (proof.length > (opts.maxProofLength ?? DPOP_DEFAULTS.maxProofLength)) throw new DpopError('too_large', 'the DPoP proof is too large');
  if (!COMPACT_JWS.test(proof)) throw new DpopError('malformed', 'the DPoP proof is not a compact JWS');
  const dot1 = proof.indexOf('.');
  const dot2 = proof.indexOf('.', dot1 + 1);

  const h = decodeObject(proof.slice(0, dot1));
  if (!h) throw new DpopError('header_malformed', 'the DPoP proof header is not a JSON object');
  if (typeof h.typ !== 'string' || h.typ.toLowerCase() !== 'dpop+jwt')
    throw new DpopError('typ_invalid', 'the DPoP proof typ must be dpop+jwt');
  const alg = h.alg;
  if (typeof alg !== 'string' || !isSupportedAlg(alg) || !algs.includes(alg)) {
    throw new DpopError('alg_not_allowed', 'the DPoP proof algorithm is not accepted (asymmetric algorithms only)');
  }
  if (Object.hasOwn(h, 'crit'))
    throw new DpopError('crit_unsupported', 'the DPoP proof declares critical extensions, which are not supported');
  const key = importProofKey(h.jwk);
  checkAlgFitsKey(alg, key);
  const signingInput = Buffer.from(proof.slice(0, dot2), 'latin1');
  const signature = Buffer.from(proof.slice(dot2 + 1), 'base64url');
  if (!verifyProofSignature(alg, key, signingInput, signature))
    throw new DpopError('signature_invalid', 'the DPoP proof signature is invalid');

  const p = decodeObject(proof.slice(dot1 + 1, dot2));
  if (!p) throw new DpopError('malformed', 'the DPoP proof payload is not a JSON object');
  const { jti, htm, htu, iat } = p;
  if (typeof jti !== 'string' || jti.length < 16 || jti.length > 256) {
    throw new DpopError('claim_invalid', 'the DPoP proof jti must be a string of 16 to 256 characters');
  }
  if (htm !== req.method) throw new DpopError('htm_mismatch', 'the DPoP proof htm does not match the request method');
  if (typeof htu !== 'string' || htu.length > 4096) throw new DpopError('claim_invalid', 'the DPoP proof htu is missing or invalid');
  // The common case (the client sends the normal form) costs one comparison, not a URL parse.
  if (!htuMatches(htu, req.htu)) {
    throw new DpopError('htu_mismatch', 'the DPoP proof htu does not match the request URI');
  }
  if (typeof iat !== 'number' || !Number.isFinite(iat)) throw new DpopError('claim_invalid', 'the DPoP proof iat is missing or invalid');
  const now = nowMs / 1000;
  if (iat < now - window || iat > now + window) throw new DpopError('iat_out_of_window', 'the DPoP proof iat is too old or in the future');
  if (req.accessToken !== undefined) {
    if (p.ath === undefined) throw new DpopError('ath_missing', 'the DPoP proof has no ath (access token hash)');
    if (p.ath !== accessTokenHash(req.accessToken))
      throw new DpopError('ath_mismatch', 'the DPoP proof ath does not match the access token');
  }
  if (req.nonce !== undefined) {
    if (p.nonce === undefined) throw new DpopError('nonce_missing', 'this server requires a DPoP nonce; use the one in DPoP-Nonce');
    if (!req.nonce(p.nonce)) throw new DpopError('nonce_invalid', 'the DPoP nonce is not current; use the one in DPoP-Nonce');
  }
  return {
    jkt: key.jkt,
    jti,
    iat,
    replayKey: `${key.jkt}.${jti}`,
    // Until the proof leaves the window by its own iat, plus a second for rounding.
    replayTtlMs: Math.max(1000, Math.ceil((iat + window) * 1000 - nowMs) + 1000),
  };
}

function htuMatches(htu: string, want: string | readonly string[]): boolean {
  if (typeof want === 'string') return htu === want || normaliseHtu(htu) === want;
  if (want.includes(htu)) return true;
  const n = normaliseHtu(htu);
  return n !== undefined && want.includes(n);
}

export interface DpopVerifierOptions extends DpopCheckOptions {
  clock: Clock;
  replay: DpopReplayStore;
}

export interface DpopVerifier {
  /** Checks a proof (checkDpopProof), then records it as used. Rejects with `DpopError`. */
  verify(proof: string, req: DpopRequest): Promise<CheckedProof>;
  readonly iatWindowSec: number;
}

export function createDpopVerifier(o: DpopVerifierOptions): DpopVerifier {
  const window = o.iatWindowSec ?? DPOP_DEFAULTS.iatWindowSec;
  if (!Number.isFinite(window) || window < 1 || window > 3600) throw new RangeError('iatWindowSec must be between 1 and 3600');
  const opts: DpopCheckOptions = { algs: o.algs, iatWindowSec: window, maxProofLength: o.maxProofLength };
  return {
    iatWindowSec: window,
    async verify(proof, req) {
      const checked = checkDpopProof(proof, req, o.clock.now(), opts);
      let fresh: boolean;
      try {
        fresh = await o.replay.claim(checked.replayKey, checked.replayTtlMs);
      } catch (err) {
        throw Object.assign(new DpopError('replay_store_unavailable', 'DPoP replay protection is unavailable; try again shortly'), {
          cause: err,
        });
      }
      if (!fresh) throw new DpopError('replayed', 'the DPoP proof was already used (jti)');
      return checked;
    },
  };
}
