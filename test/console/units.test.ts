// @tier: pure
/**
 * The console's pure parts: the html escaper (element content and attribute values, nested
 * fragments, links), the CSRF comparison and origin check, cookie parsing and attributes, the
 * session store's expiry (a fake clock), and the pages' form checks.
 */
import t from 'tap';
import { FakeClock } from '../../shared/clock.js';
import { escapeHtml, href, html, trusted } from '../../console/html.js';
import { csrfTokensEqual, newCsrfToken, sameOrigin } from '../../console/auth/csrf.js';
import { cookieNames, parseCookies, serializeCookie } from '../../console/auth/cookies.js';
import { SessionStore, SIGN_IN_TTL_MS } from '../../console/auth/sessions.js';
import { codeChallenge } from '../../console/auth/oidc.js';
import { errorFor, field } from '../../console/forms.js';
import { safeReturnTo } from '../../console/web.js';
import { validateQuotaForm } from '../../console/pages/quotas.js';
import { parseTemplateData } from '../../console/pages/templates.js';
import { backOf, redriveSummary } from '../../console/pages/dlq.js';
import { seg } from '../../console/api/client.js';

const EVIL = `<script>alert("x")</script>' onmouseover='steal()' & "quoted"`;

t.test('html escapes every interpolation, in content and in attributes', async (t) => {
  t.equal(escapeHtml(`<>&"'`), '&lt;&gt;&amp;&quot;&#39;');
  const content = html`<p>${EVIL}</p>`.value;
  t.notMatch(content, /<script>/, 'no tag survives in content');
  t.equal(content, `<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;steal()&#39; &amp; &quot;quoted&quot;</p>`);
  const dq = html`<input value="${EVIL}" />`.value;
  t.equal(dq.match(/"/g)?.length, 2, 'a double-quoted attribute cannot be closed from inside');
  // prettier-ignore
  const sq = html`<a title='${EVIL}'>x</a>`.value;
  t.equal(sq.match(/'/g)?.length, 2, 'a single-quoted attribute cannot be closed from inside');
  t.notMatch(sq, /onmouseover='/, 'no event handler attribute appears');
});

t.test('fragments nest unescaped, arrays join, nothing renders for null, undefined and false', async (t) => {
  const inner = html`<b>${'<i>'}</b>`;
  t.equal(html`<p>${inner}</p>`.value, '<p><b>&lt;i&gt;</b></p>', 'an html fragment is kept as markup, once escaped');
  // prettier-ignore
  t.equal(html`<ul>${['a<', 'b'].map((x) => html`<li>${x}</li>`)}</ul>`.value, '<ul><li>a&lt;</li><li>b</li></ul>');
  t.equal(html`${null}${undefined}${false}${0}`.value, '0', 'zero is text, the others nothing');
  t.equal(html`${'<x>'}${trusted('<br>')}`.value, '&lt;x&gt;<br>', 'trusted() is the one way to keep markup from a string');
  t.equal(String(html`<p>${1n}</p>`), '<p>1</p>');
});

t.test('href takes only paths on the console', async (t) => {
  t.equal(href('/quotas', { kind: 'user', prefix: 'a b&c', cursor: undefined, empty: '' }), '/quotas?kind=user&prefix=a+b%26c');
  for (const bad of ['javascript:alert(1)', '//evil.example/x', 'https://evil.example', '/\\evil.example', 'quotas'])
    t.throws(() => href(bad), `${bad} is refused`);
});

t.test('form controls: a label for every control, and the API problem beside the field it names', async (t) => {
  const problem = {
    title: 'Invalid field',
    status: 400,
    code: 'invalid_field',
    field: 'quota.rate',
    detail: 'quota.rate: must be positive',
  };
  t.equal(errorFor('rate', problem), 'must be positive', 'the field name in the detail is dropped');
  t.equal(errorFor('burst', problem), undefined, 'another field shows nothing');
  t.equal(errorFor('variants', { ...problem, field: 'variants.en', detail: 'no channel' }), 'no channel');
  const out = field({ name: 'rate', label: 'Rate', value: '"><script>', problem }).value;
  t.match(out, /<label for="f-rate">Rate<\/label>/);
  t.match(out, /aria-invalid="true"/);
  t.match(out, /aria-describedby="f-rate-error"/);
  t.match(out, /value="&quot;&gt;&lt;script&gt;"/, 'the value is escaped in its attribute');
});

t.test('CSRF tokens compare in constant time and refuse anything but the same token', async (t) => {
  const tok = newCsrfToken();
  t.match(tok, /^[A-Za-z0-9_-]{43}$/, '256 bits, base64url');
  t.not(newCsrfToken(), tok, 'fresh each time');
  t.ok(csrfTokensEqual(tok, tok));
  t.notOk(csrfTokensEqual(tok, tok.slice(0, -1)), 'a prefix');
  t.notOk(csrfTokensEqual(tok, `${tok}x`), 'longer');
  t.notOk(csrfTokensEqual(tok, ''), 'empty');
  t.notOk(csrfTokensEqual(tok, null), 'missing');
  t.notOk(csrfTokensEqual('', ''), 'a session without a token matches nothing');
});

t.test('a POST must come from the console’s own origin', async (t) => {
  const o = 'https://console.example';
  t.ok(sameOrigin({ origin: o }, o));
  t.notOk(sameOrigin({ origin: 'https://evil.example' }, o));
  t.notOk(sameOrigin({ origin: 'null' }, o), 'an opaque origin');
  t.notOk(sameOrigin({ origin: 'https://console.example:8443' }, o), 'another port');
  t.ok(sameOrigin({ referer: 'https://console.example/quotas?x=1' }, o), 'no Origin: the Referer’s origin');
  t.notOk(sameOrigin({ referer: 'https://console.example.evil.example/' }, o));
  t.notOk(sameOrigin({ referer: 'not a url' }, o));
  t.notOk(sameOrigin({}, o), 'neither header: refused');
  t.notOk(sameOrigin({ origin: 'https://evil.example', referer: `${o}/` }, o), 'Origin wins over Referer');
});

t.test('cookies: parsed as sent, written HttpOnly with the SameSite and Secure asked for', async (t) => {
  const c = parseCookies('a=1; console_session=abc; a=2; "q"; b="quoted"; =x');
  t.equal(c.get('a'), '1', 'the first of a repeated name');
  t.equal(c.get('console_session'), 'abc');
  t.equal(c.get('b'), 'quoted');
  t.equal(parseCookies(undefined).size, 0);
  t.equal(serializeCookie('s', 'v1', { sameSite: 'Lax', secure: false, maxAge: 60 }), 's=v1; Path=/; HttpOnly; SameSite=Lax; Max-Age=60');
  t.equal(serializeCookie('s', '', { sameSite: 'Lax', secure: true, maxAge: 0 }), 's=; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=0');
  t.throws(() => serializeCookie('s', 'a;b', { sameSite: 'Lax', secure: false }), 'a value that would end the cookie');
  t.same(cookieNames(true), { session: '__Host-console_session', signIn: '__Host-console_signin' }, 'behind https: __Host- names');
  t.same(cookieNames(false), { session: 'console_session', signIn: 'console_signin' });
});

t.test('sessions end when idle, at their maximum age, and on delete; sign-ins are used once', async (t) => {
  const clock = new FakeClock(1_000_000);
  const store = new SessionStore({ clock, idleMs: 30 * 60_000, maxMs: 2 * 3_600_000 });
  const tokens = { accessToken: 'at', accessExpiresAt: clock.now() + 900_000 };
  const s = store.create({ userId: 'u1', role: 'admin' }, tokens);
  t.match(s.id, /^[A-Za-z0-9_-]{43}$/);
  t.not(s.csrfToken, s.id, 'the CSRF token is not the session id');
  clock.advance(29 * 60_000);
  t.equal(store.get(s.id), s, 'used within the idle time');
  clock.advance(29 * 60_000);
  t.equal(store.get(s.id), s, 'each use renews the idle time');
  t.equal(store.cookieMaxAge(s), (2 * 3_600_000 - 58 * 60_000) / 1000, 'the cookie lives until the absolute end');
  clock.advance(30 * 60_000);
  t.equal(store.get(s.id), undefined, 'idle for 30 minutes: gone');

  const busy = store.create({ userId: 'u2', role: 'admin' }, tokens);
  for (let i = 0; i < 8; i++) {
    clock.advance(15 * 60_000);
    if (i < 7) t.ok(store.get(busy.id), `still there after ${(i + 1) * 15} minutes of use`);
  }
  t.equal(store.get(busy.id), undefined, 'two hours after sign-in: gone however busy');

  const third = store.create({ userId: 'u3', role: 'admin' }, tokens);
  store.delete(third.id);
  t.equal(store.get(third.id), undefined, 'deleted at sign-out');
  t.equal(store.get(undefined), undefined);
  t.equal(store.get('forged'), undefined);

  const id = store.begin({ state: 's', nonce: 'n', codeVerifier: 'v', returnTo: '/' });
  t.same(store.take(id)?.state, 's');
  t.equal(store.take(id), undefined, 'a sign-in is taken once');
  const late = store.begin({ state: 's', nonce: 'n', codeVerifier: 'v', returnTo: '/' });
  clock.advance(SIGN_IN_TTL_MS);
  t.equal(store.take(late), undefined, 'a sign-in older than 10 minutes is refused');

  const small = new SessionStore({ clock, idleMs: 60_000, maxMs: 120_000, maxSessions: 2 });
  const a = small.create({ userId: 'a', role: 'admin' }, tokens);
  const b = small.create({ userId: 'b', role: 'admin' }, tokens);
  small.get(a.id);
  small.create({ userId: 'c', role: 'admin' }, tokens);
  t.equal(small.size, 2, 'bounded');
  t.ok(small.get(a.id), 'the recently used one is kept');
  t.equal(small.get(b.id), undefined, 'the least recently used one is dropped');
});

t.test('sign-ins others start by the thousand do not evict one in progress; an altered or forged sign-in cookie is none', async (t) => {
  const clock = new FakeClock(1_000_000);
  const store = new SessionStore({ clock, idleMs: 60_000, maxMs: 120_000 });
  const mine = store.begin({ state: 'mine', nonce: 'n', codeVerifier: 'v', returnTo: '/quotas' });
  // An anonymous client can start a sign-in with one GET /auth/login, as often as it likes.
  for (let i = 0; i < 10_001; i++) store.begin({ state: `s${i}`, nonce: 'n', codeVerifier: 'v', returnTo: '/' });
  clock.advance(60_000);
  t.same(store.take(mine), { state: 'mine', nonce: 'n', codeVerifier: 'v', returnTo: '/quotas', createdAt: 1_000_000 }, 'mine completes');
  t.equal(store.take(mine), undefined, 'once');
  t.equal(store.take(mine.slice(0, -2) + (mine.endsWith('AA') ? 'BA' : 'AA')), undefined, 'a sign-in cookie altered is none');
  t.equal(store.take('A'.repeat(43)), undefined, 'one the console never made is none');
});

t.test('PKCE S256 and the return path after sign-in', async (t) => {
  // RFC 7636 appendix B.
  t.equal(codeChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'), 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
  t.equal(safeReturnTo('/quotas?kind=user'), '/quotas?kind=user');
  for (const bad of [null, '', 'https://evil.example', '//evil.example', '/\\evil.example', '/auth/logout', '/x\r\nSet-Cookie: a=b'])
    t.equal(safeReturnTo(bad), '/', `${JSON.stringify(bad)} goes home`);
});

t.test('the quota form: whole numbers, a unit or an interval, a plan for rate 0; per-route rules kept', async (t) => {
  const base = {
    algorithm: 'token_bucket',
    rate: '10',
    burst: '20',
    unit: 'minute',
    interval_ms: '',
    cost: '1',
    fail_mode: '',
    shadow: false,
    plan: '',
    accuracy: 'exact',
  };
  t.same(validateQuotaForm(base, undefined), {
    input: { rate: 10, algorithm: 'token_bucket', burst: 20, unit: 'minute', cost: 1, shadow: false },
    errors: {},
  });
  t.same(validateQuotaForm({ ...base, rate: '1.5', burst: '-1' }, undefined).errors, {
    rate: 'must be a whole number from 0 to 4294967295',
    burst: 'must be a whole number from 0 to 4294967295',
  });
  t.same(validateQuotaForm({ ...base, unit: '' }, undefined).errors, { unit: 'choose a unit, or give an interval in ms' });
  t.same(validateQuotaForm({ ...base, interval_ms: '1500' }, undefined).errors, { interval_ms: 'give a unit or an interval, not both' });
  t.same(validateQuotaForm({ ...base, unit: '', interval_ms: '1500' }, undefined).input?.interval_ms, 1500);
  t.same(validateQuotaForm({ ...base, rate: '0', burst: '' }, undefined).errors, {
    plan: 'a record with rate 0 refers to a plan: name it',
  });
  t.same(validateQuotaForm({ ...base, rate: '0', burst: '', plan: 'pro', unit: '' }, undefined).input, {
    rate: 0,
    cost: 1,
    shadow: false,
    plan: 'pro',
  });
  const routes = [{ path_prefix: '/v1/search', rate: 1 }];
  t.same(
    validateQuotaForm(base, { subject_id: 'user:1', routes }).input?.routes,
    routes,
    'the PUT replaces the record: its routes go back',
  );
});

t.test('template sample data and re-drive summaries', async (t) => {
  t.same(parseTemplateData('order_id=A-1\n\n eta = Tuesday=ish\r\n'), { data: { order_id: 'A-1', eta: ' Tuesday=ish' } });
  t.same(parseTemplateData('x=1\nnope'), { error: 'line 2: write name=value' });
  t.same(redriveSummary([]), { kind: 'info', text: 'Nothing to re-drive.' });
  t.same(
    redriveSummary([
      { id: 'a', result: 'redriven' },
      { id: 'b', result: 'redriven' },
      { id: 'c', result: 'already_redriven' },
    ]),
    { kind: 'success', text: '2 re-driven, 1 already re-driven.' },
  );
  t.same(redriveSummary([{ id: 'a', result: 'not_found' }]), { kind: 'info', text: '1 not found.' });
});

t.test('an id in an API path stays one segment: no dot segments, no empty segment', async (t) => {
  const base = 'http://notifier.internal:8083/api/v1/admin/templates';
  for (const id of ['a/b', '?x=1', '#frag', '%2e%2e', '.%2E', '..x', 'a b', '...'])
    t.equal(new URL(`${base}/${seg(id)}/render`).pathname.split('/').length, 7, `${JSON.stringify(id)} is one segment`);
  for (const id of ['.', '..', '']) {
    t.throws(() => seg(id), { name: 'ApiError', problem: { status: 404, code: 'not_found' } }, `${JSON.stringify(id)} is refused`);
  }
});

t.test("the re-drive form's way back is a /dlq path with no control characters (it becomes a Location header as is)", async (t) => {
  t.equal(backOf('/dlq?channel=email&all=true'), '/dlq?channel=email&all=true');
  t.equal(backOf('/dlq/abc'), '/dlq/abc');
  for (const bad of [null, '', '/quotas', 'https://evil.example/dlq', '/dlq\r\nSet-Cookie: a=b', '/dlq\nx', '/dlqx'])
    t.equal(backOf(bad), '/dlq', `${JSON.stringify(bad)} goes to /dlq`);
});
