/**
 * Amazon SNS HTTP(S) deliveries: the envelope, its string to sign, and the signature check
 * (AWS, "Verifying the signatures of Amazon SNS messages"). Pure: the certificate is handed in
 * (certs.ts fetches and caches it).
 *
 * SNS posts a JSON document with `Content-Type: text/plain; charset=UTF-8`. Its `Type` is
 * `Notification`, `SubscriptionConfirmation` or `UnsubscribeConfirmation`. The string to sign is
 * made of name/value pairs, each name and each value followed by a newline, in byte order of the
 * names:
 * - Notification: `Message`, `MessageId`, `Subject` (only when present), `Timestamp`, `TopicArn`,
 *   `Type`;
 * - the two confirmations: `Message`, `MessageId`, `SubscribeURL`, `Timestamp`, `Token`,
 *   `TopicArn`, `Type`.
 * `SignatureVersion` 1 signs it with RSA over SHA1, 2 with RSA over SHA256; `Signature` is base64.
 * Fields SNS may add later are tolerated and never signed. The signed `Timestamp` also bounds how
 * late a message may arrive ({@link timestampProblem}).
 */
import { verify, type KeyObject } from 'node:crypto';

export type SnsType = 'Notification' | 'SubscriptionConfirmation' | 'UnsubscribeConfirmation';

export interface SnsEnvelope {
  Type: SnsType;
  MessageId: string;
  TopicArn: string;
  Message: string;
  Timestamp: string;
  SignatureVersion: '1' | '2';
  Signature: string;
  SigningCertURL: string;
  Subject?: string;
  /** The two confirmations only. */
  SubscribeURL?: string;
  Token?: string;
}

/** Why an envelope was refused before any signature check. */
export type EnvelopeProblem =
  { problem: 'not_json' } | { problem: 'unsigned'; detail: string } | { problem: 'invalid'; field: string; detail: string };

const TYPES: readonly SnsType[] = ['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation'];

/**
 * Reads an SNS envelope from the raw body. `unsigned` when it carries no `Signature`,
 * `SigningCertURL` or `SignatureVersion` (nothing to verify: refused as unsigned).
 */
export function parseSnsEnvelope(body: Buffer): SnsEnvelope | EnvelopeProblem {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    return { problem: 'not_json' };
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    return { problem: 'invalid', field: 'body', detail: 'must be a JSON object' };
  const d = doc as Record<string, unknown>;
  for (const k of ['Signature', 'SigningCertURL', 'SignatureVersion']) {
    if (typeof d[k] !== 'string' || d[k] === '') return { problem: 'unsigned', detail: `no ${k}` };
  }
  if (d.SignatureVersion !== '1' && d.SignatureVersion !== '2') {
    return { problem: 'invalid', field: 'SignatureVersion', detail: 'must be "1" or "2"' };
  }
  if (typeof d.Type !== 'string' || !(TYPES as readonly string[]).includes(d.Type)) {
    return { problem: 'invalid', field: 'Type', detail: `must be one of ${TYPES.join(', ')}` };
  }
  const required = ['MessageId', 'TopicArn', 'Message', 'Timestamp'];
  if (d.Type !== 'Notification') required.push('SubscribeURL', 'Token');
  for (const k of required) if (typeof d[k] !== 'string') return { problem: 'invalid', field: k, detail: 'must be a string' };
  if (Number.isNaN(timestampMs(d.Timestamp as string))) {
    return { problem: 'invalid', field: 'Timestamp', detail: 'must be an ISO 8601 UTC time such as 2026-01-01T00:00:00.000Z' };
  }
  if (d.Subject !== undefined && d.Subject !== null && typeof d.Subject !== 'string') {
    return { problem: 'invalid', field: 'Subject', detail: 'must be a string' };
  }
  const env: SnsEnvelope = {
    Type: d.Type as SnsType,
    MessageId: d.MessageId as string,
    TopicArn: d.TopicArn as string,
    Message: d.Message as string,
    Timestamp: d.Timestamp as string,
    SignatureVersion: d.SignatureVersion,
    Signature: d.Signature as string,
    SigningCertURL: d.SigningCertURL as string,
  };
  if (typeof d.Subject === 'string') env.Subject = d.Subject;
  if (typeof d.SubscribeURL === 'string') env.SubscribeURL = d.SubscribeURL;
  if (typeof d.Token === 'string') env.Token = d.Token;
  return env;
}

export function isEnvelope(x: SnsEnvelope | EnvelopeProblem): x is SnsEnvelope {
  return !('problem' in x);
}

/** SNS writes `2012-04-25T21:49:25.719Z`; NaN for anything else (no local times, no offsets to guess). */
export function timestampMs(ts: string): number {
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/.test(ts) ? Date.parse(ts) : NaN;
}

/** How far ahead of our clock a `Timestamp` may be: the clocks' skew, nothing more. */
export const SNS_FUTURE_SKEW_MS = 5 * 60_000;

/**
 * Whether a message signed at `timestamp` may still be taken at `nowMs`: SNS stops retrying an
 * HTTP/S delivery within an hour, so a genuine message is never much older than that; an older
 * one is a recording played back (its MessageId may have left `provider_events` with retention).
 * Undefined when it is inside the window.
 */
export function timestampProblem(
  timestamp: string,
  nowMs: number,
  maxAgeMs: number,
): { why: 'stale' | 'future'; detail: string } | undefined {
  const at = timestampMs(timestamp);
  const minutes = (ms: number): string => `${Math.round(ms / 60_000)} minutes`;
  if (Number.isNaN(at) || nowMs - at > maxAgeMs) {
    return { why: 'stale', detail: `the message was signed ${minutes(nowMs - at)} ago; older than ${minutes(maxAgeMs)} is refused` };
  }
  if (at - nowMs > SNS_FUTURE_SKEW_MS) {
    return {
      why: 'future',
      detail: `the message is dated ${minutes(at - nowMs)} ahead of our clock; more than ${minutes(SNS_FUTURE_SKEW_MS)} is refused`,
    };
  }
  return undefined;
}

/** The string SNS signs for this envelope (see the module comment). */
export function stringToSign(e: Omit<SnsEnvelope, 'Signature' | 'SigningCertURL' | 'SignatureVersion'>): string {
  const pairs: [string, string | undefined][] =
    e.Type === 'Notification'
      ? [
          ['Message', e.Message],
          ['MessageId', e.MessageId],
          ['Subject', e.Subject],
          ['Timestamp', e.Timestamp],
          ['TopicArn', e.TopicArn],
          ['Type', e.Type],
        ]
      : [
          ['Message', e.Message],
          ['MessageId', e.MessageId],
          ['SubscribeURL', e.SubscribeURL],
          ['Timestamp', e.Timestamp],
          ['Token', e.Token],
          ['TopicArn', e.TopicArn],
          ['Type', e.Type],
        ];
  let out = '';
  for (const [k, v] of pairs) if (v !== undefined) out += `${k}\n${v}\n`;
  return out;
}

/** The digest of a signature version. */
export function snsDigest(version: '1' | '2'): 'sha1' | 'sha256' {
  return version === '1' ? 'sha1' : 'sha256';
}

/** True when the envelope's signature verifies with `publicKey` (the signing certificate's). */
export function verifySnsSignature(e: SnsEnvelope, publicKey: KeyObject): boolean {
  const sig = Buffer.from(e.Signature, 'base64');
  if (sig.length === 0) return false;
  try {
    return verify(snsDigest(e.SignatureVersion), Buffer.from(stringToSign(e), 'utf8'), publicKey, sig);
  } catch {
    return false;
  }
}
