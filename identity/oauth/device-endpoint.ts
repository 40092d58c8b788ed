/**
 * The device authorization grant's two endpoints besides /token (RFC 8628):
 *
 * - `POST /auth/device_authorization`: the device (client) asks for a device code and a user code;
 * - `GET /auth/device` and its form `POST /auth/device`: the user-code page where a person, on
 *   another device, enters the code, then signs in and approves (or denies) it. The approval form
 *   is guarded like the sign-in page (authorize-endpoint.ts): cross-site posts and posts without
 *   the page's anti-forgery token are refused, and its password check shares /auth/login's
 *   throttle.
 */
import { PlatformError } from '../../shared/errors.js';
import type { Handler, Reply, RequestContext } from '../../shared/http.js';
import { authenticateClient, presentedClient } from '../clients/client-auth.js';
import { DEVICE_CODE_GRANT } from '../clients/client.js';
import { newOpaqueToken } from '../tokens/opaque.js';
import { formatUserCode, newUserCode, normalizeUserCode } from './device-flow.js';
import { decideUserCode, findByUserCode, insertDeviceCode } from './device-store.js';
import { OAuthError, oauthErrorReply, oauthJson } from './oauth-error.js';
import { deviceSubject, crossSiteRefusal } from './csrf.js';
import { FORM_TOKEN_FIELD, FormGuard } from './form-guard.js';
import { errorFor, withHtmlErrors } from './html-errors.js';
import { deviceCodePage, devicePage, htmlReply, messagePage } from './pages.js';
import { passwordChecker, throttledMessage } from './password-check.js';
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

const INVALID_CODE = 'That code is not valid. Check it, or start again on your device.';
const WRONG = 'Wrong email or password.';

/**
 * `GET /auth/device`: without a code, the code form (a GET form back here); with one
 * (`verification_uri_complete`, or that form), the approval form for a pending code, with an
 * anti-forgery token bound to this browser and this device code (form-guard.ts), or the code form
 * again (400) when the code is unknown, used or expired.
 */
export function devicePageGet(rt: OAuthRuntime): Handler {
  const guard = new FormGuard(rt.pool, rt.clock, rt.settings.issuer, rt.log);
  return withHtmlErrors(async (ctx: RequestContext) => {
    const typed = (ctx.query.get('user_code') ?? '').slice(0, 64);
    if (typed.trim() === '') return htmlReply(deviceCodePage({}));
    const userCode = normalizeUserCode(typed);
    const d = userCode === undefined ? undefined : await findByUserCode(rt.pool, userCode);
    // Unknown, used and expired codes read the same. Guessing 34 bits through the sidecar's
    // per-IP cap on /auth is not practical within a code's lifetime.
    if (userCode === undefined || !d || d.status !== 'pending' || d.expiresAt <= rt.clock.now()) {
      return htmlReply(deviceCodePage({ userCode: typed, error: INVALID_CODE }), 400);
    }
    const form = await guard.issue(ctx.headers, deviceSubject(userCode), d.expiresAt);
    return htmlReply(devicePage({ userCode: formatUserCode(userCode), formToken: form.token }), 200, { 'set-cookie': form.setCookie });
  }, rt.log);
}

/**
 * `POST /auth/device`: the approval form. Refused before anything is looked up when another site
 * posted it (403 `cross_site_request`) or when its anti-forgery token is not this browser's for
 * this code (403 `invalid_form_token`). The password check shares /auth/login's throttle
 * (password-check.ts): 429 with `Retry-After` on the page when throttled.
 */
export function devicePagePost(rt: OAuthRuntime): Handler {
  const guard = new FormGuard(rt.pool, rt.clock, rt.settings.issuer, rt.log);
  const checkPassword = passwordChecker(rt);
  const publicOrigin = new URL(rt.settings.issuer).origin;
  return withHtmlErrors(async (ctx: RequestContext) => {
    const crossSite = crossSiteRefusal(ctx.headers, publicOrigin);
    if (crossSite) {
      rt.log.warn({ endpoint: 'device', reason: crossSite }, 'oauth: cross-site device form post refused');
      return errorFor(ctx, new PlatformError('cross_site_request', { detail: crossSite }), rt.log, {
        href: DEVICE_PAGE_PATH,
        text: 'Enter the code again',
      });
    }
    const form = new URLSearchParams(ctx.body.toString('utf8'));
    const userCode = normalizeUserCode(form.get('user_code') ?? '');
    const token = form.get(FORM_TOKEN_FIELD);
    const problem = userCode === undefined ? 'other_subject' : await guard.check(ctx.headers, token, deviceSubject(userCode));
    if (problem !== undefined || userCode === undefined || !token) {
      rt.log.info({ endpoint: 'device', problem }, 'oauth: device form without a valid anti-forgery token refused');
      const href = userCode === undefined ? DEVICE_PAGE_PATH : `${DEVICE_PAGE_PATH}?user_code=${formatUserCode(userCode)}`;
      return errorFor(
        ctx,
        new PlatformError('invalid_form_token', { detail: 'this form has expired or was not shown to this browser; start again' }),
        rt.log,
        { href, text: 'Start again' },
      );
    }
    const shown = formatUserCode(userCode);
    const email = form.get('email') ?? '';
    const again = (error: string, status = 200, headers: Record<string, string> = {}): Reply =>
      htmlReply(devicePage({ userCode: shown, formToken: token, email, error }), status, headers);
    const now = rt.clock.now();
    const d = await findByUserCode(rt.pool, userCode);
    if (!d || d.status !== 'pending' || d.expiresAt <= now) return htmlReply(deviceCodePage({ userCode: shown, error: INVALID_CODE }), 400);
    if (form.get('action') === 'deny') {
      await decideUserCode(rt.pool, userCode, { approve: false }, now);
      await guard.consume(token);
      return htmlReply(messagePage('Request denied', 'The device was not connected. You can close this page.'));
    }
    const password = form.get('password') ?? '';
    if (!email || !password) return again(WRONG);
    const checked = await checkPassword(ctx, email, password);
    if (!checked.ok) {
      if (checked.reason === 'wrong') return again(WRONG);
      return again(throttledMessage(checked.retryAfterS), 429, { 'retry-after': String(checked.retryAfterS) });
    }
    const ok = await decideUserCode(rt.pool, userCode, { approve: true, userId: checked.userId, authTimeMs: now }, now);
    if (!ok) return htmlReply(deviceCodePage({ userCode: shown, error: INVALID_CODE }), 400);
    await guard.consume(token);
    return htmlReply(messagePage('Device connected', 'You can return to your device. You can close this page.'));
  }, rt.log);
}
