/**
 * Security alerts reach the user (README, "Security alerts"), end to end on the production path:
 * identity's relay drains its outbox through a real sidecar (its self-signed service token,
 * verified there against identity's JWKS, vouched for upstream with role `service`) to the
 * notifier, which delivers to the sandbox providers. identity and the notifier share one database,
 * as under `npm start`; the templates are shipped the way `npm start` ships them.
 *
 * - signup: the notifier gets the user's e-mail in their recipient profile, and the welcome e-mail
 *   arrives;
 * - a password change (the stored hash replaced) sends a security alert e-mail;
 * - a refresh-token reuse (through the real /token, grace 0) and an authorization-code reuse
 *   each send one.
 */
import t from 'tap';
import { useTestDatabase } from '../harness/db.js';
import { freePort } from '../harness/ports.js';
import { useSidecar } from '../harness/services.js';
import { waitFor } from '../harness/wait.js';
import { setCredentials } from '../../identity/oauth/index.js';
import { s256 } from '../../identity/oauth/pkce.js';
import { shipTemplates } from '../../identity/notify/templates.js';
import { browserSignIn, postForm } from '../identity/oauth/helpers.js';
import {
  ADMIN_TOKEN,
  AUDIENCE,
  ISSUER,
  SERVICE_HEADERS,
  SERVICE_SECRET,
  call,
  mails,
  outboxOf,
  signup,
  useIdentity,
  useNotifier,
  useSandbox,
  waitProfile,
} from '../identity/notify/helpers.js';

const EMAIL = 'ada.alerts@example.com';
const PASSWORD = 'correct horse battery staple';
const REDIRECT = 'https://app.example/cb';
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';

