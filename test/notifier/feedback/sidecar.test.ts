/**
 * The provider webhooks through the sidecar, as `npm start` wires them: the sandbox posts its
 * signed SES events and Twilio callbacks to the sidecar's `/api/v1/webhooks` route (no
 * credentials, class `webhook`, a per-IP cap of its own), which forwards them byte for byte to the
 * notifier; a forged one is refused by the notifier with nothing changed; a burst from one address
 * is counted in the route's own bucket, not in the shared per-IP cap of the other open routes.
 */
import t from 'tap';
import { useSidecar } from '../../harness/services.js';
import { feedbackRig, series } from './helpers.js';

t.test('an e-mail and an SMS reach delivered with their webhooks going through the sidecar', async (t) => {
  const rig = await feedbackRig(t, 'feedback_sidecar');
  const sidecar = await useSidecar(t, {
    NOTIFIER_URL: rig.core.url,
    LIMITER_IP_RATE: '1',
    LIMITER_IP_BURST: '5',
  });
  rig.sandbox.feedback.targets.snsEndpoint = `${sidecar.url}/api/v1/webhooks/ses`;
  rig.sandbox.feedback.targets.callbackOrigin = sidecar.url;
  rig.sandbox.setFaults({ channel: 'email', callback_delay_ms: 100 }, { channel: 'sms', callback_delay_ms: 100 });
  await rig.user('u-edge', 'edge@example.com', '+15550005555');
  const id = await rig.send('u-edge', ['email', 'sms']);
  await rig.waitChannels(id, { email: 'delivered', sms: 'delivered' });
  t.ok(
    rig.sandbox.feedback.records().every((r) => r.status === 200),
    'every callback answered 200 through the sidecar',
  );

  // Forged through the sidecar: the notifier refuses it; no credentials were asked for.
  const forged = { ...rig.sandbox.feedback.sns.envelope({ Type: 'Notification', Message: '{}' }), Message: '{"tampered":true}' };
  const r = await fetch(`${sidecar.url}/api/v1/webhooks/ses`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain; charset=UTF-8' },
    body: JSON.stringify(forged),
  });
  t.equal(r.status, 403);
  t.equal(((await r.json()) as { code: string }).code, 'webhook_signature_invalid');

  // 50 unsigned posts from one address: all reach the notifier (401), none is throttled by the
  // shared per-IP cap of 5, which the open routes still have whole.
  const statuses = await Promise.all(
    Array.from({ length: 50 }, () =>
      fetch(`${sidecar.url}/api/v1/webhooks/twilio`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'MessageSid=SMx&MessageStatus=delivered',
      }).then((x) => x.status),
    ),
  );
  t.same(new Set(statuses), new Set([401]), "the webhook route's own bucket");
  const track = await Promise.all(Array.from({ length: 5 }, () => fetch(`${sidecar.url}/api/v1/track/open/x.gif`).then((x) => x.status)));
  t.notOk(track.includes(429), 'the shared per-IP bucket was not drained by the webhooks');
  t.equal(series(await rig.metrics(), 'webhook_rejected_total', { provider: 'twilio', reason: 'unsigned' }), 50);
});
