/**
 * The console over plain HTTP, no browser (raw bytes on a socket for the refusals): every POST
 * without the session's CSRF token, with a wrong one or from another origin is refused before it
 * does anything; the pages carry the security headers and never the operator's tokens; assets are
 * served by content hash with a year's immutable caching; a forged session cookie is no session.
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { waitFor } from '../harness/wait.js';
import { loadConfig } from '../../shared/config.js';
import { startConsole } from '../../console/app.js';
import { consoleConfig } from '../../console/config.js';
import { testLogger } from '../harness/log.js';
import { testEnv } from '../harness/services.js';
import { browserSignIn } from '../identity/oauth/helpers.js';
import { CP_ADMIN_TOKEN, OPERATOR, startPlatform, type Platform } from './platform.js';
import { call } from '../identity/notify/helpers.js';

/** Signs in as a browser would, by hand; returns the session cookie (`name=value`) and its id. */
async function httpSignIn(p: Platform): Promise<{ cookie: string; id: string }> {
  const login = await fetch(`${p.consoleUrl}/auth/login?return_to=%2Fquotas`, { redirect: 'manual' });
  const signInCookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
  const authorize = login.headers.get('location')!;
  const r = await browserSignIn(authorize, OPERATOR.email, OPERATOR.password);
  if (!r.location) throw new Error(`identity did not redirect: ${r.status} ${r.body.slice(0, 200)}`);
  const cb = await fetch(r.location, { redirect: 'manual', headers: { cookie: signInCookie } });
  if (cb.status !== 303 || cb.headers.get('location') !== '/quotas') throw new Error(`callback answered ${cb.status}`);
  const cookie = (cb.headers.get('set-cookie') ?? '').split(';')[0]!;
  return { cookie, id: cookie.split('=')[1]! };
}

/** One raw HTTP/1.1 request on a socket; the whole response as text. */
function raw(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => (out += d));
    s.on('end', () => resolve(out));
    s.on('error', reject);
    s.write(request);
  });
}

