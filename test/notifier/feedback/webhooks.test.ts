/**
 * Provider webhooks end to end, against real Postgres and the sandbox: the sandbox accepts an
 * e-mail over SMTP (`250 Ok <SES message id>`) and an SMS over the Twilio-style API, then posts
 * the signed SES events (through its SNS topic) and Twilio status callbacks back; the notifier
 * verifies them, moves the deliveries, keeps error codes and suppresses bounced and complaining
 * addresses.
 */
import t from 'tap';
import { waitFor } from '../../harness/wait.js';
import { feedbackRig, series } from './helpers.js';

/** Callbacks follow the send by this much (as real providers' do), so the `sent` record is there first. */
const LATER = 150;

t.test('an e-mail and an SMS reach delivered through the providers own webhooks', async (t) => {
  const rig = await feedbackRig(t, 'feedback_delivered');
  rig.sandbox.setFaults({ channel: 'email', callback_delay_ms: LATER }, { channel: 'sms', callback_delay_ms: LATER });
  await rig.user('u-ok', 'ada@example.com', '+15550001111');
  const id = await rig.send('u-ok', ['email', 'sms']);
  const view = await rig.waitChannels(id, { email: 'delivered', sms: 'delivered' });
  t.equal(view.status, 'delivered');
  // Three events: SES Delivery, Twilio sent and delivered (one that beat its `sent` record is
  // matched again within seconds).
  const rows = await waitFor(
    async () => {
      const r = await rig.core.db.pool.query(
        `SELECT d.channel, d.provider_message_id, e.kind, e.result, e.provider FROM deliveries d
           JOIN provider_events e ON e.delivery_id = d.id WHERE d.notification_id = $1 ORDER BY e.id`,
        [id],
      );
      return r.rows.length === 3 ? r.rows : undefined;
    },
    { what: 'three matched provider events' },
  );
  // The last e-mail the sandbox accepted: on a loaded machine a first attempt can outlast the send
  // deadline after the sandbox accepted it, and the retry's message id is the one recorded.
  const email = rig.sandbox.messages({ channel: 'email' }).at(-1)!;
  t.match(email.id, /^0100[0-9a-f]{12}-.*-000000$/, 'the sandbox answered with an SES-shaped message id');
  t.same(
    rows.filter((r) => r.channel === 'email').map((r) => [r.provider_message_id, r.kind, r.result]),
    [[email.id, 'delivered', 'moved']],
    'joined on mail.messageId = provider_message_id',
  );
  t.same(
    rows.filter((r) => r.channel === 'sms').map((r) => [r.kind, r.result]),
    [
      ['progress', 'recorded'],
      ['delivered', 'moved'],
    ],
    'Twilio sent, then delivered',
  );
  const m = await rig.metrics();
  const applied = (provider: string): number =>
    series(m, 'webhook_events_total', { provider, type: 'delivered', result: 'moved' }) +
    series(m, 'webhook_events_total', { provider, type: 'delivered', result: 'matched_late' });
  t.equal(applied('ses'), 1, 'counted once');
  t.equal(applied('twilio'), 1, 'counted once');
});

t.test(
  'a permanent bounce: bounced with its reason, the address suppressed, the next e-mail suppressed visibly; an operator removes it',
  async (t) => {
    const rig = await feedbackRig(t, 'feedback_bounce');
    rig.sandbox.setFaults({ channel: 'email', outcome: 'bounce_permanent', callback_delay_ms: LATER });
    await rig.user('u-b', 'Gone@Example.com');
    const first = await rig.send('u-b', ['email']);
    const v1 = await rig.waitChannels(first, { email: 'bounced' });
    t.match(v1.details.email.reason, /^bounced: Permanent\/General 5\.1\.1/, 'the reason carries the bounce and its status');
    const entry = await rig.core.api('GET', '/api/v1/admin/suppressions/gone%40example.com', undefined, rig.core.admin);
    t.equal(entry.status, 200);
    t.match(entry.body, { address: 'gone@example.com', reason: 'bounce', provider: 'ses' });
    t.equal((await rig.core.api('GET', '/api/v1/admin/suppressions', undefined, rig.core.user('u-b'))).status, 403, 'operators only');

    rig.sandbox.clearFaults();
    const second = await rig.send('u-b', ['email']);
    const v2 = await rig.waitChannels(second, { email: 'suppressed' });
    t.match(v2.details.email.reason, /^suppressed: the address is on the suppression list after a permanent bounce/);
    t.notMatch(v2.details.email.reason, /example\.com/, 'the reason does not show the address');
    t.equal(rig.sandbox.messages({ channel: 'email' }).length, 1, 'the provider never saw the second e-mail');
    const m = await rig.metrics();
    t.equal(series(m, 'email_suppressions_added_total', { reason: 'bounce' }), 1);
    t.equal(series(m, 'suppressed_sends_total', { channel: 'email' }), 1);

    t.equal((await rig.core.api('DELETE', '/api/v1/admin/suppressions/gone@example.com', undefined, rig.core.admin)).status, 204);
    t.equal((await rig.core.api('DELETE', '/api/v1/admin/suppressions/gone@example.com', undefined, rig.core.admin)).status, 404);
    const third = await rig.send('u-b', ['email']);
    await rig.waitChannels(third, { email: 'delivered' });
    t.equal(rig.sandbox.messages({ channel: 'email' }).length, 2, 'sent again once removed');
  },
);