t.test('security alerts and the welcome reach the user through sidecar → notifier → sandbox', async (t) => {
  const db = await useTestDatabase(t, 'e2e_security_alerts', { poolMax: 4 });
  const sandbox = await useSandbox(t);
  const notifier = await useNotifier(t, db, sandbox);
  const sidecarPort = await freePort();
  const { url: identityUrl } = await useIdentity(t, db, `http://127.0.0.1:${sidecarPort}`, { IDENTITY_REFRESH_GRACE: '0' });
  await useSidecar(t, {
    LIMITER_PORT: String(sidecarPort),
    NOTIFIER_URL: notifier.url,
    IDENTITY_URL: identityUrl,
    JWKS_URL: `${identityUrl}/.well-known/jwks.json`,
    JWT_ISSUER: ISSUER,
    JWT_AUDIENCE: AUDIENCE,
    SERVICE_SECRET,
  });
  t.same(await shipTemplates(notifier.url, SERVICE_HEADERS), ['security_alert_v1', 'account_welcome_v1'], 'templates shipped');
  t.same(await shipTemplates(notifier.url, SERVICE_HEADERS), ['security_alert_v1', 'account_welcome_v1'], 'shipping again is harmless');

  const userId = await signup(identityUrl, EMAIL, PASSWORD);
  const profile = await waitProfile(notifier.url, userId, (p) => p.email === EMAIL, 'the profile synced at signup');
  t.equal(profile.email, EMAIL, 'the notifier knows where to reach the user');
  await waitFor(() => mails(sandbox, EMAIL, /^Welcome/).length === 1, { timeoutMs: 15_000, what: 'the welcome e-mail' });
  t.pass('the welcome e-mail arrived');

  await t.test('a password change', async (t) => {
    await setCredentials(db.pool, { userId, email: EMAIL, password: 'a brand new passphrase', role: 'customer', name: 'Ada' });
    const got = await waitFor(
      () => {
        const m = mails(sandbox, EMAIL, /password was changed/);
        return m.length > 0 ? m : undefined;
      },
      { timeoutMs: 15_000, what: 'the password-change alert' },
    );
    t.equal(got.length, 1, 'one alert');
    const alert = got[0]!;
    t.match(alert, { channel: 'email', to: EMAIL, subject: 'Security alert: Your password was changed' });
    t.match(alert.text, /If you did not do this, reset your password now/);
  });

  // A public client and a sign-in through the real sign-in page, for the token endpoint's alerts.
  const reg = await call(
    `${identityUrl}/auth/admin/clients`,
    'POST',
    { client_id: 'web-app', client_type: 'public', redirect_uris: [REDIRECT], scope: 'openid read:orders' },
    { authorization: `Bearer ${ADMIN_TOKEN}` },
  );
  t.equal(reg.status, 201, 'a public client registered');
  const password = 'a brand new passphrase';
  const signIn = async (): Promise<string> => {
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: 'web-app',
      redirect_uri: REDIRECT,
      scope: 'openid read:orders',
      code_challenge: s256(VERIFIER),
      code_challenge_method: 'S256',
    });
    const r = await browserSignIn(`${identityUrl}/authorize?${q.toString()}`, EMAIL, password);
    const code = r.location ? new URL(r.location).searchParams.get('code') : null;
    if (!code) throw new Error(`sign-in failed: ${r.status} ${r.body.slice(0, 300)}`);
    return code;
  };
  const exchange = (code: string) =>
    postForm(`${identityUrl}/token`, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      client_id: 'web-app',
      code_verifier: VERIFIER,
    });

  await t.test('a refresh-token reuse', async (t) => {
    const tokens = await exchange(await signIn());
    t.equal(tokens.status, 200, 'the code exchanged');
    const first = String(tokens.json.refresh_token);
    const rotated = await postForm(`${identityUrl}/token`, { grant_type: 'refresh_token', refresh_token: first, client_id: 'web-app' });
    t.equal(rotated.status, 200, 'the first use rotates');
    const reused = await postForm(`${identityUrl}/token`, { grant_type: 'refresh_token', refresh_token: first, client_id: 'web-app' });
    t.equal(reused.status, 400, 'the rotated-out token presented again is refused');
    const got = await waitFor(
      () => {
        const m = mails(sandbox, EMAIL, /session of yours was signed out/);
        return m.length > 0 ? m : undefined;
      },
      { timeoutMs: 15_000, what: 'the refresh-token reuse alert' },
    );
    t.equal(got.length, 1, 'one alert');
    t.match(got[0]!.text, /A sign-in token for web-app was used again/);
  });

  await t.test('an authorization-code reuse', async (t) => {
    const code = await signIn();
    t.equal((await exchange(code)).status, 200);
    t.equal((await exchange(code)).status, 400, 'the second redemption is refused');
    const got = await waitFor(
      () => {
        const m = mails(sandbox, EMAIL, /sign-in was blocked/);
        return m.length > 0 ? m : undefined;
      },
      { timeoutMs: 15_000, what: 'the code reuse alert' },
    );
    t.equal(got.length, 1, 'one alert');
    t.match(got[0]!.text, /A one-time sign-in code for web-app was used twice/);
  });

  const rows = await outboxOf(db.pool, userId);
  t.same(
    rows.map((r) => [r.kind, r.sent_at !== null, r.parked_at]),
    [
      ['welcome', true, null],
      ['security_alert', true, null],
      ['security_alert', true, null],
      ['security_alert', true, null],
    ],
    'every outbox row sent, none parked',
  );
  // The provider has each e-mail; the notifier records `sent` a moment after (batched commits).
  const statuses = await waitFor(
    async () => {
      const { rows } = await db.pool.query<{ status: string; n: string }>(
        `SELECT status, count(*) AS n FROM notifications n JOIN deliveries d ON d.notification_id = n.id
          WHERE n.recipient_id = $1 AND n.notification_type = 'security_alerts' AND d.channel = 'email' GROUP BY status`,
        [userId],
      );
      return rows.some((r) => r.status === 'queued' || r.status === 'sending') ? undefined : rows;
    },
    { what: 'the three security_alerts e-mails to be recorded' },
  );
  t.same(statuses, [{ status: 'sent', n: '3' }], 'the notifier recorded three security_alerts e-mails, sent');
});
