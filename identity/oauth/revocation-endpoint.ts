/**
 * `POST /revoke` (RFC 7009): a client ends a token it holds. Form-encoded; the client
 * authenticates as at /token (client_secret_basic, client_secret_post, or `none` for a public
 * client, which RFC 7009 §2.1 allows to revoke its own tokens): a failure is 401 `invalid_client`.
 * `token` is required (400 `invalid_request`); `token_type_hint` (`access_token`,
 * `refresh_token`) only decides which kind is looked up first: the other kind is searched too
 * when the first finds nothing (§2.1), and any other hint is ignored.
 *
 * - A refresh token revokes its whole family (the grant): every refresh token of it stops working
 *   at once, and every access token of it at identity at once and at the sidecars within seconds
 *   (the revocation list, revocation-list.ts). Rotated-out tokens of the family count: the client
 *   asked to end that grant.
 * - An access token revokes itself (its `jti`), not its family, until it expires.
 *
 * The answer is 200 with an empty body whether anything was revoked or not (§2.2): an unknown,
 * malformed, expired or already revoked token, and a token issued to another client (§2.1: the
 * server must check the token was issued to the requesting client, and refuses to act otherwise;
 * answering otherwise would tell the caller the token exists), all get the same 200 and change
 * nothing. Tokens of `/auth/login` belong to no client, so no client revokes them.
 */
import type { Handler, RequestContext } from '../../shared/http.js';
import { authenticateClient, presentedClient } from '../clients/client-auth.js';
import type { OAuthClient } from '../clients/client.js';
import { findRefreshToken, revokeGrant } from '../tokens/grant-store.js';
import { refreshTokenBytes, refreshTokenHash } from '../tokens/opaque.js';
import { revokeAccessToken } from '../tokens/revocation-store.js';
import { NO_STORE, oauthErrorReply } from './oauth-error.js';
import { formParams, required } from './params.js';
import type { OAuthRuntime } from './runtime.js';

/** What looking a token up as one kind found. */
type Found = 'not_this_kind' | 'revoked' | 'unchanged';

async function revokeAsAccessToken(rt: OAuthRuntime, client: OAuthClient, token: string): Promise<Found> {
  if (token.split('.').length !== 3) return 'not_this_kind';
  let claims;
  try {
    // A DPoP-bound token may be revoked too: the binding guards its use, not its end.
    claims = (await rt.verifier.verify(token, 'any')).claims;
  } catch {
    // Not ours, tampered with, signed by a retired key, or expired: nothing left to revoke.
    return 'not_this_kind';
  }
  if (claims.client_id !== client.clientId) return 'unchanged';
  const now = rt.clock.now();
  const recorded = await revokeAccessToken(rt.pool, {
    jti: claims.jti,
    clientId: client.clientId,
    expiresAtMs: claims.exp * 1000,
    nowMs: now,
  });
  return recorded ? 'revoked' : 'unchanged';
}

async function revokeAsRefreshToken(rt: OAuthRuntime, client: OAuthClient, token: string): Promise<Found> {
  const raw = refreshTokenBytes(token);
  if (!raw) return 'not_this_kind';
  const t = await findRefreshToken(rt.pool, refreshTokenHash(raw));
  if (!t) return 'not_this_kind';
  if (t.grant.clientId !== client.clientId) return 'unchanged';
  return (await revokeGrant(rt.pool, t.grant.grantId, 'revoked_by_client', rt.clock.now())) ? 'revoked' : 'unchanged';
}

export function revocationEndpoint(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    try {
      const p = formParams(ctx);
      const client = await authenticateClient(presentedClient(ctx.headers, p), rt.client);
      const token = required(p, 'token');
      const order =
        p.get('token_type_hint') === 'refresh_token'
          ? [revokeAsRefreshToken, revokeAsAccessToken]
          : [revokeAsAccessToken, revokeAsRefreshToken];
      for (const attempt of order) {
        const found = await attempt(rt, client, token);
        if (found === 'not_this_kind') continue;
        if (found === 'revoked') {
          rt.revocations.invalidate();
          rt.metrics.tokenRevocations.inc({ token_type: attempt === revokeAsRefreshToken ? 'refresh_token' : 'access_token' });
        }
        break;
      }
      return { status: 200, headers: { ...NO_STORE } };
    } catch (err) {
      return oauthErrorReply(err, rt.log, 'revoke');
    }
  };
}
