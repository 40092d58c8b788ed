/**
 * Bearer access tokens on identity's own resource endpoints (userinfo, the admin API): read from
 * `Authorization: Bearer` (RFC 6750 §2.1; never from the query), verified with the shared verifier,
 * and checked against the grant (`sid`): a token of a revoked grant is refused here although it
 * still verifies at the edge until it expires (access tokens are short-lived for that reason).
 */
import { PlatformError } from '../../shared/errors.js';
import type { RequestContext } from '../../shared/http.js';
import { getGrant, type Grant } from '../tokens/grant-store.js';
import type { VerifiedAccessToken } from './local-verifier.js';
import type { OAuthRuntime } from './runtime.js';

export const BEARER_CHALLENGE = 'Bearer realm="identity"';

/**
 * The bearer token of the request. No Authorization header: 401 `credentials_required` with the
 * bare challenge (RFC 6750 §3.1: no error code when the request carries no credentials). One that
 * is not `Bearer <token68>`: 401 `invalid_token` with `error="invalid_request"`, so that every 401
 * after presented credentials names its error.
 */
export function bearerToken(ctx: RequestContext): string {
  const auth = ctx.headers['authorization'] ?? '';
  const m = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i.exec(auth);
  if (m) return m[1]!;
  if (auth.trim() === '')
    throw new PlatformError('credentials_required', {
      detail: 'send an access token as Authorization: Bearer',
      headers: { 'www-authenticate': BEARER_CHALLENGE },
    });
  throw new PlatformError('invalid_token', {
    detail: 'the Authorization header must be "Bearer <access token>"',
    headers: { 'www-authenticate': 'Bearer realm="identity", error="invalid_request"' },
  });
}

function revoked(): PlatformError {
  return new PlatformError('invalid_token', {
    detail: 'the access token belongs to a revoked grant',
    headers: { 'www-authenticate': 'Bearer realm="identity", error="invalid_token"' },
  });
}

export interface AuthenticatedCaller extends VerifiedAccessToken {
  /** The grant of a user token, checked not revoked; undefined for tokens without `sid`. */
  grant: Grant | undefined;
}

/** Verifies the request's bearer token and its grant. Throws 401 problems. */
export async function authenticateBearer(rt: OAuthRuntime, ctx: RequestContext): Promise<AuthenticatedCaller> {
  const v = await rt.verifier.verify(bearerToken(ctx));
  if (v.sid === undefined) return { ...v, grant: undefined };
  const grant = await getGrant(rt.pool, v.sid);
  if (!grant || grant.revokedAt !== undefined || grant.userId !== v.claims.sub) throw revoked();
  return { ...v, grant };
}
