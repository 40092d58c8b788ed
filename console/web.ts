/**
 * What the console's HTTP handlers share: the layout with the nav of every registered page, the
 * security headers, the session cookie, and answers (pages, redirects, error pages) as replies for
 * shared/http.ts.
 */
import type { Reply, RequestContext } from '../shared/http.js';
import type { Clock } from '../shared/clock.js';
import type { Logger } from '../shared/log.js';
import { html, type Html } from './html.js';
import type { Assets } from './assets.js';
import { renderLayout, type NavItem } from './layout.js';
import type { ApiProblem } from './api/problem.js';
import type { Flash, Operator } from './page.js';
import { parseCookies, serializeCookie, type CookieNames } from './auth/cookies.js';
import type { Session, SessionStore } from './auth/sessions.js';
import { pageHeaders } from './security-headers.js';

export interface WebDeps {
  log: Logger;
  clock: Clock;
  assets: Assets;
  sessions: SessionStore;
  cookies: CookieNames;
  /** Cookies get `Secure` (CONSOLE_PUBLIC_URL is https). */
  secure: boolean;
  /** The console's origin (CONSOLE_PUBLIC_URL). */
  origin: string;
  /** identity's origin as browsers reach it (CSP form-action). */
  identityOrigin: string;
  nav: NavItem[];
}

export interface PageOptions {
  title: string;
  body: Html;
  status?: number;
  current?: string;
  session?: Session;
  flash?: readonly Flash[];
  problem?: ApiProblem;
  operator?: Operator;
  headers?: Record<string, string>;
}

export class Web {
  constructor(readonly d: WebDeps) {}

  page(o: PageOptions): Reply {
    const body = renderLayout({
      title: o.title,
      body: o.body,
      nav: o.session ? this.d.nav : [],
      current: o.current,
      operator: o.session?.operator,
      csrfToken: o.session?.csrfToken,
      flash: o.flash,
      problem: o.problem,
      assets: { css: this.d.assets.css.path, js: this.d.assets.js.path },
    });
    return { status: o.status ?? 200, body, headers: { ...pageHeaders(this.d.identityOrigin), ...o.headers } };
  }

  /** 303 See Other (after a POST, the browser GETs the new location). */
  redirect(location: string, headers: Record<string, string> = {}): Reply {
    return { status: 303, headers: { ...pageHeaders(this.d.identityOrigin), location, ...headers }, body: '' };
  }

  /** The signed-in session of a request, if any. */
  session(ctx: Pick<RequestContext, 'headers'>): Session | undefined {
    return this.d.sessions.get(parseCookies(ctx.headers.cookie).get(this.d.cookies.session));
  }

  sessionCookie(s: Session): Record<string, string> {
    return {
      'set-cookie': serializeCookie(this.d.cookies.session, s.id, {
        sameSite: 'Lax',
        secure: this.d.secure,
        maxAge: this.d.sessions.cookieMaxAge(s),
      }),
    };
  }

  clearSessionCookie(): Record<string, string> {
    return { 'set-cookie': serializeCookie(this.d.cookies.session, '', { sameSite: 'Lax', secure: this.d.secure, maxAge: 0 }) };
  }

  /** Where to send a browser that needs to sign in, coming back to `returnTo` afterwards. */
  signInLocation(returnTo: string): string {
    return `/auth/login?${new URLSearchParams({ return_to: safeReturnTo(returnTo) }).toString()}`;
  }

  /** An error page (no nav unless signed in). */
  error(status: number, title: string, text: Html | string, session?: Session, problem?: ApiProblem): Reply {
    return this.page({ status, title, body: html`<p>${text}</p>`, session, problem });
  }
}

/** A path on this console to come back to after sign-in; anything else (another origin, the auth pages) is `/`. */
export function safeReturnTo(raw: string | null | undefined): string {
  if (!raw || !raw.startsWith('/') || raw.startsWith('//') || raw.startsWith('/\\') || raw.startsWith('/auth/')) return '/';
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return '/'; // no control characters (header splitting, odd parsing)
  }
  return raw.length > 2000 ? '/' : raw;
}

/** The request's path and query, as the browser asked. */
export function requestTarget(ctx: RequestContext): string {
  const q = ctx.query.toString();
  return q === '' ? ctx.path : `${ctx.path}?${q}`;
}
