/**
 * Provider events only from what we configured (issue 24, items 2 and 5), against real Postgres
 * and the sandbox's signed SNS messages:
 * - a validly signed message from a topic that is not in NOTIFIER_SES_TOPIC_ARNS is refused (403)
 *   before anything: no certificate fetched, no SubscribeURL visited, nothing stored;
 * - with NOTIFIER_SES_TOPIC_ARNS unset the webhook refuses every SNS message, says so at start and
 *   in /readyz's `detail`, and /readyz stays 200;
 * - an event naming a message we never sent suppresses no one; when the message turns out to be
 *   ours (its `sent` recorded after the event), the late match applies the state and the
 *   suppression together;
 * - a signed `Timestamp` outside NOTIFIER_SNS_MAX_AGE (or ahead of our clock) is refused;
 * - a Twilio status we do not act on is recorded, changes nothing, and is counted with a label
 *   that cannot grow with what a caller sends.
 */
import t from 'tap';
import { createServer } from 'node:http';
import { createHmac, createPublicKey } from 'node:crypto';
import { Writable } from 'node:stream';
import { systemClock } from '../../../shared/clock.js';
import { loadConfig } from '../../../shared/config.js';
import { createLogger } from '../../../shared/log.js';
import { startNotifier } from '../../../notifier/app.js';
import { notifierConfig } from '../../../notifier/config.js';
import { startSandbox } from '../../../sandbox/app.js';
import { SandboxSns } from '../../../sandbox/sns.js';
import { parseSnsEnvelope, isEnvelope, verifySnsSignature } from '../../../notifier/feedback/sns.js';
import { useTestDatabase, type TestContext } from '../../harness/db.js';
import { testEnv } from '../../harness/services.js';
import { waitFor } from '../../harness/wait.js';
import { FAST_ENV, scriptedChannels } from '../core/helpers.js';
import { feedbackRig, series, SMS_TOKEN, type FeedbackRig } from './helpers.js';

const SNS_HEADERS = { 'content-type': 'text/plain; charset=UTF-8' };

const post = async (url: string, body: string, headers: Record<string, string> = SNS_HEADERS) => {
  const r = await fetch(url, { method: 'POST', headers, body });
  const text = await r.text();
  return { status: r.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
};

/** An SES event signed by the sandbox's SNS topic, as raw JSON text. */
const sesBody = (rig: FeedbackRig, event: Record<string, unknown>): string =>
  JSON.stringify(rig.sandbox.feedback.sns.envelope({ Type: 'Notification', Message: JSON.stringify(event) }));

const bounceOf = (messageId: string, address: string) => ({
  eventType: 'Bounce',
  mail: { messageId },
  bounce: { bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: address, status: '5.1.1' }] },
});

const suppressed = async (rig: FeedbackRig, address: string): Promise<number> =>
  (await rig.core.api('GET', `/api/v1/admin/suppressions/${encodeURIComponent(address)}`, undefined, rig.core.admin)).status;

/** A server that counts every request and serves `pem(name)` under /certs/{name}. */
async function countingServer(t: TestContext, pem: (name: string) => string | undefined) {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(req.url ?? '');
    const name = /^\/certs\/(.+)$/.exec(req.url ?? '')?.[1];
    const body = name === undefined ? undefined : pem(name);
    res.statusCode = body === undefined ? 404 : 200;
    res.end(body ?? '');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as { port: number }).port;
  return { seen, host: `127.0.0.1:${port}`, url: `http://127.0.0.1:${port}` };
}

