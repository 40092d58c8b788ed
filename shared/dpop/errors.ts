/**
 * Why a DPoP proof (RFC 9449) was refused. Every refusal is a `DpopError`: a `PlatformError` whose
 * code is `dpop_proof_invalid` (RFC 9449's `invalid_dpop_proof`) or `dpop_nonce_required`
 * (`use_dpop_nonce`: the server wants a proof with its current nonce), and whose `reason` is a
 * finer, stable tag for metrics and tests. The detail never contains the proof or a token.
 *
 * Resource servers answer these with 401 and `WWW-Authenticate: DPoP error="<rfc error>"`; the
 * token endpoint maps them onto its OAuth errors (400 `invalid_dpop_proof` / `use_dpop_nonce`).
 */
import { PlatformError } from '../errors.js';

export type DpopRejectReason =
  | 'missing'
  | 'multiple'
  | 'too_large'
  | 'malformed'
  | 'header_malformed'
  | 'typ_invalid'
  | 'alg_not_allowed'
  | 'crit_unsupported'
  | 'jwk_missing'
  | 'jwk_private'
  | 'jwk_invalid'
  | 'jwk_alg_mismatch'
  | 'signature_invalid'
  | 'claim_invalid'
  | 'htm_mismatch'
  | 'htu_mismatch'
  | 'iat_out_of_window'
  | 'ath_missing'
  | 'ath_mismatch'
  | 'replayed'
  | 'replay_store_unavailable'
  | 'nonce_missing'
  | 'nonce_invalid';

/** The RFC 9449 error names, for `WWW-Authenticate` and the token endpoint. */
export type DpopRfcError = 'invalid_dpop_proof' | 'use_dpop_nonce';

export class DpopError extends PlatformError<'dpop_proof_invalid' | 'dpop_nonce_required' | 'dependency_unavailable'> {
  readonly reason: DpopRejectReason;
  /** The RFC 9449 error name this refusal is sent as. */
  readonly rfcError: DpopRfcError;

  constructor(reason: DpopRejectReason, detail: string) {
    const nonce = reason === 'nonce_missing' || reason === 'nonce_invalid';
    const code = reason === 'replay_store_unavailable' ? 'dependency_unavailable' : nonce ? 'dpop_nonce_required' : 'dpop_proof_invalid';
    const rfcError: DpopRfcError = nonce ? 'use_dpop_nonce' : 'invalid_dpop_proof';
    super(code, {
      detail,
      headers:
        code === 'dependency_unavailable'
          ? undefined
          : { 'www-authenticate': `DPoP error="${rfcError}", algs="${DEFAULT_DPOP_ALGS.join(' ')}"` },
    });
    this.name = 'DpopError';
    this.reason = reason;
    this.rfcError = rfcError;
  }
}

export function isDpopError(err: unknown): err is DpopError {
  return err instanceof DpopError;
}

/** Asymmetric JWS algorithms a proof may use (RFC 9449 §4.2: never `none`, never a MAC). */
export const DEFAULT_DPOP_ALGS = Object.freeze([
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
] as const);

export type DpopAlg = (typeof DEFAULT_DPOP_ALGS)[number];
