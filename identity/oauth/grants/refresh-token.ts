/**
 * `grant_type=refresh_token` (RFC 6749 §6): rotation with reuse detection and a retry grace
 * window (identity/tokens/refresh-rotation.ts). The refreshed id token has no `nonce` (OpenID
 * Connect Core §12.2) and the original `auth_time`.
 *
 * DPoP (RFC 9449 §5): a family bound to a key (a public client that used DPoP) is refreshed only
 * with a proof of that key: without a proof `invalid_dpop_proof`, with another key `invalid_grant`,
 * and neither rotates nor revokes anything. The new access token is bound to the request's key.
 */
import type { OAuthClient } from '../../clients/client.js';
import { rotateRefreshToken } from '../../tokens/refresh-rotation.js';
import { OAuthError } from '../oauth-error.js';
import { required, type Params } from '../params.js';
import type { OAuthRuntime } from '../runtime.js';
import { parseScope } from '../scopes.js';
import type { GrantContext } from './grant-context.js';
import { userTokenResponse } from './user-tokens.js';

export async function refreshTokenGrant(
  rt: OAuthRuntime,
  client: OAuthClient,
  p: Params,
  g: GrantContext,
): Promise<Record<string, unknown>> {
  const presented = required(p, 'refresh_token');
  const scopes = parseScope(p.get('scope'));
  await rt.tokens.ready();
  const s = rt.settings;
  const out = await rotateRefreshToken(rt.pool, presented, {
    clientId: client.clientId,
    scopes: scopes && scopes.length > 0 ? scopes : undefined,
    nowMs: rt.clock.now(),
    graceMs: s.refreshGraceMs,
    ttlMs: s.refreshTokenTtlMs,
    jkt: g.dpop?.jkt,
  });
  switch (out.kind) {
    case 'refused':
      if (out.reason === 'scope_not_granted') throw new OAuthError('invalid_scope', 'a requested scope was not granted');
      if (out.reason === 'dpop_key_mismatch') {
        if (g.dpop === undefined)
          throw new OAuthError('invalid_dpop_proof', 'this refresh token is bound to a DPoP key; send a DPoP proof');
        throw new OAuthError('invalid_grant', 'this refresh token is bound to another DPoP key');
      }
      throw new OAuthError('invalid_grant', 'the refresh token is invalid, expired or revoked');
    case 'reuse_detected':
      if (out.alert) await rt.alert(out.alert);
      throw new OAuthError('invalid_grant', 'the refresh token was already used; the grant is revoked and the user must sign in again');
    default:
      return userTokenResponse(rt, {
        grant: out.grant,
        client,
        refreshToken: out.refreshToken,
        scopes: scopes && scopes.length > 0 ? scopes : undefined,
        jkt: g.dpop?.jkt,
      });
  }
}
