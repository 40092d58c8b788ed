/**
 * `grant_type=client_credentials` (RFC 6749 §4.4), confidential clients only: an access token
 * for the client itself (`sub` = `client_id`, `role` = the client's role, its `tenant_id` and
 * `plan` when registered, so the edge limits it as that tenant or plan), API scopes only, no
 * refresh token and no id token.
 */
import type { OAuthClient } from '../../clients/client.js';
import { OAuthError } from '../oauth-error.js';
import type { Params } from '../params.js';
import type { OAuthRuntime } from '../runtime.js';
import { grantScopes, isApiScope, parseScope } from '../scopes.js';
import { tokenType, type GrantContext } from './grant-context.js';

export async function clientCredentialsGrant(
  rt: OAuthRuntime,
  client: OAuthClient,
  p: Params,
  g: GrantContext,
): Promise<Record<string, unknown>> {
  if (client.type !== 'confidential') throw new OAuthError('unauthorized_client', 'client_credentials needs a confidential client');
  const scopes = grantScopes(parseScope(p.get('scope')), client.scopes, isApiScope);
  await rt.tokens.ready();
  const access = rt.tokens.accessToken({
    sub: client.clientId,
    role: client.role,
    scope: scopes.join(' '),
    clientId: client.clientId,
    tenantId: client.tenantId,
    plan: client.plan,
    jkt: g.dpop?.jkt,
  });
  return { access_token: access.token, token_type: tokenType(g.dpop?.jkt), expires_in: access.expiresIn, scope: scopes.join(' ') };
}
