/**
 * SMS over a Twilio-style REST API: `POST {base}/2010-04-01/Accounts/{sid}/Messages.json`,
 * form-encoded `To`, `From`, `Body` and, when configured, `StatusCallback` (where Twilio posts the
 * message's status changes: notifier/feedback), Basic auth `sid:token`. The delivery id travels in
 * `X-Delivery-Id` (Twilio ignores it; the sandbox counts by it). Twilio's Messages API takes no
 * idempotency key and cannot be asked whether it has a message of ours, so this channel has no
 * `lookup`: a send caught in flight by a crash is sent again, and the phone shows a second
 * message (README, "What a crash can still duplicate").
 *
 * Answers: 2xx → sent (the message `sid`); 429 → retry `provider_quota_exceeded`, 503 →
 * `provider_unavailable`, 500 → `provider_internal`, other 5xx → `provider_error`, all honouring
 * Retry-After; 400 with a recipient error code (21211 invalid number, 21612/21614 unreachable or not
 * mobile, 21610 opted out) → permanent `invalid_recipient`; 401/403 → permanent
 * `provider_auth_failed`; other 4xx → permanent `provider_rejected`; no answer → retry `timeout`.
 */
import type { Clock } from '../../shared/clock.js';
import { permanent, retry, sent, type Channel, type OutboundMessage, type SendContext, type SendResult } from './channel.js';
import { ProviderGuard, type GuardDeps } from './breaker.js';
import { ProviderHttp, isFailure, jsonOf, type HttpAnswer } from './provider-http.js';
import { parseRetryAfter } from './retry-after.js';

export interface TwilioChannelOptions {
  /** Provider name in metrics, breaker and results (default `twilio`). */
  provider?: string;
  /** e.g. `https://api.twilio.com`, or the sandbox. */
  baseUrl: string;
  accountSid: string;
  authToken: string;
  /** Sender number (`From`). */
  from: string;
  timeoutMs: number;
  connections: number;
  /** Connect timeout, ms (default: timeoutMs). */
  connectTimeoutMs?: number;
  /** Sent as `StatusCallback`: where the provider posts the message's status changes (notifier/feedback). */
  statusCallback?: string;
}

/** Twilio error codes that mean "this number cannot receive": retrying will not help. */
const RECIPIENT_CODES = new Set([21211, 21214, 21217, 21401, 21407, 21408, 21610, 21612, 21614]);

export function createTwilioChannel(opts: TwilioChannelOptions, deps: GuardDeps): Channel {
  const provider = opts.provider ?? 'twilio';
  const guard = new ProviderGuard('sms', provider, deps);
  const http = new ProviderHttp({
    baseUrl: opts.baseUrl,
    connections: opts.connections,
    connectTimeoutMs: opts.connectTimeoutMs ?? opts.timeoutMs,
  });
  const base = `/2010-04-01/Accounts/${encodeURIComponent(opts.accountSid)}`;
  const auth = `Basic ${Buffer.from(`${opts.accountSid}:${opts.authToken}`).toString('base64')}`;

  return {
    name: 'sms',
    provider,
    breakerState: () => guard.breaker.state,
    close: () => http.close(),
    send(msg: OutboundMessage, ctx: SendContext): Promise<SendResult> {
      if (!msg.to) return Promise.resolve(permanent('missing_address', 'no phone number'));
      return guard.run(ctx.deadlineMs, opts.timeoutMs, async (timeoutMs) => {
        const answer = await http.request({
          method: 'POST',
          path: `${base}/Messages.json`,
          headers: {
            authorization: auth,
            'content-type': 'application/x-www-form-urlencoded',
            'x-delivery-id': ctx.deliveryId,
          },
          body: new URLSearchParams({
            To: msg.to,
            From: opts.from,
            Body: msg.body,
            ...(opts.statusCallback !== undefined && { StatusCallback: opts.statusCallback }),
          }).toString(),
          timeoutMs,
        });
        if (isFailure(answer)) return retry(answer.failed, { detail: answer.detail });
        return classifyTwilio(answer, deps.clock);
      });
    },
  };
}

/** Maps a Twilio-style answer to a send result (see the module comment). */
export function classifyTwilio(answer: HttpAnswer, clock: Clock): SendResult {
  const body = jsonOf(answer.text) as { sid?: unknown; code?: unknown; message?: unknown } | undefined;
  if (answer.status >= 200 && answer.status < 300) {
    return typeof body?.sid === 'string' ? sent(body.sid) : retry('provider_error', { detail: 'accepted without a message sid' });
  }
  const code = typeof body?.code === 'number' ? body.code : undefined;
  const detail = `SMS provider ${answer.status}${code === undefined ? '' : ` (code ${code})`}`;
  const retryAfterMs = parseRetryAfter(answer.headers['retry-after'], clock.now());
  const again = (reason: 'provider_quota_exceeded' | 'provider_unavailable' | 'provider_internal' | 'provider_error') =>
    retry(reason, retryAfterMs === undefined ? { detail } : { retryAfterMs, detail });
  if (answer.status === 429) return again('provider_quota_exceeded');
  if (answer.status === 503) return again('provider_unavailable');
  if (answer.status === 500) return again('provider_internal');
  if (answer.status >= 500) return again('provider_error');
  if (answer.status === 401 || answer.status === 403) return permanent('provider_auth_failed', detail);
  if (code !== undefined && RECIPIENT_CODES.has(code)) return permanent('invalid_recipient', detail);
  if (answer.status >= 400) return permanent('provider_rejected', detail);
  return again('provider_error');
}