t.test('a validly signed message from a topic we did not configure is refused before anything is fetched or stored', async (t) => {
  // Another AWS account's topic: its own key, its certificate on a host the notifier may fetch
  // from (so only the topic check stands between it and our data).
  let strangerUrl = '';
  const stranger = new SandboxSns({
    topicArn: 'arn:aws:sns:us-east-1:111122223333:not-ours',
    signatureVersion: '1',
    baseUrl: () => strangerUrl,
    clock: systemClock,
  });
  const server = await countingServer(t, (name) => stranger.certificate(name));
  strangerUrl = server.url;
  stranger.rotate();
  const rig = await feedbackRig(t, 'feedback_trust_topic', { certHosts: [server.host] });
  rig.sandbox.feedback.targets.snsEndpoint = undefined;
  const url = `${rig.core.url}/api/v1/webhooks/ses`;
  await rig.user('u-v', 'victim@example.com');
  const id = await rig.send('u-v', ['email']);
  await rig.waitChannels(id, { email: 'sent' });
  const messageId = (await rig.core.db.pool.query('SELECT provider_message_id FROM deliveries WHERE notification_id = $1', [id])).rows[0]
    .provider_message_id as string;

  const confirmation = stranger.envelope({
    Type: 'SubscriptionConfirmation',
    Message: 'You have chosen to subscribe to the topic.',
    SubscribeURL: `${server.url}/confirm?Action=ConfirmSubscription&Token=abc`,
    Token: 'abc',
  });
  const bounce = stranger.envelope({ Type: 'Notification', Message: JSON.stringify(bounceOf(messageId, 'victim@example.com')) });
  // Genuinely signed: the stranger's certificate verifies both.
  for (const env of [confirmation, bounce]) {
    const parsed = parseSnsEnvelope(Buffer.from(JSON.stringify(env)));
    t.ok(isEnvelope(parsed) && verifySnsSignature(parsed, createPublicKey(stranger.certificate(env.SigningCertURL!.split('/').pop()!)!)));
  }

  const r1 = await post(url, JSON.stringify(confirmation));
  t.equal(r1.status, 403);
  t.equal(r1.body.code, 'webhook_topic_not_allowed');
  const r2 = await post(url, JSON.stringify(bounce));
  t.equal(r2.status, 403);
  t.equal(r2.body.code, 'webhook_topic_not_allowed');
  t.same(server.seen, [], 'neither the certificate nor the SubscribeURL was fetched');
  t.equal((await rig.core.status(id)).channels.email, 'sent', 'the delivery did not move');
  t.equal(await suppressed(rig, 'victim@example.com'), 404, 'the address is not suppressed');
  t.equal((await rig.core.db.pool.query('SELECT count(*)::int AS n FROM provider_events')).rows[0].n, 0, 'nothing stored');
  t.equal(series(await rig.metrics(), 'webhook_rejected_total', { provider: 'ses', reason: 'topic_not_allowed' }), 2);

  // Our own topic, same message: applied.
  t.same((await post(url, sesBody(rig, bounceOf(messageId, 'victim@example.com')))).body, { result: 'moved' });
  t.equal(await suppressed(rig, 'victim@example.com'), 200);
});

t.test('with NOTIFIER_SES_TOPIC_ARNS unset every SNS message is refused, said at start and in /readyz (still 200)', async (t) => {
  const sandbox = await startSandbox();
  t.teardown(() => sandbox.close(1000));
  const db = await useTestDatabase(t, 'feedback_trust_unset', { poolMax: 4 });
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  const config = loadConfig(
    notifierConfig,
    testEnv({
      ...FAST_ENV,
      DATABASE_URL: db.url,
      NOTIFIER_WORKERS: 'false',
      NOTIFIER_SNS_CERT_HTTP_HOSTS: `127.0.0.1:${sandbox.port}`,
      NOTIFIER_SES_TOPIC_ARNS: '',
    }),
  );
  const notifier = await startNotifier(config, createLogger({ service: 'notifier', level: 'info', destination }));
  t.teardown(() => notifier.close());
  const base = `http://127.0.0.1:${notifier.port}`;

  const said = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('turned off by configuration'));
  t.match(said, { level: 40, msg: 'turned off by configuration: ses_webhook', off: { ses_webhook: /NOTIFIER_SES_TOPIC_ARNS is unset/ } });
  const ready = await fetch(`${base}/readyz`);
  t.equal(ready.status, 200, 'the rest of the notifier works');
  t.match(await ready.json(), {
    status: 'ready',
    checks: { postgres: 'ok' },
    detail: { ses_webhook: /^off: NOTIFIER_SES_TOPIC_ARNS is unset/ },
  });

  // The sandbox's own topic, genuinely signed: refused too, and its subscription never confirmed.
  sandbox.feedback.targets.snsEndpoint = `${base}/api/v1/webhooks/ses`;
  t.equal(await sandbox.feedback.subscribe(), 403);
  t.same([...sandbox.feedback.subscriptions.values()], [false], 'the SubscribeURL was not visited');
  const r = await post(
    `${base}/api/v1/webhooks/ses`,
    JSON.stringify(sandbox.feedback.sns.envelope({ Type: 'Notification', Message: JSON.stringify(bounceOf('m-1', 'a@example.com')) })),
  );
  t.equal(r.status, 403);
  t.match(r.body, { code: 'webhook_topic_not_allowed', detail: /NOTIFIER_SES_TOPIC_ARNS/ });
  t.equal((await notifier.pool.query('SELECT count(*)::int AS n FROM provider_events')).rows[0].n, 0);
  t.equal((await notifier.pool.query('SELECT count(*)::int AS n FROM email_suppressions')).rows[0].n, 0);
  const m = await (await fetch(`${base}/metrics`)).text();
  t.equal(series(m, 'webhook_rejected_total', { provider: 'ses', reason: 'no_topics' }), 2);
});

