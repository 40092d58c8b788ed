/**
 * Registers the pages' handlers on the HTTP server, with everything around them:
 *
 * - no session: a GET is redirected to the sign-in (and back here afterwards); a POST too (its
 *   form is lost: the session had ended);
 * - every POST: `application/x-www-form-urlencoded` only, the Origin check and the CSRF token
 *   (auth/csrf.ts) before the handler runs; a refusal is a 403 page that shows no token;
 * - the API clients carry the operator's access token, refreshed through identity when it is
 *   about to expire; a refresh identity refuses ends the session;
 * - an API error the handler did not catch is a page with the problem (a 401 from a service ends
 *   the session and asks for a new sign-in).
 */
import type { Reply, RequestContext } from '../shared/http.js';
import { route, streamRoute, type EdgeOptions } from '../shared/http.js';
import { multipartForm } from './multipart.js';
import type { TemplatedApp } from '../shared/uws.js';
import { html, type Html } from './html.js';
import { serviceClient, type ConsoleApis } from './api/client.js';
import { isApiError } from './api/problem.js';
import { csrfTokensEqual, sameOrigin } from './auth/csrf.js';
import type { Oidc } from './auth/oidc.js';
import type { Session, Tokens } from './auth/sessions.js';
import type { ConsolePage, Flash, PageContext, PageHandler, PageResult, PageRouter } from './page.js';
import { requestTarget, type Web } from './web.js';

export interface ServiceUrls {
  controlPlane: string;
  notifier: string;
  identity: string;
}

export interface RouterDeps {
  web: Web;
  oidc: Oidc;
  services: ServiceUrls;
  apiTimeoutMs: number;
}

/** Refresh the access token this long before it expires. */
const REFRESH_MARGIN_MS = 30_000;

class SessionEnded extends Error {}

