/**
 * Why a token was refused. Every refusal is a `TokenError`: a `PlatformError` whose code is what
 * the caller sees (`invalid_token`, `token_expired`, or `dependency_unavailable` when no signing
 * keys could be loaded at all) and whose `reason` is a finer, stable tag for metrics and tests.
 *
 * The detail names what was wrong in general terms. It never contains the token or any part of
 * it, so it is safe to send to the caller and to log.
 */
import { PlatformError, type ErrorCode } from '../errors.js';

export type TokenRejectReason =
  | 'malformed'
  | 'too_large'
  | 'header_malformed'
  | 'alg_not_allowed'
  | 'alg_mismatch'
  | 'forbidden_header'
  | 'crit_unsupported'
  | 'typ_not_access_token'
  | 'kid_invalid'
  | 'kid_unknown'
  | 'keys_unavailable'
  | 'signature_invalid'
  | 'iss_mismatch'
  | 'aud_missing'
  | 'aud_mismatch'
  | 'exp_missing'
  | 'expired'
  | 'not_yet_valid'
  | 'iat_future'
  | 'claim_invalid'
  | 'verifier_closed'
  | 'dpop_bound_as_bearer'
  | 'dpop_not_bound'
  | 'dpop_key_mismatch'
  | 'revoked';

function codeFor(reason: TokenRejectReason): ErrorCode {
  if (reason === 'expired') return 'token_expired';
  if (reason === 'keys_unavailable' || reason === 'verifier_closed') return 'dependency_unavailable';
  return 'invalid_token';
}

/** The algorithms a DPoP proof may use, as advertised in a DPoP challenge (shared/dpop DEFAULT_DPOP_ALGS). */
const DPOP_ALGS = 'ES256 ES384 ES512 EdDSA Ed25519 RS256 RS384 RS512 PS256 PS384 PS512';

/** The scheme the token was presented under: the challenge answers in it (RFC 6750 §3, RFC 9449 §7.1). */
export type TokenScheme = 'bearer' | 'dpop';

function challengeFor(code: ErrorCode, reason: TokenRejectReason, scheme: TokenScheme): Record<string, string> | undefined {
  if (code === 'dependency_unavailable') return undefined;
  if (scheme === 'dpop') return { 'www-authenticate': `DPoP error="invalid_token", algs="${DPOP_ALGS}"` };
  // RFC 9449 §7.1: a DPoP-bound token sent as Bearer is told which scheme it needs; a token sent
  // under the DPoP scheme is answered with a DPoP challenge.
  if (reason === 'dpop_bound_as_bearer') return { 'www-authenticate': `Bearer error="invalid_token", DPoP algs="${DPOP_ALGS}"` };
  if (reason === 'dpop_not_bound' || reason === 'dpop_key_mismatch') {
    return { 'www-authenticate': `DPoP error="invalid_token", algs="${DPOP_ALGS}"` };
  }
  // RFC 6750 §3: a 401 for a bearer token names the scheme and the error.
  return { 'www-authenticate': 'Bearer error="invalid_token"' };
}

export class TokenError extends PlatformError {
  readonly reason: TokenRejectReason;

  constructor(reason: TokenRejectReason, detail: string, scheme: TokenScheme = 'bearer') {
    const code = codeFor(reason);
    super(code, { detail, headers: challengeFor(code, reason, scheme) });
    this.name = 'TokenError';
    this.reason = reason;
  }
}

export function isTokenError(err: unknown): err is TokenError {
  return err instanceof TokenError;
}
