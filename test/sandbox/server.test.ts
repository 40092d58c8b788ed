/**
 * The sandbox provider server over its real protocols: FCM v1 and the Twilio-style API over HTTP,
 * SMTP over a raw socket, and its own /sandbox API. In-process on port 0.
 */
import t from 'tap';
import { smtpConnect } from './smtp-client.js';
import { createRegistry } from '../../shared/metrics.js';
import { waitFor } from '../harness/wait.js';
import { getGlobalDispatcher } from 'undici';
import { startSandbox, type Sandbox } from '../../sandbox/app.js';
import type { TestContext } from '../harness/db.js';

const credentials = { fcmAccessToken: 'fcm-token', smsAccountSid: 'ACtest', smsAuthToken: 'sms-token' };
const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

async function sandbox(t: TestContext, opts: Parameters<typeof startSandbox>[0] = {}): Promise<Sandbox> {
  const s = await startSandbox({ credentials, ...opts });
  t.teardown(() => s.close());
  return s;
}

const fcm = (s: Sandbox, body: unknown, token = 'fcm-token', prefix = '') =>
  fetch(`${s.url}${prefix}/v1/projects/p1/messages:send`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const sms = (s: Sandbox, form: Record<string, string>, headers: Record<string, string> = {}, auth = basic('ACtest', 'sms-token')) =>
  fetch(`${s.url}/2010-04-01/Accounts/ACtest/Messages.json`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
  });

// fetch keeps idle connections open for seconds; close them when the file is done.
t.teardown(() => getGlobalDispatcher().close());

t.test('health and readiness', async (t) => {
  const s = await sandbox(t);
  t.equal((await fetch(`${s.url}/healthz`)).status, 200);
  t.equal((await fetch(`${s.url}/readyz`)).status, 200);
  t.match(await (await fetch(`${s.url}/metrics`)).text(), /sandbox_requests_total/);
});

t.test('FCM v1: accepts a message, records it with its delivery id, answers its name', async (t) => {
  const s = await sandbox(t);
  const r = await fcm(s, { message: { token: 'tok-1', notification: { title: 'T', body: 'B' }, data: { delivery_id: 'd-1', k: 'v' } } });
  t.equal(r.status, 200);
  const { name } = (await r.json()) as { name: string };
  t.match(name, /^projects\/p1\/messages\/0:[0-9a-f]{32}$/);
  const [m] = s.messages({ channel: 'push' });
  t.match(m, { channel: 'push', provider: 'primary', to: 'tok-1', delivery_id: 'd-1', title: 'T', body: 'B', data: { k: 'v' } });
  t.equal(name.endsWith(m!.id), true);
});

t.test('FCM v1: bad credentials, missing token and non-string data are refused as FCM would', async (t) => {
  const s = await sandbox(t);
  const unauth = await fcm(s, { message: { token: 't' } }, 'wrong');
  t.equal(unauth.status, 401);
  t.match(await unauth.json(), { error: { status: 'UNAUTHENTICATED' } });
  const noToken = await fcm(s, { message: { notification: { body: 'x' } } });
  t.equal(noToken.status, 400);
  t.match(await noToken.json(), {
    error: { status: 'INVALID_ARGUMENT', details: [{}, { fieldViolations: [{ field: 'message.token' }] }] },
  });
  const badData = await fcm(s, { message: { token: 't', data: { n: 1 } } });
  t.equal(badData.status, 400);
  t.match(await badData.json(), { error: { details: [{}, { fieldViolations: [{ field: 'message.data[n]' }] }] } });
  t.equal(s.messages().length, 0, 'nothing recorded');
});

t.test('FCM v1: UNREGISTERED from the profile list and from the token itself', async (t) => {
  const s = await sandbox(t, { faults: [{ channel: 'push', unregistered_tokens: ['gone'] }] });
  for (const token of ['gone', 'fault-unregistered-9']) {
    const r = await fcm(s, { message: { token } });
    t.equal(r.status, 404);
    t.match(await r.json(), { error: { status: 'NOT_FOUND', details: [{ errorCode: 'UNREGISTERED' }] } });
  }
});

t.test('a second provider under /providers/{name} has its own records and faults', async (t) => {
  const s = await sandbox(t);
  s.setFaults({ channel: 'push', provider: 'primary', error_rate: 1, error: 'UNAVAILABLE', retry_after_s: 3 });
  const primary = await fcm(s, { message: { token: 't' } });
  t.equal(primary.status, 503);
  t.equal(primary.headers.get('retry-after'), '3');
  const secondary = await fcm(s, { message: { token: 't' } }, 'fcm-token', '/providers/backup');
  t.equal(secondary.status, 200);
  t.equal(s.messages({ provider: 'backup' }).length, 1);
  t.equal(s.messages({ provider: 'primary' }).length, 0);
});

