/**
 * `POST /token` (RFC 6749 §3.2): form-encoded, client authenticated (basic, post, or none for a
 * public client), then the grant. Offered grants: authorization_code (PKCE required),
 * refresh_token, client_credentials (confidential clients) and the device code. The implicit and
 * password grants are refused with `unsupported_grant_type`, like any other. Every answer, success
 * or error, is JSON with `Cache-Control: no-store`.
 */
import type { Handler, RequestContext } from '../../shared/http.js';
import { authenticateClient, presentedClient } from '../clients/client-auth.js';
import { DEVICE_CODE_GRANT, type GrantType, type OAuthClient } from '../clients/client.js';
import { authorizationCodeGrant } from './grants/authorization-code.js';
import { clientCredentialsGrant } from './grants/client-credentials.js';
import { deviceCodeGrant } from './grants/device-code.js';
import { refreshTokenGrant } from './grants/refresh-token.js';
import { OAuthError, oauthErrorReply, oauthJson } from './oauth-error.js';
import { formParams, required, type Params } from './params.js';
import type { OAuthRuntime } from './runtime.js';

type GrantHandler = (rt: OAuthRuntime, client: OAuthClient, p: Params) => Promise<Record<string, unknown>>;

const GRANTS: Record<GrantType, GrantHandler> = {
  authorization_code: authorizationCodeGrant,
  refresh_token: refreshTokenGrant,
  client_credentials: clientCredentialsGrant,
  [DEVICE_CODE_GRANT]: deviceCodeGrant,
};

function isGrantType(g: string): g is GrantType {
  return Object.hasOwn(GRANTS, g);
}

export function tokenEndpoint(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    let grantType = 'unknown';
    try {
      const p = formParams(ctx);
      const g = required(p, 'grant_type');
      if (!isGrantType(g)) throw new OAuthError('unsupported_grant_type', 'this grant type is not supported');
      grantType = g;
      const client = await authenticateClient(presentedClient(ctx.headers, p), rt.client);
      if (!client.grantTypes.includes(g)) throw new OAuthError('unauthorized_client', 'this client may not use this grant type');
      const body = await GRANTS[g](rt, client, p);
      rt.metrics.tokensIssued.inc({ grant_type: g === DEVICE_CODE_GRANT ? 'device_code' : g });
      return oauthJson(body);
    } catch (err) {
      const reply = oauthErrorReply(err, rt.log, 'token');
      const error = (reply.body as { error?: string }).error ?? 'server_error';
      rt.metrics.tokenErrors.inc({ error });
      if (error === 'invalid_grant' || error === 'invalid_client') rt.log.info({ grant_type: grantType, error }, 'token request refused');
      return reply;
    }
  };
}
