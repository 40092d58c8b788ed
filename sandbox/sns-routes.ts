/**
 * The sandbox SNS's own endpoints, and the callbacks' admin API:
 * - `GET /sns/certs/{name}.pem`: a signing certificate (the envelopes' SigningCertURL);
 * - `GET /sns/confirm?Action=ConfirmSubscription&TopicArn=&Token=`: a SubscribeURL; answers the
 *   ConfirmSubscriptionResponse XML and records the subscription as confirmed;
 * - `GET /sns/unsubscribe`: the UnsubscribeURL (answered, nothing changes);
 * - `GET /sandbox/callbacks` → `{callbacks, pending, subscriptions, sns_endpoint, callback_origin}`;
 *   `DELETE /sandbox/callbacks` → 204 forgets the list;
 * - `PUT /sandbox/callbacks` with `{"sns_endpoint": url|null, "callback_origin": url|null}`;
 * - `POST /sandbox/sns/subscribe`: sends a SubscriptionConfirmation to the endpoint → `{status}`;
 * - `POST /sandbox/sns/rotate`: a new signing key and certificate → `{signing_cert_url}`.
 */
import { PlatformError, invalidField } from '../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../shared/http.js';
import type { TemplatedApp } from '../shared/uws.js';
import type { SandboxFeedback } from './feedback.js';

function optionalUrl(body: Record<string, unknown>, k: string): string | undefined | null {
  const v = body[k];
  if (v === undefined) return undefined;
  if (v === null) return null;
  if (typeof v !== 'string' || !/^https?:\/\//.test(v)) throw invalidField(k, 'must be an http(s) URL or null');
  try {
    new URL(v);
  } catch {
    throw invalidField(k, 'must be an http(s) URL or null');
  }
  return v;
}

export function snsRoutes(app: TemplatedApp, edge: EdgeOptions, feedback: SandboxFeedback): void {
  route(
    app,
    'get',
    '/sns/certs/:name',
    (ctx) => {
      const pem = feedback.sns.certificate(ctx.params[0]!);
      if (!pem) throw new PlatformError('not_found', { detail: 'no such certificate' });
      return { body: pem, contentType: 'application/x-x509-ca-cert' };
    },
    edge,
  );
  route(
    app,
    'get',
    '/sns/confirm',
    (ctx) => {
      const token = ctx.query.get('Token') ?? '';
      if (!feedback.subscriptions.has(token)) throw new PlatformError('not_found', { detail: 'no such subscription token' });
      feedback.subscriptions.set(token, true);
      const arn = `${feedback.sns.topicArn}:${token.slice(0, 8)}`;
      return {
        contentType: 'text/xml',
        body: `<ConfirmSubscriptionResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><ConfirmSubscriptionResult><SubscriptionArn>${arn}</SubscriptionArn></ConfirmSubscriptionResult></ConfirmSubscriptionResponse>`,
      };
    },
    edge,
  );
  route(app, 'get', '/sns/unsubscribe', () => ({ contentType: 'text/xml', body: '<UnsubscribeResponse/>' }), edge);
  route(
    app,
    'get',
    '/sandbox/callbacks',
    () => ({
      body: {
        callbacks: feedback.records(),
        pending: feedback.pending,
        subscriptions: [...feedback.subscriptions].map(([token, confirmed]) => ({ token, confirmed })),
        sns_endpoint: feedback.targets.snsEndpoint ?? null,
        callback_origin: feedback.targets.callbackOrigin ?? null,
      },
    }),
    edge,
  );
  route(
    app,
    'del',
    '/sandbox/callbacks',
    () => {
      feedback.clear();
      return { status: 204 };
    },
    edge,
  );
  route(
    app,
    'put',
    '/sandbox/callbacks',
    (ctx) => {
      const body = jsonBody(ctx);
      for (const k of Object.keys(body))
        if (k !== 'sns_endpoint' && k !== 'callback_origin') throw invalidField(k, 'is not a callback setting');
      const sns = optionalUrl(body, 'sns_endpoint');
      const origin = optionalUrl(body, 'callback_origin');
      if (sns !== undefined) feedback.targets.snsEndpoint = sns ?? undefined;
      if (origin !== undefined) feedback.targets.callbackOrigin = origin ?? undefined;
      return { body: { sns_endpoint: feedback.targets.snsEndpoint ?? null, callback_origin: feedback.targets.callbackOrigin ?? null } };
    },
    edge,
  );
  route(app, 'post', '/sandbox/sns/subscribe', async () => ({ body: { status: await feedback.subscribe() } }), edge);
  route(app, 'post', '/sandbox/sns/rotate', () => ({ body: { signing_cert_url: feedback.sns.rotate() } }), edge);
}
