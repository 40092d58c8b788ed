/**
 * OAuth errors in their RFC form: `{"error": "...", "error_description": "..."}` (RFC 6749 §5.2,
 * RFC 8628 §3.5, RFC 7662), with the status each RFC gives. This is the one mapping to the wire for
 * the token, device-authorization and introspection endpoints; every other identity endpoint
 * answers problem+json. A description never contains a token, a code or a secret.
 */
import { CodedError, ERROR_CODES, type OAuthErrorCode } from '../../shared/errors.js';
import type { Reply } from '../../shared/http.js';
import type { Logger } from '../../shared/log.js';
import { isDatabaseUnavailable } from '../../shared/db-errors.js';

/**
 * The RFC error codes: the registry's `wire: 'oauth'` section (shared/error-codes.ts), with the
 * status each RFC gives as their `status`.
 */
export type { OAuthErrorCode } from '../../shared/errors.js';

/** The realm of our Basic challenge on invalid_client. */
export const BASIC_CHALLENGE = 'Basic realm="identity", charset="UTF-8"';

/**
 * An OAuth error in its RFC form. A `CodedError` whose `code` is the RFC `error` (kept as `error`
 * too); only {@link oauthErrorReply} puts it on the wire. Anywhere else (problem+json, gRPC) it is
 * not the caller's and is answered as the generic `internal`.
 */
export class OAuthError extends CodedError<OAuthErrorCode> {
  /** The RFC `error` member: the same string as `code`. */
  readonly error: OAuthErrorCode;
  readonly description: string;
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(error: OAuthErrorCode, description: string, opts: { cause?: unknown } = {}) {
    super(error, `${error}: ${description}`, opts);
    this.name = 'OAuthError';
    this.error = error;
    this.description = description;
    this.status = ERROR_CODES[error].status;
    // RFC 6749 §5.2 and RFC 9110: a 401 names the scheme the client should authenticate with.
    this.headers = error === 'invalid_client' ? { 'www-authenticate': BASIC_CHALLENGE } : {};
  }
}

export function isOAuthError(err: unknown): err is OAuthError {
  return err instanceof OAuthError;
}

/** Token responses and their errors are never cached (RFC 6749 §5.1). */
export const NO_STORE = Object.freeze({ 'cache-control': 'no-store', pragma: 'no-cache' });

/** A JSON reply with the no-store headers. */
export function oauthJson(body: unknown, status = 200, headers: Record<string, string> = {}): Reply {
  return { status, body, contentType: 'application/json;charset=UTF-8', headers: { ...NO_STORE, ...headers } };
}

/**
 * The reply for anything an OAuth endpoint threw: an `OAuthError` as itself, anything else as
 * `server_error` (or `temporarily_unavailable` for a 503 platform error), its cause logged only.
 */
export function oauthErrorReply(err: unknown, log: Logger, where: string): Reply {
  if (err instanceof OAuthError) {
    return oauthJson({ error: err.error, error_description: err.description }, err.status, err.headers);
  }
  const status = (err as { status?: unknown } | null)?.status;
  if (status === 503 || isDatabaseUnavailable(err)) {
    log.warn({ err, endpoint: where }, 'oauth: temporarily unavailable');
    return oauthJson({ error: 'temporarily_unavailable' satisfies OAuthErrorCode, error_description: 'try again shortly' }, 503, {
      'retry-after': '1',
    });
  }
  log.error({ err, endpoint: where }, 'oauth: request failed');
  return oauthJson({ error: 'server_error' satisfies OAuthErrorCode, error_description: 'the server could not complete the request' }, 500);
}
