/**
 * The two minimal HTML pages a person sees: the sign-in page of `/authorize` and the user-code
 * page of the device flow. Plain forms, no script; every value is HTML-escaped; never cached,
 * never framed (clickjacking), no referrer (the query holds the authorization request).
 */
import type { Reply } from '../../shared/http.js';

export const PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'cache-control': 'no-store',
  pragma: 'no-cache',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'no-referrer',
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

export function htmlReply(html: string, status = 200): Reply {
  return { status, body: html, contentType: 'text/html; charset=utf-8', headers: { ...PAGE_HEADERS } };
}

function hidden(params: ReadonlyMap<string, string>): string {
  return [...params].map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`).join('\n');
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
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(p.email ?? '')}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" name="action" value="approve">Sign in</button><button type="submit" name="action" value="deny" formnovalidate>Cancel</button>
</form>`,
  );
}

export interface DevicePage {
  userCode?: string;
  email?: string;
  error?: string;
}

export function devicePage(p: DevicePage): string {
  return page(
    'Connect a device',
    `<h1>Connect a device</h1>
<p>Enter the code shown on your device, and sign in to approve it.</p>
${errorLine(p.error)}
<form method="post" action="/auth/device">
<label for="user_code">Code</label><input id="user_code" name="user_code" autocomplete="off" required value="${escapeHtml(p.userCode ?? '')}">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" value="${escapeHtml(p.email ?? '')}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password">
<button type="submit" name="action" value="approve">Approve</button><button type="submit" name="action" value="deny">Deny</button>
</form>`,
  );
}

export function messagePage(title: string, message: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(message)}</p>`);
}
