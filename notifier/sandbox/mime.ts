/**
 * Just enough MIME (RFC 5322/2045/2047) to show what an e-mail said: unfolded headers, encoded
 * words in the subject, and the text and HTML parts of a (possibly multipart) body, decoded from
 * quoted-printable or base64. Not a general parser: nested multiparts are walked, attachments are
 * ignored, and charsets other than UTF-8/ASCII/Latin-1 are read as UTF-8.
 */

export interface ParsedMail {
  /** Lower-cased header names; the first occurrence of each. */
  headers: Record<string, string>;
  subject?: string;
  text?: string;
  html?: string;
}

export function parseMail(raw: Buffer): ParsedMail {
  const { headers, body } = splitEntity(raw.toString('latin1'));
  const out: ParsedMail = { headers };
  if (headers.subject !== undefined) out.subject = decodeWords(headers.subject);
  walk(headers, body, out, 0);
  return out;
}

function splitEntity(s: string): { headers: Record<string, string>; body: string } {
  const end = s.search(/\r?\n\r?\n/);
  const head = end < 0 ? s : s.slice(0, end);
  const body = end < 0 ? '' : s.slice(end).replace(/^\r?\n\r?\n/, '');
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i <= 0) continue;
    const name = line.slice(0, i).trim().toLowerCase();
    if (!(name in headers)) headers[name] = line.slice(i + 1).trim();
  }
  return { headers, body };
}

function param(value: string, name: string): string | undefined {
  const m = new RegExp(`;\\s*${name}\\s*=\\s*(?:"([^"]*)"|([^;\\s]+))`, 'i').exec(value);
  return m ? (m[1] ?? m[2]) : undefined;
}

function walk(headers: Record<string, string>, body: string, out: ParsedMail, depth: number): void {
  const type = (headers['content-type'] ?? 'text/plain').toLowerCase();
  if (type.startsWith('multipart/') && depth < 5) {
    const boundary = param(headers['content-type'] ?? '', 'boundary');
    if (!boundary) return;
    const parts = body.split(new RegExp(`\\r?\\n?--${escapeRe(boundary)}(?:--)?[ \\t]*\\r?\\n?`));
    for (const part of parts) {
      if (part.trim() === '') continue;
      const e = splitEntity(part);
      walk(e.headers, e.body, out, depth + 1);
    }
    return;
  }
  if (/attachment/i.test(headers['content-disposition'] ?? '')) return;
  const decoded = decodeBody(body, headers['content-transfer-encoding'] ?? '7bit', param(headers['content-type'] ?? '', 'charset'));
  if (type.startsWith('text/html')) out.html ??= decoded;
  else if (type.startsWith('text/plain')) out.text ??= decoded;
}

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function bytesToText(bytes: Buffer, charset: string | undefined): string {
  const cs = (charset ?? 'utf-8').toLowerCase();
  return cs === 'iso-8859-1' || cs === 'latin1' ? bytes.toString('latin1') : bytes.toString('utf8');
}

function decodeBody(body: string, encoding: string, charset: string | undefined): string {
  const enc = encoding.toLowerCase();
  if (enc === 'base64') return bytesToText(Buffer.from(body.replace(/\s+/g, ''), 'base64'), charset);
  if (enc === 'quoted-printable') return bytesToText(qpBytes(body.replace(/=\r?\n/g, '')), charset);
  return bytesToText(Buffer.from(body, 'latin1'), charset).replace(/\r?\n$/, '');
}

function qpBytes(s: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '=' && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(s.charCodeAt(i) & 0xff);
  }
  return Buffer.from(bytes);
}

/** Decodes RFC 2047 encoded words (`=?UTF-8?B?…?=`, `=?UTF-8?Q?…?=`); other text is kept. */
export function decodeWords(value: string): string {
  return value
    .replace(/(=\?[^?]+\?[BbQq]\?[^?]*\?=)\s+(?==\?)/g, '$1')
    .replace(/=\?([^?]+)\?([BbQq])\?([^?]*)\?=/g, (_m, charset: string, enc: string, text: string) => {
      const bytes = enc.toUpperCase() === 'B' ? Buffer.from(text, 'base64') : qpBytes(text.replace(/_/g, ' '));
      return bytesToText(bytes, charset);
    });
}
