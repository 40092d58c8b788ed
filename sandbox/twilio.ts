/**
 * The sandbox's Twilio-style SMS API, under `/2010-04-01/Accounts/{sid}` (and the same under
 * `/providers/{name}/…` for a second SMS provider):
 * - `POST /Messages.json`: form `To`, `From`, `Body`, optional `StatusCallback` (where the message's
 *   status callbacks go, signed: feedback.ts); Basic auth `sid:token`; the `X-Delivery-Id` header
 *   is recorded (for the tests' accounting; Twilio ignores it). Like Twilio's, it takes no
 *   idempotency key: every request it accepts is a new message. 201 with the message resource.
 * - `GET /Messages.json?To=`: the account's messages, newest first.
 * - `GET /Messages/{sid}.json`: one message.
 * Errors are Twilio's documents `{code, message, more_info, status}`.
 */
import type { EdgeOptions, Reply, RequestContext } from '../shared/http.js';
import { route } from '../shared/http.js';
import type { TemplatedApp } from '../shared/uws.js';
import type { SandboxCore } from './core.js';
import type { FaultError } from './faults.js';
import { smsSegments, type SandboxMessage } from './store.js';

const FAILURES: Record<FaultError, { status: number; code: number; message: string }> = {
  UNAVAILABLE: { status: 503, code: 20503, message: 'Service unavailable' },
  QUOTA_EXCEEDED: { status: 429, code: 20429, message: 'Too Many Requests' },
  INTERNAL: { status: 500, code: 20500, message: 'Internal Server Error' },
  INVALID_ARGUMENT: { status: 400, code: 21211, message: "The 'To' number is not a valid phone number." },
  UNREGISTERED: { status: 400, code: 21614, message: "The 'To' number is not a valid mobile number." },
  UNAUTHENTICATED: { status: 401, code: 20003, message: 'Authenticate' },
};

function twilioError(status: number, code: number, message: string, retryAfterS?: number): Reply {
  const reply: Reply = { status, body: { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status } };
  if (retryAfterS !== undefined && status >= 429) reply.headers = { 'retry-after': String(retryAfterS) };
  return reply;
}

/** Registers the Twilio-style endpoints (and their `/providers/{name}` twins) on `app`. */
export function twilioRoutes(app: TemplatedApp, edge: EdgeOptions, core: SandboxCore): void {
  for (const [prefix, providerOf] of [
    ['', () => 'primary'],
    ['/providers/:provider', (ctx: RequestContext) => ctx.params[0]!],
  ] as const) {
    const sidAt = prefix === '' ? 0 : 1;
    const base = `${prefix}/2010-04-01/Accounts/:sid`;
    route(app, 'post', `${base}/Messages.json`, (ctx) => create(core, ctx, providerOf(ctx), ctx.params[sidAt]!), edge);
    route(app, 'get', `${base}/Messages.json`, (ctx) => list(core, ctx, providerOf(ctx), ctx.params[sidAt]!), edge);
    route(
      app,
      'get',
      `${base}/Messages/:message`,
      (ctx) => fetchOne(core, ctx, providerOf(ctx), ctx.params[sidAt]!, ctx.params[sidAt + 1]!),
      edge,
    );
  }
}

/** The password of the request's Basic credentials (the account's auth token). */
function basicPassword(ctx: RequestContext): string {
  const b64 = /^Basic\s+(\S+)$/i.exec(ctx.headers['authorization'] ?? '')?.[1];
  const decoded = b64 ? Buffer.from(b64, 'base64').toString('utf8') : '';
  const i = decoded.indexOf(':');
  return i < 0 ? '' : decoded.slice(i + 1);
}

/** `undefined` when the Basic credentials fit the account in the path (and the configured ones). */
function unauthorized(core: SandboxCore, ctx: RequestContext, sid: string): Reply | undefined {
  const b64 = /^Basic\s+(\S+)$/i.exec(ctx.headers['authorization'] ?? '')?.[1];
  const decoded = b64 ? Buffer.from(b64, 'base64').toString('utf8') : '';
  const i = decoded.indexOf(':');
  const user = i < 0 ? '' : decoded.slice(0, i);
  const pass = i < 0 ? '' : decoded.slice(i + 1);
  const { smsAccountSid, smsAuthToken } = core.credentials;
  if (
    !user ||
    user !== sid ||
    (smsAccountSid !== undefined && user !== smsAccountSid) ||
    (smsAuthToken !== undefined && pass !== smsAuthToken)
  ) {
    return twilioError(401, 20003, 'Authenticate');
  }
  return undefined;
}

