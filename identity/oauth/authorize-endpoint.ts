/**
 * `GET /authorize` shows the sign-in page for a valid authorization request; `POST /authorize`
 * (the page's form) checks the credentials and redirects to the client with a code, or with
 * `access_denied` when the person cancels. The form carries the request's parameters, and the
 * POST validates them again from scratch, so no server-side state is kept between the two.
 *
 * Errors before the redirect URI is established are problem+json (400 `invalid_field` naming
 * `client_id` or `redirect_uri`) and are never redirected; later errors redirect with `error`.
 * Every redirect carries `iss` (RFC 9207), so a client talking to several servers can tell whose
 * answer it got.
 */
import { PlatformError } from '../../shared/errors.js';
import type { Handler, Reply, RequestContext } from '../../shared/http.js';
import { createCode } from './code-store.js';
import { redirectTo, validateAuthorizationRequest, type AuthorizationValidation } from './authorization-request.js';
import { htmlReply, PAGE_HEADERS, signInPage } from './pages.js';
import type { OAuthRuntime } from './runtime.js';

function redirectReply(location: string): Reply {
  return { status: 303, headers: { ...PAGE_HEADERS, location } };
}

function refused(v: Extract<AuthorizationValidation, { ok: false }>, issuer: string): Reply {
  if (!v.redirect) throw new PlatformError('invalid_field', { field: v.field, detail: v.detail });
  return redirectReply(redirectTo(v.redirectUri, { error: v.error, error_description: v.description, state: v.state, iss: issuer }));
}

export function authorizeGet(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    const v = await validateAuthorizationRequest(ctx.query.toString(), rt.client);
    if (!v.ok) return refused(v, rt.settings.issuer);
    const r = v.request;
    return htmlReply(signInPage({ clientName: r.client.name, scopes: r.scopes, params: r.params }));
  };
}

export function authorizePost(rt: OAuthRuntime): Handler {
  return async (ctx: RequestContext) => {
    const ct = (ctx.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (ct !== 'application/x-www-form-urlencoded') {
      throw new PlatformError('unsupported_media_type', { detail: 'expected application/x-www-form-urlencoded' });
    }
    const text = ctx.body.toString('utf8');
    const v = await validateAuthorizationRequest(text, rt.client);
    if (!v.ok) return refused(v, rt.settings.issuer);
    const r = v.request;
    const form = new URLSearchParams(text);
    const back = (params: Record<string, string | undefined>): Reply =>
      redirectReply(redirectTo(r.redirectUri, { ...params, state: r.state, iss: rt.settings.issuer }));

    if (form.get('action') === 'deny') return back({ error: 'access_denied', error_description: 'the user declined' });
    const email = form.get('email') ?? '';
    const password = form.get('password') ?? '';
    const userId = email && password ? await rt.users.verifyPassword(email, password) : undefined;
    if (!userId) {
      // One message whatever was wrong: the page does not say whether the address has an account.
      return htmlReply(
        signInPage({ clientName: r.client.name, scopes: r.scopes, params: r.params, email, error: 'Wrong email or password.' }),
      );
    }
    const now = rt.clock.now();
    const code = await createCode(rt.pool, {
      clientId: r.client.clientId,
      redirectUri: r.redirectUri,
      codeChallenge: r.codeChallenge,
      userId,
      scope: r.scopes.join(' '),
      nonce: r.nonce,
      authTimeMs: now,
      nowMs: now,
      ttlMs: rt.settings.authCodeTtlMs,
    });
    return back({ code });
  };
}
