/**
 * Refresh-token rotation over real HTTP and PostgreSQL: every use rotates; two concurrent
 * refreshes with one token produce exactly one successor (both answered with it); a retry within
 * the grace window gets the same successor; a rotated-out token presented after the grace window
 * revokes the whole family and records a RefreshTokenReuseDetected alert. Time is the server's
 * injected clock, moved by the test.
 */
import t from 'tap';
import { listSecurityEvents } from '../../../identity/tokens/security-events.js';
import { refreshTokenBytes, refreshTokenHash } from '../../../identity/tokens/opaque.js';
import { decideRotation } from '../../../identity/tokens/refresh-rotation.js';
import { s256 } from '../../../identity/oauth/pkce.js';
import { browserSignIn, postForm, startOAuthServer, type OAuthServer } from './helpers.js';

const REDIRECT = 'https://app.example/cb';
const PASSWORD = 'correct horse battery staple';
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';

async function signInTokens(srv: OAuthServer, clientId = 'web-app'): Promise<Record<string, unknown>> {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    scope: 'openid read:orders',
    code_challenge: s256(VERIFIER),
    code_challenge_method: 'S256',
  });
  const r = await browserSignIn(`${srv.issuer}/authorize?${q.toString()}`, 'u1@example.com', PASSWORD);
  const code = new URL(r.location!).searchParams.get('code')!;
  const res = await postForm(`${srv.issuer}/token`, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT,
    client_id: clientId,
    code_verifier: VERIFIER,
  });
  if (res.status !== 200) throw new Error(`exchange failed: ${res.text}`);
  return res.json;
}

function refresh(srv: OAuthServer, token: string, clientId = 'web-app'): ReturnType<typeof postForm> {
  return postForm(`${srv.issuer}/token`, { grant_type: 'refresh_token', refresh_token: token, client_id: clientId });
}

async function familyOf(srv: OAuthServer, token: string): Promise<{ grant: string; tokens: number; current: number; revoked: boolean }> {
  const { rows } = await srv.pool.query<{ grant_id: string }>('SELECT grant_id FROM refresh_tokens WHERE token_sha256 = $1', [
    refreshTokenHash(refreshTokenBytes(token)!),
  ]);
  const grant = rows[0]!.grant_id;
  const { rows: r2 } = await srv.pool.query<{ n: string; cur: string; revoked: boolean }>(
    `SELECT count(*) AS n, count(*) FILTER (WHERE rotated_at IS NULL) AS cur,
            (SELECT revoked_at IS NOT NULL FROM oauth_grants WHERE grant_id = $1) AS revoked
       FROM refresh_tokens WHERE grant_id = $1`,
    [grant],
  );
  return { grant, tokens: Number(r2[0]!.n), current: Number(r2[0]!.cur), revoked: r2[0]!.revoked };
}

