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
  | 'verifier_closed';

function codeFor(reason: TokenRejectReason): ErrorCode {
  if (reason === 'expired') return 'token_expired';
  if (reason === 'keys_unavailable' || reason === 'verifier_closed') return 'dependency_unavailable';
  return 'invalid_token';
}

export class TokenError extends PlatformError {
  readonly reason: TokenRejectReason;

  constructor(reason: TokenRejectReason, detail: string) {
    const code = codeFor(reason);
    super(code, {
      detail,
      // RFC 6750 §3: a 401 for a bearer token names the scheme and the error.
      headers: code === 'dependency_unavailable' ? undefined : { 'www-authenticate': 'Bearer error="invalid_token"' },
    });
    this.name = 'TokenError';
    this.reason = reason;
  }
}

export function isTokenError(err: unknown): err is TokenError {
  return err instanceof TokenError;
}
