// @tier: pure
/**
 * FCM with OAuth 2.0 access tokens minted from a service-account key, against the sandbox's
 * Google token endpoint: the key file's checks, one exchange shared by concurrent sends, refresh
 * before expiry, a refused key as a permanent auth failure, an unreachable token endpoint as a
 * retry, a token FCM stops taking dropped and replaced, and the configuration path end to end.
 */
import { generateKeyPairSync, createPublicKey, type KeyObject } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import t from 'tap';
import { createFcmChannel } from '../../../notifier/channels/push-fcm.js';
import { channelsConfig, createChannels, serviceAccountTokens } from '../../../notifier/channels/index.js';
import type { Channel } from '../../../notifier/channels/channel.js';
import type { Sandbox } from '../../../sandbox/app.js';
import { FakeClock, type Clock } from '../../../shared/clock.js';
import { loadConfig } from '../../../shared/config.js';
import { FCM_SCOPE, parseServiceAccountKey, readServiceAccountKey, type ServiceAccountKey } from '../../../shared/service-account.js';
import type { TestContext } from '../../harness/db.js';
import { closedPort, ctx, guardDeps, message, useSandbox } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'fcm-oauth-'));
const EMAIL = 'notifier@proj.iam.gserviceaccount.com';

function rsaPem(): string {
  return generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}
const PEM = rsaPem();
const OTHER_PEM = rsaPem();

function keyFile(name: string, fields: Record<string, unknown>): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(fields));
  return path;
}

function accountJson(tokenUri: string, pem = PEM): Record<string, unknown> {
  return { type: 'service_account', project_id: 'proj', private_key_id: 'k1', private_key: pem, client_email: EMAIL, token_uri: tokenUri };
}

async function oauthSandbox(t: TestContext, clock?: Clock): Promise<Sandbox> {
  const publicKey: KeyObject = createPublicKey(PEM);
  return useSandbox(t, { credentials: { fcmServiceAccount: { clientEmail: EMAIL, publicKey } }, ...(clock && { clock }) });
}

function push(t: TestContext, s: Sandbox, accessToken: Parameters<typeof createFcmChannel>[0]['accessToken'], clock?: Clock): Channel {
  const c = createFcmChannel({ baseUrl: s.url, projectId: 'proj', accessToken, timeoutMs: 2_000, connections: 4 }, guardDeps({}, clock));
  t.teardown(() => c.close());
  return c;
}

