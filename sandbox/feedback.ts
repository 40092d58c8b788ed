/**
 * What the sandbox providers report back after accepting a message, as the real ones do:
 *
 * - e-mail: Amazon SES event publishing through SNS: a signed SNS `Notification` whose `Message` is
 *   the SES event (`Delivery`, `Bounce` Permanent/Transient, `Complaint`), posted with
 *   `Content-Type: text/plain; charset=UTF-8` to the subscribed endpoint (SANDBOX_SNS_ENDPOINT, or
 *   `PUT /sandbox/callbacks`); retried on a 5xx or no answer (3 attempts), as SNS does;
 * - SMS: Twilio status callbacks to the message's `StatusCallback`: form-encoded `MessageSid`,
 *   `MessageStatus` (`sent`, then `delivered`, `undelivered` with `ErrorCode`, or `failed`),
 *   signed with `X-Twilio-Signature` under the account's auth token; never retried.
 *
 * The fault profile of the channel says what is reported (`outcome`) and how (`callback_delay_ms`
 * before each event, `callback_duplicate_rate` of events sent twice, `callback_reorder` sends a
 * message's events last first). `callbackOrigin` (tests) sends Twilio's callbacks to another
 * origin than the one the message named, while signing the named URL: what a proxy in between
 * does. Every callback sent is listed by `GET /sandbox/callbacks`.
 */
import { createHmac, randomUUID } from 'node:crypto';
import type { AcceptedMessages, SandboxCore } from './core.js';
import type { FeedbackOutcome, FaultProfile } from './faults.js';
import { decideOutcome } from './faults.js';
import type { SandboxSns } from './sns.js';
import type { SandboxMessage } from './store.js';

export interface CallbackTargets {
  /** Where SNS posts SES events; unset: none are sent. */
  snsEndpoint?: string | undefined;
  /** Replaces the origin of a message's StatusCallback when posting (the signature keeps the named URL). */
  callbackOrigin?: string | undefined;
}

/** One callback attempt, as GET /sandbox/callbacks lists it. */
export interface CallbackRecord {
  kind: 'sns' | 'twilio';
  /** SES `mail.messageId` or Twilio `MessageSid`. */
  message_id: string;
  /** SES eventType, Twilio MessageStatus, or SubscriptionConfirmation. */
  event: string;
  /** A repeat of the same event (SNS: the same MessageId). */
  duplicate: boolean;
  /** The endpoint's status, or 0 when it could not be reached. */
  status: number;
  /** Epoch seconds. */
  at: number;
}

const SNS_RETRY_DELAYS_MS = [100, 500];
const MAX_RECORDS = 100_000;

interface Outgoing {
  event: string;
  send: () => Promise<number>;
}

export class SandboxFeedback implements AcceptedMessages {
  readonly #core: SandboxCore;
  readonly sns: SandboxSns;
  targets: CallbackTargets;
  readonly #records: CallbackRecord[] = [];
  readonly #pending = new Set<Promise<void>>();
  /** Tokens of SubscriptionConfirmations sent, and whether the endpoint confirmed them. */
  readonly subscriptions = new Map<string, boolean>();
  #closed = false;

  constructor(core: SandboxCore, sns: SandboxSns, targets: CallbackTargets) {
    this.#core = core;
    this.sns = sns;
    this.targets = targets;
  }

