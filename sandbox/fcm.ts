/**
 * The sandbox's FCM HTTP v1 endpoint: `POST /v1/projects/{project}/messages:send` (and the same
 * under `/providers/{name}/…` for a second push provider). Requires `Authorization: Bearer
 * <FCM_ACCESS_TOKEN>`, or, with a service account configured, a token minted by `/token`
 * (google-oauth.ts), validates the message the way FCM does for what we send (a token, string
 * data values), answers `{name: "projects/{p}/messages/{id}"}`, and renders injected faults as
 * FCM's error documents (google.rpc.Status with an `FcmError` detail). Like FCM it takes no
 * idempotency key and de-duplicates nothing: a repeated send is a second message. It keeps the
 * identifiers by which the device replaces a shown notification (`apns-collapse-id`,
 * `android.notification.tag`, `webpush.notification.tag`), which the display model (display.ts)
 * applies per the token's platform. A request with `validate_only: true` is FCM's dry run: checked
 * (credentials, the message, the injected faults) and answered like a send, with FCM's
 * `projects/{p}/messages/fake_message_id`, but nothing is stored or displayed; it is counted as
 * `sandbox_requests_total{outcome="validated"}`.
 */
import type { EdgeOptions, Reply, RequestContext } from '../shared/http.js';
import { route } from '../shared/http.js';
import type { TemplatedApp } from '../shared/uws.js';
import type { SandboxCore } from './core.js';
import type { FaultError } from './faults.js';
import type { PushReplaceIds } from './store.js';

const FCM_ERROR = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const BAD_REQUEST = 'type.googleapis.com/google.rpc.BadRequest';

interface FcmFailure {
  status: number;
  grpc: string;
  message: string;
  errorCode?: string;
  violation?: { field: string; description: string };
}

const FAILURES: Record<FaultError, FcmFailure> = {
  UNAVAILABLE: { status: 503, grpc: 'UNAVAILABLE', message: 'The service is currently unavailable.', errorCode: 'UNAVAILABLE' },
  QUOTA_EXCEEDED: {
    status: 429,
    grpc: 'RESOURCE_EXHAUSTED',
    message: 'Quota exceeded for quota metric messages per minute.',
    errorCode: 'QUOTA_EXCEEDED',
  },
  INTERNAL: { status: 500, grpc: 'INTERNAL', message: 'Internal error encountered.', errorCode: 'INTERNAL' },
  INVALID_ARGUMENT: {
    status: 400,
    grpc: 'INVALID_ARGUMENT',
    message: 'The registration token is not a valid FCM registration token',
    errorCode: 'INVALID_ARGUMENT',
    violation: { field: 'message.token', description: 'The registration token is not a valid FCM registration token' },
  },
  UNREGISTERED: { status: 404, grpc: 'NOT_FOUND', message: 'Requested entity was not found.', errorCode: 'UNREGISTERED' },
  UNAUTHENTICATED: {
    status: 401,
    grpc: 'UNAUTHENTICATED',
    message: 'Request is missing required authentication credential. Expected OAuth 2 access token.',
  },
};

/** An FCM error answer. */
function fcmError(f: FcmFailure, retryAfterS?: number): Reply {
  const details: Record<string, unknown>[] = [];
  if (f.errorCode) details.push({ '@type': FCM_ERROR, errorCode: f.errorCode });
  if (f.violation) details.push({ '@type': BAD_REQUEST, fieldViolations: [f.violation] });
  const reply: Reply = { status: f.status, body: { error: { code: f.status, message: f.message, status: f.grpc, details } } };
  if (retryAfterS !== undefined && f.status >= 429) reply.headers = { 'retry-after': String(retryAfterS) };
  return reply;
}

const invalid = (field: string, description: string): Reply =>
  fcmError({
    status: 400,
    grpc: 'INVALID_ARGUMENT',
    message: description,
    errorCode: 'INVALID_ARGUMENT',
    violation: { field, description },
  });

/** Registers the FCM endpoint (and its `/providers/{name}` twin) on `app`. */
export function fcmRoutes(app: TemplatedApp, edge: EdgeOptions, core: SandboxCore): void {
  route(app, 'post', '/v1/projects/:project/messages:send', (ctx) => send(core, ctx, 'primary', ctx.params[0]!), edge);
  route(
    app,
    'post',
    '/providers/:provider/v1/projects/:project/messages:send',
    (ctx) => send(core, ctx, ctx.params[0]!, ctx.params[1]!),
    edge,
  );
}

