/**
 * Bad webhooks change nothing: forged and unsigned ones are refused (401/403), a certificate URL
 * outside the allowlist is never fetched, a replay moves nothing twice, an event for an unknown
 * message is answered 200 and counted; SNS subscriptions are confirmed only on an allowed host.
 * Bodies are posted as raw bytes.
 */
import t from 'tap';
import { createServer } from 'node:http';
import { createHmac } from 'node:crypto';
import { waitFor } from '../../harness/wait.js';
import { feedbackRig, series, SMS_TOKEN, type FeedbackRig } from './helpers.js';

const post = async (
  url: string,
  body: string | Buffer,
  headers: Record<string, string>,
): Promise<{ status: number; body: Record<string, unknown> }> => {
  const r = await fetch(url, { method: 'POST', headers, body });
  const text = await r.text();
  return { status: r.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
};

const SNS_HEADERS = { 'content-type': 'text/plain; charset=UTF-8' };

/** An SES event for `messageId`, signed by the sandbox's SNS topic, as raw JSON text. */
function sesBody(rig: FeedbackRig, event: Record<string, unknown>, snsMessageId?: string): string {
  return JSON.stringify(rig.sandbox.feedback.sns.envelope({ Type: 'Notification', Message: JSON.stringify(event) }, snsMessageId));
}

async function sentEmail(rig: FeedbackRig, user: string, address: string): Promise<{ id: string; messageId: string }> {
  await rig.user(user, address);
  const id = await rig.send(user, ['email']);
  await rig.waitChannels(id, { email: 'sent' });
  const { rows } = await rig.core.db.pool.query(`SELECT provider_message_id FROM deliveries WHERE notification_id = $1`, [id]);
  return { id, messageId: rows[0].provider_message_id };
}

t.test('SES events webhook: forged, unsigned, untrusted certificate, replayed, unknown', async (t) => {
  // The sandbox sends no events of its own here: each is posted by the test.
  const rig = await feedbackRig(t, 'feedback_ses_faults');
  rig.sandbox.feedback.targets.snsEndpoint = undefined;
  const url = `${rig.core.url}/api/v1/webhooks/ses`;
  const { id, messageId } = await sentEmail(rig, 'u-f', 'f@example.com');
  const bounce = {
    eventType: 'Bounce',
    mail: { messageId },
    bounce: { bounceType: 'Permanent', bouncedRecipients: [{ emailAddress: 'f@example.com', status: '5.1.1' }] },
  };

  // Forged: a valid envelope whose Message was changed after signing.
  const signed = JSON.parse(sesBody(rig, { eventType: 'Delivery', mail: { messageId } })) as Record<string, string>;
  const forged = { ...signed, Message: JSON.stringify(bounce) };
  const r1 = await post(url, JSON.stringify(forged), SNS_HEADERS);
  t.equal(r1.status, 403);
  t.equal(r1.body.code, 'webhook_signature_invalid');

  // Unsigned.
  const { Signature: _s, ...unsigned } = signed;
  const r2 = await post(url, JSON.stringify(unsigned), SNS_HEADERS);
  t.equal(r2.status, 401);
  t.equal(r2.body.code, 'webhook_signature_missing');

  // A certificate URL outside the allowlist: refused, never fetched (a server that counts requests).
  let hits = 0;
  const decoy = createServer((_req, res) => {
    hits++;
    res.end('x');
  });
  await new Promise<void>((r) => decoy.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => decoy.close(() => r())));
  const port = (decoy.address() as { port: number }).port;
  for (const certUrl of [`http://127.0.0.1:${port}/cert.pem`, `https://sns.us-east-1.amazonaws.com.127.0.0.1.nip.io:${port}/cert.pem`]) {
    const r = await post(url, JSON.stringify({ ...signed, SigningCertURL: certUrl }), SNS_HEADERS);
    t.equal(r.status, 403, certUrl);
    t.equal(r.body.code, 'webhook_cert_untrusted');
  }
  t.equal(hits, 0, 'never fetched');

  // Another content type, a body that is not JSON.
  t.equal((await post(url, JSON.stringify(signed), { 'content-type': 'application/x-www-form-urlencoded' })).status, 415);
  t.equal((await post(url, 'not json', SNS_HEADERS)).body.code, 'invalid_json');

  // Nothing above changed the delivery or stored an event.
  t.equal((await rig.core.status(id)).channels.email, 'sent');
  t.equal((await rig.core.db.pool.query('SELECT count(*)::int AS n FROM provider_events')).rows[0].n, 0, 'no event stored');
  t.equal((await rig.core.db.pool.query('SELECT count(*)::int AS n FROM email_suppressions')).rows[0].n, 0, 'no address suppressed');

  // The genuine bounce, then the same notification replayed: one transition.
  const body = sesBody(rig, bounce);
  t.same((await post(url, body, SNS_HEADERS)).body, { result: 'moved' });
  t.same((await post(url, body, SNS_HEADERS)).body, { result: 'duplicate' }, 'a replay is recognised');
  const { rows } = await rig.core.db.pool.query(`SELECT status, failed_at, feedback_at FROM deliveries WHERE notification_id = $1`, [id]);
  t.equal(rows[0].status, 'bounced');
  // A Delivery arriving after the Bounce changes nothing.
  t.same((await post(url, sesBody(rig, { eventType: 'Delivery', mail: { messageId } }), SNS_HEADERS)).body, { result: 'recorded' });
  t.equal((await rig.core.status(id)).channels.email, 'bounced');
  // A JSON content type is accepted too (some proxies rewrite it); an event type we do not act on is tolerated.
  t.same(
    (await post(url, sesBody(rig, { eventType: 'Open', mail: { messageId }, open: {} }), { 'content-type': 'application/json' })).body,
    { result: 'recorded' },
  );

  // Unknown message: 200 (the provider stops retrying) and counted.
  const unknown = await post(url, sesBody(rig, { eventType: 'Delivery', mail: { messageId: 'no-such-message' } }), SNS_HEADERS);
  t.equal(unknown.status, 200);
  t.same(unknown.body, { result: 'unknown' });
  // A signed message that is not an SES event: 200, ignored.
  t.same((await post(url, sesBody(rig, { hello: 'world' }), SNS_HEADERS)).body, { result: 'ignored' });

  const m = await rig.metrics();
  t.equal(series(m, 'webhook_rejected_total', { provider: 'ses', reason: 'bad_signature' }), 1);
  t.equal(series(m, 'webhook_rejected_total', { provider: 'ses', reason: 'unsigned' }), 1);
  t.equal(series(m, 'webhook_rejected_total', { provider: 'ses', reason: 'cert_not_allowed' }), 2);
  t.equal(series(m, 'webhook_events_total', { provider: 'ses', type: 'bounce_permanent', result: 'duplicate' }), 1);
  t.equal(series(m, 'webhook_unknown_messages_total', { provider: 'ses' }), 1);
});

