/**
 * The provider webhooks, reached through the sidecar on `/api/v1/webhooks` (auth optional: a
 * provider proves itself by its signature, not by our credentials):
 *
 * - `POST /api/v1/webhooks/ses`: Amazon SNS deliveries of SES events (`Content-Type: text/plain`,
 *   as SNS sends them, or JSON). Its `TopicArn` must be one of NOTIFIER_SES_TOPIC_ARNS, checked
 *   first (any AWS account can sign a message from a topic of its own, so a valid signature alone
 *   proves nothing); with none configured every message is refused. Then the envelope is verified
 *   against the certificate at its `SigningCertURL` (certs.ts: allowlisted hosts only, cached by
 *   URL), and its signed `Timestamp` must be within NOTIFIER_SNS_MAX_AGE (sns.ts,
 *   `timestampProblem`). A `SubscriptionConfirmation` is confirmed by fetching its `SubscribeURL`
 *   when that URL passes the same host rules as a certificate URL; otherwise (or if the fetch
 *   fails) it is logged for an operator to confirm by hand. A `Notification` carries one SES event
 *   (ses-events.ts).
 * - `POST /api/v1/webhooks/twilio`: Twilio status callbacks, `X-Twilio-Signature` checked over
 *   NOTIFIER_PUBLIC_URL plus the path (twilio.ts) with SMS_AUTH_TOKEN. A status we do not act on
 *   is recorded, logged (at most once a second) and counted (`webhook_unknown_statuses_total`).
 *
 * Answers: 200 `{result}` for a verified event (`moved`, `recorded`, `duplicate`, `unknown`, or
 * `ignored` for a signed message that is not an SES event); 401 `webhook_signature_missing`
 * (unsigned); 403 `webhook_signature_invalid`, `webhook_cert_untrusted` (the certificate URL is
 * outside the allowlist, never fetched, or the certificate is unusable), `webhook_topic_not_allowed`,
 * `webhook_message_stale` (SNS does not retry a 4xx);
 * 503 `webhook_cert_unavailable` (the certificate could not be fetched: SNS retries) or
 * `unavailable` (too many events waiting); 400 for a body that is not an envelope or a form; 415
 * for another content type. Nothing is written before the signature is verified.
 */
import type { Clock } from '../../shared/clock.js';
import { PlatformError, invalidField } from '../../shared/errors.js';
import { LimitedLog } from '../../shared/log-limit.js';
import { route, type EdgeOptions, type RequestContext } from '../../shared/http.js';
import type { Logger } from '../../shared/log.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { providerUrlProblem, type CertCache, type CertPolicy } from './certs.js';
import { parseSesEvent } from './ses-events.js';
import { isEnvelope, parseSnsEnvelope, timestampProblem, verifySnsSignature, type SnsEnvelope } from './sns.js';
import { formParams, parseTwilioCallback, twilioSignatureValid, unknownStatusLabel } from './twilio.js';
import type { FeedbackMetrics, FeedbackWriter } from './writer.js';

export const SES_WEBHOOK_PATH = '/api/v1/webhooks/ses';
export const TWILIO_WEBHOOK_PATH = '/api/v1/webhooks/twilio';

export interface WebhookRoutesOptions {
  writer: FeedbackWriter;
  certs: CertCache;
  certPolicy: CertPolicy;
  /** Accepted TopicArns (NOTIFIER_SES_TOPIC_ARNS); empty refuses every SNS message. */
  topicArns: readonly string[];
  /** NOTIFIER_SNS_MAX_AGE: the oldest signed `Timestamp` taken, ms. */
  snsMaxAgeMs: number;
  clock: Clock;
  /** NOTIFIER_PUBLIC_URL: the origin Twilio called. */
  publicUrl: string;
  /** SMS_AUTH_TOKEN: the key of Twilio's signatures. */
  smsAuthToken: string;
  metrics: FeedbackMetrics;
  log: Logger;
  /** GETs a SubscribeURL (tests replace it); true when the provider answered 200. */
  confirm?: (url: string) => Promise<boolean>;
}