  records(): CallbackRecord[] {
    return [...this.#records];
  }

  get pending(): number {
    return this.#pending.size;
  }

  clear(): void {
    this.#records.length = 0;
  }

  /** Waits until no callback is scheduled or in flight. */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  close(): void {
    this.#closed = true;
  }

  /** An e-mail was accepted under SES message id `m.id`: schedule its events. */
  emailAccepted(m: SandboxMessage): void {
    const endpoint = this.targets.snsEndpoint;
    if (!endpoint) return;
    const profile = this.#core.faults.get('email', m.provider);
    const outcome = decideOutcome(profile, 'email', m.to);
    const events = sesEvents(outcome, m, profile, this.#core.nowSeconds()).map((ev): Outgoing => ({
      event: ev.eventType as string,
      send: (() => {
        // One SNS MessageId per event: a duplicate is the same notification again.
        const messageId = randomUUID();
        return () => this.#postSns(endpoint, this.sns.envelope({ Type: 'Notification', Message: JSON.stringify(ev) }, messageId));
      })(),
    }));
    this.#schedule('sns', m.id, events, profile);
  }

  /** An SMS was accepted: schedule its status callbacks to `statusCallback`, signed with `authToken`. */
  smsAccepted(m: SandboxMessage, accountSid: string, statusCallback: string | undefined, authToken: string): void {
    if (!statusCallback) return;
    const profile = this.#core.faults.get('sms', m.provider);
    const outcome = decideOutcome(profile, 'sms', m.to);
    const statuses: { status: string; code?: string }[] =
      outcome === 'failed'
        ? [{ status: 'failed', code: profile?.outcomeErrorCode ?? '30008' }]
        : outcome === 'undelivered'
          ? [{ status: 'sent' }, { status: 'undelivered', code: profile?.outcomeErrorCode ?? '30003' }]
          : [{ status: 'sent' }, { status: 'delivered' }];
    const events = statuses.map((s): Outgoing => ({
      event: s.status,
      send: () => {
        const params: [string, string][] = [
          ['ApiVersion', '2010-04-01'],
          ['AccountSid', accountSid],
          ['MessageSid', m.id],
          ['SmsSid', m.id],
          ['MessageStatus', s.status],
          ['SmsStatus', s.status],
          ['To', m.to],
          ['From', m.from ?? ''],
        ];
        if (s.code !== undefined) params.push(['ErrorCode', s.code]);
        return this.#postTwilio(statusCallback, params, authToken);
      },
    }));
    this.#schedule('twilio', m.id, events, profile);
  }

  /** Sends a SubscriptionConfirmation to the SNS endpoint; resolves with the endpoint's status. */
  async subscribe(): Promise<number> {
    const endpoint = this.targets.snsEndpoint;
    if (!endpoint) throw new Error('no SNS endpoint is set');
    const token = randomUUID().replace(/-/g, '');
    this.subscriptions.set(token, false);
    const origin = this.sns.baseUrl;
    const env = this.sns.envelope({
      Type: 'SubscriptionConfirmation',
      Message: `You have chosen to subscribe to the topic ${this.sns.topicArn}.\nTo confirm the subscription, visit the SubscribeURL included in this message.`,
      SubscribeURL: `${origin}/sns/confirm?Action=ConfirmSubscription&TopicArn=${encodeURIComponent(this.sns.topicArn)}&Token=${token}`,
      Token: token,
    });
    const status = await this.#postSns(endpoint, env);
    this.#record('sns', '', 'SubscriptionConfirmation', false, status);
    return status;
  }

  #schedule(kind: 'sns' | 'twilio', id: string, events: Outgoing[], profile: FaultProfile | undefined): void {
    if (this.#closed) return;
    const ordered = profile?.callbackReorder ? [...events].reverse() : events;
    const delayMs = profile?.callbackDelayMs ?? 0;
    const dupRate = profile?.callbackDuplicateRate ?? 0;
    const run = (async () => {
      for (const ev of ordered) {
        await this.#core.wait(delayMs);
        if (this.#closed) return;
        const copies = dupRate > 0 && this.#core.random() < dupRate ? 2 : 1;
        for (let c = 0; c < copies; c++) {
          const status = await ev.send().catch(() => 0);
          this.#record(kind, id, ev.event, c > 0, status);
        }
      }
    })();
    this.#pending.add(run);
    void run.finally(() => this.#pending.delete(run));
  }

  #record(kind: 'sns' | 'twilio', id: string, event: string, duplicate: boolean, status: number): void {
    this.#records.push({ kind, message_id: id, event, duplicate, status, at: this.#core.nowSeconds() });
    if (this.#records.length > MAX_RECORDS) this.#records.splice(0, this.#records.length - MAX_RECORDS);
    this.#core.log.debug({ kind, event, status }, 'sandbox callback sent');
  }

  async #postSns(endpoint: string, env: Record<string, string>): Promise<number> {
    let status = 0;
    for (let attempt = 0; attempt <= SNS_RETRY_DELAYS_MS.length; attempt++) {
      if (attempt > 0) await this.#core.wait(SNS_RETRY_DELAYS_MS[attempt - 1]!);
      if (this.#closed) return status;
      try {
        const r = await fetch(endpoint, {
          method: 'POST',
          headers: {
            'content-type': 'text/plain; charset=UTF-8',
            'x-amz-sns-message-type': env.Type!,
            'x-amz-sns-message-id': env.MessageId!,
            'x-amz-sns-topic-arn': env.TopicArn!,
            'user-agent': 'Amazon Simple Notification Service Agent',
          },
          body: JSON.stringify(env),
          signal: AbortSignal.timeout(15_000),
        });
        await r.arrayBuffer().catch(() => undefined);
        status = r.status;
        if (status < 500) return status;
      } catch {
        status = 0;
      }
    }
    return status;
  }

  async #postTwilio(statusCallback: string, params: [string, string][], authToken: string): Promise<number> {
    const sorted = [...params].sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
    const signature = createHmac('sha1', authToken)
      .update(statusCallback + sorted.map(([k, v]) => k + v).join(''), 'utf8')
      .digest('base64');
    const named = new URL(statusCallback);
    const target = this.targets.callbackOrigin
      ? `${this.targets.callbackOrigin.replace(/\/+$/, '')}${named.pathname}${named.search}`
      : statusCallback;
    const r = await fetch(target, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-twilio-signature': signature,
        'i-twilio-idempotency-token': randomUUID(),
        'user-agent': 'TwilioProxy/1.1',
      },
      body: new URLSearchParams(params).toString(),
      signal: AbortSignal.timeout(15_000),
    });
    await r.arrayBuffer().catch(() => undefined);
    return r.status;
  }
}