t.test('a rotated SNS certificate is fetched at its new URL; an unknown topic is refused when topics are configured', async (t) => {
  const rig = await feedbackRig(t, 'feedback_rotate', {
    core: { env: { NOTIFIER_SES_TOPIC_ARNS: 'arn:aws:sns:us-east-1:000000000000:sandbox-ses-events' } },
  });
  rig.sandbox.feedback.targets.snsEndpoint = undefined;
  const { id, messageId } = await sentEmail(rig, 'u-r', 'r@example.com');
  const url = `${rig.core.url}/api/v1/webhooks/ses`;
  const before = rig.sandbox.feedback.sns.envelope({ Type: 'Notification', Message: '{}' }).SigningCertURL;
  const after = rig.sandbox.feedback.sns.rotate();
  t.not(after, before);
  rig.sandbox.feedback.sns.signatureVersion = '2';
  t.same(
    (await post(url, sesBody(rig, { eventType: 'Delivery', mail: { messageId } }), SNS_HEADERS)).body,
    { result: 'moved' },
    'SignatureVersion 2 with the new certificate',
  );
  await rig.waitChannels(id, { email: 'delivered' });
  // A permanent bounce after the Delivery: the mail system refused it later, and that wins.
  const late = {
    eventType: 'Bounce',
    mail: { messageId },
    bounce: { bounceType: 'Permanent', bouncedRecipients: [{ emailAddress: 'r@example.com' }] },
  };
  t.same((await post(url, sesBody(rig, late), SNS_HEADERS)).body, { result: 'moved' }, 'a Bounce after a Delivery moves it');
  const row = (await rig.core.db.pool.query('SELECT status, delivered_at FROM deliveries WHERE notification_id = $1', [id])).rows[0];
  t.equal(row.status, 'bounced');
  t.ok(row.delivered_at, 'when it was delivered is kept');
  const other = {
    ...rig.sandbox.feedback.sns.envelope({ Type: 'Notification', Message: '{}' }),
    TopicArn: 'arn:aws:sns:us-east-1:1:other',
  };
  const r = await post(url, JSON.stringify(other), SNS_HEADERS);
  t.equal(r.status, 403);
  t.equal(r.body.code, 'webhook_topic_not_allowed');
});

t.test('an SNS subscription is confirmed by fetching its SubscribeURL on an allowed host; one elsewhere is only logged', async (t) => {
  const rig = await feedbackRig(t, 'feedback_subscribe');
  t.equal(await rig.sandbox.feedback.subscribe(), 200);
  t.same([...rig.sandbox.feedback.subscriptions.values()], [true], 'the notifier visited the SubscribeURL');
  // A confirmation whose SubscribeURL names another host: answered 200, not visited.
  let hits = 0;
  const other = createServer((_req, res) => {
    hits++;
    res.end();
  });
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => other.close(() => r())));
  const port = (other.address() as { port: number }).port;
  const env = rig.sandbox.feedback.sns.envelope({
    Type: 'SubscriptionConfirmation',
    Message: 'confirm',
    SubscribeURL: `http://127.0.0.1:${port}/confirm?Token=t`,
    Token: 't',
  });
  const r = await post(`${rig.core.url}/api/v1/webhooks/ses`, JSON.stringify(env), SNS_HEADERS);
  t.same(r, { status: 200, body: { result: 'logged' } });
  t.equal(hits, 0, 'never visited');
});

