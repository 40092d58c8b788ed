/**
 * Errors a person meets on the pages of /authorize and /auth/device, before anything can be
 * redirected back to an application (unknown client, unregistered redirect URI, a refused form
 * post): an HTML page when the request prefers HTML (a browser), else problem+json exactly as the
 * edge answers everywhere else. Same status and headers either way. The page is pages.ts's (every
 * value escaped, the same restrictive headers and CSP) and never repeats what the request sent:
 * no client_id or redirect_uri is reflected (an error page of the identity provider that prints
 * attacker-chosen text is a phishing aid even when escaped).
 */
import { errorReply, type Handler, type Reply, type RequestContext } from '../../shared/http.js';
import type { Problem } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { errorPage, htmlReply, type PageLink } from './pages.js';

interface MediaRange {
  readonly type: string;
  readonly subtype: string;
  readonly q: number;
}

function parseAccept(accept: string): MediaRange[] {
  const out: MediaRange[] = [];
  for (const part of accept.split(',')) {
    const [range, ...params] = part.split(';');
    const [type, subtype] = (range ?? '').trim().toLowerCase().split('/');
    if (!type || !subtype) continue;
    let q = 1;
    for (const p of params) {
      const [k, v] = p.split('=');
      if (k?.trim().toLowerCase() === 'q') {
        const n = Number(v?.trim());
        q = Number.isFinite(n) ? Math.min(Math.max(n, 0), 1) : 0;
      }
    }
    out.push({ type, subtype, q });
  }
  return out;
}

/** The q of `type/subtype` under `ranges`: the most specific matching range wins (RFC 9110 §12.5.1). */
function qualityOf(ranges: readonly MediaRange[], type: string, subtype: string): number {
  let best: { specificity: number; q: number } | undefined;
  for (const r of ranges) {
    const specificity = r.type === type && r.subtype === subtype ? 2 : r.type === type && r.subtype === '*' ? 1 : r.type === '*' ? 0 : -1;
    if (specificity < 0) continue;
    if (!best || specificity > best.specificity || (specificity === best.specificity && r.q > best.q)) best = { specificity, q: r.q };
  }
  return best?.q ?? 0;
}

/**
 * True when the request prefers `text/html` to problem+json (and to plain JSON): a browser's
 * `text/html,…,*\/*;q=0.8` does, `application/json`, `*\/*` or no Accept at all do not. A tie
 * keeps the API's answer.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (!accept) return false;
  const ranges = parseAccept(accept);
  const html = qualityOf(ranges, 'text', 'html');
  const json = Math.max(qualityOf(ranges, 'application', 'problem+json'), qualityOf(ranges, 'application', 'json'));
  return html > 0 && html > json;
}

/** What a person is told, in words, for the errors they can meet here. */
function sentence(p: Problem): string {
  if (p.code === 'invalid_field' && p.field === 'client_id') {
    return 'This sign-in link is not valid: it does not name an application registered here. Go back to the application and try again.';
  }
  if (p.code === 'invalid_field' && p.field === 'redirect_uri') {
    return 'This sign-in link is not valid: its return address is not one registered for the application. Go back to the application and try again.';
  }
  if (p.status >= 500) return 'Something went wrong on our side. Try again in a moment.';
  return p.detail ?? p.title;
}

/** An HTML page for a problem; `link` offers a way back (a path on identity itself). */
export function problemPage(p: Problem, headers: Record<string, string>, link?: PageLink): Reply {
  const reply = htmlReply(errorPage(p.title, sentence(p), { detail: p.status < 500 ? p.detail : undefined, link }), p.status);
  return { ...reply, headers: { ...headers, ...reply.headers } };
}

/**
 * The reply for `err` to this request: an HTML page when it prefers HTML, else the problem+json
 * the edge would have sent. Logs as the edge does (a 5xx with its cause).
 */
export function errorFor(ctx: RequestContext, err: unknown, log: Logger, link?: PageLink): Reply {
  const reply = errorReply(err, log, ctx);
  return prefersHtml(ctx.headers.accept) ? problemPage(reply.body as Problem, reply.headers ?? {}, link) : reply;
}

/** `h`, with what it throws answered as {@link errorFor}: HTML to browsers, problem+json to the rest. */
export function withHtmlErrors(h: Handler, log: Logger): Handler {
  return async (ctx) => {
    try {
      return await h(ctx);
    } catch (err) {
      if (!prefersHtml(ctx.headers.accept)) throw err; // the edge's own answer, unchanged
      return errorFor(ctx, err, log);
    }
  };
}
