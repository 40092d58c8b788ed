/**
 * Signing an operator in and out (console/README.md, "Sign-in"):
 *
 * - `GET /auth/login?return_to=/path`: a pending sign-in (state, nonce, PKCE verifier) sealed
 *   into the sign-in cookie (nothing kept server-side: auth/sessions.ts), then 303 to identity's
 *   `/authorize`;
 * - `GET /auth/callback?code&state&iss`: the pending sign-in taken (once), `state` compared in
 *   constant time, `iss` required and checked (RFC 9207), the code redeemed on the back channel, the ID token
 *   verified; only a user whose role is `admin` gets a session, then 303 to `return_to`;
 * - `POST /auth/logout` (CSRF-checked): the session and its tokens forgotten, the cookie cleared.
 */
import type { Reply, RequestContext } from '../../shared/http.js';
import { route, type EdgeOptions } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { html } from '../html.js';
import { csrfTokensEqual, sameOrigin } from './csrf.js';
import { parseCookies, serializeCookie } from './cookies.js';
import { randomToken, SignInError, type Oidc } from './oidc.js';
import { SIGN_IN_TTL_MS } from './sessions.js';
import { safeReturnTo, type Web } from '../web.js';

export interface AuthRouteDeps {
  web: Web;
  oidc: Oidc;
  /** Expected `iss` on the callback (JWT_ISSUER). */
  issuer: string;
}

export function registerAuthRoutes(app: TemplatedApp, edge: EdgeOptions, deps: AuthRouteDeps): void {
  const { web, oidc } = deps;
  const { sessions, cookies, secure, log } = web.d;

  route(
    app,
    'get',
    '/auth/login',
    (ctx: RequestContext): Reply => {
      const returnTo = safeReturnTo(ctx.query.get('return_to'));
      if (web.session(ctx)) return web.redirect(returnTo);
      const state = randomToken();
      const nonce = randomToken();
      const codeVerifier = randomToken();
      const id = sessions.begin({ state, nonce, codeVerifier, returnTo });
      return web.redirect(oidc.authorizationUrl({ state, nonce, codeVerifier }), {
        'set-cookie': serializeCookie(cookies.signIn, id, { sameSite: 'Lax', secure, maxAge: SIGN_IN_TTL_MS / 1000 }),
      });
    },
    edge,
  );

  const again = html`<p><a href="/auth/login">Sign in again</a></p>`;

  route(
    app,
    'get',
    '/auth/callback',
    async (ctx: RequestContext): Promise<Reply> => {
      const pending = sessions.take(parseCookies(ctx.headers.cookie).get(cookies.signIn));
      if (!pending || !csrfTokensEqual(pending.state, ctx.query.get('state')))
        return web.page({
          status: 400,
          title: 'Sign-in not completed',
          body: html`<p>This sign-in was not started here, has already been used, or took longer than 10 minutes.</p>
            ${again}`,
        });
      const error = ctx.query.get('error');
      if (error !== null) {
        const desc = ctx.query.get('error_description');
        return web.page({
          status: 400,
          title: 'Sign-in not completed',
          body: html`<p>identity answered <code>${error}</code>${desc ? html`: ${desc}` : ''}.</p>
            ${again}`,
        });
      }
      const iss = ctx.query.get('iss');
      const code = ctx.query.get('code');
      // Required, not only compared when present: identity advertises
      // authorization_response_iss_parameter_supported, and RFC 9207 §2.4 then has the client
      // refuse an answer without it.
      if (iss !== deps.issuer || !code)
        return web.page({
          status: 400,
          title: 'Sign-in not completed',
          body: html`<p>The answer did not come from our identity service.</p>
            ${again}`,
        });
      let signedIn;
      try {
        signedIn = await oidc.redeem(code, pending.codeVerifier, pending.nonce);
      } catch (err) {
        if (!(err instanceof SignInError)) throw err;
        log.warn({ reason: err.reason }, 'console sign-in failed');
        return web.page({
          status: err.reason === 'identity_unavailable' ? 502 : 400,
          title: 'Sign-in not completed',
          body: html`<p>${err.message}</p>
            ${again}`,
        });
      }
      if (signedIn.operator.role !== 'admin') {
        log.warn({ user_id: signedIn.operator.userId, role: signedIn.operator.role }, 'console sign-in refused: not an admin');
        return web.page({
          status: 403,
          title: 'Not an operator',
          body: html`<p>
              You signed in as <strong>${signedIn.operator.email ?? signedIn.operator.userId}</strong>, whose role is
              <code>${signedIn.operator.role || 'none'}</code>. The console is for accounts with the role <code>admin</code>.
            </p>
            ${again}`,
        });
      }
      const s = sessions.create(signedIn.operator, signedIn.tokens);
      log.info({ user_id: s.operator.userId }, 'operator signed in to the console');
      return web.redirect(pending.returnTo, web.sessionCookie(s));
    },
    edge,
  );

  route(
    app,
    'post',
    '/auth/logout',
    (ctx: RequestContext): Reply => {
      const s = web.session(ctx);
      if (s) {
        const form = new URLSearchParams(ctx.body.toString('utf8'));
        if (!sameOrigin(ctx.headers, web.d.origin) || !csrfTokensEqual(s.csrfToken, form.get('_csrf')))
          return web.error(403, 'Request refused', 'This form has expired or was not made by the console. Reload the page and try again.');
        sessions.delete(s.id);
        log.info({ user_id: s.operator.userId }, 'operator signed out of the console');
      }
      return web.redirect('/auth/signed-out', web.clearSessionCookie());
    },
    edge,
  );

  route(
    app,
    'get',
    '/auth/signed-out',
    (): Reply =>
      web.page({
        title: 'Signed out',
        body: html`<p>You are signed out of the console.</p>
          <p><a href="/auth/login">Sign in</a></p>`,
      }),
    edge,
  );
}
