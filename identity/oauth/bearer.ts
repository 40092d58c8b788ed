/**
 * Access tokens on identity's own resource endpoints (userinfo, the admin API): read from
 * `Authorization: Bearer` (RFC 6750 §2.1; never from the query) or `Authorization: DPoP` with a
 * `DPoP` proof (RFC 9449 §7), verified with the shared verifier, and checked against the grant
 * (`sid`) and against the revoked access tokens (`jti`, RFC 7009): a revoked token is refused here
 * at once (the sidecars refuse it at their next poll of the revocation list).
 *
 * A DPoP-bound token (`cnf.jkt`) is accepted only under the DPoP scheme with a proof of its key
 * for this request (`htm`, `htu` = issuer + path, `ath`, single use, the nonce when nonces are on);
 * sent as Bearer it is refused. Challenges name both schemes (RFC 9449 §7.1).
 */
import { DEFAULT_DPOP_ALGS } from '../../shared/dpop/index.js';
import { PlatformError } from '../../shared/errors.js';
import type { RequestContext } from '../../shared/http.js';
import { getGrant, type Grant } from '../tokens/grant-store.js';
import { isAccessTokenRevoked } from '../tokens/revocation-store.js';
import type { VerifiedAccessToken } from './local-verifier.js';
import type { OAuthRuntime } from './runtime.js';

const DPOP_CHALLENGE = `DPoP algs="${DEFAULT_DPOP_ALGS.join(' ')}"`;
export const BEARER_CHALLENGE = `Bearer realm="identity", ${DPOP_CHALLENGE}`;

export interface PresentedToken {
  scheme: 'bearer' | 'dpop';
  token: string;
}

/**
 * The access token of the request and its scheme. No Authorization header: 401
 * `credentials_required` with the bare challenges (RFC 6750 §3.1: no error code when the request
 * carries no credentials). One that is not `Bearer <token68>` or `DPoP <token68>`: 401
 * `invalid_token` with `error="invalid_request"`, so that every 401 after presented credentials
 * names its error.
 */
export function presentedToken(ctx: RequestContext): PresentedToken {
  const auth = ctx.headers['authorization'] ?? '';
  const m = /^(Bearer|DPoP) +([A-Za-z0-9._~+/-]+=*) *$/i.exec(auth);
  if (m) return { scheme: m[1]!.toLowerCase() === 'dpop' ? 'dpop' : 'bearer', token: m[2]! };
  if (auth.trim() === '')
    throw new PlatformError('credentials_required', {
      detail: 'send an access token as Authorization: Bearer (or DPoP with a DPoP proof)',
      headers: { 'www-authenticate': BEARER_CHALLENGE },
    });
  throw new PlatformError('invalid_token', {
    detail: 'the Authorization header must be "Bearer <access token>" or "DPoP <access token>"',
    headers: { 'www-authenticate': 'Bearer realm="identity", error="invalid_request"' },
  });
}

/** The bearer token of the request (see `presentedToken`); kept for callers that take only Bearer. */
export function bearerToken(ctx: RequestContext): string {
  return presentedToken(ctx).token;
}

function revoked(scheme: PresentedToken['scheme'], detail = 'the access token belongs to a revoked grant'): PlatformError {
  return new PlatformError('invalid_token', {
    detail,
    headers: { 'www-authenticate': scheme === 'dpop' ? 'DPoP error="invalid_token"' : 'Bearer realm="identity", error="invalid_token"' },
  });
}

export interface AuthenticatedCaller extends VerifiedAccessToken {
  /** The grant of a user token, checked not revoked; undefined for tokens without `sid`. */
  grant: Grant | undefined;
  scheme: PresentedToken['scheme'];
}

/** Verifies the request's access token (and DPoP proof) and its grant. Throws 401 problems. */
export async function authenticateBearer(rt: OAuthRuntime, ctx: RequestContext): Promise<AuthenticatedCaller> {
  const p = presentedToken(ctx);
  let v: VerifiedAccessToken;
  if (p.scheme === 'dpop') {
    const proof = await rt.dpop.resourceProof(ctx, ctx.path, p.token);
    v = await rt.verifier.verify(p.token, { jkt: proof.jkt });
  } else {
    v = await rt.verifier.verify(p.token);
  }
  if (await isAccessTokenRevoked(rt.pool, v.claims.jti)) throw revoked(p.scheme, 'the access token was revoked');
  if (v.sid === undefined) return { ...v, grant: undefined, scheme: p.scheme };
  const grant = await getGrant(rt.pool, v.sid);
  if (!grant || grant.revokedAt !== undefined || grant.userId !== v.claims.sub) throw revoked(p.scheme);
  return { ...v, grant, scheme: p.scheme };
}