/** The SES events (event publishing shape) an outcome produces, in the order SES sends them. */
export function sesEvents(
  outcome: FeedbackOutcome,
  m: SandboxMessage,
  profile: FaultProfile | undefined,
  nowS: number,
): Record<string, unknown>[] {
  const ts = new Date(nowS * 1000).toISOString();
  const mail = {
    timestamp: new Date(m.received_at * 1000).toISOString(),
    source: m.from ?? '',
    sourceArn: 'arn:aws:ses:us-east-1:000000000000:identity/sandbox.invalid',
    sendingAccountId: '000000000000',
    messageId: m.id,
    destination: [m.to],
    headersTruncated: false,
    headers: [
      ...(m.message_id !== undefined ? [{ name: 'Message-ID', value: m.message_id }] : []),
      ...(m.delivery_id !== undefined ? [{ name: 'X-Delivery-Id', value: m.delivery_id }] : []),
    ],
    commonHeaders: {
      from: [m.from ?? ''],
      to: [m.to],
      ...(m.message_id !== undefined && { messageId: m.message_id }),
      subject: m.subject ?? '',
    },
    tags: { 'ses:configuration-set': ['sandbox'] },
  };
  const delivery = {
    eventType: 'Delivery',
    mail,
    delivery: {
      timestamp: ts,
      processingTimeMillis: 120,
      recipients: [m.to],
      smtpResponse: '250 2.6.0 Message received',
      reportingMTA: 'a8-70.smtp-out.sandbox.invalid',
    },
  };
  const bounce = (type: 'Permanent' | 'Transient') => ({
    eventType: 'Bounce',
    bounce: {
      bounceType: type,
      bounceSubType: type === 'Permanent' ? 'General' : 'MailboxFull',
      bouncedRecipients: [
        {
          emailAddress: m.to,
          action: 'failed',
          status: profile?.outcomeErrorCode ?? (type === 'Permanent' ? '5.1.1' : '4.2.2'),
          diagnosticCode: type === 'Permanent' ? 'smtp; 550 5.1.1 user unknown' : 'smtp; 452 4.2.2 mailbox full',
        },
      ],
      timestamp: ts,
      feedbackId: `${m.id}-bounce`,
      reportingMTA: 'dsn; a8-70.smtp-out.sandbox.invalid',
    },
    mail,
  });
  switch (outcome) {
    case 'bounce_permanent':
      return [bounce('Permanent')];
    case 'bounce_transient':
      return [bounce('Transient')];
    case 'complaint':
      return [
        delivery,
        {
          eventType: 'Complaint',
          complaint: {
            complainedRecipients: [{ emailAddress: m.to }],
            timestamp: ts,
            feedbackId: `${m.id}-complaint`,
            userAgent: 'Sandbox Feedback Loop',
            complaintFeedbackType: 'abuse',
            arrivalDate: ts,
          },
          mail,
        },
      ];
    default:
      return [delivery];
  }
}
