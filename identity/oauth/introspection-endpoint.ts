/**
 * `POST /auth/introspect` (RFC 7662), for confidential clients only (they authenticate as at
 * /token; a public client gets 401 `invalid_client`). The answer is `{"active": false}` for
 * anything that is not a currently valid token of ours, without saying why:
 *
 * - access tokens: verified by the shared verifier (so an id token, typ `JWT`, is never active),
 *   and inactive once their grant is revoked or they were revoked themselves (`POST /revoke`);
 * - refresh tokens: active while current (not rotated out, unexpired, grant not revoked), and only
 *   to the client they were issued to (another client learns nothing from them).
 */
import type { Handler, RequestContext } from '../../shared/http.js';
import { authenticateClient, presentedClient } from '../clients/client-auth.js';
import { findRefreshToken, getGrant } from '../tokens/grant-store.js';
import { refreshTokenBytes, refreshTokenHash } from '../tokens/opaque.js';
import { isAccessTokenRevoked } from '../tokens/revocation-store.js';
import { oauthErrorReply, oauthJson } from './oauth-error.js';
import { formParams, required } from './params.js';
import type { OAuthRuntime } from './runtime.js';
import { joinScopes, splitScopes } from './scopes.js';

const INACTIVE = Object.freeze({ active: false });

async function introspectAccessToken(rt: OAuthRuntime, token: string): Promise<Record<string, unknown>> {
  let v;
  try {
    // A DPoP-bound token is active too; its binding is reported (RFC 9449 §6.2), not enforced here.
    v = await rt.verifier.verify(token, 'any');
  } catch {
    return INACTIVE;
  }
  if (await isAccessTokenRevoked(rt.pool, v.claims.jti)) return INACTIVE;
  if (v.sid !== undefined) {
    const grant = await getGrant(rt.pool, v.sid);
    if (!grant || grant.revokedAt !== undefined) return INACTIVE;
  }
  const c = v.claims;
  const out: Record<string, unknown> = {
    active: true,
    token_type: c.jkt === undefined ? 'Bearer' : 'DPoP',
    scope: c.scope,
    client_id: c.client_id,
    sub: c.sub,
    user_id: c.user_id,
    role: c.role,
    aud: c.aud,
    iss: c.iss,
    exp: c.exp,
    iat: c.iat,
    jti: c.jti,
  };
  if (c.nbf !== undefined) out.nbf = c.nbf;
  if (c.tenant_id !== undefined) out.tenant_id = c.tenant_id;
  if (c.plan !== undefined) out.plan = c.plan;
  if (c.jkt !== undefined) out.cnf = { jkt: c.jkt };
  return out;
}

async function introspectRefreshToken(rt: OAuthRuntime, token: string, callerId: string): Promise<Record<string, unknown>> {
  const raw = refreshTokenBytes(token);
  if (!raw) return INACTIVE;
  const t = await findRefreshToken(rt.pool, refreshTokenHash(raw));
  const now = rt.clock.now();
  if (!t || t.grant.clientId !== callerId || t.rotatedAt !== undefined || t.grant.revokedAt !== undefined || t.expiresAt <= now) {
    return INACTIVE;
  }
  return {
    active: true,
    token_type: 'refresh_token',
    scope: joinScopes(splitScopes(t.grant.scope)),
    client_id: t.grant.clientId,
    sub: t.grant.userId,
    exp: Math.floor(t.expiresAt / 1000),
    iat: Math.floor(t.createdAt / 1000),
  };
}

export function introspectionEndpoint(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    try {
      const p = formParams(ctx);
      const client = await authenticateClient(presentedClient(ctx.headers, p), rt.client, { confidentialOnly: true });
      const token = required(p, 'token');
      // The shape tells the two kinds apart (a JWT is never one of our refresh tokens), so
      // `token_type_hint` is not needed (RFC 7662 §2.1 lets the server ignore it).
      const out =
        token.split('.').length === 3 ? await introspectAccessToken(rt, token) : await introspectRefreshToken(rt, token, client.clientId);
      return oauthJson(out);
    } catch (err) {
      return oauthErrorReply(err, rt.log, 'introspect');
    }
  };
}