t.test('the key file is checked at start, saying what is wrong and never quoting the key', async (t) => {
  t.throws(() => readServiceAccountKey(join(dir, 'missing.json')), { message: 'cannot be read (ENOENT)' });
  writeFileSync(join(dir, 'garbage.json'), 'not json');
  t.throws(() => readServiceAccountKey(join(dir, 'garbage.json')), { message: 'is not a JSON file' });
  const good = accountJson('https://oauth2.googleapis.com/token');
  t.throws(() => parseServiceAccountKey({ ...good, type: 'authorized_user' }), { message: /type is not "service_account"/ });
  t.throws(() => parseServiceAccountKey({ ...good, client_email: 42 }), { message: 'has no client_email' });
  t.throws(() => parseServiceAccountKey({ ...good, private_key: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----' }), {
    message: 'has a private_key that is not a PEM private key',
  });
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  t.throws(() => parseServiceAccountKey({ ...good, private_key: ec }), { message: /not an RSA key/ });
  t.throws(() => parseServiceAccountKey({ ...good, token_uri: 'ftp://x' }), { message: /token_uri/ });
  const { token_uri: _drop, ...noUri } = good;
  const key = parseServiceAccountKey(noUri);
  t.equal(key.tokenUri, 'https://oauth2.googleapis.com/token', "Google's endpoint by default");
  t.equal(key.keyId, 'k1');
  t.equal(key.projectId, 'proj');

  const bad = keyFile('bad.json', { ...good, private_key: 'oops PRIVATE KEY' });
  let message = '';
  try {
    loadConfig(channelsConfig, { FCM_SERVICE_ACCOUNT_FILE: bad });
  } catch (err) {
    message = (err as Error).message;
  }
  t.match(
    message,
    /^config: FCM_SERVICE_ACCOUNT_FILE .*has a private_key that is not a PEM private key/,
    'a config error naming the variable',
  );
  t.notMatch(message, /oops/, 'the key itself is never echoed');
  // A real key cut short: still no part of it in the error.
  const cut = PEM.slice(0, PEM.length - 200) + '\n-----END PRIVATE KEY-----\n';
  const cutFile = keyFile('cut.json', { ...good, private_key: cut });
  try {
    loadConfig(channelsConfig, { FCM_SERVICE_ACCOUNT_FILE: cutFile });
    t.fail('a cut key must not load');
  } catch (err) {
    const text = `${(err as Error).message} ${String((err as Error).cause ?? '')}`;
    const body = cut.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'));
    t.ok(body.length > 10, 'the cut key has a body to look for');
    t.notOk(
      body.some((l) => text.includes(l.slice(0, 20))),
      'no line of the key appears in the error',
    );
  }
});

t.test('concurrent sends share one exchange; the token is refreshed before it expires', async (t) => {
  const clock = new FakeClock(Date.now());
  const s = await oauthSandbox(t, clock);
  const key = parseServiceAccountKey(accountJson(`${s.url}/token`));
  const c = push(t, s, serviceAccountTokens({ key, clock, timeoutMs: 2_000 }), clock);
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => c.send(message(`device-${i}`), ctx())));
  t.ok(
    results.every((r) => r.ok),
    'all eight sent with a minted token',
  );
  t.equal(s.core.mintedTokens.issued, 1, 'one exchange for eight concurrent sends');
  clock.advance(50 * 60_000);
  t.ok((await c.send(message('device-a'), ctx())).ok);
  t.equal(s.core.mintedTokens.issued, 1, 'still fresh at 50 minutes');
  clock.advance(6 * 60_000);
  t.ok((await c.send(message('device-b'), ctx())).ok);
  t.equal(s.core.mintedTokens.issued, 2, 'exchanged again 5 minutes before the hour');
});

t.test('with a service account, the sandbox takes only minted tokens', async (t) => {
  const s = await oauthSandbox(t);
  const c = push(t, s, 'fcm-token');
  t.match(await c.send(message('device-1'), ctx()), { ok: false, kind: 'permanent', reason: 'provider_auth_failed' });
  t.equal(s.messages().length, 0);
});

t.test('a key the token endpoint refuses is a permanent provider_auth_failed', async (t) => {
  const s = await oauthSandbox(t);
  const key = parseServiceAccountKey(accountJson(`${s.url}/token`, OTHER_PEM));
  const c = push(t, s, serviceAccountTokens({ key, clock: new FakeClock(Date.now()), timeoutMs: 2_000 }));
  t.match(await c.send(message('device-1'), ctx()), {
    ok: false,
    kind: 'permanent',
    reason: 'provider_auth_failed',
    detail: /token endpoint answered 400 invalid_grant: Invalid JWT Signature/,
  });
  t.equal(s.core.mintedTokens.issued, 0);
});

