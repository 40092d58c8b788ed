/**
 * The device authorization grant (RFC 8628): openid-client 6 as the device (initiate, then poll;
 * `allowInsecureRequests` because the test server speaks plain HTTP) with a person approving on the
 * user-code page; and each poll answer over raw HTTP with the server's clock moved by the test:
 * authorization_pending, slow_down (and the raised interval), access_denied, expired_token, and a
 * consumed code.
 */
import t from 'tap';
import * as client from 'openid-client';
import { decidePoll, formatUserCode, newUserCode, normalizeUserCode } from '../../../identity/oauth/device-flow.js';
import { browserApproveDevice, postForm, startOAuthServer, type OAuthServer } from './helpers.js';

const PASSWORD = 'correct horse battery staple';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

function approve(
  srv: OAuthServer,
  userCode: string,
  action: 'approve' | 'deny',
  password = PASSWORD,
): Promise<{ status: number; body: string }> {
  return browserApproveDevice(srv.issuer, userCode, 'tv@example.com', password, action);
}

function poll(srv: OAuthServer, deviceCode: string, clientId = 'tv-app'): ReturnType<typeof postForm> {
  return postForm(`${srv.issuer}/token`, { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId });
}

async function start(srv: OAuthServer, clientId = 'tv-app'): Promise<Record<string, unknown>> {
  const res = await postForm(`${srv.issuer}/auth/device_authorization`, { client_id: clientId, scope: 'openid read:orders' });
  if (res.status !== 200) throw new Error(res.text);
  return res.json;
}

