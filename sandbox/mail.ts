/**
 * What an e-mail said, read with mailparser: the delivery id, Message-ID, References, subject, and the text
 * and HTML bodies (decoded from any transfer encoding and charset, nested multiparts walked,
 * attachments left out).
 *
 * The bodies keep the form the sandbox has always recorded: CRLF line breaks, as SMTP carries them
 * (mailparser turns them into LF), and no line break at the end of a single-part 7bit/8bit body
 * (that one ends the DATA, not the text). An empty or missing part is an absent field: the text is
 * never derived from the HTML, nor the HTML from the text.
 */
import { simpleParser, type ParsedMail } from 'mailparser';

export interface MailContent {
  /** `X-Delivery-Id` (its first occurrence). */
  deliveryId?: string;
  /** `Message-ID`, angle brackets included. */
  messageId?: string;
  /** `References`: the message ids it names, angle brackets included, in order. */
  references?: string[];
  subject?: string;
  text?: string;
  html?: string;
}

const OPTIONS = { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true, checksumAlgo: false } as const;

export async function readMail(raw: Buffer): Promise<MailContent> {
  const mail = await simpleParser(raw, OPTIONS);
  const out: MailContent = {};
  const deliveryId = header(mail, 'x-delivery-id');
  if (deliveryId !== undefined) out.deliveryId = deliveryId;
  if (mail.messageId !== undefined) out.messageId = mail.messageId;
  if (mail.references !== undefined) out.references = typeof mail.references === 'string' ? [mail.references] : mail.references;
  if (mail.subject !== undefined) out.subject = mail.subject;
  const lineEncoded =
    !isMultipart(mail) && !['base64', 'quoted-printable'].includes(header(mail, 'content-transfer-encoding')?.toLowerCase() ?? '');
  const body = (s: string | false | undefined): string | undefined => {
    if (typeof s !== 'string') return undefined;
    const t = (lineEncoded ? s.replace(/\n$/, '') : s).replace(/\n/g, '\r\n');
    return t === '' ? undefined : t;
  };
  const text = body(mail.text);
  if (text !== undefined) out.text = text;
  const html = body(mail.html);
  if (html !== undefined) out.html = html;
  return out;
}

function header(mail: ParsedMail, name: string): string | undefined {
  const v = mail.headers.get(name);
  const first = Array.isArray(v) ? (v as unknown[])[0] : v;
  return typeof first === 'string' ? first : undefined;
}

function isMultipart(mail: ParsedMail): boolean {
  const ct = mail.headers.get('content-type');
  return typeof ct === 'object' && ct !== null && 'value' in ct && /^multipart\//i.test(String(ct.value));
}