t.test('Twilio status callbacks: forged, unsigned, the wrong URL, replayed, unknown, raw form bytes', async (t) => {
  const rig = await feedbackRig(t, 'feedback_twilio_faults');
  // No callbacks from the sandbox here: the test posts them.
  rig.sandbox.feedback.targets.callbackOrigin = 'http://127.0.0.1:1';
  await rig.user('u-tw', 'x@example.com', '+15550004444');
  const id = await rig.send('u-tw', ['sms']);
  await rig.waitChannels(id, { sms: 'sent' });
  const { rows } = await rig.core.db.pool.query(`SELECT provider_message_id FROM deliveries WHERE notification_id = $1`, [id]);
  const sid: string = rows[0].provider_message_id;
  const url = `${rig.core.url}/api/v1/webhooks/twilio`;
  const publicUrl = 'http://edge.test/api/v1/webhooks/twilio';
  const sign = (u: string, form: string, token = SMS_TOKEN): string => {
    const params = [...new URLSearchParams(form)].sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : 1));
    return createHmac('sha1', token)
      .update(u + params.map(([k, v]) => k + v).join(''))
      .digest('base64');
  };
  const FORM = 'application/x-www-form-urlencoded';
  // Raw bytes: `+` for a space and a %-escaped UTF-8 character in a field the signature covers.
  const form = `AccountSid=ACfeedback&MessageSid=${sid}&MessageStatus=undelivered&ErrorCode=30005&To=%2B15550004444&Body=caf%C3%A9+au+lait`;

  t.equal((await post(url, form, { 'content-type': FORM })).status, 401, 'unsigned');
  t.equal(
    (await post(url, form, { 'content-type': FORM, 'x-twilio-signature': sign(publicUrl, form, 'wrong-token') })).status,
    403,
    'another token',
  );
  t.equal(
    (await post(url, form, { 'content-type': FORM, 'x-twilio-signature': sign(url, form) })).status,
    403,
    'signed over the internal URL, not the public one',
  );
  const tampered = form.replace('30005', '30003');
  t.equal(
    (await post(url, tampered, { 'content-type': FORM, 'x-twilio-signature': sign(publicUrl, form) })).status,
    403,
    'a changed field',
  );
  t.equal((await post(url, form, { 'content-type': 'application/json', 'x-twilio-signature': sign(publicUrl, form) })).status, 415);
  t.equal((await rig.core.status(id)).channels.sms, 'sent', 'nothing changed');

  const ok = await post(url, Buffer.from(form, 'latin1'), {
    'content-type': `${FORM}; charset=utf-8`,
    'x-twilio-signature': sign(publicUrl, form),
  });
  t.same(ok, { status: 200, body: { result: 'moved' } });
  const again = await post(url, form, { 'content-type': FORM, 'x-twilio-signature': sign(publicUrl, form) });
  t.same(again.body, { result: 'duplicate' }, 'replayed: no double transition');
  const late = `MessageSid=${sid}&MessageStatus=delivered`;
  t.same(
    (await post(url, late, { 'content-type': FORM, 'x-twilio-signature': sign(publicUrl, late) })).body,
    { result: 'recorded' },
    'a contradicting final status is recorded, not applied',
  );
  const view = await rig.core.status(id);
  t.equal(view.channels.sms, 'undelivered');
  t.equal(view.details.sms.reason, 'undelivered: Twilio error 30005');

  const unknown = `MessageSid=SMnotours&MessageStatus=delivered`;
  t.same(await post(url, unknown, { 'content-type': FORM, 'x-twilio-signature': sign(publicUrl, unknown) }), {
    status: 200,
    body: { result: 'unknown' },
  });
  const bad = `MessageStatus=delivered`;
  t.equal((await post(url, bad, { 'content-type': FORM, 'x-twilio-signature': sign(publicUrl, bad) })).status, 400, 'no MessageSid');

  const m = await rig.metrics();
  t.equal(series(m, 'webhook_rejected_total', { provider: 'twilio', reason: 'bad_signature' }), 3);
  t.equal(series(m, 'webhook_rejected_total', { provider: 'twilio', reason: 'unsigned' }), 1);
  t.equal(series(m, 'webhook_events_total', { provider: 'twilio', type: 'undelivered', result: 'duplicate' }), 1);
  t.equal(series(m, 'webhook_unknown_messages_total', { provider: 'twilio' }), 1);
  await waitFor(async () => (await rig.core.db.pool.query('SELECT count(*)::int AS n FROM provider_events')).rows[0].n === 3, {
    what: 'three events stored',
  });
});
