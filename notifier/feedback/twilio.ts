/**
 * Twilio status callbacks: the `X-Twilio-Signature` check and the form they carry. Pure.
 *
 * Twilio POSTs `application/x-www-form-urlencoded` to the message's `StatusCallback` URL and signs
 * it: HMAC-SHA1, keyed with the account's auth token, over the full URL it called followed by
 * every POST parameter's name and value, the parameters sorted by name (and, for a repeated name,
 * by value); base64. The URL is the public one (NOTIFIER_PUBLIC_URL plus the path and query), not
 * the address the request reached us at behind the sidecar.
 *
 * Fields: `MessageSid`, `MessageStatus` (`queued`, `sending`, `sent`, `delivered`, `undelivered`,
 * `failed`, and others tolerated), `ErrorCode` (with `undelivered` and `failed`), plus `AccountSid`,
 * `From`, `To`, `SmsSid`, `SmsStatus`, `ApiVersion` and more, tolerated. A status we do not act on
 * (kind `other`) is recorded without a state change, logged and counted under
 * {@link unknownStatusLabel}.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { FeedbackEvent, FeedbackKind } from './events.js';

/** The signature of a callback to `url` with these form parameters. */
export function twilioSignature(authToken: string, url: string, params: readonly (readonly [string, string])[]): string {
  const sorted = [...params].sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  let data = url;
  for (const [k, v] of sorted) data += k + v;
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/** Constant-time comparison of the header with the expected signature. */
export function twilioSignatureValid(
  authToken: string,
  url: string,
  params: readonly (readonly [string, string])[],
  header: string,
): boolean {
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const got = Buffer.from(header);
  return got.length === expected.length && timingSafeEqual(got, expected);
}

/** The form's parameters in order (a repeated name kept each time); `+` is a space. */
export function formParams(body: Buffer): [string, string][] {
  return [...new URLSearchParams(body.toString('utf8'))];
}

const PROGRESS = new Set(['queued', 'accepted', 'scheduled', 'sending', 'sent']);

/** Every MessageStatus Twilio documents (Messaging API, "Message resource: status values"). */
const DOCUMENTED = new Set([
  ...PROGRESS,
  'delivered',
  'undelivered',
  'failed',
  'canceled',
  'receiving',
  'received',
  'read',
  'partially_delivered',
]);

/**
 * The `status` label of an unknown status's metric: Twilio's own word when it is one it documents
 * (and we do not act on), else `other`. The value is signed, but a status is free text to the
 * signer: the label's values stay a closed set whatever arrives (the log line has the value).
 */
export function unknownStatusLabel(status: string): string {
  return DOCUMENTED.has(status) ? status : 'other';
}

function kindOf(status: string): FeedbackKind {
  if (status === 'delivered' || status === 'undelivered' || status === 'failed') return status;
  return PROGRESS.has(status) ? 'progress' : 'other';
}

export type TwilioParse = { ok: true; event: FeedbackEvent } | { ok: false; field: string; detail: string };

/** The event a callback's parameters describe. */
export function parseTwilioCallback(params: readonly (readonly [string, string])[]): TwilioParse {
  const get = (k: string): string | undefined => params.find(([n]) => n === k)?.[1];
  const sid = get('MessageSid') ?? get('SmsSid');
  if (!sid || !/^[A-Za-z0-9]{2,64}$/.test(sid)) return { ok: false, field: 'MessageSid', detail: 'must be a message sid' };
  const status = get('MessageStatus') ?? get('SmsStatus');
  if (!status || !/^[a-z_-]{1,32}$/.test(status)) return { ok: false, field: 'MessageStatus', detail: 'must be a message status' };
  const code = get('ErrorCode');
  const errorCode = code !== undefined && code !== '' ? code.slice(0, 16) : undefined;
  const kind = kindOf(status);
  const event: FeedbackEvent = {
    provider: 'twilio',
    channel: 'sms',
    // Twilio gives a callback no id of its own: the (sid, status, code) triple is the event.
    eventKey: createHash('sha256')
      .update(`${sid}\0${status}\0${errorCode ?? ''}`)
      .digest('base64url'),
    providerMessageId: sid,
    kind,
    providerType: status,
    suppress: [],
  };
  if (errorCode !== undefined) {
    event.errorCode = errorCode;
    event.detail = `Twilio error ${errorCode}`;
  }
  return { ok: true, event };
}