function formOf(ctx: RequestContext): URLSearchParams | undefined {
  const ct = (ctx.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (ctx.body.length > 0 && ct !== 'application/x-www-form-urlencoded') return undefined;
  return new URLSearchParams(ctx.body.toString('utf8'));
}

export function registerPages(app: TemplatedApp, edge: EdgeOptions, pages: readonly ConsolePage[], deps: RouterDeps): void {
  const { web } = deps;
  const { sessions, clock, log } = web.d;

  /** The session's access token, refreshed (once, shared by concurrent requests) when about to expire. */
  async function accessToken(s: Session): Promise<string> {
    if (s.tokens.accessExpiresAt - clock.now() > REFRESH_MARGIN_MS) return s.tokens.accessToken;
    const refreshToken = s.tokens.refreshToken;
    if (!refreshToken) throw new SessionEnded();
    s.refreshing ??= deps.oidc.refresh(refreshToken).finally(() => (s.refreshing = undefined));
    let t: Tokens;
    try {
      t = await s.refreshing;
    } catch (err) {
      log.info({ err: err instanceof Error ? err.message : String(err) }, 'console session ended: refresh refused');
      sessions.delete(s.id);
      throw new SessionEnded();
    }
    s.tokens = { ...t, idToken: t.idToken ?? s.tokens.idToken };
    return t.accessToken;
  }

  function apisFor(s: Session): ConsoleApis {
    const token = () => accessToken(s);
    const mk = (service: string, baseUrl: string) => serviceClient({ service, baseUrl, accessToken: token, timeoutMs: deps.apiTimeoutMs });
    return {
      controlPlane: mk('control-plane', deps.services.controlPlane),
      notifier: mk('notifier', deps.services.notifier),
      identity: mk('identity', deps.services.identity),
    };
  }

  function toReply(r: PageResult): Reply {
    return { status: r.status, headers: { ...r.headers }, body: r.body };
  }

  /** A refused form: a page without the session's nav and sign-out form, so it carries no CSRF token. */
  function forbidden(why: string): Reply {
    return web.error(403, 'Request refused', why);
  }

  function handle(page: ConsolePage, method: 'get' | 'post', handler: PageHandler) {
    return async (req: RequestContext): Promise<Reply> => {
      const s = web.session(req);
      if (!s) return web.redirect(web.signInLocation(method === 'get' ? requestTarget(req) : page.path));
      let form = new URLSearchParams();
      if (method === 'post') {
        if (!sameOrigin(req.headers, web.d.origin))
          return forbidden('This form was sent from another site. Open the console and try again.');
        const parsed = formOf(req);
        if (!parsed) return web.error(415, 'Unsupported form', 'Forms are sent as application/x-www-form-urlencoded.');
        if (!csrfTokensEqual(s.csrfToken, parsed.get('_csrf')))
          return forbidden('This form has expired or was not made by the console. Reload the page and try again.');
        parsed.delete('_csrf');
        form = parsed;
      }
      const flash = s.flash;
      s.flash = [];
      const ctx: PageContext = {
        request: { path: req.path, params: req.params, query: req.query, form, headers: req.headers },
        operator: s.operator,
        csrfToken: s.csrfToken,
        api: apisFor(s),
        flash,
        page,
        now: () => clock.now(),
        render: (v) =>
          toResult(web.page({ title: v.title, body: v.body, status: v.status, current: page.id, session: s, flash, problem: v.problem })),
        redirect: (location: string, ...f: Flash[]) => {
          s.flash.push(...f);
          return toResult(web.redirect(location));
        },
        csrfField: (): Html => html`<input type="hidden" name="_csrf" value="${s.csrfToken}" />`,
      };
      try {
        return toReply(await handler(ctx));
      } catch (err) {
        if (err instanceof SessionEnded || (isApiError(err) && err.status === 401)) {
          if (isApiError(err))
            log.warn(
              { service: err.service, code: err.problem.code, detail: err.problem.detail },
              'a service refused the operator token: signing out',
            );
          sessions.delete(s.id);
          return web.redirect(web.signInLocation(method === 'get' ? requestTarget(req) : page.path), web.clearSessionCookie());
        }
        if (isApiError(err)) {
          const status = err.status === 404 ? 404 : err.status === 403 ? 403 : 502;
          return web.page({
            status,
            title: page.title,
            body: html`<p>The ${err.service} refused or could not answer this request.</p>
              <p><a href="${page.path}">Back to ${page.title}</a></p>`,
            current: page.id,
            session: s,
            flash,
            problem: err.problem,
          });
        }
        log.error({ err, page: page.id, path: req.path }, 'console page failed');
        return web.page({
          status: 500,
          title: 'Something went wrong',
          body: html`<p>The console failed to show this page; the error is in its log.</p>`,
          current: page.id,
          session: s,
        });
      }
    };
  }

  for (const page of pages) {
    const router: PageRouter = {
      get: (pattern, handler) => route(app, 'get', pattern, handle(page, 'get', handler), edge),
      post: (pattern, handler) => route(app, 'post', pattern, handle(page, 'post', handler), edge),
      // The fields before the file pass the same checks as any POST before the file is read. The
      // checks that need no body (a session, the Origin) run before a byte of it is read: else
      // anyone could have the console parse up to maxBytes of a body only to be sent to sign in.
      upload: (pattern, handler, opts) => {
        const multipart = multipartForm((req, file) => handle(page, 'post', (ctx) => handler(ctx, file))(req));
        streamRoute(
          app,
          'post',
          pattern,
          (sctx) =>
            web.session(sctx) && sameOrigin(sctx.headers, web.d.origin)
              ? multipart(sctx)
              : handle(page, 'post', () => {
                  throw new Error('unreachable: refused without a session or from another origin');
                })({ ...sctx, body: Buffer.alloc(0) }),
          { ...edge, maxBodyBytes: opts.maxBytes },
        );
      },
    };
    page.register(router);
  }
}

function toResult(r: Reply): PageResult {
  return { status: r.status ?? 200, headers: r.headers ?? {}, body: typeof r.body === 'string' ? r.body : '' };
}