async function send(core: SandboxCore, ctx: RequestContext, provider: string, project: string): Promise<Reply> {
  const bearer = /^Bearer\s+(\S+)$/i.exec(ctx.headers['authorization'] ?? '')?.[1];
  const { fcmServiceAccount, fcmAccessToken } = core.credentials;
  const allowed = !bearer
    ? false
    : fcmServiceAccount
      ? core.mintedTokens.valid(bearer, core.clock.now())
      : fcmAccessToken === undefined || bearer === fcmAccessToken;
  if (!allowed) {
    core.count('push', provider, 'rejected');
    return fcmError(FAILURES.UNAUTHENTICATED);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(ctx.body.toString('utf8'));
  } catch {
    core.count('push', provider, 'rejected');
    return invalid('message', 'Invalid JSON payload received.');
  }
  const message = (parsed as { message?: unknown } | null)?.message;
  const validateOnly = (parsed as { validate_only?: unknown } | null)?.validate_only;
  if (validateOnly !== undefined && typeof validateOnly !== 'boolean') {
    core.count('push', provider, 'rejected');
    return invalid('validate_only', "Invalid value at 'validate_only': must be a boolean.");
  }
  if (message === null || typeof message !== 'object') {
    core.count('push', provider, 'rejected');
    return invalid('message', 'Request contains an invalid argument: message is required.');
  }
  const m = message as { token?: unknown; notification?: { title?: unknown; body?: unknown }; data?: unknown };
  if (typeof m.token !== 'string' || m.token === '') {
    core.count('push', provider, 'rejected');
    return invalid('message.token', 'The registration token is not a valid FCM registration token');
  }
  const data: Record<string, string> = {};
  if (m.data !== undefined) {
    if (m.data === null || typeof m.data !== 'object' || Array.isArray(m.data)) {
      core.count('push', provider, 'rejected');
      return invalid('message.data', 'Invalid value at message.data: must be a map of strings.');
    }
    for (const [k, v] of Object.entries(m.data)) {
      if (typeof v !== 'string') {
        core.count('push', provider, 'rejected');
        return invalid(`message.data[${k}]`, `Invalid value at 'message.data[${k}]': must be a string.`);
      }
      data[k] = v;
    }
  }
  const replace = replaceIdsOf(message as Record<string, unknown>);
  if (typeof replace === 'string') {
    core.count('push', provider, 'rejected');
    return invalid(replace, `Invalid value at '${replace}': must be a string.`);
  }
  const token = m.token;
  const deliveryId = data.delivery_id;
  if (validateOnly === true) {
    // A dry run: the same checks and faults, nothing delivered.
    return core.applyFault<Reply>(
      'push',
      provider,
      core.decide('push', provider, token),
      {
        accept: () => ({ body: { name: `projects/${project}/messages/fake_message_id` } }),
        fail: (error, retryAfterS) => fcmError(FAILURES[error], retryAfterS),
        timedOut: () => fcmError(FAILURES.UNAVAILABLE),
      },
      'validated',
    );
  }
  core.store.request('push', provider, deliveryId, token);
  return core.applyFault<Reply>('push', provider, core.decide('push', provider, token), {
    accept: () => {
      const id = core.newId('0:');
      core.store.accept({
        id,
        channel: 'push',
        provider,
        to: token,
        ...(deliveryId !== undefined ? { delivery_id: deliveryId } : {}),
        received_at: core.nowSeconds(),
        ...(typeof m.notification?.title === 'string' ? { title: m.notification.title } : {}),
        ...(typeof m.notification?.body === 'string' ? { body: m.notification.body } : {}),
        data,
        ...(replace !== undefined ? { replace_ids: replace } : {}),
      });
      core.log.debug({ channel: 'push', provider, delivery_id: deliveryId }, 'sandbox accepted a push message');
      return { body: { name: `projects/${project}/messages/${id}` } };
    },
    fail: (error, retryAfterS) => fcmError(FAILURES[error], retryAfterS),
    timedOut: () => fcmError(FAILURES.UNAVAILABLE),
  });
}

/**
 * The identifiers by which a device replaces a shown notification (display.ts): APNs
 * `apns-collapse-id`, `android.notification.tag`, `webpush.notification.tag`. Undefined when the
 * message carries none; the field path when one is not a string (FCM's map and string fields).
 */
function replaceIdsOf(message: Record<string, unknown>): PushReplaceIds | undefined | string {
  const out: PushReplaceIds = {};
  const pick = (path: readonly string[], key: keyof PushReplaceIds): string | undefined => {
    let v: unknown = message;
    for (const p of path) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[p] : undefined;
    if (v === undefined) return undefined;
    if (typeof v !== 'string') return `message.${path.join('.')}`;
    out[key] = v;
    return undefined;
  };
  const bad =
    pick(['apns', 'headers', 'apns-collapse-id'], 'apns_collapse_id') ??
    pick(['android', 'notification', 'tag'], 'android_tag') ??
    pick(['webpush', 'notification', 'tag'], 'webpush_tag');
  if (bad !== undefined) return bad;
  return Object.keys(out).length > 0 ? out : undefined;
}