const defaultConfirm = async (url: string): Promise<boolean> => {
  const r = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(5_000) });
  await r.arrayBuffer().catch(() => undefined);
  return r.status === 200;
};

export function registerWebhookRoutes(app: TemplatedApp, edge: EdgeOptions, o: WebhookRoutesOptions): void {
  // A signed caller chooses the status: one line a second, whatever it sends.
  const unknownStatusLog = new LimitedLog(o.log, 'a Twilio status we do not act on: recorded, no state change', o.clock);
  route(app, 'post', SES_WEBHOOK_PATH, (ctx) => ses(ctx, o), edge);
  route(app, 'post', TWILIO_WEBHOOK_PATH, (ctx) => twilio(ctx, o, unknownStatusLog), edge);
}

/**
 * What the SES events webhook refuses before any certificate is fetched: a topic we did not
 * configure, or every topic when none is. Undefined: the topic is ours.
 */
export function topicRefusal(topicArns: readonly string[], topicArn: string): 'no_topics' | 'topic_not_allowed' | undefined {
  if (topicArns.length === 0) return 'no_topics';
  return topicArns.includes(topicArn) ? undefined : 'topic_not_allowed';
}

function refuse(
  o: WebhookRoutesOptions,
  provider: 'ses' | 'twilio',
  reason: Parameters<FeedbackMetrics['webhookRejected']>[1],
  err: PlatformError,
): never {
  o.metrics.webhookRejected(provider, reason);
  throw err;
}

async function ses(ctx: RequestContext, o: WebhookRoutesOptions): Promise<{ body: unknown }> {
  const ct = (ctx.headers['content-type'] ?? '').toLowerCase();
  if (ct !== '' && !/^(text\/plain|application\/json)\b/.test(ct)) {
    refuse(o, 'ses', 'invalid', new PlatformError('unsupported_media_type', { detail: 'expected text/plain or application/json' }));
  }
  const parsed = parseSnsEnvelope(ctx.body);
  if (!isEnvelope(parsed)) {
    if (parsed.problem === 'not_json')
      refuse(o, 'ses', 'invalid', new PlatformError('invalid_json', { detail: 'the body is not an SNS message' }));
    if (parsed.problem === 'unsigned')
      refuse(o, 'ses', 'unsigned', new PlatformError('webhook_signature_missing', { detail: `unsigned: ${parsed.detail}` }));
    refuse(o, 'ses', 'invalid', invalidField(parsed.field, parsed.detail));
  }
  const env: SnsEnvelope = parsed;
  // Before the certificate: a stranger's topic costs no fetch, and its SubscribeURL is never visited.
  const topic = topicRefusal(o.topicArns, env.TopicArn);
  if (topic !== undefined) {
    refuse(
      o,
      'ses',
      topic,
      new PlatformError('webhook_topic_not_allowed', {
        detail:
          topic === 'no_topics'
            ? 'no SNS topic is configured (NOTIFIER_SES_TOPIC_ARNS): every message is refused'
            : 'this topic is not one we subscribed to',
      }),
    );
  }
  const cert = await o.certs.get(env.SigningCertURL);
  if (!cert.ok) {
    o.log.warn({ why: cert.why, detail: cert.detail }, 'SNS signing certificate refused');
    if (cert.why === 'unavailable')
      refuse(
        o,
        'ses',
        'cert_unavailable',
        new PlatformError('webhook_cert_unavailable', { detail: 'the signing certificate could not be fetched' }),
      );
    refuse(
      o,
      'ses',
      cert.why === 'not_allowed' ? 'cert_not_allowed' : 'cert_unusable',
      new PlatformError('webhook_cert_untrusted', { detail: cert.detail }),
    );
  }
  if (!verifySnsSignature(env, cert.key)) {
    refuse(o, 'ses', 'bad_signature', new PlatformError('webhook_signature_invalid', { detail: 'the SNS signature does not verify' }));
  }
  // After the signature, so the Timestamp judged is the one SNS signed. A replay inside the
  // window is caught by its MessageId (provider_events); this bounds how old a replay may be.
  const late = timestampProblem(env.Timestamp, o.clock.now(), o.snsMaxAgeMs);
  if (late) {
    o.log.warn(
      { topic: env.TopicArn, message_id: env.MessageId, timestamp: env.Timestamp, why: late.why },
      'SNS message refused: outside the time window',
    );
    refuse(o, 'ses', late.why, new PlatformError('webhook_message_stale', { detail: late.detail }));
  }

  switch (env.Type) {
    case 'SubscriptionConfirmation': {
      const url = env.SubscribeURL!;
      const problem = providerUrlProblem(url, o.certPolicy);
      let confirmed = false;
      if (problem === undefined) {
        try {
          confirmed = await (o.confirm ?? defaultConfirm)(url);
        } catch (err) {
          o.log.warn({ err, topic: env.TopicArn }, 'confirming the SNS subscription failed');
        }
      }
      if (confirmed) o.log.info({ topic: env.TopicArn }, 'SNS subscription confirmed');
      else
        o.log.warn(
          { topic: env.TopicArn, subscribe_url: url, why: problem },
          'SNS subscription NOT confirmed: an operator must visit the SubscribeURL',
        );
      o.metrics.webhookEvent('ses', 'subscription', confirmed ? 'moved' : 'ignored');
      return { body: { result: confirmed ? 'confirmed' : 'logged' } };
    }
    case 'UnsubscribeConfirmation':
      o.log.warn({ topic: env.TopicArn }, 'SNS says this endpoint was unsubscribed');
      o.metrics.webhookEvent('ses', 'subscription', 'ignored');
      return { body: { result: 'ignored' } };
    case 'Notification': {
      const e = parseSesEvent(env.Message, env.MessageId);
      if (!e.ok) {
        // Signed by our topic but not an SES event (a test publish): answered 200 so SNS stops.
        o.log.warn({ field: e.field, detail: e.detail, topic: env.TopicArn }, 'an SNS notification is not an SES event');
        o.metrics.webhookEvent('ses', 'unreadable', 'ignored');
        return { body: { result: 'ignored' } };
      }
      return { body: { result: await o.writer.submit(e.event) } };
    }
  }
}