t.test('refresh-token rotation', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_refresh', { IDENTITY_REFRESH_GRACE: '10s' });
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
  await srv.publicClient('other-app', [REDIRECT], { scope: 'openid read:orders' });
  await srv.user('u1', 'u1@example.com', PASSWORD);

  await t.test('every use rotates: a new refresh token, the old one rotated out', async (t) => {
    const first = await signInTokens(srv);
    const r1 = await refresh(srv, first.refresh_token as string);
    t.equal(r1.status, 200);
    t.not(r1.json.refresh_token, first.refresh_token);
    const r2 = await refresh(srv, r1.json.refresh_token as string);
    t.equal(r2.status, 200);
    const fam = await familyOf(srv, r2.json.refresh_token as string);
    t.same(
      { tokens: fam.tokens, current: fam.current, revoked: fam.revoked },
      { tokens: 3, current: 1, revoked: false },
      'one family, one current token',
    );
  });

  await t.test('two concurrent refreshes with one token: exactly one successor, both get it', async (t) => {
    const first = await signInTokens(srv);
    const [a, b] = await Promise.all([refresh(srv, first.refresh_token as string), refresh(srv, first.refresh_token as string)]);
    t.equal(a.status, 200);
    t.equal(b.status, 200, 'the loser of the race is not treated as reuse');
    t.equal(a.json.refresh_token, b.json.refresh_token, 'the same successor');
    t.not(a.json.access_token, b.json.access_token, 'each gets its own access token');
    const fam = await familyOf(srv, first.refresh_token as string);
    t.same(
      { tokens: fam.tokens, current: fam.current, revoked: fam.revoked },
      { tokens: 2, current: 1, revoked: false },
      'exactly one successor in the family',
    );
    t.equal((await refresh(srv, a.json.refresh_token as string)).status, 200, 'and the successor works');
  });

  await t.test('ten concurrent refreshes with one token: still exactly one successor', async (t) => {
    const first = await signInTokens(srv);
    const all = await Promise.all(Array.from({ length: 10 }, () => refresh(srv, first.refresh_token as string)));
    t.same(new Set(all.map((r) => r.status)), new Set([200]));
    t.equal(new Set(all.map((r) => r.json.refresh_token)).size, 1);
    t.equal((await familyOf(srv, first.refresh_token as string)).tokens, 2);
  });

  await t.test('a retry within the grace window gets the same successor, not a revocation', async (t) => {
    const first = await signInTokens(srv);
    const r1 = await refresh(srv, first.refresh_token as string);
    srv.clock.advance(9_000); // grace is 10 s
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    const retry = await refresh(srv, first.refresh_token as string);
    t.equal(retry.status, 200);
    t.equal(retry.json.refresh_token, r1.json.refresh_token);
    t.equal((await familyOf(srv, first.refresh_token as string)).revoked, false);
    t.equal(srv.alerts.length, 0, 'no alert');
  });

  await t.test('reuse after the grace window revokes the whole family and records an alert', async (t) => {
    const before = srv.alerts.length;
    const first = await signInTokens(srv);
    const r1 = await refresh(srv, first.refresh_token as string);
    const r2 = await refresh(srv, r1.json.refresh_token as string);
    srv.clock.advance(11_000);
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    const reuse = await refresh(srv, first.refresh_token as string);
    t.equal(reuse.status, 400);
    t.equal(reuse.json.error, 'invalid_grant');
    t.match(reuse.json.error_description, /revoked/);
    const fam = await familyOf(srv, first.refresh_token as string);
    t.equal(fam.revoked, true, 'the family is revoked');
    const current = await refresh(srv, r2.json.refresh_token as string);
    t.equal(current.json.error, 'invalid_grant', 'the newest token of the family is dead too');
    const info = await fetch(`${srv.issuer}/userinfo`, { headers: { authorization: `Bearer ${r2.json.access_token as string}` } });
    t.equal(info.status, 401, "the family's access tokens are refused at userinfo");
    await info.text();

    const events = (await listSecurityEvents(srv.pool, 'u1')).filter((e) => e.grantId === fam.grant);
    t.equal(events.length, 1, 'one alert recorded');
    t.equal(events[0]!.eventType, 'RefreshTokenReuseDetected');
    t.match(events[0]!.data, { user_id: 'u1', client_id: 'web-app', family_id: fam.grant });
    t.equal(typeof events[0]!.data.ts, 'number');
    t.equal(srv.alerts.length, before + 1, 'the hook got it');
    t.equal(srv.alerts.at(-1)!.familyId, fam.grant);

    const again = await refresh(srv, first.refresh_token as string);
    t.equal(again.json.error, 'invalid_grant');
    t.equal(
      (await listSecurityEvents(srv.pool, 'u1')).filter((e) => e.grantId === fam.grant).length,
      1,
      'a revoked family raises no second alert',
    );
  });

  await t.test('a retry within grace whose successor was already used is reuse', async (t) => {
    const first = await signInTokens(srv);
    const r1 = await refresh(srv, first.refresh_token as string);
    await refresh(srv, r1.json.refresh_token as string);
    const retry = await refresh(srv, first.refresh_token as string);
    t.equal(retry.json.error, 'invalid_grant');
    t.equal((await familyOf(srv, first.refresh_token as string)).revoked, true);
  });

  await t.test("another client cannot use a client's refresh token, and trying changes nothing", async (t) => {
    const first = await signInTokens(srv);
    const res = await refresh(srv, first.refresh_token as string, 'other-app');
    t.equal(res.json.error, 'invalid_grant');
    t.equal((await refresh(srv, first.refresh_token as string)).status, 200, 'still usable by its own client');
  });

  await t.test('an expired refresh token is refused', async (t) => {
    const first = await signInTokens(srv);
    srv.clock.advance(14 * 86_400_000 + 1000);
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    const res = await refresh(srv, first.refresh_token as string);
    t.equal(res.json.error, 'invalid_grant');
  });
});

t.test('with IDENTITY_REFRESH_GRACE=0 any second use is reuse', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_refresh_nograce', { IDENTITY_REFRESH_GRACE: '0' });
  await srv.publicClient('web-app', [REDIRECT], { scope: 'openid read:orders' });
  await srv.user('u1', 'u1@example.com', PASSWORD);
  const first = await signInTokens(srv);
  t.equal((await refresh(srv, first.refresh_token as string)).status, 200);
  const retry = await refresh(srv, first.refresh_token as string);
  t.equal(retry.json.error, 'invalid_grant');
  t.equal(srv.alerts.length, 1);
});

t.test('decideRotation: the rule table', async (t) => {
  const grant = { grantId: 'g', userId: 'u', clientId: 'c', scope: 'openid read:orders', authTime: 0, createdAt: 0, revokedAt: undefined };
  const now = 1_000_000;
  const cur = { grant, expiresAt: now + 1, rotatedAt: undefined };
  const req = { clientId: 'c', scopes: undefined };
  t.same(decideRotation(undefined, req, false, now, 10), { kind: 'refuse', reason: 'unknown' });
  t.same(decideRotation(cur, { clientId: 'x', scopes: undefined }, false, now, 10), { kind: 'refuse', reason: 'client_mismatch' });
  t.same(decideRotation({ ...cur, grant: { ...grant, revokedAt: 1 } }, req, false, now, 10), { kind: 'refuse', reason: 'revoked' });
  t.same(decideRotation({ ...cur, expiresAt: now }, req, false, now, 10), { kind: 'refuse', reason: 'expired' });
  t.same(decideRotation(cur, { clientId: 'c', scopes: ['write:orders'] }, false, now, 10), { kind: 'refuse', reason: 'scope_not_granted' });
  t.same(decideRotation(cur, { clientId: 'c', scopes: ['read:orders'] }, false, now, 10), { kind: 'rotate' });
  t.same(decideRotation(cur, req, false, now, 10), { kind: 'rotate' });
  t.same(decideRotation({ ...cur, rotatedAt: now - 9 }, req, true, now, 10), { kind: 'replay' });
  t.same(decideRotation({ ...cur, rotatedAt: now - 10 }, req, true, now, 10), { kind: 'reuse' }, 'the window is half-open');
  t.same(decideRotation({ ...cur, rotatedAt: now - 1 }, req, false, now, 10), { kind: 'reuse' }, 'successor already used');
  t.same(decideRotation({ ...cur, rotatedAt: now }, req, true, now, 0), { kind: 'reuse' }, 'grace 0');
});
