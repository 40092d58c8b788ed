// @tier: pure
/**
 * What the sandbox records of an e-mail (sandbox/mail.ts, mailparser underneath): messages
 * built by nodemailer, as the notifier sends them, and hand-written ones. Pure: no server.
 */
import t from 'tap';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { readMail } from '../../sandbox/mail.js';

/** The bytes an SMTP server receives for a nodemailer message: CRLF lines, ending in CRLF. */
async function composed(opts: Mail.Options): Promise<Buffer> {
  const raw = await new MailComposer({ from: 'a@example.test', to: 'b@example.test', messageId: '<m@example.test>', ...opts })
    .compile()
    .build();
  const crlf = raw.toString('utf8').replace(/\r?\n/g, '\r\n');
  return Buffer.from(crlf.endsWith('\r\n') ? crlf : crlf + '\r\n');
}

const raw = (lines: string[]) => Buffer.from(lines.join('\r\n') + '\r\n', 'latin1');

t.test('text and HTML alternatives, encoded subject, delivery id and Message-ID', async (t) => {
  const mail = await readMail(
    await composed({
      subject: 'Your order shipped ✓',
      text: 'Order 42\nis on its way.',
      html: '<p>Order <b>42</b> is on its way.</p>',
      messageId: '<d-1@mail.example.test>',
      headers: { 'X-Delivery-Id': 'd-1' },
    }),
  );
  t.same(mail, {
    deliveryId: 'd-1',
    messageId: '<d-1@mail.example.test>',
    subject: 'Your order shipped ✓',
    text: 'Order 42\r\nis on its way.',
    html: '<p>Order <b>42</b> is on its way.</p>',
  });
});

t.test('a single-part 7bit body: CRLF line breaks, without the one that ends the DATA', async (t) => {
  t.same(await readMail(raw(['Subject: x', '', 'line 1', 'line 2'])), { subject: 'x', text: 'line 1\r\nline 2' });
  t.same(await readMail(await composed({ text: 'Your code is 123456' })), { messageId: '<m@example.test>', text: 'Your code is 123456' });
});

t.test('quoted-printable and base64 bodies are decoded, in UTF-8 and Latin-1', async (t) => {
  t.equal((await readMail(await composed({ text: 'é'.repeat(300) }))).text, 'é'.repeat(300), 'base64');
  t.equal(
    (await readMail(await composed({ text: 'héllo wörld\nsecond' }))).text,
    'héllo wörld\r\nsecond\r\n',
    'quoted-printable keeps its last line break',
  );
  const latin1 = raw(['Content-Type: text/plain; charset=iso-8859-1', 'Content-Transfer-Encoding: quoted-printable', '', 'caf=E9']);
  t.equal((await readMail(latin1)).text, 'café\r\n');
});

t.test('HTML only: no text is made up; attachments are left out', async (t) => {
  t.same(await readMail(await composed({ html: '<p>hi</p>' })), { messageId: '<m@example.test>', html: '<p>hi</p>' });
  const withFile = await readMail(
    await composed({ text: 'body', html: '<b>b</b>', attachments: [{ filename: 'a.txt', content: 'attached' }] }),
  );
  t.same(withFile, { messageId: '<m@example.test>', text: 'body', html: '<b>b</b>' });
});

t.test('headers: the first X-Delivery-Id counts; absent headers are absent fields', async (t) => {
  t.same(await readMail(raw(['X-Delivery-Id: first', 'X-Delivery-Id: second', '', 'x'])), { deliveryId: 'first', text: 'x' });
  t.same(await readMail(raw(['', ''])), {});
});
