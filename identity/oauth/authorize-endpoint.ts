/**
 * `GET /authorize` shows the sign-in page for a valid authorization request; `POST /authorize`
 * (the page's form) checks the credentials and redirects to the client with a code, or with
 * `access_denied` when the person cancels. The form carries the request's parameters, and the
 * POST validates them again from scratch.
 *
 * The form is guarded against login CSRF (csrf.ts, form-guard.ts): a post another site made is
 * refused (403 `cross_site_request`), and so is one without the page's anti-forgery token, bound
 * to this browser and this authorization request (403 `invalid_form_token`); both before the
 * password is looked at. The password check shares /auth/login's throttle (password-check.ts):
 * a throttled account or address gets the page again with status 429 and `Retry-After`.
 *
 * Errors before the redirect URI is established (400 `invalid_field` naming `client_id` or
 * `redirect_uri`) and the refusals above are never redirected: an HTML page for a browser,
 * problem+json for anything else (html-errors.ts). Later errors redirect with `error`. Every
 * redirect carries `iss` (RFC 9207), so a client talking to several servers can tell whose answer
 * it got.
 */
import { PlatformError } from '../../shared/errors.js';
import type { Handler, Reply, RequestContext } from '../../shared/http.js';
import { createCode } from './code-store.js';
import { redirectTo, validateAuthorizationRequest, type AuthorizationValidation } from './authorization-request.js';
import { authorizationSubject, crossSiteRefusal } from './csrf.js';
import { FORM_TOKEN_FIELD, FormGuard } from './form-guard.js';
import { errorFor, withHtmlErrors } from './html-errors.js';
import { htmlReply, PAGE_HEADERS, signInPage } from './pages.js';
import { passwordChecker, throttledMessage } from './password-check.js';
import type { OAuthRuntime } from './runtime.js';

const WRONG = 'Wrong email or password.';

function redirectReply(location: string): Reply {
  return { status: 303, headers: { ...PAGE_HEADERS, location } };
}

function refused(v: Extract<AuthorizationValidation, { ok: false }>, issuer: string): Reply {
  if (!v.redirect) throw new PlatformError('invalid_field', { field: v.field, detail: v.detail });
  return redirectReply(redirectTo(v.redirectUri, { error: v.error, error_description: v.description, state: v.state, iss: issuer }));
}

export function authorizeGet(rt: OAuthRuntime): Handler {
  const guard = new FormGuard(rt.pool, rt.clock, rt.settings.issuer, rt.log);
  return withHtmlErrors(async (ctx: RequestContext) => {
    const v = await validateAuthorizationRequest(ctx.query.toString(), rt.client);
    if (!v.ok) return refused(v, rt.settings.issuer);
    const r = v.request;
    const form = await guard.issue(ctx.headers, authorizationSubject(r.params));
    return htmlReply(signInPage({ clientName: r.client.name, scopes: r.scopes, params: r.params, formToken: form.token }), 200, {
      'set-cookie': form.setCookie,
    });
  }, rt.log);
}

export function authorizePost(rt: OAuthRuntime): Handler {
  const guard = new FormGuard(rt.pool, rt.clock, rt.settings.issuer, rt.log);
  const checkPassword = passwordChecker(rt);
  const publicOrigin = new URL(rt.settings.issuer).origin;
  return withHtmlErrors(async (ctx: RequestContext) => {
    const crossSite = crossSiteRefusal(ctx.headers, publicOrigin);
    if (crossSite) {
      rt.log.warn({ endpoint: 'authorize', reason: crossSite }, 'oauth: cross-site sign-in form post refused');
      return errorFor(ctx, new PlatformError('cross_site_request', { detail: crossSite }), rt.log);
    }
    const ct = (ctx.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (ct !== 'application/x-www-form-urlencoded') {
      throw new PlatformError('unsupported_media_type', { detail: 'expected application/x-www-form-urlencoded' });
    }
    const text = ctx.body.toString('utf8');
    const v = await validateAuthorizationRequest(text, rt.client);
    if (!v.ok) return refused(v, rt.settings.issuer);
    const r = v.request;
    const form = new URLSearchParams(text);
    const token = form.get(FORM_TOKEN_FIELD);
    const problem = await guard.check(ctx.headers, token, authorizationSubject(r.params));
    if (problem !== undefined || !token) {
      rt.log.info(
        { endpoint: 'authorize', problem, client_id: r.client.clientId },
        'oauth: sign-in form without a valid anti-forgery token refused',
      );
      return errorFor(
        ctx,
        new PlatformError('invalid_form_token', { detail: 'this sign-in form has expired or was not shown to this browser; start again' }),
        rt.log,
        { href: `/authorize?${new URLSearchParams([...r.params]).toString()}`, text: 'Start signing in again' },
      );
    }
    const back = (params: Record<string, string | undefined>): Reply =>
      redirectReply(redirectTo(r.redirectUri, { ...params, state: r.state, iss: rt.settings.issuer }));

    if (form.get('action') === 'deny') {
      await guard.consume(token);
      return back({ error: 'access_denied', error_description: 'the user declined' });
    }
    const email = form.get('email') ?? '';
    const password = form.get('password') ?? '';
    const again = (error: string, status = 200, headers: Record<string, string> = {}): Reply =>
      htmlReply(
        signInPage({ clientName: r.client.name, scopes: r.scopes, params: r.params, formToken: token, email, error }),
        status,
        headers,
      );
    // One message whatever was wrong: the page does not say whether the address has an account.
    if (!email || !password) return again(WRONG);
    const checked = await checkPassword(ctx, email, password);
    if (!checked.ok) {
      if (checked.reason === 'wrong') return again(WRONG);
      return again(throttledMessage(checked.retryAfterS), 429, { 'retry-after': String(checked.retryAfterS) });
    }
    const now = rt.clock.now();
    const code = await createCode(rt.pool, {
      clientId: r.client.clientId,
      redirectUri: r.redirectUri,
      codeChallenge: r.codeChallenge,
      userId: checked.userId,
      scope: r.scopes.join(' '),
      nonce: r.nonce,
      authTimeMs: now,
      nowMs: now,
      ttlMs: rt.settings.authCodeTtlMs,
    });
    await guard.consume(token);
    return back({ code });
  }, rt.log);
}
