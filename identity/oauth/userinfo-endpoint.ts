/**
 * `GET /userinfo` (and `POST`, OpenID Connect Core §5.3): the signed-in user's claims for an access
 * token issued under a grant that includes `openid`. `sub` is the user id, the same as the id
 * token's. `email`/`email_verified` need the `email` scope, `name` the `profile` scope.
 * Errors are problem+json with a `WWW-Authenticate: Bearer` challenge (401 for a missing, invalid,
 * expired or revoked token; 403 `insufficient_scope` without `openid`).
 * A DPoP-bound token is accepted as `Authorization: DPoP` with a proof (oauth/bearer.ts); its
 * answers carry the next `DPoP-Nonce` when nonces are on.
 */
import { PlatformError } from '../../shared/errors.js';
import type { Handler, RequestContext } from '../../shared/http.js';
import { profileClaims } from '../tokens/claims.js';
import { authenticateBearer } from './bearer.js';
import type { OAuthRuntime } from './runtime.js';
import { splitScopes } from './scopes.js';

export function userinfoEndpoint(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    const caller = await authenticateBearer(rt, ctx);
    const scheme = caller.scheme === 'dpop' ? 'DPoP' : 'Bearer realm="identity",';
    const scopes = caller.grant ? splitScopes(caller.grant.scope) : [];
    if (!scopes.includes('openid')) {
      throw new PlatformError('forbidden', {
        detail: 'userinfo needs an access token granted with the openid scope',
        headers: { 'www-authenticate': `${scheme} error="insufficient_scope", scope="openid"` },
      });
    }
    const sub = caller.claims.sub;
    const profile = await rt.users.profile(sub);
    if (!profile) {
      throw new PlatformError('invalid_token', {
        detail: 'the user of this token no longer exists',
        headers: { 'www-authenticate': `${scheme} error="invalid_token"` },
      });
    }
    return {
      body: { sub, user_id: sub, role: profile.role, ...profileClaims(profile, scopes) },
      headers: { 'cache-control': 'no-store', pragma: 'no-cache', ...(caller.scheme === 'dpop' ? await rt.dpop.answerHeaders() : {}) },
    };
  };
}