t.test('Twilio-style: creates a message (201) with segments; validates fields and credentials', async (t) => {
  const s = await sandbox(t);
  const r = await sms(s, { To: '+15551230000', From: '+15005550006', Body: 'x'.repeat(200) }, { 'x-delivery-id': 'd-9' });
  t.equal(r.status, 201);
  const msg = (await r.json()) as Record<string, unknown>;
  t.match(msg, { sid: /^SM[0-9a-f]{32}$/, account_sid: 'ACtest', to: '+15551230000', status: 'queued', num_segments: '2' });
  t.match(s.messages({ channel: 'sms' })[0], { delivery_id: 'd-9', to: '+15551230000' });
  const one = await fetch(`${s.url}/2010-04-01/Accounts/ACtest/Messages/${msg.sid as string}.json`, {
    headers: { authorization: basic('ACtest', 'sms-token') },
  });
  t.match(await one.json(), { sid: msg.sid });
  const missing = await sms(s, { To: '+1555', From: '+1500' });
  t.equal(missing.status, 400);
  t.match(await missing.json(), { code: 21602 });
  const wrong = await sms(s, { To: '+1555', From: '+1500', Body: 'b' }, {}, basic('ACtest', 'nope'));
  t.equal(wrong.status, 401);
  t.match(await wrong.json(), { code: 20003 });
  const unknown = await fetch(`${s.url}/2010-04-01/Accounts/ACtest/Messages/SMnope.json`, {
    headers: { authorization: basic('ACtest', 'sms-token') },
  });
  t.equal(unknown.status, 404);
});

t.test('Twilio-style: no idempotency key is honoured; every request it accepts is a new message', async (t) => {
  const s = await sandbox(t);
  const form = { To: '+15551230000', From: '+15005550006', Body: 'code 1234' };
  const headers = { 'idempotency-key': 'key-1', 'x-delivery-id': 'd-1' };
  const answers = await Promise.all([sms(s, form, headers), sms(s, form, headers)]);
  const sids = await Promise.all(answers.map(async (r) => ((await r.json()) as { sid: string }).sid));
  t.same(
    answers.map((r) => r.status),
    [201, 201],
  );
  t.equal(new Set(sids).size, 2, 'two messages');
  const d = (await (await fetch(`${s.url}/sandbox/deliveries/d-1`)).json()) as { requests: number; accepted: number };
  t.match(d, { requests: 2, accepted: 2 });
  const list = await fetch(`${s.url}/2010-04-01/Accounts/ACtest/Messages.json?To=${encodeURIComponent('+15551230000')}`, {
    headers: { authorization: basic('ACtest', 'sms-token') },
  });
  t.equal(((await list.json()) as { messages: unknown[] }).messages.length, 2, 'listed by To, as Twilio lists');
});

t.test('duplicates: a delivery id accepted twice by one provider is listed', async (t) => {
  const s = await sandbox(t);
  for (let i = 0; i < 2; i++) await fcm(s, { message: { token: 't', data: { delivery_id: 'twice' } } });
  await fcm(s, { message: { token: 't', data: { delivery_id: 'once' } } });
  const { duplicates } = (await (await fetch(`${s.url}/sandbox/duplicates`)).json()) as { duplicates: unknown[] };
  t.same(duplicates, [{ channel: 'push', provider: 'primary', delivery_id: 'twice', to: 't', requests: 2, accepted: 2 }]);
  t.equal((await fetch(`${s.url}/sandbox/messages`, { method: 'DELETE' })).status, 204);
  t.match(await (await fetch(`${s.url}/sandbox/duplicates`)).json(), { duplicates: [] });
  t.match(await (await fetch(`${s.url}/sandbox/messages`)).json(), { messages: [], total: 0 });
});

t.test('/sandbox/messages filters by channel, to and delivery id, and keeps at most maxMessages', async (t) => {
  const s = await sandbox(t, { maxMessages: 3 });
  for (let i = 0; i < 5; i++) await fcm(s, { message: { token: `t${i % 2}`, data: { delivery_id: `d${i}` } } });
  const all = (await (await fetch(`${s.url}/sandbox/messages?channel=push`)).json()) as { messages: { delivery_id: string }[] };
  t.same(
    all.messages.map((m) => m.delivery_id),
    ['d2', 'd3', 'd4'],
    'the oldest were dropped',
  );
  const byTo = (await (await fetch(`${s.url}/sandbox/messages?to=t1`)).json()) as { total: number };
  t.equal(byTo.total, 1);
  const byId = (await (await fetch(`${s.url}/sandbox/messages?delivery_id=d4&limit=1`)).json()) as { messages: unknown[] };
  t.equal(byId.messages.length, 1);
  const bad = await fetch(`${s.url}/sandbox/messages?limit=0`);
  t.equal(bad.status, 400);
  t.match(await bad.json(), { code: 'invalid_field', field: 'limit' });
});

