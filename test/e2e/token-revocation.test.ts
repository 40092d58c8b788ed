/**
 * Token revocation reaches the edge (README, "Revocation and the edge"), end to end: a real identity
 * on a real database, a real sidecar in front of it (identity's issuer is the sidecar's URL, as a
 * deployment has it) that fetches identity's JWKS and revocation list, and a raw upstream behind
 * `/v1`. Through the sidecar:
 *
 * - `POST /revoke` with client_secret_basic revokes a family, and the sidecar then refuses every
 *   access token of it with the same 401 as an invalid token;
 * - openid-client's `tokenRevocation` (discovery through the sidecar) revokes one access token, and
 *   the sidecar refuses it while the family's next access token passes;
 * - a refresh-token reuse revokes its family at the edge too, and the user's other sessions (another
 *   client, another sign-in with the same client) keep working, while nothing can renew the
 *   revoked one without the password (README identity/, "After a refresh-token reuse");
 * - identity down: a sidecar keeps the list it has (revoked tokens stay refused, others pass); a
 *   second sidecar, whose list is refreshed every 250 ms, so that its two failed fetches come quickly.
 *
 * The time from the revocation's answer to the sidecar's first refusal is logged against the
 * stated bound (REVOCATION_REFRESH_INTERVAL + one fetch, here the default 2 s), not asserted:
 * wall-clock budgets flake on shared machines, and the bound is a property of the timers.
 */
import t from 'tap';
import * as client from 'openid-client';
import { loadConfig } from '../../shared/config.js';
import { startIdentity } from '../../identity/app.js';
import { identityConfig } from '../../identity/config.js';
import { s256 } from '../../identity/oauth/pkce.js';
import { useTestDatabase } from '../harness/db.js';
import { testLogger } from '../harness/log.js';
import { freePort } from '../harness/ports.js';
import { testEnv, useSidecar } from '../harness/services.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { basic, browserSignIn, decodeJwt, postForm } from '../identity/oauth/helpers.js';

const AUDIENCE = 'edge-api';
const ADMIN = 'e2e-revocation-admin-token-0123456789abcdef';
const REDIRECT = 'https://app.example/cb';
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const EMAIL = 'rev@example.com';
const PASSWORD = 'correct horse battery staple';
/** The default: what the measurement is for. */
const INTERVAL = '2s';

