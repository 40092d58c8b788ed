/**
 * `grant_type=authorization_code` (RFC 6749 §4.1.3 with PKCE, RFC 7636 §4.5–4.6).
 *
 * The code's row is locked for the redemption, so two requests with one code cannot both win.
 * Checks, in order: the code exists; it was not redeemed before (a second redemption revokes the
 * grant the first one created, with an `AuthorizationCodeReuseDetected` alert, RFC 6749 §4.1.2);
 * it has not expired; it was issued to this client; `redirect_uri` is the one of the request;
 * the verifier hashes to the challenge. Any failure is `invalid_grant` and leaves an unredeemed
 * code unredeemed, so an attacker holding a stolen code cannot burn it for the real client.
 */
import { withTransaction } from '../../../shared/db.js';
import type { OAuthClient } from '../../clients/client.js';
import { createGrant, revokeGrant, type Grant } from '../../tokens/grant-store.js';
import { looksLikeOpaqueToken } from '../../tokens/opaque.js';
import { recordSecurityEvent, type SecurityAlert } from '../../tokens/security-events.js';
import { lockCode, markCodeConsumed } from '../code-store.js';
import { OAuthError } from '../oauth-error.js';
import { required, type Params } from '../params.js';
import { verifierMatches } from '../pkce.js';
import type { OAuthRuntime } from '../runtime.js';
import { familyBinding, type GrantContext } from './grant-context.js';
import { userTokenResponse } from './user-tokens.js';

type Redemption =
  | { ok: true; grant: Grant; refreshToken: string | undefined; nonce: string | undefined }
  | { ok: false; description: string; alert?: SecurityAlert };

export async function authorizationCodeGrant(
  rt: OAuthRuntime,
  client: OAuthClient,
  p: Params,
  g: GrantContext,
): Promise<Record<string, unknown>> {
  const code = required(p, 'code');
  const redirectUri = required(p, 'redirect_uri');
  const verifier = required(p, 'code_verifier');
  if (!looksLikeOpaqueToken(code)) throw new OAuthError('invalid_grant', 'the authorization code is invalid');
  await rt.tokens.ready();
  const now = rt.clock.now();
  const s = rt.settings;

  const r = await withTransaction(rt.pool, async (db): Promise<Redemption> => {
    const rec = await lockCode(db, code);
    if (!rec) return { ok: false, description: 'the authorization code is invalid' };
    if (rec.consumedAt !== undefined) {
      let alert: SecurityAlert | undefined;
      if (rec.grantId !== undefined && (await revokeGrant(db, rec.grantId, 'authorization_code_reuse', now))) {
        alert = { type: 'AuthorizationCodeReuseDetected', userId: rec.userId, clientId: rec.clientId, familyId: rec.grantId, at: now };
        await recordSecurityEvent(db, alert);
      }
      return { ok: false, description: 'the authorization code was already used; the tokens it issued are revoked', alert };
    }
    if (rec.expiresAt <= now) return { ok: false, description: 'the authorization code has expired' };
    if (rec.clientId !== client.clientId) return { ok: false, description: 'the authorization code was issued to another client' };
    if (rec.redirectUri !== redirectUri) return { ok: false, description: 'redirect_uri does not match the authorization request' };
    if (!verifierMatches(verifier, rec.codeChallenge)) return { ok: false, description: 'PKCE verification failed' };
    const { grant, refreshToken } = await createGrant(db, {
      userId: rec.userId,
      clientId: client.clientId,
      scope: rec.scope,
      authTimeMs: rec.authTime,
      nowMs: now,
      refreshTtlMs: client.grantTypes.includes('refresh_token') ? s.refreshTokenTtlMs : undefined,
      dpopJkt: familyBinding(client, g),
    });
    await markCodeConsumed(db, code, grant.grantId, now);
    return { ok: true, grant, refreshToken, nonce: rec.nonce };
  });

  if (!r.ok) {
    if (r.alert) await rt.alert(r.alert);
    throw new OAuthError('invalid_grant', r.description);
  }
  return userTokenResponse(rt, { grant: r.grant, client, refreshToken: r.refreshToken, nonce: r.nonce, jkt: g.dpop?.jkt });
}