t.test('a bounce naming a message we never sent suppresses no one; once the message is ours, the late match applies it', async (t) => {
  // The e-mail provider answers when the test says: the bounce arrives before `sent` is recorded.
  const channels = scriptedChannels();
  let release!: () => void;
  const answered = new Promise<void>((r) => (release = r));
  const MID = '0100018c0000aaaa-late-match-000000';
  channels.primary.email.script = async () => {
    await answered;
    return { ok: true, providerMessageId: MID };
  };
  const rig = await feedbackRig(t, 'feedback_trust_unknown', { core: { channels, env: { NOTIFIER_SEND_TIMEOUT: '30s' } } });
  rig.sandbox.feedback.targets.snsEndpoint = undefined;
  const url = `${rig.core.url}/api/v1/webhooks/ses`;

  // A message nobody sent: answered as before, nothing suppressed.
  const stray = await post(url, sesBody(rig, bounceOf('0100018cffff-never-sent-000000', 'bystander@example.com')));
  t.same(stray, { status: 200, body: { result: 'unknown' } });
  t.equal(await suppressed(rig, 'bystander@example.com'), 404, 'not suppressed');

  await rig.user('u-l', 'late@example.com');
  const id = await rig.send('u-l', ['email']);
  await waitFor(() => channels.primary.email.calls.length === 1, { what: 'the e-mail to reach the provider' });
  const early = await post(url, sesBody(rig, bounceOf(MID, 'Late@Example.com')));
  t.same(early.body, { result: 'unknown' }, 'the bounce beat the provider\u2019s answer');
  t.equal(await suppressed(rig, 'late@example.com'), 404, 'nothing suppressed while the message is not known to be ours');

  release();
  const view = await rig.waitChannels(id, { email: 'bounced' });
  t.match(view.details.email.reason, /^bounced: Permanent\/General 5\.1\.1/);
  const entry = await rig.core.api('GET', '/api/v1/admin/suppressions/late%40example.com', undefined, rig.core.admin);
  t.equal(entry.status, 200, 'suppressed by the late match');
  const delivery = (await rig.core.db.pool.query('SELECT id FROM deliveries WHERE notification_id = $1', [id])).rows[0].id as string;
  t.match(entry.body, { address: 'late@example.com', reason: 'bounce', provider: 'ses', delivery_id: delivery });
  const m = await rig.metrics();
  t.equal(series(m, 'webhook_events_total', { provider: 'ses', type: 'bounce_permanent', result: 'matched_late' }), 1);
  t.equal(series(m, 'email_suppressions_added_total', { reason: 'bounce' }), 1, 'one address: the late one');
  t.equal(await suppressed(rig, 'bystander@example.com'), 404, 'the stray bounce still suppresses no one');
  const { rows } = await rig.core.db.pool.query('SELECT suppress FROM provider_events WHERE provider_message_id = $1', [MID]);
  t.same(rows, [{ suppress: null }], 'applied once: nothing left waiting');
});

