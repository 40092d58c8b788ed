/**
 * `POST /token` (RFC 6749 §3.2): form-encoded, client authenticated (basic, post, or none for a
 * public client), then the grant. Offered grants: authorization_code (PKCE required),
 * refresh_token, client_credentials (confidential clients) and the device code. The implicit and
 * password grants are refused with `unsupported_grant_type`, like any other. Every answer, success
 * or error, is JSON with `Cache-Control: no-store`.
 *
 * DPoP (RFC 9449 §5), for every grant and every client: a request with a `DPoP` header is checked
 * (oauth/dpop.ts) after the client is authenticated, and the grant binds what it issues to the
 * proof's key. A client registered with `dpop_bound_access_tokens` must send one. With nonces on
 * (IDENTITY_DPOP_NONCE=required), a proof without our current nonce is `use_dpop_nonce`, and every
 * answer to a DPoP request carries the nonce to use next in `DPoP-Nonce`.
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
import { PATHS } from './discovery.js';
import type { GrantContext } from './grants/grant-context.js';

type GrantHandler = (rt: OAuthRuntime, client: OAuthClient, p: Params, g: GrantContext) => Promise<Record<string, unknown>>;

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
      const dpop = await rt.dpop.tokenRequestProof(ctx, PATHS.token);
      if (dpop === undefined && client.dpopBoundAccessTokens === true) {
        throw new OAuthError('invalid_dpop_proof', 'this client must send a DPoP proof (dpop_bound_access_tokens)');
      }
      const body = await GRANTS[g](rt, client, p, { dpop });
      rt.metrics.tokensIssued.inc({ grant_type: g === DEVICE_CODE_GRANT ? 'device_code' : g });
      return oauthJson(body, 200, dpop === undefined ? {} : await rt.dpop.answerHeaders());
    } catch (err) {
      const reply = oauthErrorReply(err, rt.log, 'token');
      const error = (reply.body as { error?: string }).error ?? 'server_error';
      rt.metrics.tokenErrors.inc({ error });
      if (error === 'invalid_grant' || error === 'invalid_client') rt.log.info({ grant_type: grantType, error }, 'token request refused');
      return reply;
    }
  };
}
