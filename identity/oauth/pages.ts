/**
 * The minimal HTML pages a person sees: the sign-in page of `/authorize`, the two steps of the
 * device flow's user-code page, and the error and message pages. Plain forms, no script; every
 * value is HTML-escaped; never cached, never framed (clickjacking). The referrer goes to identity
 * itself only (`same-origin`: the query holds the authorization request, which other sites must
 * not see; `no-referrer` would also make browsers send `Origin: null` on the page's own form
 * posts, which the cross-site check in csrf.ts refuses). Each password form carries its
 * anti-forgery token (form-guard.ts).
 */
import type { Reply } from '../../shared/http.js';
import { FORM_TOKEN_FIELD } from './form-guard.js';

export const PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'cache-control': 'no-store',
  pragma: 'no-cache',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
});

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:24rem;margin:3rem auto;padding:0 1rem}label{display:block;margin:.75rem 0 .25rem}input{width:100%;padding:.4rem;box-sizing:border-box}button{margin:1rem .5rem 0 0;padding:.5rem 1rem}.error{color:#b00020}</style>
</head><body>
${body}
</body></html>
`;
}

export function htmlReply(html: string, status = 200, headers: Record<string, string> = {}): Reply {
  return { status, body: html, contentType: 'text/html; charset=utf-8', headers: { ...headers, ...PAGE_HEADERS } };
}

function hidden(params: ReadonlyMap<string, string>): string {
  return [...params].map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`).join('\n');
}

function tokenInput(formToken: string): string {
  return `<input type="hidden" name="${FORM_TOKEN_FIELD}" value="${escapeHtml(formToken)}">`;
}

function errorLine(error: string | undefined): string {
  return error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : '';
}

export interface SignInPage {
  /** Who is asking (the client's name). */
  clientName: string;
  scopes: readonly string[];
  /** The validated authorization parameters, posted back with the credentials. */
  params: ReadonlyMap<string, string>;
  /** The anti-forgery token of this page. */
  formToken: string;
  email?: string;
  error?: string;
}

export function signInPage(p: SignInPage): string {
  return page(
    'Sign in',
    `<h1>Sign in</h1>
<p>${escapeHtml(p.clientName)} asks to access your account${p.scopes.length ? ` (${escapeHtml(p.scopes.join(', '))})` : ''}.</p>
${errorLine(p.error)}
<form method="post" action="/authorize">
${hidden(p.params)}
${tokenInput(p.formToken)}
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(p.email ?? '')}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" name="action" value="approve">Sign in</button><button type="submit" name="action" value="deny" formnovalidate>Cancel</button>
</form>`,
  );
}

export interface DeviceCodePage {
  userCode?: string;
  error?: string;
}

/** The device page's first step: the code. A GET form, so nothing is decided by it. */
export function deviceCodePage(p: DeviceCodePage): string {
  return page(
    'Connect a device',
    `<h1>Connect a device</h1>
<p>Enter the code shown on your device.</p>
${errorLine(p.error)}
<form method="get" action="/auth/device">
<label for="user_code">Code</label><input id="user_code" name="user_code" autocomplete="off" required value="${escapeHtml(p.userCode ?? '')}">
<button type="submit">Continue</button>
</form>`,
  );
}

export interface DevicePage {
  /** The code, as shown on the device (`BCDF-GHJK`). */
  userCode: string;
  /** The anti-forgery token of this page, bound to this device code. */
  formToken: string;
  email?: string;
  error?: string;
}

/** The device page's second step, for a valid code: sign in and approve, or deny. */
export function devicePage(p: DevicePage): string {
  return page(
    'Connect a device',
    `<h1>Connect a device</h1>
<p>A device showing the code <strong>${escapeHtml(p.userCode)}</strong> asks to use your account. Sign in to approve it.</p>
${errorLine(p.error)}
<form method="post" action="/auth/device">
<input type="hidden" name="user_code" value="${escapeHtml(p.userCode)}">
${tokenInput(p.formToken)}
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" value="${escapeHtml(p.email ?? '')}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password">
<button type="submit" name="action" value="approve">Approve</button><button type="submit" name="action" value="deny">Deny</button>
</form>`,
  );
}

/** A way on from an error page: a path on identity itself. */
export interface PageLink {
  href: string;
  text: string;
}

/** An error page: what went wrong in words, the technical detail below it, and a way on. */
export function errorPage(title: string, message: string, opts: { detail?: string | undefined; link?: PageLink | undefined } = {}): string {
  const detail = opts.detail && opts.detail !== message ? `\n<p><small>${escapeHtml(opts.detail)}</small></p>` : '';
  const link = opts.link ? `\n<p><a href="${escapeHtml(opts.link.href)}">${escapeHtml(opts.link.text)}</a></p>` : '';
  return page(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(message)}</p>${detail}${link}`);
}

export function messagePage(title: string, message: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(message)}</p>`);
}
