/**
 * A self-signed X.509 v3 certificate for an RSA key, built by hand in DER (Node can parse
 * certificates but not make them): what the sandbox's SNS serves at its SigningCertURL. Only the
 * fields a verifier reads: serial, issuer and subject (one CN), validity, the public key; signed
 * with sha256WithRSAEncryption.
 */
import { sign, type KeyObject } from 'node:crypto';

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

const tlv = (tag: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([tag]), len(body.length), body]);
const seq = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [40 * a! + b!];
  for (const n of rest) {
    const groups: number[] = [];
    let v = n;
    do {
      groups.unshift(v & 0x7f);
      v = Math.floor(v / 128);
    } while (v > 0);
    groups.forEach((g, i) => out.push(i < groups.length - 1 ? g | 0x80 : g));
  }
  return tlv(0x06, Buffer.from(out));
}

/**
 * A non-negative DER INTEGER from big-endian bytes, in its one valid (minimal) form: leading zero
 * bytes dropped (OpenSSL refuses a certificate whose serial keeps them: a random 8-byte serial
 * starting 0x00 made one SNS certificate in ~500 unparseable), then a zero byte put back when the
 * first bit is 1, which would read as negative.
 */
function integer(bytes: Buffer): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start += 1;
  const minimal = bytes.subarray(start);
  return tlv(0x02, minimal[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), minimal]) : minimal);
}

function utcTime(ms: number): Buffer {
  const d = new Date(ms);
  const p = (n: number): string => String(n).padStart(2, '0');
  const s = `${p(d.getUTCFullYear() % 100)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`;
  return tlv(0x17, Buffer.from(s, 'ascii'));
}

const name = (cn: string): Buffer => seq(tlv(0x31, seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(cn, 'utf8')))));

/** PEM of a self-signed certificate for `publicKey`, signed by `privateKey`. */
export function selfSignedCertificate(o: {
  privateKey: KeyObject;
  publicKey: KeyObject;
  commonName: string;
  serial: Buffer;
  notBeforeMs: number;
  notAfterMs: number;
}): string {
  const algorithm = seq(oid('1.2.840.113549.1.1.11'), Buffer.from([0x05, 0x00]));
  const spki = o.publicKey.export({ type: 'spki', format: 'der' });
  const tbs = seq(
    tlv(0xa0, integer(Buffer.from([2]))),
    integer(o.serial),
    algorithm,
    name(o.commonName),
    seq(utcTime(o.notBeforeMs), utcTime(o.notAfterMs)),
    name(o.commonName),
    spki,
  );
  const signature = sign('sha256', tbs, o.privateKey);
  const der = seq(tbs, algorithm, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const b64 = der.toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END CERTIFICATE-----\n`;
}
