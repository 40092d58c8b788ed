/**
 * The token response for a user's grant (authorization code, refresh, device): an access token
 * bound to the grant (`sid`), an id token when `openid` was granted, and the refresh token the
 * grant step produced.
 */
import type { OAuthClient } from '../../clients/client.js';
import type { Grant } from '../../tokens/grant-store.js';
import { OAuthError } from '../oauth-error.js';
import { tokenType } from './grant-context.js';
import type { OAuthRuntime } from '../runtime.js';
import { accessTokenScope, joinScopes, splitScopes } from '../scopes.js';

export interface UserTokenInput {
  grant: Grant;
  client: OAuthClient;
  refreshToken: string | undefined;
  /** The authorization request's nonce (code flow only; never on refresh). */
  nonce?: string | undefined;
  /** A narrower set than the grant's (refresh with `scope`). */
  scopes?: readonly string[] | undefined;
  /** The request's DPoP key: the access token is bound to it. */
  jkt?: string | undefined;
}

export async function userTokenResponse(rt: OAuthRuntime, i: UserTokenInput): Promise<Record<string, unknown>> {
  const profile = await rt.users.profile(i.grant.userId);
  if (!profile) throw new OAuthError('invalid_grant', 'the user of this grant no longer exists');
  const scopes = i.scopes ?? splitScopes(i.grant.scope);
  const access = rt.tokens.accessToken({
    sub: i.grant.userId,
    role: profile.role,
    scope: accessTokenScope(scopes),
    clientId: i.client.clientId,
    sid: i.grant.grantId,
    jkt: i.jkt,
  });
  const body: Record<string, unknown> = {
    access_token: access.token,
    token_type: tokenType(i.jkt),
    expires_in: access.expiresIn,
    scope: joinScopes(scopes),
  };
  if (i.refreshToken !== undefined) body.refresh_token = i.refreshToken;
  if (scopes.includes('openid')) {
    body.id_token = rt.tokens.idToken({
      sub: i.grant.userId,
      clientId: i.client.clientId,
      authTimeMs: i.grant.authTime,
      nonce: i.nonce,
      sid: i.grant.grantId,
      profile,
      scopes,
    });
  }
  return body;
}
