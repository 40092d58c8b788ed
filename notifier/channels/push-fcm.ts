/**
 * Push over the FCM HTTP v1 API: `POST {base}/v1/projects/{project}/messages:send` with a Bearer
 * token and `{message: {token, notification: {title, body}, data, android, apns, webpush}}`.
 *
 * Credentials: a static token (FCM_ACCESS_TOKEN, what the sandbox takes by default), or, as real
 * FCM wants, short-lived OAuth 2.0 access tokens minted from a service-account key
 * (FCM_SERVICE_ACCOUNT_FILE, google-oauth.ts). With minted tokens a 401 drops the token and the
 * send is retried (the next attempt exchanges a fresh one); a key the token endpoint refuses is a
 * permanent `provider_auth_failed`, like a static token FCM refuses.
 *
 * How answers map (FCM's `ErrorCode` from `error.details[].errorCode`, else `error.status`):
 * - `UNREGISTERED` → `invalid_token` (prune the token, no retry);
 * - `INVALID_ARGUMENT` about the token (`message.token` field violation, or a message naming the
 *   registration token) → `invalid_token`; any other `INVALID_ARGUMENT` → permanent `invalid_message`;
 * - `QUOTA_EXCEEDED`/429, `UNAVAILABLE`/503, `INTERNAL`/500 → retry, honouring Retry-After;
 * - `UNAUTHENTICATED`, `THIRD_PARTY_AUTH_ERROR`, `PERMISSION_DENIED` (401/403) → permanent
 *   `provider_auth_failed` (and a breaker failure: every send would fail alike);
 * - `SENDER_ID_MISMATCH` → permanent `provider_rejected` (not pruned: a misconfigured project
 *   must not wipe the device registry);
 * - other 5xx → retry `provider_error`; other 4xx → permanent `provider_rejected`;
 * - no answer within the deadline → retry `timeout`; refused or broken connection → retry
 *   `connection_failed`.
 *
 * FCM has no idempotency key and no way to ask whether a message was sent, so there is no
 * `lookup`: the delivery id travels in `data.delivery_id` (the app reports receipt and open with it),
 * and a repeated send is made invisible on the device instead: every message carries the delivery's
 * replace identifiers (`apns-collapse-id`, `android.notification.tag`, `webpush.notification.tag`;
 * push-replace.ts), so a second copy replaces the first rather than adding to it.
 */
import type { Clock } from '../../shared/clock.js';
import { invalidToken, permanent, retry, sent, type Channel, type OutboundMessage, type SendContext, type SendResult } from './channel.js';
import { ProviderGuard, type GuardDeps } from './breaker.js';
import { isTokenRefused } from './google-oauth.js';
import { ProviderHttp, isFailure, jsonOf, type HttpAnswer } from './provider-http.js';
import { parseRetryAfter } from './retry-after.js';
import { replaceIds } from './push-replace.js';

export interface FcmChannelOptions {
  /** Provider name in metrics, breaker and results (default `fcm`). */
  provider?: string;
  /** e.g. `https://fcm.googleapis.com`, or the sandbox. */
  baseUrl: string;
  projectId: string;
  /** A static bearer token, or a source of current ones (OAuth 2.0 service account). */
  accessToken: string | TokenSource;
  /** Longest a call may take, ms (a send's own deadline may shorten it). */
  timeoutMs: number;
  /** Keep-alive connections. */
  connections: number;
  /** Connect timeout, ms (default: timeoutMs). */
  connectTimeoutMs?: number;
}

/** Returns a current access token. */
export interface TokenSource {
  (): Promise<string>;
  /** Drops this token (FCM refused it) so the next call mints another. */
  invalidate?: (token: string) => void;
  /** How long ago this token was minted, ms; undefined when it is not the current one. */
  ageMs?: (token: string) => number | undefined;
}

/**
 * A token FCM refuses this soon after it was minted is not stale but wrong (another project's
 * account, a token endpoint that is not Google's): retrying cannot fix it.
 */
const FRESH_TOKEN_MS = 60_000;

interface FcmErrorBody {
  error?: {
    code?: number;
    message?: string;
    status?: string;
    details?: { '@type'?: string; errorCode?: string; fieldViolations?: { field?: string; description?: string }[] }[];
  };
}

