// @tier: pure
/**
 * E-mail over SMTP with nodemailer against the sandbox's SMTP server: the delivery id in the
 * Message-ID and X-Delivery-Id, subject, text and HTML, and how SMTP replies map to results.
 */
import t from 'tap';
import { createSmtpChannel, classifySmtpError, senderDomain, smtpPoolOptions } from '../../../notifier/channels/email-smtp.js';
import type { Channel } from '../../../notifier/channels/channel.js';
import type { Sandbox } from '../../../sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { closedPort, ctx, guardDeps, message, useSandbox } from './helpers.js';

function email(t: TestContext, s: Sandbox | string, timeoutMs = 2_000): Channel {
  const c = createSmtpChannel(
    { url: typeof s === 'string' ? s : s.smtpUrl, from: 'Platform <noreply@mail.example.test>', poolSize: 2, timeoutMs },
    guardDeps(),
  );
  t.teardown(() => c.close());
  return c;
}

const mail = (to: string) =>
  message(to, { subject: 'Your order shipped ✓', text: 'Order 42 is on its way.', html: '<p>Order <b>42</b> is on its way.</p>' });

t.test('sends subject, text and HTML; the delivery id is the Message-ID and the X-Delivery-Id', async (t) => {
  const s = await useSandbox(t);
  const c = email(t, s);
  t.equal(c.name, 'email');
  t.equal(c.lookup, undefined, 'SMTP offers no lookup');
  const r = await c.send(mail('ada@example.test'), ctx(2_000, 'd-mail-1'));
  t.ok(r.ok);
  const [m] = s.messages({ channel: 'email' });
  t.match(m, {
    to: 'ada@example.test',
    from: 'noreply@mail.example.test',
    delivery_id: 'd-mail-1',
    message_id: '<d-mail-1@mail.example.test>',
    subject: 'Your order shipped ✓',
    text: 'Order 42 is on its way.',
    html: '<p>Order <b>42</b> is on its way.</p>',
  });
  t.same(r, { ok: true, providerMessageId: m!.id }, "the server's queue id");
  const fallback = await c.send(message('bob@example.test', { subject: 'Hi' }), ctx());
  t.ok(fallback.ok);
  t.equal(s.messages({ to: 'bob@example.test' })[0]!.text, 'Your code is 123456', 'body is the text when there is no text');
});

t.test('pooled connections carry many messages', async (t) => {
  const s = await useSandbox(t);
  const c = email(t, s);
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) => c.send(mail(`u${i}@example.test`), ctx())));
  t.ok(
    results.every((r) => r.ok),
    'all sent',
  );
  t.equal(s.messages({ channel: 'email' }).length, 12);
});

t.test('SMTP 4xx → retry; 5xx to RCPT → invalid_recipient; 535 → provider_auth_failed; other 5xx → provider_rejected', async (t) => {
  const s = await useSandbox(t);
  const c = email(t, s);
  t.match(await c.send(mail('fault-quota_exceeded@example.test'), ctx()), { kind: 'retry', reason: 'provider_quota_exceeded' });
  t.match(await c.send(mail('fault-internal@example.test'), ctx()), { kind: 'retry', reason: 'provider_internal' });
  t.match(await c.send(mail('fault-unavailable@example.test'), ctx()), { kind: 'retry', reason: 'provider_unavailable' });
  t.match(await c.send(mail('fault-invalid_argument@example.test'), ctx()), { kind: 'permanent', reason: 'invalid_recipient' });
  s.setFaults({ channel: 'email', error_rate: 1, error: 'INTERNAL' });
  t.match(await c.send(mail('ok@example.test'), ctx()), { kind: 'retry', reason: 'provider_internal', detail: /451/ });
  s.setFaults({ channel: 'email', error_rate: 1, error: 'INVALID_ARGUMENT' });
  t.match(await c.send(mail('ok@example.test'), ctx()), { kind: 'permanent', reason: 'provider_rejected', detail: /550/ });
  s.setFaults({ channel: 'email', error_rate: 1, error: 'UNAUTHENTICATED' });
  t.match(await c.send(mail('ok@example.test'), ctx()), { kind: 'permanent', reason: 'provider_auth_failed' });
  s.clearFaults();
  t.ok((await c.send(mail('ok@example.test'), ctx())).ok, 'the channel still works after every refusal');
  t.equal(s.messages().length, 1);
});

t.test('a server that never answers → retry timeout at the deadline; nothing listening → connection_failed', async (t) => {
  // The server holds the answer and the channel allows ten minutes: only the 200 ms deadline can end the send.
  const s = await useSandbox(t, { faults: [{ channel: 'email', hold_ms: 600_000 }] });
  const c = email(t, s, 600_000);
  const started = performance.now();
  t.match(await c.send(mail('fault-timeout@example.test'), ctx(200)), { kind: 'retry', reason: 'timeout' });
  t.comment(`gave up after ${Math.round(performance.now() - started)} ms`);
  const dead = email(t, `smtp://127.0.0.1:${await closedPort()}`);
  t.match(await dead.send(mail('a@example.test'), ctx()), { kind: 'retry', reason: 'connection_failed' });
  t.match(await dead.send(mail(''), ctx()), { kind: 'permanent', reason: 'missing_address' });
});

t.test('configuration helpers and error mapping without a server', async (t) => {
  t.equal(senderDomain('Platform <noreply@mail.example.test>'), 'mail.example.test');
  t.equal(senderDomain('plain@example.org'), 'example.org');
  t.match(smtpPoolOptions({ url: 'smtps://user%40x:p%3Ass@mx.example:2465', from: 'a@b', poolSize: 3, timeoutMs: 1000 }), {
    host: 'mx.example',
    port: 2465,
    secure: true,
    maxConnections: 3,
    auth: { user: 'user@x', pass: 'p:ss' },
  });
  t.throws(() => smtpPoolOptions({ url: 'http://x', from: 'a@b', poolSize: 1, timeoutMs: 1 }));
  t.match(classifySmtpError({ responseCode: 554, command: 'DATA' }), { kind: 'permanent', reason: 'provider_rejected' });
  t.match(classifySmtpError({ responseCode: 450, command: 'RCPT TO' }), { kind: 'retry', reason: 'provider_error' });
  t.match(classifySmtpError({ code: 'ETIMEDOUT' }), { kind: 'retry', reason: 'timeout' });
  t.match(classifySmtpError({ code: 'EAUTH', responseCode: undefined }), { kind: 'permanent', reason: 'provider_auth_failed' });
  t.match(classifySmtpError(new Error('odd')), { kind: 'retry', reason: 'provider_error' });
});