t.test('a complaint after delivery: complained and suppressed; a transient bounce changes nothing but is counted', async (t) => {
  const rig = await feedbackRig(t, 'feedback_complaint');
  await rig.user('u-c', 'complaint@simulator.amazonses.com');
  const c = await rig.send('u-c', ['email']);
  const v = await rig.waitChannels(c, { email: 'complained' });
  t.match(v.details.email.reason, /^complained: complaint \(abuse\)/);
  t.match((await rig.core.api('GET', '/api/v1/admin/suppressions?reason=complaint', undefined, rig.core.admin)).body, {
    suppressions: [{ address: 'complaint@simulator.amazonses.com', reason: 'complaint' }],
  });

  rig.sandbox.setFaults({ channel: 'email', outcome: 'bounce_transient', callback_delay_ms: LATER });
  await rig.user('u-t', 'full@example.com');
  const s = await rig.send('u-t', ['email']);
  await waitFor(
    async () =>
      series(await rig.metrics(), 'webhook_events_total', { provider: 'ses', type: 'bounce_transient', result: 'recorded' }) === 1,
    {
      what: 'the transient bounce to be recorded',
    },
  );
  t.equal((await rig.core.status(s)).channels.email, 'sent', 'still sent');
  t.equal(
    (await rig.core.api('GET', '/api/v1/admin/suppressions/full@example.com', undefined, rig.core.admin)).status,
    404,
    'not suppressed',
  );
});

t.test('SMS undelivered and failed keep the carrier error code in the status view', async (t) => {
  const rig = await feedbackRig(t, 'feedback_sms');
  rig.sandbox.setFaults({ channel: 'sms', outcome: 'undelivered', outcome_error_code: '30003' });
  await rig.user('u-s', 'x@example.com', '+15550002222');
  const a = await rig.send('u-s', ['sms']);
  const va = await rig.waitChannels(a, { sms: 'undelivered' });
  t.equal(va.details.sms.reason, 'undelivered: Twilio error 30003');
  rig.sandbox.setFaults({ channel: 'sms', outcome: 'failed' });
  const b = await rig.send('u-s', ['sms']);
  const vb = await rig.waitChannels(b, { sms: 'failed' });
  t.equal(vb.details.sms.reason, 'failed: Twilio error 30008');
  const { rows } = await rig.core.db.pool.query(
    'SELECT provider_error_code FROM deliveries WHERE notification_id = ANY($1::uuid[]) ORDER BY created_at',
    [[a, b]],
  );
  t.same(
    rows.map((r) => r.provider_error_code),
    ['30003', '30008'],
    'stored',
  );
});

t.test(
  'duplicated and reordered callbacks are harmless: each event applied once, states only forward; one that beats its send is matched later',
  async (t) => {
    const rig = await feedbackRig(t, 'feedback_dups');
    rig.sandbox.setFaults(
      { channel: 'email', outcome: 'complaint', callback_duplicate_rate: 1, callback_reorder: true, callback_delay_ms: LATER },
      { channel: 'sms', callback_duplicate_rate: 1, callback_reorder: true },
    );
    await rig.user('u-d', 'dup@example.com', '+15550003333');
    const id = await rig.send('u-d', ['email', 'sms']);
    await rig.waitChannels(id, { email: 'complained', sms: 'delivered' });
    await waitFor(() => rig.sandbox.feedback.pending === 0, { what: 'the sandbox to finish its callbacks' });
    const m = await rig.metrics();
    t.equal(
      series(m, 'webhook_events_total', { provider: 'ses', type: 'complaint', result: 'moved' }),
      1,
      'the Complaint (sent first) moved sent → complained',
    );
    t.equal(
      series(m, 'webhook_events_total', { provider: 'ses', type: 'delivered', result: 'recorded' }),
      1,
      'the late Delivery did not move it back',
    );
    t.equal(series(m, 'webhook_events_total', { provider: 'ses', type: 'complaint', result: 'duplicate' }), 1, 'the replayed Complaint');
    t.equal(series(m, 'webhook_events_total', { provider: 'ses', type: 'delivered', result: 'duplicate' }), 1);
    // With no delay the first callback can beat the `sent` record: answered `unknown`, then matched again.
    t.equal(
      series(m, 'webhook_events_total', { provider: 'twilio', type: 'delivered', result: 'moved' }) +
        series(m, 'webhook_events_total', { provider: 'twilio', type: 'delivered', result: 'matched_late' }),
      1,
      'delivered (sent first) applied once',
    );
    t.equal(series(m, 'webhook_events_total', { provider: 'twilio', type: 'progress', result: 'recorded' }), 1);
    t.equal(series(m, 'webhook_events_total', { provider: 'twilio', type: 'delivered', result: 'duplicate' }), 1);
    const { rows } = await rig.core.db.pool.query('SELECT count(*)::int AS n FROM provider_events');
    t.equal(rows[0].n, 4, 'each event stored once');
  },
);