async function twilio(ctx: RequestContext, o: WebhookRoutesOptions, unknownStatusLog: LimitedLog): Promise<{ body: unknown }> {
  const ct = (ctx.headers['content-type'] ?? '').toLowerCase();
  if (!/^application\/x-www-form-urlencoded\b/.test(ct)) {
    refuse(o, 'twilio', 'invalid', new PlatformError('unsupported_media_type', { detail: 'expected application/x-www-form-urlencoded' }));
  }
  const signature = ctx.headers['x-twilio-signature'];
  if (!signature) refuse(o, 'twilio', 'unsigned', new PlatformError('webhook_signature_missing', { detail: 'no X-Twilio-Signature' }));
  const params = formParams(ctx.body);
  const query = ctx.query.toString();
  const url = `${o.publicUrl.replace(/\/+$/, '')}${ctx.path}${query ? `?${query}` : ''}`;
  if (!twilioSignatureValid(o.smsAuthToken, url, params, signature)) {
    refuse(o, 'twilio', 'bad_signature', new PlatformError('webhook_signature_invalid', { detail: 'X-Twilio-Signature does not match' }));
  }
  const e = parseTwilioCallback(params);
  if (!e.ok) refuse(o, 'twilio', 'invalid', invalidField(e.field, e.detail));
  const result = await o.writer.submit(e.event);
  if (e.event.kind === 'other' && result !== 'duplicate') {
    o.metrics.unknownStatus('twilio', unknownStatusLabel(e.event.providerType));
    unknownStatusLog.warn({ status: e.event.providerType, message_sid: e.event.providerMessageId, result });
  }
  return { body: { result } };
}
