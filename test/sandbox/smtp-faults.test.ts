// @tier: pure
/**
 * Every fault the sandbox injects over SMTP, seen from a raw socket: latency before the answer to
 * DATA, held answers (timeout, lost response), refusals at RCPT TO and after DATA in their SMTP
 * form, 421 closing the connection; plus multi-recipient records, AUTH, and shutdown.
 */
import t from 'tap';
import { waitFor } from '../harness/wait.js';
import { createSmtpChannel } from '../../notifier/channels/email-smtp.js';
import { startSandbox, type Sandbox, type SandboxOptions } from '../../sandbox/app.js';
import { systemClock } from '../../shared/clock.js';
import { createRegistry, type Registry } from '../../shared/metrics.js';
import type { TestContext } from '../harness/db.js';
import { dataBody, openTransaction, smtpConnect, type SmtpClient } from './smtp-client.js';

async function sandbox(t: TestContext, opts: SandboxOptions = {}): Promise<Sandbox & { registry: Registry }> {
  const registry = createRegistry('test', { defaults: false });
  const s = await startSandbox({ registry, ...opts });
  t.teardown(() => s.close());
  return Object.assign(s, { registry });
}

async function client(t: TestContext, s: Sandbox): Promise<SmtpClient> {
  const c = await smtpConnect(s.smtpPort);
  t.teardown(() => c.end());
  return c;
}

const body = (deliveryId: string) =>
  dataBody([`Message-ID: <${deliveryId}@example.test>`, `X-Delivery-Id: ${deliveryId}`, 'Subject: hi', '', 'hello']);

const requests = async (r: Registry, outcome: string): Promise<number> => {
  const m = new RegExp(`outcome="${outcome}"[^}]*} (\\d+)`).exec(await r.getSingleMetricAsString('sandbox_requests_total'));
  return Number(m?.[1] ?? 0);
};

t.test('latency: the answer to DATA waits latency_ms; RCPT TO is not delayed', async (t) => {
  const s = await sandbox(t, { faults: [{ channel: 'email', latency_ms: 150 }] });
  const c = await client(t, s);
  await openTransaction(c, 'from@example.test', ['to@example.test']);
  const started = performance.now();
  t.match(await c.send(body('d-lat')), /^250 Ok 0100[0-9a-f]{12}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-000000$/);
  t.ok(performance.now() - started >= 140, 'the answer waited for the latency');
  t.equal(s.messages({ delivery_id: 'd-lat' }).length, 1);
});

t.test('timeout: no answer for hold_ms, then 451 4.4.2 and the connection is closed; nothing recorded', async (t) => {
  const s = await sandbox(t, { faults: [{ channel: 'email', hold_ms: 250 }] });
  const c = await client(t, s);
  await openTransaction(c, 'from@example.test', ['fault-timeout@example.test']);
  const started = performance.now();
  t.equal(await c.send(body('d-timeout')), '451 4.4.2 Timeout');
  t.ok(performance.now() - started >= 240, 'held for hold_ms');
  await c.closed;
  t.pass('the server closed the connection');
  t.same(s.messages(), []);
  t.match(s.core.store.delivery('d-timeout'), [{ requests: 1, accepted: 0 }]);
  t.equal(await requests(s.registry, 'timeout'), 1);
});

t.test('timeout_rate: the same hold for any address', async (t) => {
  const s = await sandbox(t, { faults: [{ channel: 'email', timeout_rate: 1, hold_ms: 100 }] });
  const c = await client(t, s);
  await openTransaction(c, 'from@example.test', ['ok@example.test']);
  t.equal(await c.send(body('d-rate')), '451 4.4.2 Timeout');
  await c.closed;
  t.pass('the server closed the connection');
  t.same(s.messages(), []);
});

t.test('lost response: the message is recorded at once, the 250 comes only after hold_ms', async (t) => {
  // 1 s: the record is seen within one 25 ms poll of waitFor, far inside the hold.
  const s = await sandbox(t, { faults: [{ channel: 'email', hold_ms: 1_000 }] });
  const c = await client(t, s);
  await openTransaction(c, 'from@example.test', ['fault-lost@example.test']);
  const started = performance.now();
  let answered = false;
  const reply = c.send(body('d-lost')).finally(() => (answered = true));
  await waitFor(() => s.messages({ delivery_id: 'd-lost' }).length === 1, { what: 'the message to be recorded' });
  t.notOk(answered, 'recorded, and not answered yet');
  const r = await reply;
  t.ok(performance.now() - started >= 990, 'answered after hold_ms');
  t.equal(r, `250 Ok ${s.messages()[0]!.id}`);
  t.equal(await c.send('NOOP'), '250 OK', 'the connection stays usable');
  t.equal(await requests(s.registry, 'lost'), 1);
});

t.test('refusals at RCPT TO: by address and by the profile list; 421 closes the connection; each counted', async (t) => {
  const s = await sandbox(t, { faults: [{ channel: 'email', invalid_recipients: ['gone@example.test'] }] });
  const c = await client(t, s);
  t.match(await c.send('EHLO client.test'), /^250[ -]/);
  t.match(await c.send('MAIL FROM:<from@example.test>'), /^250 /);
  t.equal(await c.send('RCPT TO:<gone@example.test>'), '550 5.1.1 Mailbox unavailable');
  t.equal(await c.send('RCPT TO:<fault-invalid_argument@example.test>'), '550 5.1.1 Mailbox unavailable');
  t.equal(await c.send('RCPT TO:<fault-unregistered@example.test>'), '550 5.1.1 Mailbox unavailable');
  t.equal(await c.send('RCPT TO:<fault-quota_exceeded@example.test>'), '452 4.5.3 Too many messages, slow down');
  t.equal(await c.send('RCPT TO:<fault-internal@example.test>'), '451 4.3.0 Local error in processing');
  t.equal(await c.send('RCPT TO:<fault-unauthenticated@example.test>'), '535 5.7.8 Authentication credentials invalid');
  t.match(await c.send('RCPT TO:<ok@example.test>'), /^250 /, 'the transaction goes on after a refused recipient');
  t.equal(await c.send('RCPT TO:<fault-unavailable@example.test>'), '421 4.3.2 Service not available, closing transmission channel');
  await c.closed;
  t.pass('the server closed the connection after 421');
  t.equal(await requests(s.registry, 'error'), 7);
  t.same(s.messages(), []);
});