t.test('an unreachable or failing token endpoint is a retry; the same source tries again on the next send', async (t) => {
  const s = await oauthSandbox(t);
  const key: ServiceAccountKey = parseServiceAccountKey(accountJson(`http://127.0.0.1:${await closedPort()}/token`));
  const down = push(t, s, serviceAccountTokens({ key, clock: new FakeClock(Date.now()), timeoutMs: 1_000 }));
  t.match(await down.send(message('device-1'), ctx()), { ok: false, kind: 'retry', reason: 'provider_error' });

  // A token endpoint answering 503, then 408, then passing requests on to the sandbox's.
  const answers = [503, 408];
  const flaky = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = answers.shift();
      if (status !== undefined) {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'backend_error' }));
        return;
      }
      void fetch(`${s.url}/token`, {
        method: 'POST',
        body: Buffer.concat(chunks),
        headers: { 'content-type': String(req.headers['content-type']) },
      }).then(async (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(await r.text()));
    });
  });
  await new Promise<void>((r) => flaky.listen(0, '127.0.0.1', r));
  t.teardown(() => flaky.close());
  const tokenUri = `http://127.0.0.1:${(flaky.address() as AddressInfo).port}/token`;
  const c = push(t, s, serviceAccountTokens({ key, tokenUri, clock: new FakeClock(Date.now()), timeoutMs: 1_000 }));
  t.match(await c.send(message('device-1'), ctx()), { ok: false, kind: 'retry', reason: 'provider_error', detail: /503/ });
  t.match(
    await c.send(message('device-1'), ctx()),
    { ok: false, kind: 'retry', reason: 'provider_error', detail: /408/ },
    '408 is passing, not a refusal',
  );
  t.ok((await c.send(message('device-1'), ctx())).ok, 'a failed exchange is not cached; FCM_TOKEN_URL overrides the key file’s token_uri');
  t.equal(s.core.mintedTokens.issued, 1);
});

t.test('waiting for a token counts against the send deadline', async (t) => {
  const s = await oauthSandbox(t);
  const hang = createServer(() => {}); // never answers
  await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    hang.closeAllConnections();
    hang.close();
  });
  const key = parseServiceAccountKey(accountJson(`http://127.0.0.1:${(hang.address() as AddressInfo).port}/token`));
  // The send deadline (300 ms) is the only timer that can end this send: the exchange and the
  // channel both allow ten minutes.
  const c = createFcmChannel(
    {
      baseUrl: s.url,
      projectId: 'proj',
      accessToken: serviceAccountTokens({ key, clock: new FakeClock(Date.now()), timeoutMs: 600_000 }),
      timeoutMs: 600_000,
      connections: 4,
    },
    guardDeps(),
  );
  t.teardown(() => c.close());
  const t0 = Date.now();
  t.match(await c.send(message('device-1'), ctx(300)), { ok: false, kind: 'retry', reason: 'timeout', detail: /access token/ });
  t.comment(`gave up after ${Date.now() - t0} ms`);
  const open = await new Promise<number>((r) => hang.getConnections((_e, n) => r(n)));
  t.ok(open > 0, 'gave up at the send deadline with the token exchange still in flight');
});

t.test('a minted token FCM stops taking is dropped: the send is retried and the next one mints afresh', async (t) => {
  const s = await oauthSandbox(t);
  const key = parseServiceAccountKey(accountJson(`${s.url}/token`));
  const clock = new FakeClock(Date.now());
  const tokens = serviceAccountTokens({ key, clock, timeoutMs: 2_000 });
  const c = push(t, s, tokens);
  t.ok((await c.send(message('device-1'), ctx())).ok);
  const first = await tokens();
  tokens.invalidate('some-older-token');
  t.equal(await tokens(), first, 'a 401 for an older token does not drop the current one');
  s.core.mintedTokens.clear(); // revoked
  t.match(
    await c.send(message('device-2'), ctx()),
    {
      ok: false,
      kind: 'permanent',
      reason: 'provider_auth_failed',
      detail: /minted 0 s ago/,
    },
    'refused moments after minting: not stale but wrong, so permanent',
  );
  clock.advance(2 * 60_000);
  t.match(await c.send(message('device-2'), ctx()), {
    ok: false,
    kind: 'retry',
    reason: 'provider_error',
    detail: /access token was refused/,
  });
  t.ok((await c.send(message('device-3'), ctx())).ok);
  t.equal(s.core.mintedTokens.issued, 2);
});

