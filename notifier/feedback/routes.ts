/**
 * The provider webhooks, reached through the sidecar on `/api/v1/webhooks` (auth optional: a
 * provider proves itself by its signature, not by our credentials):
 *
 * - `POST /api/v1/webhooks/ses`: Amazon SNS deliveries of SES events (`Content-Type: text/plain`,
 *   as SNS sends them, or JSON). The envelope is verified against the certificate at its
 *   `SigningCertURL` (certs.ts: allowlisted hosts only, cached by URL) and its `TopicArn` against
 *   NOTIFIER_SES_TOPIC_ARNS when set. A `SubscriptionConfirmation` is confirmed by fetching its
 *   `SubscribeURL` when that URL passes the same host rules as a certificate URL; otherwise (or if
 *   the fetch fails) it is logged for an operator to confirm by hand. A `Notification` carries one
 *   SES event (ses-events.ts).
 * - `POST /api/v1/webhooks/twilio`: Twilio status callbacks, `X-Twilio-Signature` checked over
 *   NOTIFIER_PUBLIC_URL plus the path (twilio.ts) with SMS_AUTH_TOKEN.
 *
 * Answers: 200 `{result}` for a verified event (`moved`, `recorded`, `duplicate`, `unknown`, or
 * `ignored` for a signed message that is not an SES event); 401 `webhook_signature_missing`
 * (unsigned); 403 `webhook_signature_invalid`, `webhook_cert_untrusted` (the certificate URL is
 * outside the allowlist, never fetched, or the certificate is unusable), `webhook_topic_not_allowed`;
 * 503 `webhook_cert_unavailable` (the certificate could not be fetched: SNS retries) or
 * `unavailable` (too many events waiting); 400 for a body that is not an envelope or a form; 415
 * for another content type. Nothing is written before the signature is verified.
 */
import { PlatformError, invalidField } from '../../shared/errors.js';
import { route, type EdgeOptions, type RequestContext } from '../../shared/http.js';
import type { Logger } from '../../shared/log.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { providerUrlProblem, type CertCache, type CertPolicy } from './certs.js';
import { parseSesEvent } from './ses-events.js';
import { isEnvelope, parseSnsEnvelope, verifySnsSignature, type SnsEnvelope } from './sns.js';
import { formParams, parseTwilioCallback, twilioSignatureValid } from './twilio.js';
import type { FeedbackMetrics, FeedbackWriter } from './writer.js';

export const SES_WEBHOOK_PATH = '/api/v1/webhooks/ses';
export const TWILIO_WEBHOOK_PATH = '/api/v1/webhooks/twilio';

export interface WebhookRoutesOptions {
  writer: FeedbackWriter;
  certs: CertCache;
  certPolicy: CertPolicy;
  /** Accepted TopicArns; empty accepts any (a warning at start). */
  topicArns: readonly string[];
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
  route(app, 'post', SES_WEBHOOK_PATH, (ctx) => ses(ctx, o), edge);
  route(app, 'post', TWILIO_WEBHOOK_PATH, (ctx) => twilio(ctx, o), edge);
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
  if (o.topicArns.length > 0 && !o.topicArns.includes(env.TopicArn)) {
    refuse(
      o,
      'ses',
      'topic_not_allowed',
      new PlatformError('webhook_topic_not_allowed', { detail: 'this topic is not one we subscribed to' }),
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

async function twilio(ctx: RequestContext, o: WebhookRoutesOptions): Promise<{ body: unknown }> {
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
  return { body: { result: await o.writer.submit(e.event) } };
}
