/**
 * The sandbox's Amazon SNS: a topic that signs what it posts with its own RSA key, whose
 * certificate it serves at the envelope's `SigningCertURL` (`GET /sns/certs/{name}.pem`; the
 * notifier fetches it there when its allowlist names the sandbox). `rotate()` makes a new key and
 * certificate under a new URL, as AWS rotates its signing certificates; the old ones stay served.
 *
 * The string to sign is written here independently of the notifier's verifier (so a mistake is
 * not shared by both ends): for a Notification, `Message`, `MessageId`, `Subject` (when present),
 * `Timestamp`, `TopicArn`, `Type`; for the confirmations, `Message`, `MessageId`, `SubscribeURL`,
 * `Timestamp`, `Token`, `TopicArn`, `Type`; each name and value followed by a newline.
 * SignatureVersion 1 is RSA-SHA1, 2 RSA-SHA256.
 */
import { generateKeyPairSync, randomBytes, randomUUID, sign, type KeyObject } from 'node:crypto';
import type { Clock } from '../shared/clock.js';
import { selfSignedCertificate } from './x509.js';

/**
 * The sandbox SNS topic's ARN: what `npm start` sets NOTIFIER_SES_TOPIC_ARNS to (bin/start.ts), so
 * the notifier accepts the sandbox's SES events and nothing else.
 */
export const SANDBOX_TOPIC_ARN = 'arn:aws:sns:us-east-1:000000000000:sandbox-ses-events';

interface SigningKey {
  privateKey: KeyObject;
  certUrl: string;
}

export interface SnsEnvelopeFields {
  Type: 'Notification' | 'SubscriptionConfirmation' | 'UnsubscribeConfirmation';
  Message: string;
  Subject?: string;
  SubscribeURL?: string;
  Token?: string;
}

const CERT_VALIDITY_MS = 365 * 86_400_000;

export class SandboxSns {
  readonly topicArn: string;
  signatureVersion: '1' | '2';
  readonly #certs = new Map<string, string>();
  readonly #baseUrl: () => string;
  readonly #clock: Clock;
  #key: SigningKey | undefined;

  /** @param baseUrl the sandbox's own URL (known once it listens), where the certificates are served. */
  constructor(o: { topicArn: string; signatureVersion: '1' | '2'; baseUrl: () => string; clock: Clock }) {
    this.topicArn = o.topicArn;
    this.signatureVersion = o.signatureVersion;
    this.#baseUrl = o.baseUrl;
    this.#clock = o.clock;
  }

  /** The sandbox's URL, where the certificates and the SubscribeURL are served. */
  get baseUrl(): string {
    return this.#baseUrl();
  }

  /** The PEM served under `name` (`SimpleNotificationService-<serial>.pem`), if any. */
  certificate(name: string): string | undefined {
    return this.#certs.get(name);
  }

  /** A new signing key and certificate at a new URL; returns that URL. */
  rotate(): string {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const serial = randomBytes(8);
    const now = this.#clock.now();
    const pem = selfSignedCertificate({
      privateKey,
      publicKey,
      commonName: 'sns.sandbox.invalid',
      serial,
      notBeforeMs: now - 3_600_000,
      notAfterMs: now + CERT_VALIDITY_MS,
    });
    const name = `SimpleNotificationService-${serial.toString('hex')}.pem`;
    this.#certs.set(name, pem);
    this.#key = { privateKey, certUrl: `${this.#baseUrl()}/sns/certs/${name}` };
    return this.#key.certUrl;
  }

  /** A signed envelope, as SNS posts it. */
  envelope(fields: SnsEnvelopeFields, messageId: string = randomUUID()): Record<string, string> {
    const key = this.#key ?? (this.rotate(), this.#key!);
    const timestamp = new Date(this.#clock.now()).toISOString();
    const e: Record<string, string> = {
      Type: fields.Type,
      MessageId: messageId,
      TopicArn: this.topicArn,
      Message: fields.Message,
      Timestamp: timestamp,
    };
    if (fields.Subject !== undefined) e.Subject = fields.Subject;
    if (fields.SubscribeURL !== undefined) e.SubscribeURL = fields.SubscribeURL;
    if (fields.Token !== undefined) e.Token = fields.Token;
    const names =
      fields.Type === 'Notification'
        ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
        : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
    const toSign = names
      .filter((n) => e[n] !== undefined)
      .map((n) => `${n}\n${e[n]}\n`)
      .join('');
    const digest = this.signatureVersion === '1' ? 'sha1' : 'sha256';
    return {
      ...e,
      SignatureVersion: this.signatureVersion,
      Signature: sign(digest, Buffer.from(toSign, 'utf8'), key.privateKey).toString('base64'),
      SigningCertURL: key.certUrl,
      ...(fields.Type === 'Notification'
        ? { UnsubscribeURL: `${this.#baseUrl()}/sns/unsubscribe?SubscriptionArn=${encodeURIComponent(`${this.topicArn}:sandbox`)}` }
        : {}),
    };
  }
}
