// @tier: pure
/** The sandbox's hand-built certificate parses with Node's X509Certificate and verifies with its key. */
import t from 'tap';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { selfSignedCertificate } from '../../sandbox/x509.js';

t.test('a self-signed certificate parses, carries the key and its dates, and verifies', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const now = Date.UTC(2026, 10, 24, 4, 0, 0);
  const pem = selfSignedCertificate({
    privateKey,
    publicKey,
    commonName: 'sns.sandbox.test',
    serial: Buffer.from([0x80, 1, 2, 3]),
    notBeforeMs: now - 60_000,
    notAfterMs: now + 86_400_000,
  });
  const c = new X509Certificate(pem);
  t.equal(c.subject, 'CN=sns.sandbox.test');
  t.equal(c.issuer, 'CN=sns.sandbox.test');
  t.equal(Date.parse(c.validFrom), now - 60_000);
  t.equal(Date.parse(c.validTo), now + 86_400_000);
  t.ok(c.verify(publicKey), 'self-signed: verifies with its own key');
  t.ok(c.publicKey.export({ type: 'spki', format: 'der' }).equals(publicKey.export({ type: 'spki', format: 'der' })));
  const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
  t.notOk(c.verify(other), 'not with another key');
  t.match(c.serialNumber, /^(00)?80010203$/i, 'the serial, as a positive integer');
});

t.test('a serial with leading zero bytes is written in its minimal form, which OpenSSL accepts', async (t) => {
  // sandbox/sns.ts draws 8 random bytes: 1 in 512 start with a zero byte the INTEGER does not
  // need, which OpenSSL refuses (the notifier then logged "the certificate does not parse").
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const now = Date.UTC(2026, 10, 28, 12, 0, 0);
  for (const [serial, hex] of [
    [[0x00, 0x12, 0x34], /^1234$/i],
    [[0x00, 0x00, 0x00, 0x07], /^07$/i],
    [[0x00, 0x9a, 0xbc], /^(00)?9ABC$/i],
    [[0x00, 0x00], /^0+$/],
  ] as const) {
    const pem = selfSignedCertificate({
      privateKey,
      publicKey,
      commonName: 'sns.sandbox.test',
      serial: Buffer.from(serial),
      notBeforeMs: now - 60_000,
      notAfterMs: now + 86_400_000,
    });
    const c = new X509Certificate(pem);
    t.match(c.serialNumber, hex, `serial ${Buffer.from(serial).toString('hex')} parses as ${c.serialNumber}`);
    t.ok(c.verify(publicKey));
  }
});