t.test('/sandbox/faults: set, list, refuse bad ones naming the field, clear', async (t) => {
  const s = await sandbox(t);
  const set = await fetch(`${s.url}/sandbox/faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify([
      { channel: 'sms', latency_ms: 10 },
      { channel: 'push', error_rate: 0.5 },
    ]),
  });
  t.equal(set.status, 200);
  t.match(await set.json(), {
    faults: [
      { channel: 'sms', latency_ms: 10 },
      { channel: 'push', error_rate: 0.5 },
    ],
  });
  const bad = await fetch(`${s.url}/sandbox/faults`, { method: 'POST', body: JSON.stringify({ channel: 'sms', timeout_rate: 'often' }) });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { code: 'invalid_field', field: 'timeout_rate' });
  t.equal((await fetch(`${s.url}/sandbox/faults?channel=sms`, { method: 'DELETE' })).status, 204);
  t.match(await (await fetch(`${s.url}/sandbox/faults`)).json(), { faults: [{ channel: 'push' }] });
  t.equal((await fetch(`${s.url}/sandbox/faults`, { method: 'DELETE' })).status, 204);
  t.match(await (await fetch(`${s.url}/sandbox/faults`)).json(), { faults: [] });
});

t.test('latency is added to every answer; a timeout holds the request until the sandbox closes', async (t) => {
  const registry = createRegistry('test', { defaults: false });
  const s = await startSandbox({ credentials, registry, faults: [{ channel: 'push', latency_ms: 120 }] });
  const started = performance.now();
  t.equal((await fcm(s, { message: { token: 't' } })).status, 200);
  t.ok(performance.now() - started >= 110, 'the answer waited for the latency');
  const held = fcm(s, { message: { token: 'fault-timeout-1' } }).then(
    (r) => r.status,
    () => 'closed',
  );
  let answered = false;
  void held.then(() => (answered = true));
  // The sandbox counts a held request when it starts holding it: then the absence of an answer means something.
  await waitFor(async () => /outcome="timeout"[^}]*\} 1\b/.test(await registry.getSingleMetricAsString('sandbox_requests_total')), {
    what: 'the sandbox to hold the request',
  });
  t.notOk(answered, 'no answer while held');
  await s.close();
  t.ok(['closed', 503].includes(await held), 'released at close');
});

/**
 * A scripted SMTP client: writes each unit (a command, or a whole DATA body ending in a lone dot)
 * and waits for its one reply. Returns the greeting and every reply.
 */
async function smtpSession(port: number, units: string[]): Promise<string[]> {
  const c = await smtpConnect(port);
  const replies = [c.greeting];
  for (const unit of units) replies.push(await c.send(unit));
  c.end();
  return replies;
}

t.test('SMTP: a full session with dot-stuffing; STARTTLS is not offered; recipients refused by address', async (t) => {
  const s = await sandbox(t);
  const replies = await smtpSession(s.smtpPort, [
    'EHLO client.test',
    'STARTTLS',
    'MAIL FROM:<from@example.test>',
    'RCPT TO:<fault-invalid_argument@example.test>',
    'RCPT TO:<to@example.test>',
    'DATA',
    [
      'Message-ID: <d-77@example.test>',
      'X-Delivery-Id: d-77',
      'Subject: =?UTF-8?Q?caf=C3=A9?=',
      '',
      '..leading dot',
      'second line',
      '.',
    ].join('\r\n'),
    'RSET',
    'NOOP',
    'QUIT',
  ]);
  t.match(replies[0], /^220 /);
  t.match(replies[1], /^250-.*\n?[\s\S]*250 AUTH PLAIN LOGIN$/);
  t.notMatch(replies[1], /STARTTLS/);
  t.match(replies[2], /^500 /, 'STARTTLS is refused like an unknown command (smtp-server answers 500, not 502)');
  t.match(replies[3], /^250 /);
  t.match(replies[4], /^550 5\.1\.1/);
  t.match(replies[5], /^250 /);
  t.match(replies[6], /^354 /);
  t.match(replies[7], /^250 Ok 0100[0-9a-f-]+-000000$/, "SES's SMTP answer: 250 Ok <message id>");
  t.match(replies.slice(8), [/^250 /, /^250 /, /^221 /]);
  const [m] = s.messages({ channel: 'email' });
  t.match(m, { to: 'to@example.test', from: 'from@example.test', delivery_id: 'd-77', message_id: '<d-77@example.test>', subject: 'café' });
  t.equal(m!.text, '.leading dot\r\nsecond line');
});

t.test('SMTP: commands out of order are refused', async (t) => {
  const s = await sandbox(t);
  const replies = await smtpSession(s.smtpPort, ['MAIL FROM:<a@b>', 'HELO x', 'RCPT TO:<a@b>', 'DATA', 'BOGUS', 'QUIT']);
  t.match(replies.slice(1), [/^503 /, /^250 /, /^503 /, /^503 /, /^500 /, /^221 /]);
});
