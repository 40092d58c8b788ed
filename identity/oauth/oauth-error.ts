/**
 * OAuth errors in their RFC form: `{"error": "...", "error_description": "..."}` (RFC 6749 §5.2,
 * RFC 8628 §3.5, RFC 7662), with the status each RFC gives. This is the one mapping to the wire for
 * the token, device-authorization and introspection endpoints; every other identity endpoint
 * answers problem+json. A description never contains a token, a code or a secret.
 */
import type { Reply } from '../../shared/http.js';
import type { Logger } from '../../shared/log.js';
import { isDatabaseUnavailable } from '../../shared/db-errors.js';

export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'access_denied'
  | 'server_error'
  | 'temporarily_unavailable'
  | 'authorization_pending'
  | 'slow_down'
  | 'expired_token'
  | 'login_required';

const STATUS: Record<OAuthErrorCode, number> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  unsupported_response_type: 400,
  invalid_scope: 400,
  access_denied: 400,
  server_error: 500,
  temporarily_unavailable: 503,
  authorization_pending: 400,
  slow_down: 400,
  expired_token: 400,
  login_required: 400,
};

/** The realm of our Basic challenge on invalid_client. */
export const BASIC_CHALLENGE = 'Basic realm="identity", charset="UTF-8"';

export class OAuthError extends Error {
  readonly error: OAuthErrorCode;
  readonly description: string;
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(error: OAuthErrorCode, description: string, opts: { cause?: unknown } = {}) {
    super(`${error}: ${description}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'OAuthError';
    this.error = error;
    this.description = description;
    this.status = STATUS[error];
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
    return oauthJson({ error: 'temporarily_unavailable', error_description: 'try again shortly' }, 503, { 'retry-after': '1' });
  }
  log.error({ err, endpoint: where }, 'oauth: request failed');
  return oauthJson({ error: 'server_error', error_description: 'the server could not complete the request' }, 500);
}