export function createFcmChannel(opts: FcmChannelOptions, deps: GuardDeps): Channel {
  const provider = opts.provider ?? 'fcm';
  const guard = new ProviderGuard('push', provider, deps);
  const http = new ProviderHttp({
    baseUrl: opts.baseUrl,
    connections: opts.connections,
    connectTimeoutMs: opts.connectTimeoutMs ?? opts.timeoutMs,
  });
  const path = `/v1/projects/${encodeURIComponent(opts.projectId)}/messages:send`;
  const source = opts.accessToken;

  return {
    name: 'push',
    provider,
    breakerState: () => guard.breaker.state,
    close: () => http.close(),
    async send(msg: OutboundMessage, ctx: SendContext): Promise<SendResult> {
      if (!msg.to) return permanent('missing_address', 'no device token');
      return guard.run(ctx.deadlineMs, opts.timeoutMs, async (timeoutMs) => {
        // The token wait and the FCM call share the one deadline: a send never outlives its
        // timeout (the claim's lease is computed from it). A static token costs no wait.
        let bearer = typeof source === 'string' ? source : '';
        let left = timeoutMs;
        if (typeof source !== 'string') {
          const started = performance.now();
          try {
            bearer = await withinMs(source(), timeoutMs);
          } catch (err) {
            // Refused: permanent. Anything else (no answer, 5xx) is thrown on: the guard retries it.
            if (isTokenRefused(err)) return permanent('provider_auth_failed', err.message);
            if (err === TOO_LATE) return retry('timeout', { detail: 'no FCM access token within the deadline' });
            throw err;
          }
          left = Math.floor(timeoutMs - (performance.now() - started));
          if (left < 1) return retry('timeout', { detail: 'no time left after getting the FCM access token' });
        }
        const answer = await http.request({
          method: 'POST',
          path,
          headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json; charset=utf-8' },
          body: JSON.stringify(fcmMessage(msg, ctx)),
          timeoutMs: left,
        });
        if (isFailure(answer)) return retry(answer.failed, { detail: answer.detail });
        if (answer.status === 401 && typeof source !== 'string' && source.invalidate) {
          const age = source.ageMs?.(bearer);
          if (age !== undefined && age < FRESH_TOKEN_MS) {
            return permanent('provider_auth_failed', `FCM 401 for an access token minted ${Math.round(age / 1000)} s ago`);
          }
          // A token FCM no longer takes (revoked, or expired early): mint another for the retry.
          source.invalidate(bearer);
          return retry('provider_error', { detail: 'FCM 401: the access token was refused; a new one is minted for the retry' });
        }
        return classifyFcm(answer, msg.to, deps.clock);
      });
    },
  };
}

// One shared sentinel, compared by identity; an Error so that what a promise rejects with is always one.
const TOO_LATE = new Error('the token exchange outlived the send deadline');

/** `p`, or a rejection with {@link TOO_LATE} after `ms` (p itself goes on: its token is cached). */
function withinMs<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(TOO_LATE), ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

/**
 * The FCM v1 request body for one message. Every message carries the Android, APNs and web push
 * overrides: FCM applies only the one of the token's platform, so the registry's `platform` is not
 * needed here (and a token registered under the wrong platform still gets its replace identifier).
 */
export function fcmMessage(msg: OutboundMessage, ctx: SendContext): { message: Record<string, unknown>; validate_only?: true } {
  const urgent = msg.tier === 'transactional' || msg.tier === 'high';
  const notification: Record<string, string> = { body: msg.body };
  if (msg.title !== undefined) notification.title = msg.title;
  const ids = replaceIds(ctx.deliveryId);
  return {
    // A dry run (a provider ramp's shadow copy): FCM validates the request and delivers nothing.
    ...(ctx.dryRun === true && { validate_only: true as const }),
    message: {
      token: msg.to,
      notification,
      data: { ...msg.data, delivery_id: ctx.deliveryId, notification_id: msg.notificationId },
      android: { priority: urgent ? 'HIGH' : 'NORMAL', notification: { tag: ids.tag } },
      apns: { headers: { 'apns-priority': urgent ? '10' : '5', 'apns-collapse-id': ids.apnsCollapseId } },
      webpush: { notification: { tag: ids.tag } },
    },
  };
}

/** Maps an FCM answer to a send result (see the module comment). */
export function classifyFcm(answer: HttpAnswer, token: string, clock: Clock): SendResult {
  const body = jsonOf(answer.text);
  if (answer.status >= 200 && answer.status < 300) {
    const name = (body as { name?: unknown } | undefined)?.name;
    return typeof name === 'string' ? sent(name) : retry('provider_error', { detail: 'FCM accepted without a message name' });
  }
  const err = (body as FcmErrorBody | undefined)?.error;
  const fcmCode = err?.details?.find((d) => typeof d.errorCode === 'string')?.errorCode ?? err?.status ?? '';
  const detail = `FCM ${answer.status} ${fcmCode}`.trim();
  const retryAfterMs = parseRetryAfter(answer.headers['retry-after'], clock.now());
  const again = (reason: 'provider_quota_exceeded' | 'provider_unavailable' | 'provider_internal' | 'provider_error') =>
    retry(reason, retryAfterMs === undefined ? { detail } : { retryAfterMs, detail });
  switch (fcmCode) {
    case 'UNREGISTERED':
      return invalidToken(token, detail);
    case 'INVALID_ARGUMENT':
      return aboutToken(err) ? invalidToken(token, detail) : permanent('invalid_message', detail);
    case 'QUOTA_EXCEEDED':
    case 'RESOURCE_EXHAUSTED':
      return again('provider_quota_exceeded');
    case 'UNAVAILABLE':
      return again('provider_unavailable');
    case 'INTERNAL':
      return again('provider_internal');
    case 'UNAUTHENTICATED':
    case 'THIRD_PARTY_AUTH_ERROR':
    case 'PERMISSION_DENIED':
      return permanent('provider_auth_failed', detail);
    case 'SENDER_ID_MISMATCH':
      return permanent('provider_rejected', detail);
  }
  if (answer.status === 429) return again('provider_quota_exceeded');
  if (answer.status === 503) return again('provider_unavailable');
  if (answer.status === 500) return again('provider_internal');
  if (answer.status >= 500) return again('provider_error');
  if (answer.status === 401 || answer.status === 403) return permanent('provider_auth_failed', detail);
  if (answer.status >= 400) return permanent('provider_rejected', detail);
  return again('provider_error');
}

/** Is an INVALID_ARGUMENT about the registration token (rather than the rest of the message)? */
function aboutToken(err: FcmErrorBody['error']): boolean {
  for (const d of err?.details ?? []) for (const v of d.fieldViolations ?? []) if (v.field === 'message.token') return true;
  return /registration token|message\.token/i.test(err?.message ?? '');
}