t.test('revocation reaches the sidecar within seconds', async (t) => {
  const db = await useTestDatabase(t, 'e2e_token_revocation');
  const sidecarPort = await freePort();
  const issuer = `http://127.0.0.1:${sidecarPort}`;
  const identity = await startIdentity(
    loadConfig(
      identityConfig,
      testEnv({
        DATABASE_URL: db.url,
        JWT_ISSUER: issuer,
        JWT_AUDIENCE: AUDIENCE,
        IDENTITY_JWKS_URL: undefined,
        IDENTITY_ADMIN_TOKEN: ADMIN,
        IDENTITY_REFRESH_GRACE: '0',
        IDENTITY_NOTIFY_RELAY: 'false',
        SHUTDOWN_GRACE: '1s',
      }),
    ),
    testLogger('identity'),
  );
  let identityUp = true;
  const stopIdentity = async (): Promise<void> => {
    if (!identityUp) return;
    identityUp = false;
    await identity.close();
  };
  t.teardown(stopIdentity);
  const idUrl = `http://127.0.0.1:${identity.port}`;
  const up = await startUpstream();
  t.teardown(() => up.close());
  const sidecarEnv = {
    IDENTITY_URL: idUrl,
    JWKS_URL: `${idUrl}/.well-known/jwks.json`,
    JWT_ISSUER: issuer,
    JWT_AUDIENCE: AUDIENCE,
    REVOCATION_REFRESH_INTERVAL: INTERVAL,
    LIMITER_ROUTES: `/v1=${up.url}`,
    // The test polls: keep its own calls clear of the per-IP cap and the default plan.
    LIMITER_IP_RATE: '10000',
    LIMITER_IP_BURST: '10000',
    LIMITER_DEFAULT_RATE: '10000',
    LIMITER_DEFAULT_BURST: '10000',
  };
  const sc = await useSidecar(t, { ...sidecarEnv, LIMITER_PORT: String(sidecarPort) });

  // A user, a public client (two of them) and a confidential one, all with the code and refresh grants.
  const signup = await fetch(`${idUrl}/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: EMAIL, password: PASSWORD, name: 'Rev' }),
  });
  t.equal(signup.status, 201);
  const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
  const register = async (body: Record<string, unknown>): Promise<string | undefined> => {
    const r = await fetch(`${idUrl}/auth/admin/clients`, { method: 'POST', headers: admin, body: JSON.stringify(body) });
    if (r.status !== 201) throw new Error(`client registration answered ${r.status}`);
    return ((await r.json()) as { client_secret?: string }).client_secret;
  };
  const scope = 'openid read:orders';
  await register({ client_id: 'web-app', client_type: 'public', redirect_uris: [REDIRECT], scope });
  await register({ client_id: 'other-app', client_type: 'public', redirect_uris: [REDIRECT], scope });
  const secret = (await register({
    client_id: 'backend',
    client_type: 'confidential',
    redirect_uris: [REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    scope,
  }))!;

  const authorizeQuery = (clientId: string, extra: Record<string, string> = {}) =>
    new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      scope,
      code_challenge: s256(VERIFIER),
      code_challenge_method: 'S256',
      ...extra,
    }).toString();
  /** A sign-in on identity's page, then the code exchanged at /token through the sidecar. */
  const signIn = async (clientId: string, clientSecret?: string): Promise<{ access: string; refresh: string }> => {
    const r = await browserSignIn(`${idUrl}/authorize?${authorizeQuery(clientId)}`, EMAIL, PASSWORD);
    const code = new URL(r.location!).searchParams.get('code')!;
    const form: Record<string, string> = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: VERIFIER };
    if (clientSecret === undefined) form.client_id = clientId;
    const res = await postForm(`${sc.url}/token`, form, clientSecret ? { authorization: basic(clientId, clientSecret) } : {});
    if (res.status !== 200) throw new Error(`code exchange answered ${res.status}: ${res.text}`);
    return { access: res.json.access_token as string, refresh: res.json.refresh_token as string };
  };
  const refresh = (token: string, clientId: string) =>
    postForm(`${sc.url}/token`, { grant_type: 'refresh_token', refresh_token: token, client_id: clientId });
  /** A bearer call through the sidecar (`via`: another one) to the raw upstream: its status and body. */
  const through = async (
    token: string,
    via: string = sc.url,
  ): Promise<{ status: number; body: Record<string, unknown>; challenge: string | null }> => {
    const r = await fetch(`${via}/v1/things`, { headers: { authorization: `Bearer ${token}` } });
    const text = await r.text();
    return {
      status: r.status,
      body: r.status === 200 ? {} : (JSON.parse(text) as Record<string, unknown>),
      challenge: r.headers.get('www-authenticate'),
    };
  };
  /** Revoked at `started`: waits for the sidecar to refuse `token`, and reports how long it took. */
  const refusedAfter = async (token: string, started: number, what: string, via = { url: sc.url, interval: INTERVAL }): Promise<number> => {
    // The generous timeout only keeps a broken build from hanging; the figure is reported below.
    await waitFor(async () => (await through(token, via.url)).status === 401, { timeoutMs: 30_000, intervalMs: 20, what });
    const ms = performance.now() - started;
    t.comment(
      `${what}: refused by the sidecar ${ms.toFixed(0)} ms after the revocation answered (bound: REVOCATION_REFRESH_INTERVAL ${via.interval} + one fetch)`,
    );
    return ms;
  };

  await t.test('POST /revoke through the sidecar (client_secret_basic): the family is refused at the edge', async (t) => {
    const first = await signIn('backend', secret);
    const rotated = await postForm(
      `${sc.url}/token`,
      { grant_type: 'refresh_token', refresh_token: first.refresh },
      { authorization: basic('backend', secret) },
    );
    t.equal(rotated.status, 200);
    const second = rotated.json.access_token as string;
    t.equal((await through(first.access)).status, 200, 'the first access token passes the sidecar');
    t.equal((await through(second)).status, 200, 'and the second, of the same family');
    t.equal(decodeJwt(second).payload.sid, decodeJwt(first.access).payload.sid, 'both carry the family as sid');
    const orders = async (token: string): Promise<number> => {
      const r = await fetch(`${idUrl}/orders`, { headers: { authorization: `Bearer ${token}` } });
      await r.arrayBuffer();
      return r.status;
    };
    t.equal(await orders(second), 200, "identity's orders API, called directly, takes it");

    const r = await fetch(`${sc.url}/revoke`, {
      method: 'POST',
      headers: { authorization: basic('backend', secret), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: rotated.json.refresh_token as string, token_type_hint: 'refresh_token' }).toString(),
    });
    const started = performance.now();
    t.equal(r.status, 200, 'the sidecar forwards the Basic credentials to identity');
    await refusedAfter(second, started, 'family revoked with POST /revoke');
    t.equal((await through(first.access)).status, 401, 'every access token of the family is refused');
    t.equal(await orders(second), 401, "and identity's orders API, called directly, refuses it too");

    const refused = await through(second);
    const garbage = await through(`${second.slice(0, -4)}AAAA`);
    t.equal(garbage.status, 401);
    t.equal(refused.body.code, 'invalid_token', 'the refusal is invalid_token');
    t.equal(refused.body.code, garbage.body.code, 'the same code as a token with a bad signature');
    t.equal(refused.challenge, garbage.challenge, 'and the same challenge');
    t.equal(refused.challenge, 'Bearer error="invalid_token"');
    const seen = up.requests.length;
    t.equal((await through(second)).status, 401);
    t.equal(up.requests.length, seen, 'a refused token reaches nothing upstream');

    const bad = await fetch(`${sc.url}/revoke`, {
      method: 'POST',
      headers: { authorization: basic('backend', 'wrong'), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'token=x',
    });
    t.equal(bad.status, 401, 'bad client credentials through the sidecar: 401');
    t.equal(((await bad.json()) as { error: string }).error, 'invalid_client');
  });

  await t.test("openid-client's tokenRevocation through the sidecar: one access token is refused, its family goes on", async (t) => {
    const config = await client.discovery(new URL(issuer), 'web-app', { redirect_uris: [REDIRECT] }, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    t.equal(config.serverMetadata().revocation_endpoint, `${issuer}/revoke`, 'discovery (through the sidecar) names /revoke');
    const a = await signIn('web-app');
    t.equal((await through(a.access)).status, 200);
    await client.tokenRevocation(config, a.access, { token_type_hint: 'access_token' });
    const started = performance.now();
    await refusedAfter(a.access, started, 'access token revoked with tokenRevocation');
    const next = await refresh(a.refresh, 'web-app');
    t.equal(next.status, 200, 'the refresh token still works');
    t.equal((await through(next.json.access_token as string)).status, 200, 'and the family’s new access token passes the sidecar');
  });

  await t.test('a refresh-token reuse revokes its family at the edge; the user’s other sessions go on', async (t) => {
    const a = await signIn('web-app');
    const sameClient = await signIn('web-app');
    const otherClient = await signIn('other-app');
    const rotated = await refresh(a.refresh, 'web-app');
    t.equal(rotated.status, 200);
    const aNext = rotated.json.access_token as string;
    t.equal((await through(aNext)).status, 200);

    const reused = await refresh(a.refresh, 'web-app');
    const started = performance.now();
    t.equal(reused.status, 400, 'the rotated-out token is refused');
    t.equal(reused.json.error, 'invalid_grant');
    await refusedAfter(aNext, started, 'family revoked by refresh-token reuse');
    t.equal((await through(a.access)).status, 401, 'the family’s first access token too');
    t.equal((await refresh(rotated.json.refresh_token as string, 'web-app')).status, 400, 'its current refresh token is dead');

    // The decision (identity/README.md): the family, not the user, is what the reuse proves stolen.
    t.equal((await through(sameClient.access)).status, 200, 'another sign-in with the same client passes the sidecar');
    t.equal((await refresh(sameClient.refresh, 'web-app')).status, 200, 'and refreshes');
    t.equal((await through(otherClient.access)).status, 200, 'another client’s session passes');
    t.equal((await refresh(otherClient.refresh, 'other-app')).status, 200, 'and refreshes');

    // Nothing renews the revoked session silently: identity keeps no sign-in session (no cookie).
    const silent = await fetch(`${idUrl}/authorize?${authorizeQuery('web-app', { prompt: 'none', state: 'st' })}`, { redirect: 'manual' });
    const location = new URL(silent.headers.get('location') ?? 'http://none/');
    t.equal(location.searchParams.get('error'), 'login_required', 'prompt=none: login_required');
    t.equal(silent.headers.get('set-cookie'), null, 'and no session cookie exists to change that');
  });

  await t.test('identity down: the sidecar keeps the list it has', async (t) => {
    // A second sidecar in front of the same identity, its list refreshed every 250 ms (the least the
    // setting takes): what is tested here is what a sidecar keeps through two failed fetches, not the
    // default interval (measured above), which made this wait about 6 s for the revocation and the
    // two failures.
    const quick = {
      interval: '250ms',
      ...(await useSidecar(t, { ...sidecarEnv, LIMITER_PORT: '0', REVOCATION_REFRESH_INTERVAL: '250ms' })),
    };
    const revoked = await signIn('web-app');
    const alive = await signIn('other-app');
    await postForm(`${sc.url}/revoke`, { token: revoked.refresh, client_id: 'web-app' });
    await refusedAfter(revoked.access, performance.now(), 'family revoked just before the outage', quick);
    t.equal((await through(alive.access, quick.url)).status, 200);

    await stopIdentity();
    const failures = async (): Promise<number> => {
      const text = await (await fetch(`${quick.adminUrl}/metrics`)).text();
      return Number(/^ratelimit_revocation_list_fetch_failures\{[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    await waitFor(async () => (await failures()) >= 2, { timeoutMs: 30_000, what: 'the sidecar to fail two fetches of the list' });
    t.pass('identity is unreachable for the sidecar');
    t.equal((await through(revoked.access, quick.url)).status, 401, 'a revoked token stays refused');
    t.equal((await through(alive.access, quick.url)).status, 200, 'a live one still passes');
    const text = await (await fetch(`${quick.adminUrl}/metrics`)).text();
    t.match(text, /^ratelimit_revocation_list_entries\{[^}]*\} [1-9]/m, 'the entries are held');
    t.match(text, /^ratelimit_revocation_list_age_seconds\{[^}]*\} [0-9.]+$/m, 'and the age of the last good list is reported');
  });
});
