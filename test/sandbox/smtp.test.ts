// @tier: pure
/**
 * The SMTP listener on its own (sandbox/smtp.ts), with scripted hooks: what reaches the
 * hooks, the size limit, a failing hook, replies that close the connection, and shutdown.
 */
import t from 'tap';
import { waitFor } from '../harness/wait.js';
import { startSmtpServer, type SmtpHooks, type SmtpReply } from '../../sandbox/smtp.js';
import type { TestContext } from '../harness/db.js';
import { testLogger } from '../harness/log.js';
import { dataBody, openTransaction, smtpConnect } from './smtp-client.js';

interface Received {
  envelope: { from: string; to: string[] };
  data: Buffer;
}

async function server(
  t: TestContext,
  answer: (r: Received) => Promise<SmtpReply>,
  opts: { maxBytes?: number; refuse?: SmtpHooks['recipient'] } = {},
) {
  const received: Received[] = [];
  const smtp = await startSmtpServer({
    host: '127.0.0.1',
    port: 0,
    log: testLogger('smtp'),
    ...(opts.maxBytes !== undefined ? { maxBytes: opts.maxBytes } : {}),
    hooks: {
      recipient: opts.refuse ?? (() => undefined),
      message: (envelope, data) => {
        received.push({ envelope, data });
        return answer({ envelope, data });
      },
    },
  });
  t.teardown(() => smtp.close());
  return { smtp, received };
}

const ok = () => Promise.resolve({ code: 250, text: '2.0.0 Ok: queued as q1' });

t.test('greeting, EHLO, VRFY, QUIT; the hook gets the envelope and the dot-unstuffed data', async (t) => {
  const { smtp, received } = await server(t, ok);
  const c = await smtpConnect(smtp.port);
  t.equal(c.greeting, '220 sandbox ESMTP sandbox ready');
  const ehlo = await c.send('EHLO client.test');
  t.match(ehlo, /^250-sandbox /);
  t.notMatch(ehlo, /STARTTLS|SIZE|DSN|ENHANCEDSTATUSCODES/);
  t.match(await c.send('VRFY someone'), /^252 /);
  t.match(await c.send('MAIL FROM:<>'), /^250 /);
  t.match(await c.send('RCPT TO:<a@example.test>'), /^250 /);
  t.match(await c.send('RCPT TO:<b@example.test>'), /^250 /);
  t.match(await c.send('DATA'), /^354 /);
  t.equal(await c.send(dataBody(['Subject: x', '', '..dot', 'end'])), '250 2.0.0 Ok: queued as q1');
  t.same(received[0]!.envelope, { from: '', to: ['a@example.test', 'b@example.test'] });
  t.equal(received[0]!.data.toString(), 'Subject: x\r\n\r\n.dot\r\nend\r\n');
  t.match(await c.send('QUIT'), /^221 /);
  await c.closed;
});

t.test('a message over maxBytes is refused with 552 after DATA, and the hook is not called', async (t) => {
  const { smtp, received } = await server(t, ok, { maxBytes: 100 });
  const c = await smtpConnect(smtp.port);
  t.teardown(() => c.end());
  await openTransaction(c, 'from@example.test', ['to@example.test']);
  t.equal(await c.send(dataBody(['Subject: big', '', 'x'.repeat(200)])), '552 5.3.4 Message size exceeds fixed limit');
  t.equal(received.length, 0);
  await openTransaction(c, 'from@example.test', ['to@example.test']);
  t.equal(await c.send(dataBody(['Subject: small', '', 'x'])), '250 2.0.0 Ok: queued as q1', 'the connection is still usable');
});

t.test('a hook that fails is answered 451 and the connection closed', async (t) => {
  const { smtp } = await server(t, () => Promise.reject(new Error('boom')));
  const c = await smtpConnect(smtp.port);
  t.teardown(() => c.end());
  await openTransaction(c, 'from@example.test', ['to@example.test']);
  t.equal(await c.send(dataBody(['', 'x'])), '451 4.3.0 Local error in processing');
  await c.closed;
});

t.test('a reply marked close closes the connection after it is sent; others keep it', async (t) => {
  const replies: SmtpReply[] = [
    { code: 452, text: '4.5.3 later' },
    { code: 451, text: '4.4.2 Timeout', close: true },
  ];
  const { smtp } = await server(t, () => Promise.resolve(replies.shift()!));
  const c = await smtpConnect(smtp.port);
  t.teardown(() => c.end());
  await openTransaction(c, 'from@example.test', ['to@example.test']);
  t.equal(await c.send(dataBody(['', 'x'])), '452 4.5.3 later');
  t.notOk(c.isClosed());
  await openTransaction(c, 'from@example.test', ['to@example.test']);
  t.equal(await c.send(dataBody(['', 'x'])), '451 4.4.2 Timeout');
  await c.closed;
});

t.test('a refused recipient gets the hook’s reply; 421 closes the connection', async (t) => {
  const { smtp } = await server(t, ok, {
    refuse: (a) =>
      a.startsWith('bye') ? { code: 421, text: '4.3.2 closing' } : a.startsWith('no') ? { code: 550, text: '5.1.1 nope' } : undefined,
  });
  const c = await smtpConnect(smtp.port);
  t.teardown(() => c.end());
  await c.send('EHLO client.test');
  await c.send('MAIL FROM:<from@example.test>');
  t.equal(await c.send('RCPT TO:<no@example.test>'), '550 5.1.1 nope');
  t.equal(await c.send('RCPT TO:<bye@example.test>'), '421 4.3.2 closing');
  await c.closed;
});

t.test('close() destroys open connections at once, a held message included', async (t) => {
  let receiving = false;
  const { smtp } = await server(t, () => {
    receiving = true;
    return new Promise(() => {});
  });
  const idle = await smtpConnect(smtp.port);
  const busy = await smtpConnect(smtp.port);
  t.teardown(() => (idle.end(), busy.end()));
  await openTransaction(busy, 'from@example.test', ['to@example.test']);
  void busy.send(dataBody(['', 'x'])).catch(() => undefined);
  await waitFor(() => receiving, { what: 'the message handler to hold the DATA' });
  // The handler never finishes: close() can only return by destroying the connections.
  await smtp.close();
  await Promise.all([idle.closed, busy.closed]);
});