function post(port: number, path: string, o: { cookie: string; origin?: string; body: string; contentType?: string }): Promise<string> {
  return raw(
    port,
    [
      `POST ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      `Cookie: ${o.cookie}`,
      ...(o.origin !== undefined ? [`Origin: ${o.origin}`] : []),
      `Content-Type: ${o.contentType ?? 'application/x-www-form-urlencoded'}`,
      `Content-Length: ${Buffer.byteLength(o.body)}`,
      'Connection: close',
      '',
      o.body,
    ].join('\r\n'),
  );
}

const statusOf = (res: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(res)?.[1]);

t.test('the console over HTTP', async (t) => {
  const p = await startPlatform(t, 'console_http');
  const port = p.console.port;
  let { cookie, id } = await httpSignIn(p);
  const session = p.console.sessions.get(id);
  t.ok(session, 'signed in');
  let csrf = session!.csrfToken;
  const signInAgain = async () => {
    const again = await httpSignIn(p);
    return { ...again, csrf: p.console.sessions.get(again.id)!.csrfToken };
  };
  const tokens = session!.tokens;
  t.ok(tokens.refreshToken, 'identity issued a refresh token');

  const quotasBefore = async () =>
    (await call(`${p.controlPlaneUrl}/internal/quotas`, 'GET', undefined, { authorization: `Bearer ${CP_ADMIN_TOKEN}` })).json;
  const form = `kind=user&id=99&algorithm=token_bucket&rate=5&burst=5&unit=minute&cost=1&accuracy=exact`;

  await t.test('a POST without the right CSRF token or from another origin is refused, and changes nothing', async (t) => {
    const before = await quotasBefore();
    for (const [what, body, origin] of [
      ['no token', form, p.consoleUrl],
      ['an empty token', `${form}&_csrf=`, p.consoleUrl],
      ['a wrong token', `${form}&_csrf=${'A'.repeat(43)}`, p.consoleUrl],
      [
        "another session's token shape, one character off",
        `${form}&_csrf=${csrf.slice(0, -1)}${csrf.endsWith('A') ? 'B' : 'A'}`,
        p.consoleUrl,
      ],
      ['the right token from another origin', `${form}&_csrf=${csrf}`, 'https://evil.example'],
      ['the right token with Origin: null', `${form}&_csrf=${csrf}`, 'null'],
      ['the right token without Origin or Referer', `${form}&_csrf=${csrf}`, undefined],
    ] as const) {
      const res = await post(port, '/quotas/new', { cookie, origin, body });
      t.equal(statusOf(res), 403, `${what}: 403`);
      t.notOk(res.includes(csrf), `${what}: the refusal page does not show the token`);
    }
    t.same(await quotasBefore(), before, 'no quota was written');
    const logout = await post(port, '/auth/logout', { cookie, origin: 'https://evil.example', body: `_csrf=${csrf}` });
    t.equal(statusOf(logout), 403, 'a cross-site sign-out is refused too');
    t.ok(p.console.sessions.get(id), 'and the session lives on');
    const json = await post(port, '/quotas/new', {
      cookie,
      origin: p.consoleUrl,
      body: `{"_csrf":"${csrf}"}`,
      contentType: 'application/json',
    });
    t.equal(statusOf(json), 415, 'a JSON body is not a form');

    const ok = await post(port, '/quotas/new', { cookie, origin: p.consoleUrl, body: `${form}&_csrf=${encodeURIComponent(csrf)}` });
    t.equal(statusOf(ok), 303, 'the same form with the token from the console: saved, then redirected');
    t.match(ok, /\r\nlocation: \/quotas\/s\/user%3A99\r\n/i);
  });

  await t.test('pages carry the security headers, and never a token', async (t) => {
    const paths = ['/', '/activity', '/quotas', '/quotas/s/user%3A99', '/quotas/new', '/notifications', '/dlq', '/templates', '/types'];
    for (const path of paths) {
      const res = await fetch(`${p.consoleUrl}${path}`, { headers: { cookie }, redirect: 'manual' });
      const body = await res.text();
      t.equal(res.status, 200, `${path}: 200`);
      t.equal(res.headers.get('cache-control'), 'no-store', `${path}: no-store`);
      const csp = res.headers.get('content-security-policy') ?? '';
      t.match(csp, /default-src 'none'/, `${path}: CSP default none`);
      t.match(csp, /script-src 'self'(;|$)/, `${path}: scripts from the console only, no inline`);
      t.match(csp, /frame-ancestors 'none'/, `${path}: not framed`);
      t.equal(res.headers.get('x-frame-options'), 'DENY');
      t.equal(res.headers.get('referrer-policy'), 'same-origin');
      t.equal(res.headers.get('x-content-type-options'), 'nosniff');
      t.notMatch(body, /<script(?![^>]*\ssrc=)[^>]*>/, `${path}: no inline script`);
      t.notMatch(body, /\sstyle=|<style/, `${path}: no inline style (the overview's charts take their colours from the stylesheet)`);
      for (const [name, value] of Object.entries(tokens))
        if (typeof value === 'string' && value.length > 20) t.notOk(body.includes(value), `${path}: the ${name} is not on the page`);
      t.notOk(body.includes(id), `${path}: nor the session id`);
    }
  });

  await t.test('assets: by content hash, immutable for a year', async (t) => {
    const page = await (await fetch(`${p.consoleUrl}/quotas`, { headers: { cookie } })).text();
    const css = /<link rel="stylesheet" href="(\/assets\/console\.[0-9a-f]{12}\.css)"/.exec(page)?.[1];
    const js = /<script src="(\/assets\/console\.[0-9a-f]{12}\.js)" defer><\/script>/.exec(page)?.[1];
    t.ok(css && js, 'the page names both by hash');
    for (const [path, type] of [
      [css!, 'text/css; charset=utf-8'],
      [js!, 'text/javascript; charset=utf-8'],
    ] as const) {
      const r = await fetch(`${p.consoleUrl}${path}`);
      t.equal(r.status, 200);
      t.equal(r.headers.get('content-type'), type);
      t.equal(r.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      const etag = r.headers.get('etag')!;
      t.equal((await fetch(`${p.consoleUrl}${path}`, { headers: { 'if-none-match': etag } })).status, 304, 'revalidation is a 304');
    }
    t.equal((await fetch(`${p.consoleUrl}/assets/console.000000000000.css`)).status, 404, 'another hash is not served');
  });

  await t.test('without a session: pages redirect to sign-in, a forged cookie included', async (t) => {
    for (const c of ['', 'console_session=forged-session-id', `console_session=${id}x`]) {
      const r = await fetch(`${p.consoleUrl}/quotas?kind=user`, { headers: c ? { cookie: c } : {}, redirect: 'manual' });
      t.equal(r.status, 303, `${c || 'no cookie'}: 303`);
      t.equal(r.headers.get('location'), '/auth/login?return_to=%2Fquotas%3Fkind%3Duser', 'to sign in, then back');
    }
    const cb = await fetch(`${p.consoleUrl}/auth/callback?code=x&state=y`, { redirect: 'manual' });
    t.equal(cb.status, 400, 'a callback this browser did not start is refused');
  });

  await t.test('an upload without a session or from another origin is answered before its body is read', async (t) => {
    // Headers announcing 100 MB and one line of it: the answer must come without the rest.
    const partial = (headers: string[]) =>
      new Promise<{ res: string; socket: Socket }>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let res = '';
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => (res += d));
        socket.on('error', reject);
        socket.write(
          [
            'POST /segments/upload HTTP/1.1',
            `Host: 127.0.0.1:${port}`,
            ...headers,
            'Content-Type: multipart/form-data; boundary=b',
            'Content-Length: 100000000',
            '',
            '--b\r\nContent-Disposition: form-data; name="segment_id"\r\n\r\nx\r\n',
          ].join('\r\n'),
        );
        waitFor(() => res.includes('\r\n\r\n'), { what: 'an answer before the body' }).then(() => resolve({ res, socket }), reject);
      });
    const anon = await partial([]);
    anon.socket.destroy();
    t.equal(statusOf(anon.res), 303, 'no session: to sign in');
    t.match(anon.res, /\r\nlocation: \/auth\/login\?return_to=%2Fsegments\r\n/i);
    const foreign = await partial([`Cookie: ${cookie}`, 'Origin: https://evil.example']);
    foreign.socket.destroy();
    t.equal(statusOf(foreign.res), 403, 'another origin: refused');
  });

  await t.test('an access token about to expire is refreshed through identity, out of the browser’s sight', async (t) => {
    const s = p.console.sessions.get(id)!;
    const before = { ...s.tokens };
    s.tokens.accessExpiresAt = Date.now() + 1_000; // inside the 30 s margin
    const r = await fetch(`${p.consoleUrl}/quotas`, { headers: { cookie } });
    t.equal(r.status, 200, 'the page is served');
    t.not(s.tokens.accessToken, before.accessToken, 'with a new access token');
    t.not(s.tokens.refreshToken, before.refreshToken, 'the refresh token rotated');
    t.ok(s.tokens.accessExpiresAt > Date.now() + 60_000, 'valid for minutes again');
    t.notOk((r.headers.get('set-cookie') ?? '').includes(s.tokens.accessToken), 'nothing of it reaches the browser');

    // A refresh identity refuses (a refresh token it never issued) ends the session.
    s.tokens = { ...s.tokens, refreshToken: 'A'.repeat(43), accessExpiresAt: Date.now() };
    const ended = await fetch(`${p.consoleUrl}/quotas`, { headers: { cookie }, redirect: 'manual' });
    t.equal(ended.status, 303, 'sent to sign in again');
    t.match(ended.headers.get('location') ?? '', /^\/auth\/login/);
    t.equal(p.console.sessions.get(id), undefined, 'the session is gone');
  });

  await t.test(
    "a callback without identity's iss is refused (identity advertises it, RFC 9207 §2.4), and its code is not redeemed",
    async (t) => {
      const login = await fetch(`${p.consoleUrl}/auth/login`, { redirect: 'manual' });
      const signInCookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
      const r = await browserSignIn(login.headers.get('location')!, OPERATOR.email, OPERATOR.password);
      const back = new URL(r.location!);
      t.ok(back.searchParams.get('iss'), 'identity sends iss');
      back.searchParams.delete('iss');
      const before = p.console.sessions.size;
      const cb = await fetch(back, { redirect: 'manual', headers: { cookie: signInCookie } });
      t.equal(cb.status, 400, 'refused');
      t.notOk(cb.headers.get('set-cookie')?.includes('console_session='), 'no session cookie');
      t.equal(p.console.sessions.size, before, 'no session made');
    },
  );

  await t.test('sign-out forgets the session', async (t) => {
    ({ cookie, id, csrf } = await signInAgain());
    const res = await post(port, '/auth/logout', { cookie, origin: p.consoleUrl, body: `_csrf=${encodeURIComponent(csrf)}` });
    t.equal(statusOf(res), 303);
    t.match(res, /\r\nset-cookie: console_session=; Path=\/; HttpOnly; SameSite=Lax; Max-Age=0\r\n/i, 'the cookie is cleared');
    t.equal(p.console.sessions.get(id), undefined, 'the session and its tokens are gone');
  });
});

t.test('behind https the cookies are Secure and __Host- named', async (t) => {
  const config = loadConfig(
    consoleConfig,
    testEnv({
      CONSOLE_PORT: '0',
      CONSOLE_PUBLIC_URL: 'https://console.example',
      CONSOLE_CLIENT_SECRET: 'not-used-before-a-callback',
      IDENTITY_URL: 'http://127.0.0.1:9',
      CONSOLE_IDENTITY_PUBLIC_URL: 'https://id.example',
    }),
  );
  const c = await startConsole(config, testLogger('console'));
  t.teardown(() => c.close());
  const r = await fetch(`http://127.0.0.1:${c.port}/auth/login`, { redirect: 'manual' });
  t.equal(r.status, 303);
  t.match(r.headers.get('set-cookie'), /^__Host-console_signin=[A-Za-z0-9_-]{100,}; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=600$/);
  const to = new URL(r.headers.get('location')!);
  t.equal(to.origin, 'https://id.example', "the browser goes to identity's public address");
  t.equal(to.searchParams.get('redirect_uri'), 'https://console.example/auth/callback');
  t.match(r.headers.get('content-security-policy'), /form-action 'self' https:\/\/id\.example/);
});
