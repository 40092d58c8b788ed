// @tier: pure
/**
 * The pure parts of the sign-in pages' guards: which form posts count as cross-site (csrf.ts),
 * the form cookie, what a token is bound to, which requests get an HTML error page
 * (html-errors.ts `prefersHtml`), and the escaping of the error page.
 */
import t from 'tap';
import {
  authorizationSubject,
  crossSiteRefusal,
  deviceSubject,
  formCookie,
  formCookieName,
  readFormCookie,
} from '../../../identity/oauth/csrf.js';
import { prefersHtml } from '../../../identity/oauth/html-errors.js';
import { errorPage } from '../../../identity/oauth/pages.js';

const ORIGIN = 'https://id.example.com';

t.test('crossSiteRefusal: Sec-Fetch-Site first, then Origin', async (t) => {
  const allowed: Record<string, string>[] = [
    {},
    { 'sec-fetch-site': 'same-origin' },
    { 'sec-fetch-site': 'Same-Origin' },
    { 'sec-fetch-site': 'none' },
    // Sec-Fetch-Site is the browser's word and wins over an Origin a proxy may have changed.
    { 'sec-fetch-site': 'same-origin', origin: 'https://other.example' },
    { origin: ORIGIN },
    { origin: 'https://ID.example.com:443' },
  ];
  for (const h of allowed) t.equal(crossSiteRefusal(h, ORIGIN), undefined, JSON.stringify(h));
  const refused: Record<string, string>[] = [
    { 'sec-fetch-site': 'cross-site' },
    { 'sec-fetch-site': 'cross-site', origin: ORIGIN },
    { 'sec-fetch-site': 'same-site' },
    { 'sec-fetch-site': 'something-new' },
    { 'sec-fetch-site': 'same-origin, cross-site' },
    { origin: 'https://evil.example' },
    { origin: 'null' },
    { origin: 'http://id.example.com' },
    { origin: 'https://id.example.com:8443' },
    { origin: 'https://sub.id.example.com' },
    { origin: '' },
    { origin: 'not an origin' },
  ];
  for (const h of refused) t.type(crossSiteRefusal(h, ORIGIN), 'string', JSON.stringify(h));
});

t.test('the form cookie', async (t) => {
  t.equal(formCookieName('https://id.example.com'), '__Host-identity-form', '__Host- when served over https');
  t.equal(formCookieName('http://127.0.0.1:8083'), 'identity-form');
  const v = 'A'.repeat(43);
  t.equal(
    formCookie('__Host-identity-form', v, { secure: true, maxAgeMs: 1_800_000 }),
    `__Host-identity-form=${v}; Path=/; HttpOnly; SameSite=Strict; Max-Age=1800; Secure`,
  );
  t.equal(readFormCookie(`a=b; identity-form=${v}; c=d`, 'identity-form'), v);
  t.equal(readFormCookie(`identity-form=short`, 'identity-form'), undefined, 'not one of ours');
  t.equal(readFormCookie(`xidentity-form=${v}`, 'identity-form'), undefined, 'another name');
  t.equal(readFormCookie(undefined, 'identity-form'), undefined);
});

t.test('what a token is bound to', async (t) => {
  const base = new Map([
    ['client_id', 'web'],
    ['redirect_uri', 'https://app.example/cb'],
    ['state', 's'],
    ['code_challenge', 'c'],
  ]);
  const reordered = new Map([...base].reverse());
  t.same(authorizationSubject(base), authorizationSubject(reordered), 'the order of the parameters does not matter');
  for (const k of base.keys()) {
    const changed = new Map(base);
    changed.set(k, `${base.get(k)}x`);
    t.notSame(authorizationSubject(changed), authorizationSubject(base), `a change to ${k} is another request`);
  }
  const extra = new Map(base);
  extra.set('nonce', 'n');
  t.notSame(authorizationSubject(extra), authorizationSubject(base), 'an added parameter is another request');
  // `a=b&c` and `a` = `b&c` must not collide.
  t.notSame(
    authorizationSubject(new Map([['a', 'b&c=d']])),
    authorizationSubject(
      new Map([
        ['a', 'b'],
        ['c', 'd'],
      ]),
    ),
  );
  t.notSame(deviceSubject('BCDFGHJK'), deviceSubject('BCDFGHJL'));
});

t.test('prefersHtml: a browser yes, an API client no, a tie no', async (t) => {
  const html = [
    'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8',
    'text/html',
    'text/*',
    'TEXT/HTML; charset=utf-8',
    'application/json;q=0.5, text/html',
  ];
  for (const a of html) t.ok(prefersHtml(a), a);
  const api = [
    undefined,
    '',
    '*/*',
    'application/json',
    'application/problem+json',
    'application/json, text/html',
    'text/html;q=0, */*',
    'text/html;q=0.5, application/*',
    'text/plain',
    'garbage',
  ];
  for (const a of api) t.notOk(prefersHtml(a), String(a));
});

t.test('the error page escapes everything it shows', async (t) => {
  const html = errorPage('<T>', '<b>message</b>', { detail: `"d" & 'e'`, link: { href: '/authorize?a="><script>', text: '<i>again</i>' } });
  t.notMatch(html, /<(b|i|script)>/);
  t.match(html, '&lt;b&gt;message&lt;/b&gt;');
  t.match(html, '&quot;d&quot; &amp; &#39;e&#39;');
  t.match(html, '<a href="/authorize?a=&quot;&gt;&lt;script&gt;">&lt;i&gt;again&lt;/i&gt;</a>');
});