function resource(m: SandboxMessage, sid: string, provider: string): Record<string, unknown> {
  const date = new Date(m.received_at * 1000).toUTCString().replace('GMT', '+0000');
  const prefix = provider === 'primary' ? '' : `/providers/${provider}`;
  return {
    sid: m.id,
    account_sid: sid,
    to: m.to,
    from: m.from ?? null,
    body: m.body ?? '',
    status: m.status ?? 'queued',
    num_segments: String(m.segments ?? 1),
    direction: 'outbound-api',
    date_created: date,
    date_updated: date,
    date_sent: null,
    price: null,
    error_code: null,
    error_message: null,
    uri: `${prefix}/2010-04-01/Accounts/${sid}/Messages/${m.id}.json`,
  };
}

async function create(core: SandboxCore, ctx: RequestContext, provider: string, sid: string): Promise<Reply> {
  const denied = unauthorized(core, ctx, sid);
  if (denied) {
    core.count('sms', provider, 'rejected');
    return denied;
  }
  const form = new URLSearchParams(ctx.body.toString('utf8'));
  const to = form.get('To') ?? '';
  const from = form.get('From') ?? '';
  const body = form.get('Body') ?? '';
  const missing = !to
    ? twilioError(400, 21604, "A 'To' phone number is required.")
    : !from
      ? twilioError(400, 21603, "A 'From' phone number is required.")
      : !body
        ? twilioError(400, 21602, 'Message body is required.')
        : undefined;
  if (missing) {
    core.count('sms', provider, 'rejected');
    return missing;
  }
  const statusCallback = form.get('StatusCallback') || undefined;
  const deliveryId = ctx.headers['x-delivery-id'] || undefined;
  core.store.request('sms', provider, deliveryId, to);
  return core.applyFault<Reply>('sms', provider, core.decide('sms', provider, to), {
    accept: () => {
      const m: SandboxMessage = {
        id: core.newId('SM'),
        channel: 'sms',
        provider,
        to,
        from,
        body,
        received_at: core.nowSeconds(),
        segments: smsSegments(body),
        status: 'queued',
        ...(deliveryId !== undefined ? { delivery_id: deliveryId } : {}),
      };
      core.store.accept(m);
      core.log.debug({ channel: 'sms', provider, delivery_id: deliveryId }, 'sandbox accepted an SMS');
      core.feedback?.smsAccepted(m, sid, statusCallback, core.credentials.smsAuthToken ?? basicPassword(ctx));
      return { status: 201, body: resource(m, sid, provider) };
    },
    fail: (error, retryAfterS) => {
      const f = FAILURES[error];
      return twilioError(f.status, f.code, f.message, retryAfterS);
    },
    timedOut: () => twilioError(503, 20503, 'Service unavailable'),
  });
}

function list(core: SandboxCore, ctx: RequestContext, provider: string, sid: string): Reply {
  const denied = unauthorized(core, ctx, sid);
  if (denied) return denied;
  const to = ctx.query.get('To') ?? undefined;
  const found = core.store.list({ channel: 'sms', provider, ...(to ? { to } : {}) });
  const pageSize = Math.min(1000, Math.max(1, Number(ctx.query.get('PageSize')) || 50));
  const messages = found
    .reverse()
    .slice(0, pageSize)
    .map((m) => resource(m, sid, provider));
  return { body: { messages, page: 0, page_size: pageSize, next_page_uri: null } };
}

function fetchOne(core: SandboxCore, ctx: RequestContext, provider: string, sid: string, file: string): Reply {
  const denied = unauthorized(core, ctx, sid);
  if (denied) return denied;
  const id = file.replace(/\.json$/, '');
  const m = core.store.byId(id);
  if (!m || m.channel !== 'sms' || m.provider !== provider) {
    return twilioError(404, 20404, `The requested resource /2010-04-01/Accounts/${sid}/Messages/${id}.json was not found`);
  }
  return { body: resource(m, sid, provider) };
}