t.test('the sandbox token endpoint checks the grant, the signer, the scope and the lifetime', async (t) => {
  const s = await oauthSandbox(t);
  const post = async (form: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> => {
    const res = await fetch(`${s.url}/token`, { method: 'POST', body: new URLSearchParams(form) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const sign = (claims: Record<string, unknown>, lifetimeS = 3600, pem = PEM): Promise<string> => {
    const iat = Math.floor(Date.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuer(EMAIL)
      .setAudience(`${s.url}/token`)
      .setIssuedAt(iat)
      .setExpirationTime(iat + lifetimeS)
      .sign(createPrivateKeyFrom(pem));
  };
  const grant = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
  t.match(await post({ grant_type: 'client_credentials' }), { status: 400, body: { error: 'unsupported_grant_type' } });
  t.match(await post({ grant_type: grant, assertion: 'x.y.z' }), { status: 400, body: { error: 'invalid_grant' } });
  t.match(await post({ grant_type: grant, assertion: await sign({ scope: 'https://www.googleapis.com/auth/cloud-platform' }) }), {
    status: 400,
    body: { error: 'invalid_scope' },
  });
  t.match(await post({ grant_type: grant, assertion: await sign({ scope: FCM_SCOPE }, 7200) }), {
    status: 400,
    body: { error: 'invalid_grant', error_description: /60 minutes/ },
  });
  t.match(await post({ grant_type: grant, assertion: await sign({ scope: FCM_SCOPE }, 3600, OTHER_PEM) }), {
    status: 400,
    body: { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' },
  });
  t.match(await post({ grant_type: grant, assertion: await sign({ scope: FCM_SCOPE }) }), {
    status: 200,
    body: { access_token: /^ya29\.sandbox-/, expires_in: 3599, token_type: 'Bearer' },
  });
  const metrics = await (await fetch(`${s.url}/metrics`)).text();
  t.match(
    metrics,
    /sandbox_requests_total\{channel="push",provider="oauth",outcome="rejected",service="sandbox"\} 5\b/,
    'every refusal counted',
  );
  t.match(metrics, /sandbox_requests_total\{channel="push",provider="oauth",outcome="accepted",service="sandbox"\} 1\b/);
});

t.test('configured by FCM_SERVICE_ACCOUNT_FILE and FCM_TOKEN_URL, both push providers send with minted tokens', async (t) => {
  const s = await oauthSandbox(t);
  const file = keyFile('account.json', accountJson('https://oauth2.googleapis.com/token'));
  const config = loadConfig(channelsConfig, {
    FCM_URL: s.url,
    FCM_SECONDARY_URL: `${s.url}/providers/backup`,
    FCM_SERVICE_ACCOUNT_FILE: file,
    FCM_TOKEN_URL: `${s.url}/token`,
  });
  const set = createChannels(config, { sendTimeoutMs: 2_000, writeInbox: async () => {} });
  t.teardown(() => set.close());
  t.match(
    await set.primary.push.send(message('device-1'), ctx()),
    { ok: true, providerMessageId: /^projects\/proj\/messages\// },
    "FCM_PROJECT_ID unset: the key's project_id",
  );
  t.ok((await set.secondary.push!.send(message('device-2'), ctx())).ok);
  t.equal(s.core.mintedTokens.issued, 1, 'one token source for the project');
  const named = createChannels(
    loadConfig(channelsConfig, {
      FCM_URL: s.url,
      FCM_PROJECT_ID: 'other',
      FCM_SERVICE_ACCOUNT_FILE: file,
      FCM_TOKEN_URL: `${s.url}/token`,
    }),
    {
      sendTimeoutMs: 2_000,
      writeInbox: async () => {},
    },
  );
  t.teardown(() => named.close());
  t.match(
    await named.primary.push.send(message('device-3'), ctx()),
    { ok: true, providerMessageId: /^projects\/other\/messages\// },
    'FCM_PROJECT_ID wins when set',
  );
});

function createPrivateKeyFrom(pem: string): KeyObject {
  return parseServiceAccountKey(accountJson('https://oauth2.googleapis.com/token', pem)).privateKey;
}