t.test('device flow', async (t) => {
  const srv = await startOAuthServer(t, 'oauth_device', { IDENTITY_DEVICE_POLL_INTERVAL: '1s' });
  await srv.publicClient('tv-app', [], {
    grant_types: [DEVICE_GRANT, 'refresh_token'],
    scope: 'openid read:orders',
  });
  await srv.publicClient('web-app', ['https://app.example/cb']);
  await srv.user('tv-user', 'tv@example.com', PASSWORD);

  await t.test('openid-client as the device; a person approves on the user-code page', async (t) => {
    const config = await client.discovery(new URL(srv.issuer), 'tv-app', {}, client.None(), { execute: [client.allowInsecureRequests] });
    const da = await client.initiateDeviceAuthorization(config, { scope: 'openid read:orders' });
    t.match(da.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    t.equal(da.verification_uri, `${srv.issuer}/auth/device`);
    t.equal(da.interval, 1);
    t.equal(da.expires_in, 600);

    const page = await fetch(da.verification_uri_complete!);
    t.match(await page.text(), da.user_code, 'the complete URI pre-fills the code');
    // Typed sloppily: lower case, no dash.
    const ok = await approve(srv, da.user_code.toLowerCase().replace('-', ''), 'approve');
    t.equal(ok.status, 200);
    t.match(ok.body, 'Device connected');

    const tokens = await client.pollDeviceAuthorizationGrant(config, da);
    t.type(tokens.access_token, 'string');
    t.type(tokens.refresh_token, 'string');
    t.equal(tokens.claims()!.sub, 'tv-user');
    t.equal(tokens.scope, 'openid read:orders');
    const info = await client.fetchUserInfo(config, tokens.access_token, 'tv-user');
    t.equal(info.sub, 'tv-user');
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    t.type(refreshed.access_token, 'string');
  });

  await t.test('authorization_pending, then slow_down when polled too fast, with the interval raised by 5 s', async (t) => {
    const da = await start(srv);
    const first = await poll(srv, da.device_code as string);
    t.equal(first.status, 400);
    t.equal(first.json.error, 'authorization_pending');
    const fast = await poll(srv, da.device_code as string);
    t.equal(fast.json.error, 'slow_down', 'a second poll within the 1 s interval');
    srv.clock.advance(2_000);
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    t.equal((await poll(srv, da.device_code as string)).json.error, 'slow_down', '2 s later is still too soon: the interval is now 6 s');
    // Each slow_down adds 5 s for this and every later poll (RFC 8628 §3.5): now 11 s.
    srv.clock.advance(10_000);
    t.equal((await poll(srv, da.device_code as string)).json.error, 'slow_down', '10 s later is too soon for 11 s');
    srv.clock.advance(16_000);
    t.equal((await poll(srv, da.device_code as string)).json.error, 'authorization_pending', 'after the raised interval (16 s)');
  });

  await t.test('access_denied when the person denies', async (t) => {
    const da = await start(srv);
    const denied = await approve(srv, da.user_code as string, 'deny');
    t.match(denied.body, 'Request denied');
    const res = await poll(srv, da.device_code as string);
    t.equal(res.json.error, 'access_denied');
  });

  await t.test('expired_token after the device code lifetime; the code can no longer be approved', async (t) => {
    const da = await start(srv);
    srv.clock.advance(601_000);
    t.teardown(() => {
      srv.clock.offsetMs = 0;
    });
    t.equal((await poll(srv, da.device_code as string)).json.error, 'expired_token');
    const late = await approve(srv, da.user_code as string, 'approve');
    t.equal(late.status, 400);
    t.match(late.body, 'That code is not valid');
  });

  await t.test('an approved code is exchanged once; another client cannot exchange it', async (t) => {
    const da = await start(srv);
    await approve(srv, da.user_code as string, 'approve');
    t.equal((await poll(srv, da.device_code as string, 'web-app')).json.error, 'unauthorized_client', 'a client without the device grant');
    const ok = await poll(srv, da.device_code as string);
    t.equal(ok.status, 200);
    const again = await poll(srv, da.device_code as string);
    t.equal(again.json.error, 'invalid_grant');
  });

  await t.test('a wrong password does not approve; unknown codes are refused', async (t) => {
    const da = await start(srv);
    const wrong = await approve(srv, da.user_code as string, 'approve', 'not the password');
    t.match(wrong.body, 'Wrong email or password.');
    t.equal((await poll(srv, da.device_code as string)).json.error, 'authorization_pending');
    const unknown = await approve(srv, 'BCDF-GHJK', 'approve');
    t.equal(unknown.status, 400);
    const malformed = await approve(srv, 'AEIO-UAEI', 'approve');
    t.equal(malformed.status, 400);
  });

  await t.test('device authorization errors are RFC-shaped', async (t) => {
    const noClient = await postForm(`${srv.issuer}/auth/device_authorization`, { scope: 'openid' });
    t.equal(noClient.status, 401);
    t.equal(noClient.json.error, 'invalid_client');
    const wrongGrant = await postForm(`${srv.issuer}/auth/device_authorization`, { client_id: 'web-app' });
    t.equal(wrongGrant.json.error, 'unauthorized_client');
    const scope = await postForm(`${srv.issuer}/auth/device_authorization`, { client_id: 'tv-app', scope: 'write:everything' });
    t.equal(scope.json.error, 'invalid_scope');
  });
});

t.test('user codes and the poll rule (pure)', async (t) => {
  for (let i = 0; i < 50; i++) {
    const c = newUserCode();
    t.equal(normalizeUserCode(formatUserCode(c).toLowerCase()), c);
  }
  t.equal(normalizeUserCode('bcdf ghjk'), 'BCDFGHJK');
  t.equal(normalizeUserCode('BCDF-GHJ'), undefined, 'too short');
  t.equal(normalizeUserCode('ABCD-EFGH'), undefined, 'vowels are not in the alphabet');
  const base = {
    clientId: 'c',
    scope: '',
    status: 'pending' as const,
    intervalS: 5,
    expiresAt: 100_000,
    lastPolledAt: undefined,
    userId: undefined,
    authTime: undefined,
  };
  t.same(decidePoll(undefined, 'c', 0).kind, 'error');
  t.same(decidePoll(base, 'other', 0), { kind: 'error', error: 'invalid_grant', description: 'the device code is invalid' });
  t.same(decidePoll(base, 'c', 0), { kind: 'pending' });
  t.same(decidePoll({ ...base, lastPolledAt: 0 }, 'c', 4_999), { kind: 'slow_down', intervalS: 10 });
  t.same(decidePoll({ ...base, lastPolledAt: 0 }, 'c', 5_000), { kind: 'pending' });
  t.same(decidePoll({ ...base, status: 'approved' }, 'c', 0), { kind: 'issue' });
  t.match(decidePoll({ ...base, status: 'denied' }, 'c', 0), { error: 'access_denied' });
  t.match(decidePoll({ ...base, status: 'denied' }, 'c', 100_000), { error: 'expired_token' }, 'expiry first');
  t.match(decidePoll({ ...base, status: 'consumed' }, 'c', 0), { error: 'invalid_grant' });
});
