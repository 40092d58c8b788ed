/**
 * Errors a person meets at /authorize before anything can be redirected (an unknown client, an
 * unregistered or missing redirect URI, a form posted with the wrong content type) are an HTML
 * page for a browser (`Accept` preferring text/html), with the status and the restrictive headers
 * of the other pages, and nothing the request sent reflected into it; anything else still gets
 * problem+json exactly as before. Redirectable errors still redirect.
 */
import t, { type Test } from 'tap';
import { startOAuthServer, type OAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/cb';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';
const XSS = '<script>alert(1)</script>';
const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'";

function url(srv: OAuthServer, params: Record<string, string>): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'web-app',
    redirect_uri: REDIRECT,
    scope: 'openid',
    state: 's',
    code_challenge: CHALLENGE,
    code_challenge_method: 'S256',
    ...params,
  });
  for (const [k, v] of Object.entries(params)) if (v === '') q.delete(k);
  return `${srv.issuer}/authorize?${q.toString()}`;
}

async function get(target: string, accept?: string): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await fetch(target, { headers: accept ? { accept } : {}, redirect: 'manual' });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

function isPage(t: Test, r: { status: number; headers: Headers; body: string }, status: number, what: string): void {
  t.equal(r.status, status, `${what}: the status of the problem`);
  t.match(r.headers.get('content-type'), /^text\/html; charset=utf-8$/, `${what}: HTML`);
  t.equal(r.headers.get('content-security-policy'), PAGE_CSP, `${what}: the pages' CSP`);
  t.equal(r.headers.get('x-frame-options'), 'DENY', `${what}: never framed`);
  t.equal(r.headers.get('cache-control'), 'no-store', `${what}: never cached`);
  t.equal(r.headers.get('x-content-type-options'), 'nosniff');
  t.match(r.body, /^<!doctype html>/);
  t.notMatch(r.body, /<script/i, `${what}: no script`);
  t.notMatch(r.body, /alert\(1\)/, `${what}: nothing of the request reflected`);
  t.notMatch(r.body, /evil\.example/, `${what}: no redirect URI reflected`);
}

t.test('errors before the redirect: HTML for a browser, problem+json for the rest', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_html_errors');
  await srv.publicClient('web-app', [REDIRECT]);

  await t.test('an unknown client_id (a script, even)', async (t) => {
    const target = url(srv, { client_id: XSS });
    const html = await get(target, BROWSER_ACCEPT);
    isPage(t, html, 400, 'unknown client');
    t.match(html.body, 'it does not name an application registered here', 'says what is wrong, in words');

    for (const accept of ['application/json', 'application/problem+json', '*/*', undefined, 'text/html;q=0.5, application/json']) {
      const api = await get(target, accept);
      t.equal(api.status, 400, `Accept: ${accept}`);
      t.equal(api.headers.get('content-type'), 'application/problem+json', `Accept: ${accept}: problem+json as before`);
      t.match(JSON.parse(api.body), { code: 'invalid_field', field: 'client_id', status: 400 });
    }
  });

  await t.test('a redirect URI that is not registered, or none', async (t) => {
    isPage(
      t,
      await get(url(srv, { redirect_uri: `https://evil.example/cb?x="><script>alert(1)</script>` }), BROWSER_ACCEPT),
      400,
      'bad redirect',
    );
    isPage(t, await get(url(srv, { redirect_uri: '' }), BROWSER_ACCEPT), 400, 'no redirect_uri');
    isPage(t, await get(url(srv, { client_id: '' }), BROWSER_ACCEPT), 400, 'no client_id');
    const api = await get(url(srv, { redirect_uri: 'https://evil.example/cb' }), 'application/json');
    t.match(JSON.parse(api.body), { code: 'invalid_field', field: 'redirect_uri' });
  });

  await t.test('the form post: an unknown client and a wrong content type', async (t) => {
    const form = new URLSearchParams(new URL(url(srv, { client_id: XSS })).search);
    const headers = { 'sec-fetch-site': 'same-origin', accept: BROWSER_ACCEPT };
    const unknown = await fetch(`${srv.issuer}/authorize`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    isPage(t, { status: unknown.status, headers: unknown.headers, body: await unknown.text() }, 400, 'POST, unknown client');
    const plain = await fetch(`${srv.issuer}/authorize`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'text/plain' },
      body: 'x',
    });
    isPage(t, { status: plain.status, headers: plain.headers, body: await plain.text() }, 415, 'POST, text/plain');
  });

  await t.test('errors after the redirect URI is known still redirect, whatever Accept says', async (t) => {
    const r = await get(url(srv, { code_challenge: '' }), BROWSER_ACCEPT);
    t.equal(r.status, 303);
    t.equal(new URL(r.headers.get('location')!).searchParams.get('error'), 'invalid_request');
  });
});