t.test('errors after DATA, by profile: each in its SMTP form; only 421 closes the connection', async (t) => {
  const s = await sandbox(t);
  const cases: [string, string, boolean][] = [
    ['UNAVAILABLE', '421 4.3.2 Service not available, closing transmission channel', true],
    ['QUOTA_EXCEEDED', '452 4.5.3 Too many messages, slow down', false],
    ['INTERNAL', '451 4.3.0 Local error in processing', false],
    ['INVALID_ARGUMENT', '550 5.1.1 Mailbox unavailable', false],
    ['UNREGISTERED', '550 5.1.1 Mailbox unavailable', false],
    ['UNAUTHENTICATED', '535 5.7.8 Authentication credentials invalid', false],
  ];
  for (const [error, reply, closes] of cases) {
    s.setFaults({ channel: 'email', error_rate: 1, error });
    const c = await client(t, s);
    await openTransaction(c, 'from@example.test', ['ok@example.test']);
    t.equal(await c.send(body(`d-${error}`)), reply, error);
    if (closes) {
      await c.closed;
      t.pass(`${error}: connection closed`);
    } else t.equal(await c.send('NOOP'), '250 OK', `${error}: connection kept`);
    t.match(s.core.store.delivery(`d-${error}`), [{ requests: 1, accepted: 0 }], `${error}: the request was counted`);
  }
  t.same(s.messages(), []);
  t.equal(await requests(s.registry, 'error'), cases.length);
});

t.test('one message to several recipients: one record per recipient, ids <queue id>.<address>', async (t) => {
  const s = await sandbox(t);
  const c = await client(t, s);
  await openTransaction(c, '', ['a@example.test', 'b@example.test']);
  const queued = /^250 Ok (\S+)$/.exec(await c.send(body('d-multi')))?.[1];
  t.ok(queued);
  t.match(s.messages(), [
    { id: `${queued}.a@example.test`, to: 'a@example.test', from: '', delivery_id: 'd-multi', message_id: '<d-multi@example.test>' },
    { id: `${queued}.b@example.test`, to: 'b@example.test', from: '', delivery_id: 'd-multi', text: 'hello' },
  ]);
  t.match(s.core.store.delivery('d-multi'), [
    { to: 'a@example.test', requests: 1, accepted: 1 },
    { to: 'b@example.test', requests: 1, accepted: 1 },
  ]);
});

t.test('AUTH PLAIN and LOGIN take any credentials; a client that never authenticates is not cut off', async (t) => {
  const s = await sandbox(t);
  const plain = await client(t, s);
  t.match(await plain.send('EHLO client.test'), /250 AUTH PLAIN LOGIN$/);
  t.equal(await plain.send(`AUTH PLAIN ${Buffer.from('\0user\0whatever').toString('base64')}`), '235 Authentication successful');
  const login = await client(t, s);
  await login.send('EHLO client.test');
  t.equal(await login.send('AUTH LOGIN'), '334 VXNlcm5hbWU6');
  t.equal(await login.send(Buffer.from('user').toString('base64')), '334 UGFzc3dvcmQ6');
  t.equal(await login.send(Buffer.from('anything').toString('base64')), '235 Authentication successful');

  const anonymous = await client(t, s);
  await anonymous.send('EHLO client.test');
  for (let i = 0; i < 15; i++) t.equal(await anonymous.send('NOOP'), '250 OK');
  await openTransaction(anonymous, 'from@example.test', ['to@example.test']);
  t.match(await anonymous.send(body('d-anon')), /^250 /);

  const channel = createSmtpChannel(
    { url: `smtp://user:secret@127.0.0.1:${s.smtpPort}`, from: 'noreply@mail.example.test', poolSize: 1, timeoutMs: 2_000 },
    { clock: systemClock, breaker: { errorThreshold: 0.5, minVolume: 1000, windowMs: 10_000, coolDownMs: 5_000 } },
  );
  t.teardown(() => channel.close());
  const r = await channel.send(
    { to: 'ada@example.test', recipientId: 'u', notificationId: 'n', title: 'T', body: 'B' },
    { deliveryId: 'd-auth', idempotencyKey: 'd-auth', deadlineMs: 2_000 },
  );
  t.ok(r.ok, 'nodemailer authenticates and sends');
  t.equal(s.messages({ delivery_id: 'd-auth' }).length, 1);
});

t.test('closing the sandbox ends a held answer at once and closes the connection', async (t) => {
  const registry = createRegistry('test', { defaults: false });
  const s = await startSandbox({ registry });
  const c = await smtpConnect(s.smtpPort);
  t.teardown(() => c.end());
  await openTransaction(c, 'from@example.test', ['fault-timeout@example.test']);
  const held = c.send(body('d-held')).catch(() => 'closed');
  await waitFor(async () => (await requests(registry, 'timeout')) === 1, { what: 'the sandbox to hold the message' });
  // The hold is 30 s: close() returning at all within the test's time shows it did not wait for it.
  await s.close();
  await c.closed;
  t.pass('the sandbox closed and the connection is closed');
  t.ok(['closed', '451 4.4.2 Timeout'].includes(await held));
});
