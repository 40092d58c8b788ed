/**
 * The device authorization grant's two endpoints besides /token (RFC 8628):
 *
 * - `POST /auth/device_authorization`: the device (client) asks for a device code and a user code;
 * - `GET /auth/device` and its form `POST /auth/device`: the user-code page where a person, on
 *   another device, enters the code, signs in and approves (or denies) it.
 */
import type { Handler, RequestContext } from '../../shared/http.js';
import { authenticateClient, presentedClient } from '../clients/client-auth.js';
import { DEVICE_CODE_GRANT } from '../clients/client.js';
import { newOpaqueToken } from '../tokens/opaque.js';
import { formatUserCode, newUserCode, normalizeUserCode } from './device-flow.js';
import { decideUserCode, findByUserCode, insertDeviceCode } from './device-store.js';
import { OAuthError, oauthErrorReply, oauthJson } from './oauth-error.js';
import { devicePage, htmlReply, messagePage } from './pages.js';
import { formParams } from './params.js';
import type { OAuthRuntime } from './runtime.js';
import { grantScopes, parseScope } from './scopes.js';

export const DEVICE_PAGE_PATH = '/auth/device';

export function deviceAuthorizationEndpoint(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    try {
      const p = formParams(ctx);
      const client = await authenticateClient(presentedClient(ctx.headers, p), rt.client);
      if (!client.grantTypes.includes(DEVICE_CODE_GRANT))
        throw new OAuthError('unauthorized_client', 'this client may not use the device grant');
      const scopes = grantScopes(parseScope(p.get('scope')), client.scopes);
      const s = rt.settings;
      const now = rt.clock.now();
      const deviceCode = newOpaqueToken();
      const intervalS = Math.round(s.devicePollIntervalMs / 1000);
      let userCode: string | undefined;
      // A collision with a live code is rare (34 bits); draw again a few times before giving up.
      for (let i = 0; i < 5 && userCode === undefined; i++) {
        const candidate = newUserCode();
        const ok = await insertDeviceCode(rt.pool, {
          deviceCode,
          userCode: candidate,
          clientId: client.clientId,
          scope: scopes.join(' '),
          intervalS,
          nowMs: now,
          ttlMs: s.deviceCodeTtlMs,
        });
        if (ok) userCode = candidate;
      }
      if (userCode === undefined) throw new OAuthError('temporarily_unavailable', 'try again');
      const shown = formatUserCode(userCode);
      const verificationUri = `${s.issuer}${DEVICE_PAGE_PATH}`;
      return oauthJson({
        device_code: deviceCode,
        user_code: shown,
        verification_uri: verificationUri,
        verification_uri_complete: `${verificationUri}?user_code=${encodeURIComponent(shown)}`,
        expires_in: Math.floor(s.deviceCodeTtlMs / 1000),
        interval: intervalS,
      });
    } catch (err) {
      return oauthErrorReply(err, rt.log, 'device_authorization');
    }
  };
}

export function devicePageGet(): Handler {
  return (ctx: RequestContext) => htmlReply(devicePage({ userCode: ctx.query.get('user_code') ?? '' }));
}

export function devicePagePost(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    const form = new URLSearchParams(ctx.body.toString('utf8'));
    const typed = form.get('user_code') ?? '';
    const email = form.get('email') ?? '';
    const userCode = normalizeUserCode(typed);
    const again = (error: string, status = 400): ReturnType<Handler> => htmlReply(devicePage({ userCode: typed, email, error }), status);
    const now = rt.clock.now();
    const d = userCode === undefined ? undefined : await findByUserCode(rt.pool, userCode);
    if (!d || d.status !== 'pending' || d.expiresAt <= now) {
      // Unknown, used and expired codes read the same. Guessing 34 bits through the sidecar's
      // per-IP cap on /auth is not practical within a code's lifetime.
      return again('That code is not valid. Check it, or start again on your device.');
    }
    if (form.get('action') === 'deny') {
      await decideUserCode(rt.pool, userCode!, { approve: false }, now);
      return htmlReply(messagePage('Request denied', 'The device was not connected. You can close this page.'));
    }
    const password = form.get('password') ?? '';
    const userId = email && password ? await rt.users.verifyPassword(email, password) : undefined;
    if (!userId) return again('Wrong email or password.', 200);
    const ok = await decideUserCode(rt.pool, userCode!, { approve: true, userId, authTimeMs: now }, now);
    if (!ok) return again('That code is not valid. Check it, or start again on your device.');
    return htmlReply(messagePage('Device connected', 'You can return to your device. You can close this page.'));
  };
}