t.test('SNS Timestamp window: too old or ahead of our clock refused (403), inside it accepted, a replay still duplicate', async (t) => {
  let offset = 0;
  const rig = await feedbackRig(t, 'feedback_trust_stale', {
    sandbox: { clock: { now: () => Date.now() + offset } },
    core: { env: { NOTIFIER_SNS_MAX_AGE: '30m' } },
  });
  rig.sandbox.feedback.targets.snsEndpoint = undefined;
  rig.sandbox.feedback.sns.rotate(); // a certificate valid now, whatever the clock says later
  const url = `${rig.core.url}/api/v1/webhooks/ses`;
  const signedAt = (ms: number, n: number): string => {
    offset = ms;
    const body = sesBody(rig, { eventType: 'Delivery', mail: { messageId: `m-window-${n}` } });
    offset = 0;
    return body;
  };
  const MIN = 60_000;
  const cases: [string, number, number][] = [
    ['three days old', -3 * 1440 * MIN, 403],
    ['31 minutes old', -31 * MIN, 403],
    ['29 minutes old', -29 * MIN, 200],
    ['6 minutes ahead', 6 * MIN, 403],
    ['4 minutes ahead', 4 * MIN, 200],
  ];
  let n = 0;
  for (const [what, at, want] of cases) {
    const r = await post(url, signedAt(at, n++));
    t.equal(r.status, want, what);
    if (want === 403) t.equal(r.body.code, 'webhook_message_stale', what);
    else t.same(r.body, { result: 'unknown' }, what);
  }
  const inside = signedAt(-10 * MIN, n++);
  t.same((await post(url, inside)).body, { result: 'unknown' });
  t.same((await post(url, inside)).body, { result: 'duplicate' }, 'a replay inside the window is caught by its MessageId');
  const m = await rig.metrics();
  t.equal(series(m, 'webhook_rejected_total', { provider: 'ses', reason: 'stale' }), 2);
  t.equal(series(m, 'webhook_rejected_total', { provider: 'ses', reason: 'future' }), 1);
  t.equal((await rig.core.db.pool.query('SELECT count(*)::int AS n FROM provider_events')).rows[0].n, 3, 'only those inside stored');
});

t.test('a Twilio status we do not act on: 200, recorded, no state change, counted under a bounded label', async (t) => {
  const rig = await feedbackRig(t, 'feedback_trust_twilio');
  rig.sandbox.feedback.targets.callbackOrigin = 'http://127.0.0.1:1'; // the test posts the callbacks
  await rig.user('u-st', 'x@example.com', '+15550007777');
  const id = await rig.send('u-st', ['sms']);
  await rig.waitChannels(id, { sms: 'sent' });
  const sid = (await rig.core.db.pool.query('SELECT provider_message_id FROM deliveries WHERE notification_id = $1', [id])).rows[0]
    .provider_message_id as string;
  const url = `${rig.core.url}/api/v1/webhooks/twilio`;
  const callback = async (status: string) => {
    const form = `MessageSid=${sid}&MessageStatus=${status}`;
    const params = [...new URLSearchParams(form)].sort(([a], [b]) => (a < b ? -1 : 1));
    const signature = createHmac('sha1', SMS_TOKEN)
      .update('http://edge.test/api/v1/webhooks/twilio' + params.map(([k, v]) => k + v).join(''))
      .digest('base64');
    return post(url, form, { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature });
  };
  t.same(await callback('read'), { status: 200, body: { result: 'recorded' } }, 'documented by Twilio, not acted on');
  t.same(await callback('made-up-one'), { status: 200, body: { result: 'recorded' } });
  t.same(await callback('made-up-one'), { status: 200, body: { result: 'duplicate' } }, 'a replay is not counted again');
  t.same(await callback('made-up-two'), { status: 200, body: { result: 'recorded' } });
  t.equal((await rig.core.status(id)).channels.sms, 'sent', 'no state change');
  const m = await rig.metrics();
  t.equal(series(m, 'webhook_unknown_statuses_total', { provider: 'twilio', status: 'read' }), 1);
  t.equal(series(m, 'webhook_unknown_statuses_total', { provider: 'twilio', status: 'other' }), 2, 'made-up statuses share one series');
  t.notMatch(m, /made-up/, 'what a caller sends never becomes a label');
  t.equal(series(m, 'webhook_events_total', { provider: 'twilio', type: 'other', result: 'recorded' }), 3);
});
