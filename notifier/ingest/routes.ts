/**
 * `POST /api/v1/notifications`: validate (validate.ts), accept (accept.ts), answer 202
 * `{notification_id, status: "accepted"}`. Only callers with a service role send notifications
 * (internal services and campaign tools, through the sidecar with an API key or a service token);
 * the idempotency key (the `Idempotency-Key` header or the body's `idempotency_key`: the same key,
 * see validate.ts) is scoped to the caller's subject. A repeat answered from the idempotency
 * record carries `Idempotent-Replayed: true`.
 */
import { PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { isServiceCaller, type CallerResolver } from '../caller.js';
import type { NotifierMetrics } from '../metrics.js';
import { acceptNotification, type AcceptDeps } from './accept.js';
import { validateNotificationRequest, type IngestPolicies } from './validate.js';

export interface IngestRoutesOptions extends AcceptDeps {
  caller: CallerResolver;
  metrics: NotifierMetrics;
  policies: IngestPolicies;
}

export function registerIngestRoutes(app: TemplatedApp, edge: EdgeOptions, o: IngestRoutesOptions): void {
  route(
    app,
    'post',
    '/api/v1/notifications',
    async (ctx) => {
      const caller = await o.caller.callerOf(ctx);
      if (!isServiceCaller(caller, o.caller.serviceRoles)) {
        throw new PlatformError('forbidden', { detail: `sending notifications needs role ${o.caller.serviceRoles.join(' or ')}` });
      }
      let priority = 'unknown';
      try {
        const n = validateNotificationRequest(jsonBody(ctx), o.policies, ctx.headers['idempotency-key']);
        priority = n.priority;
        const r = await acceptNotification(o, caller.subject, n);
        o.metrics.ingested(n.priority, r.replayed ? 'replayed' : 'accepted');
        return { status: 202, body: r.body, headers: r.replayed ? { 'idempotent-replayed': 'true' } : undefined };
      } catch (err) {
        o.metrics.ingested(priority, 'rejected');
        throw err;
      }
    },
    edge,
  );
}
