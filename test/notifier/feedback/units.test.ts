/**
 * Provider feedback without a database: the SNS envelope from raw bytes, its string to sign and
 * both signature versions (against the sandbox's independent signer), the certificate URL
 * allowlist and cache (fake clock), SES events, Twilio's signature (Twilio's published example)
 * and its form from raw bytes, the forward-only feedback rules, the SMTP reply's message id.
 */
import t from 'tap';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { FakeClock } from '../../../shared/clock.js';
import { CertCache, certUrlProblem, providerUrlProblem, type CertPolicy } from '../../../notifier/feedback/certs.js';
import { isEnvelope, parseSnsEnvelope, stringToSign, timestampProblem, verifySnsSignature } from '../../../notifier/feedback/sns.js';
import { topicRefusal } from '../../../notifier/feedback/routes.js';
import { loadConfig } from '../../../shared/config.js';
import { notifierConfig } from '../../../notifier/config.js';
import { parseSesEvent } from '../../../notifier/feedback/ses-events.js';
import {
  formParams,
  parseTwilioCallback,
  twilioSignature,
  twilioSignatureValid,
  unknownStatusLabel,
} from '../../../notifier/feedback/twilio.js';
import {
  canApplyFeedback,
  channelStatus,
  FEEDBACK_FROM,
  type DeliveryStatus,
  type FeedbackState,
} from '../../../notifier/tracking/states.js';
import { providerMessageId } from '../../../notifier/channels/email-smtp.js';
import { SandboxSns } from '../../../sandbox/sns.js';
import { selfSignedCertificate } from '../../../sandbox/x509.js';
import { decideOutcome, parseFaultProfile, seededRandom } from '../../../sandbox/faults.js';
import { FeedbackWriter, type FeedbackMetrics } from '../../../notifier/feedback/writer.js';
import type { Pool } from '../../../shared/db.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';

const POLICY: CertPolicy = { hostPattern: /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/, httpHosts: ['127.0.0.1:8089'] };

function sandboxSns(version: '1' | '2'): SandboxSns {
  return new SandboxSns({
    topicArn: 'arn:aws:sns:us-east-1:1:t',
    signatureVersion: version,
    baseUrl: () => 'http://127.0.0.1:8089',
    clock: new FakeClock(Date.now()),
  });
}

t.test('an SNS envelope from raw bytes: both signature versions verify; any changed byte does not', async (t) => {
  for (const version of ['1', '2'] as const) {
    const sns = sandboxSns(version);
    sns.rotate();
    // A message with a newline, a quote and non-ASCII text, as JSON escapes carry them.
    const env = sns.envelope({ Type: 'Notification', Message: '{"eventType":"Delivery","x":"é\\n\\"q\\""}\nline two', Subject: 'Sûbject' });
    const raw = Buffer.from(JSON.stringify({ ...env, SomeFutureField: { nested: true } }), 'utf8');
    const parsed = parseSnsEnvelope(raw);
    t.ok(isEnvelope(parsed), 'unknown fields tolerated');
    if (!isEnvelope(parsed)) continue;
    t.equal(parsed.Message, env.Message, 'escapes decoded before signing');
    const key = (await import('node:crypto')).createPublicKey(
      // The sandbox's certificate, as the notifier would fetch it.
      sns.certificate(parsed.SigningCertURL.split('/').pop()!)!,
    );
    t.ok(verifySnsSignature(parsed, key), `SignatureVersion ${version} verifies`);
    t.notOk(verifySnsSignature({ ...parsed, Message: parsed.Message + ' ' }, key), 'a changed Message does not');
    t.notOk(verifySnsSignature({ ...parsed, Subject: undefined }, key), 'dropping the Subject does not');
    t.notOk(verifySnsSignature({ ...parsed, SignatureVersion: version === '1' ? '2' : '1' }, key), 'the other digest does not');
    t.notOk(verifySnsSignature({ ...parsed, Signature: '' }, key), 'an empty signature does not');
  }
  const sns = sandboxSns('1');
  const conf = sns.envelope({
    Type: 'SubscriptionConfirmation',
    Message: 'm',
    SubscribeURL: 'http://127.0.0.1:8089/sns/confirm?Token=t',
    Token: 't',
  });
  const parsed = parseSnsEnvelope(Buffer.from(JSON.stringify(conf)));
  t.ok(isEnvelope(parsed));
  if (isEnvelope(parsed)) {
    t.equal(
      stringToSign(parsed),
      `Message\nm\nMessageId\n${conf.MessageId}\nSubscribeURL\nhttp://127.0.0.1:8089/sns/confirm?Token=t\nTimestamp\n${conf.Timestamp}\nToken\nt\nTopicArn\narn:aws:sns:us-east-1:1:t\nType\nSubscriptionConfirmation\n`,
      'the confirmation string to sign names SubscribeURL and Token',
    );
  }
});

t.test('SNS envelopes that are refused before any signature check', async (t) => {
  t.same(parseSnsEnvelope(Buffer.from('not json')), { problem: 'not_json' });
  t.same(parseSnsEnvelope(Buffer.from([0xff, 0xfe, 0x00])), { problem: 'not_json' }, 'bytes that are not UTF-8 JSON');
  t.match(parseSnsEnvelope(Buffer.from('{"Type":"Notification","Message":"x"}')), { problem: 'unsigned' });
  t.match(
    parseSnsEnvelope(Buffer.from(JSON.stringify({ Type: 'Notification', Signature: 'a', SigningCertURL: 'b', SignatureVersion: '3' }))),
    { problem: 'invalid', field: 'SignatureVersion' },
  );
  t.match(parseSnsEnvelope(Buffer.from(JSON.stringify({ Type: 'Other', Signature: 'a', SigningCertURL: 'b', SignatureVersion: '1' }))), {
    problem: 'invalid',
    field: 'Type',
  });
  t.match(
    parseSnsEnvelope(
      Buffer.from(
        JSON.stringify({
          Type: 'SubscriptionConfirmation',
          Signature: 'a',
          SigningCertURL: 'b',
          SignatureVersion: '1',
          MessageId: 'm',
          TopicArn: 't',
          Message: 'x',
          Timestamp: 'z',
        }),
      ),
    ),
    { problem: 'invalid', field: 'SubscribeURL' },
  );
  t.match(parseSnsEnvelope(Buffer.from('[1]')), { problem: 'invalid', field: 'body' });
});

t.test('SNS topics: only the configured ones; none configured refuses all', async (t) => {
  const ours = 'arn:aws:sns:eu-west-1:123456789012:ses-events';
  t.equal(topicRefusal([ours], ours), undefined);
  t.equal(topicRefusal([ours], 'arn:aws:sns:eu-west-1:999999999999:ses-events'), 'topic_not_allowed', 'another account, same name');
  t.equal(topicRefusal([ours], ours.toUpperCase()), 'topic_not_allowed', 'compared exactly');
  t.equal(topicRefusal([], ours), 'no_topics');
});

t.test('the SNS Timestamp window: NOTIFIER_SNS_MAX_AGE (65 minutes by default) back, 5 minutes ahead', async (t) => {
  const env = { DATABASE_URL: 'postgres://x@127.0.0.1/x' };
  t.equal(loadConfig(notifierConfig, env).NOTIFIER_SNS_MAX_AGE, 65 * 60_000, "SNS's 3,600 s retry limit plus 5 minutes");
  t.equal(loadConfig(notifierConfig, { ...env, NOTIFIER_SNS_MAX_AGE: '2h' }).NOTIFIER_SNS_MAX_AGE, 7_200_000);
  t.throws(() => loadConfig(notifierConfig, { ...env, NOTIFIER_SNS_MAX_AGE: '10s' }), /NOTIFIER_SNS_MAX_AGE.*between 1m and 24h/);
  t.equal(loadConfig(notifierConfig, env).NOTIFIER_SES_TOPIC_ARNS, undefined, 'no topic unless configured');
  const now = Date.parse('2026-11-27T12:00:00.000Z');
  const max = 65 * 60_000;
  const at = (ms: number): string => new Date(now + ms).toISOString();
  t.equal(timestampProblem(at(0), now, max), undefined);
  t.equal(timestampProblem(at(-max), now, max), undefined, 'exactly the maximum age');
  t.match(timestampProblem(at(-max - 1), now, max), { why: 'stale', detail: /signed 65 minutes ago; older than 65 minutes/ });
  t.match(timestampProblem(at(-3 * 86_400_000), now, max), { why: 'stale' });
  t.equal(timestampProblem(at(5 * 60_000), now, max), undefined, 'five minutes of skew');
  t.match(timestampProblem(at(5 * 60_000 + 1), now, max), { why: 'future' });
  t.equal(timestampProblem('2026-11-27T12:00:00Z', now, max), undefined, 'no fraction');
  for (const bad of ['2026-11-27T12:00:00+01:00', '2026-11-27 12:00:00', 'yesterday', '']) {
    t.match(timestampProblem(bad, now, max), { why: 'stale' }, `unreadable ${JSON.stringify(bad)} is never fresh`);
    const body = JSON.stringify({
      Type: 'Notification',
      Signature: 'a',
      SigningCertURL: 'b',
      SignatureVersion: '1',
      MessageId: 'm',
      TopicArn: 't',
      Message: 'x',
      Timestamp: bad,
    });
    t.match(parseSnsEnvelope(Buffer.from(body)), { problem: 'invalid', field: 'Timestamp' }, `${JSON.stringify(bad)} refused as invalid`);
  }
});

t.test("an unknown Twilio status's metric label: Twilio's documented words, everything else `other`", async (t) => {
  for (const s of ['read', 'received', 'receiving', 'canceled', 'partially_delivered']) t.equal(unknownStatusLabel(s), s);
  for (const s of ['bogus', 'x'.repeat(32), 'delivered-ish']) t.equal(unknownStatusLabel(s), 'other');
  for (const s of ['read', 'canceled', 'bogus'])
    t.match(
      parseTwilioCallback([
        ['MessageSid', 'SM1'],
        ['MessageStatus', s],
      ]),
      { event: { kind: 'other' } },
    );
});

t.test('certificate URLs: https to an allowed host, http only to a listed host:port, a .pem path, no credentials', async (t) => {
  t.equal(certUrlProblem('https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem', POLICY), undefined);
  t.equal(certUrlProblem('https://sns.cn-north-1.amazonaws.com.cn/x.pem', POLICY), undefined);
  t.equal(certUrlProblem('http://127.0.0.1:8089/sns/certs/x.pem', POLICY), undefined);
  t.match(certUrlProblem('http://sns.us-east-1.amazonaws.com/x.pem', POLICY), /plain http/);
  t.match(certUrlProblem('https://sns.us-east-1.amazonaws.com.evil.example/x.pem', POLICY), /not an allowed SNS host/);
  t.match(certUrlProblem('https://evil.example/sns.us-east-1.amazonaws.com/x.pem', POLICY), /not an allowed SNS host/);
  t.match(certUrlProblem('https://user:pw@sns.us-east-1.amazonaws.com/x.pem', POLICY), /credentials/);
  t.match(certUrlProblem('https://sns.us-east-1.amazonaws.com/x.txt', POLICY), /\.pem/);
  t.match(certUrlProblem('http://127.0.0.1:9999/x.pem', POLICY), /plain http/);
  t.match(certUrlProblem('file:///etc/passwd.pem', POLICY), /scheme/);
  t.match(certUrlProblem('not a url', POLICY), /not a URL/);
  t.equal(
    providerUrlProblem('https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&Token=x', POLICY),
    undefined,
    'a SubscribeURL needs no .pem',
  );
});

t.test(
  'the certificate cache: fetched once per URL, shared by concurrent requests, kept for the TTL, refused unfetched outside the allowlist',
  async (t) => {
    const clock = new FakeClock(Date.UTC(2026, 10, 24));
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = (validTo: number): string =>
      selfSignedCertificate({
        privateKey,
        publicKey,
        commonName: 'c',
        serial: randomBytes(4),
        notBeforeMs: clock.now() - 1000,
        notAfterMs: validTo,
      });
    const fetched: string[] = [];
    let answer: { status: number; body: Buffer } | Error = { status: 200, body: Buffer.from(pem(clock.now() + 86_400_000)) };
    const cache = new CertCache({
      policy: POLICY,
      ttlMs: 60_000,
      clock,
      fetch: async (url) => {
        fetched.push(url);
        await new Promise((r) => setImmediate(r));
        if (answer instanceof Error) throw answer;
        return answer;
      },
    });
    const url = 'https://sns.us-east-1.amazonaws.com/a.pem';
    const [a, b] = await Promise.all([cache.get(url), cache.get(url)]);
    t.ok(a.ok && b.ok);
    t.equal(fetched.length, 1, 'one fetch for two concurrent requests');
    await cache.get(url);
    t.equal(fetched.length, 1, 'cached');
    clock.advance(60_001);
    await cache.get(url);
    t.equal(fetched.length, 2, 'fetched again after the TTL (certificates rotate)');
    t.match(await cache.get('https://evil.example/a.pem'), { ok: false, why: 'not_allowed' });
    t.equal(fetched.length, 2, 'a URL outside the allowlist is never fetched');
    answer = new Error('ECONNREFUSED');
    t.match(await cache.get('https://sns.us-east-1.amazonaws.com/b.pem'), { ok: false, why: 'unavailable' });
    answer = { status: 200, body: Buffer.from(pem(clock.now() + 86_400_000)) };
    t.match(await cache.get('https://sns.us-east-1.amazonaws.com/b.pem'), { ok: true }, 'a failed fetch is not cached');
    answer = { status: 404, body: Buffer.alloc(0) };
    t.match(await cache.get('https://sns.us-east-1.amazonaws.com/c.pem'), { ok: false, why: 'unavailable' });
    answer = { status: 200, body: Buffer.from('garbage') };
    t.match(await cache.get('https://sns.us-east-1.amazonaws.com/d.pem'), { ok: false, why: 'unusable' });
    answer = { status: 200, body: Buffer.from(pem(clock.now() - 1)) };
    t.match(await cache.get('https://sns.us-east-1.amazonaws.com/e.pem'), { ok: false, why: 'unusable' }, 'an expired certificate');
  },
);

t.test('SES events: Delivery, Bounce Permanent and Transient, Complaint, others tolerated', async (t) => {
  const mail = { messageId: '0100abc-000000', destination: ['x@example.com'], unknownField: 1 };
  const d = parseSesEvent(JSON.stringify({ eventType: 'Delivery', mail, delivery: {} }), 'k1');
  t.match(d, { ok: true, event: { kind: 'delivered', providerMessageId: '0100abc-000000', eventKey: 'k1', suppress: [] } });
  const b = parseSesEvent(
    JSON.stringify({
      eventType: 'Bounce',
      mail,
      bounce: {
        bounceType: 'Permanent',
        bounceSubType: 'General',
        bouncedRecipients: [{ emailAddress: 'Ada <Ada@Example.COM>', status: '5.1.1', diagnosticCode: 'smtp; 550' }],
      },
    }),
    'k2',
  );
  t.match(b, {
    ok: true,
    event: { kind: 'bounce_permanent', errorCode: '5.1.1', suppress: [{ address: 'ada@example.com', reason: 'bounce' }] },
  });
  t.match(b.ok && b.event.detail, /^Permanent\/General 5\.1\.1 smtp; 550/);
  const soft = parseSesEvent(
    JSON.stringify({ eventType: 'Bounce', mail, bounce: { bounceType: 'Transient', bouncedRecipients: [{ emailAddress: 'a@b.c' }] } }),
    'k3',
  );
  t.match(soft, { ok: true, event: { kind: 'bounce_transient', suppress: [] } }, 'a transient bounce suppresses nothing');
  const c = parseSesEvent(
    JSON.stringify({
      notificationType: 'Complaint',
      mail,
      complaint: { complainedRecipients: [{ emailAddress: 'a@b.c' }], complaintFeedbackType: 'abuse' },
    }),
    'k4',
  );
  t.match(
    c,
    { ok: true, event: { kind: 'complaint', detail: 'complaint (abuse)', suppress: [{ address: 'a@b.c', reason: 'complaint' }] } },
    'the older notificationType form too',
  );
  t.match(parseSesEvent(JSON.stringify({ eventType: 'Open', mail }), 'k5'), { ok: true, event: { kind: 'other', providerType: 'Open' } });
  t.match(parseSesEvent('nope', 'k'), { ok: false, field: 'Message' });
  t.match(parseSesEvent('{"eventType":"Delivery"}', 'k'), { ok: false, field: 'Message.mail.messageId' });
  t.match(parseSesEvent('{"mail":{"messageId":"m"}}', 'k'), { ok: false, field: 'Message.eventType' });
});

t.test("Twilio's signature: the published example, and a form read from raw bytes", async (t) => {
  const params: [string, string][] = [
    ['CallSid', 'CA1234567890ABCDE'],
    ['Caller', '+14158675309'],
    ['Digits', '1234'],
    ['From', '+14158675309'],
    ['To', '+18005551212'],
  ];
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  t.equal(twilioSignature('12345', url, params), 'RSOYDt4T1cUTdK1PDd93/VVr8B8=', "Twilio's documented example");
  t.ok(twilioSignatureValid('12345', url, [...params].reverse(), 'RSOYDt4T1cUTdK1PDd93/VVr8B8='), 'order of the form does not matter');
  t.notOk(twilioSignatureValid('12346', url, params, 'RSOYDt4T1cUTdK1PDd93/VVr8B8='), 'another token');
  t.notOk(twilioSignatureValid('12345', url + '&x=1', params, 'RSOYDt4T1cUTdK1PDd93/VVr8B8='), 'another URL');
  t.notOk(twilioSignatureValid('12345', url, params, 'short'), 'a header of another length');

  // `+` is a space, %-escapes are UTF-8, a repeated name is kept twice; the signature covers the decoded values.
  const raw = Buffer.from('MessageSid=SM0123&MessageStatus=undelivered&ErrorCode=30003&Body=caf%C3%A9+ok&Tag=b&Tag=a', 'latin1');
  const form = formParams(raw);
  t.same(form, [
    ['MessageSid', 'SM0123'],
    ['MessageStatus', 'undelivered'],
    ['ErrorCode', '30003'],
    ['Body', 'café ok'],
    ['Tag', 'b'],
    ['Tag', 'a'],
  ]);
  const data = 'https://n.example/api/v1/webhooks/twilioBodycafé okErrorCode30003MessageSidSM0123MessageStatusundeliveredTagaTagb';
  const expected = (await import('node:crypto')).createHmac('sha1', 'tok').update(data, 'utf8').digest('base64');
  t.equal(twilioSignature('tok', 'https://n.example/api/v1/webhooks/twilio', form), expected, 'names sorted, a repeated name by value');
  const e = parseTwilioCallback(form);
  t.match(e, { ok: true, event: { kind: 'undelivered', providerMessageId: 'SM0123', errorCode: '30003', detail: 'Twilio error 30003' } });
  t.equal(e.ok && e.event.eventKey, createHash('sha256').update('SM0123\0undelivered\x0030003').digest('base64url'), 'the event key');
  t.match(
    parseTwilioCallback([
      ['MessageSid', 'SM1'],
      ['MessageStatus', 'sent'],
    ]),
    { ok: true, event: { kind: 'progress' } },
  );
  t.match(
    parseTwilioCallback([
      ['MessageSid', 'SM1'],
      ['MessageStatus', 'read'],
    ]),
    { ok: true, event: { kind: 'other' } },
  );
  t.match(parseTwilioCallback([['MessageStatus', 'sent']]), { ok: false, field: 'MessageSid' });
  t.match(parseTwilioCallback([['MessageSid', 'SM1']]), { ok: false, field: 'MessageStatus' });
  t.match(
    parseTwilioCallback([
      ['MessageSid', 'SM 1'],
      ['MessageStatus', 'sent'],
    ]),
    { ok: false, field: 'MessageSid' },
  );
});

t.test('feedback moves states forward only; what wins is decided by states.ts', async (t) => {
  t.ok(canApplyFeedback('sent', 'delivered'));
  t.notOk(canApplyFeedback('bounced', 'delivered'), 'a Delivery after a Bounce changes nothing');
  t.ok(canApplyFeedback('delivered', 'bounced'), 'a Bounce after a Delivery wins: the mailbox refused it later');
  t.notOk(canApplyFeedback('opened', 'bounced'), 'not once opened');
  t.ok(canApplyFeedback('opened', 'complained'), 'a complaint follows reading');
  t.notOk(canApplyFeedback('complained', 'bounced'));
  t.notOk(canApplyFeedback('delivered', 'undelivered'), "a carrier's final statuses exclude each other: the first stands");
  t.notOk(canApplyFeedback('undelivered', 'delivered'));
  for (const [to, from] of Object.entries(FEEDBACK_FROM)) {
    for (const f of from) t.notOk(canApplyFeedback(to as DeliveryStatus, to as never), `${to} never repeats (from ${f})`);
  }
  t.equal(channelStatus(['bounced', 'sent']), 'sent', 'progress beats a failure');
  t.equal(channelStatus(['suppressed', 'opted_out']), 'suppressed', 'the suppression list before the user choice');
  t.equal(channelStatus(['failed', 'undelivered']), 'failed');
});

t.test("the SMTP reply's provider message id", async (t) => {
  t.equal(
    providerMessageId('250 Ok 0100018c4e5b6a7b-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000'),
    '0100018c4e5b6a7b-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000',
    "SES's 250 Ok <id>",
  );
  t.equal(providerMessageId('250 2.0.0 Ok: queued as 4F2A1'), '4F2A1', 'Postfix');
  t.equal(providerMessageId('250 2.0.0 Ok <id>'), undefined, 'nothing that is not an id');
  t.equal(providerMessageId('250 Message accepted'), undefined);
  t.equal(providerMessageId(undefined), undefined);
});

t.test('the sandbox decides what a provider reports: the SES mailbox simulator, else the profile', async (t) => {
  t.equal(decideOutcome(undefined, 'email', 'bounce@simulator.amazonses.com'), 'bounce_permanent');
  t.equal(decideOutcome(undefined, 'email', 'complaint+x@simulator.amazonses.com'), 'complaint');
  t.equal(decideOutcome(undefined, 'email', 'a@example.com'), 'delivered');
  const p = parseFaultProfile({
    channel: 'sms',
    outcome: 'undelivered',
    outcome_error_code: '30005',
    callback_delay_ms: 5,
    callback_duplicate_rate: 1,
    callback_reorder: true,
  });
  t.equal(decideOutcome(p, 'sms', '+15550001'), 'undelivered');
  t.match(p, { outcomeErrorCode: '30005', callbackDelayMs: 5, callbackDuplicateRate: 1, callbackReorder: true });
  t.throws(() => parseFaultProfile({ channel: 'sms', outcome: 'complaint' }), { code: 'invalid_field', field: 'outcome' });
  t.throws(() => parseFaultProfile({ channel: 'push', outcome: 'delivered' }), { code: 'invalid_field', field: 'outcome' });
  t.throws(() => parseFaultProfile({ channel: 'email', callback_reorder: 'yes' }), { code: 'invalid_field', field: 'callback_reorder' });
});

t.test('the feedback writer refuses past its queue (503, counted) instead of holding unbounded memory', async (t) => {
  const rejected: string[] = [];
  const metrics: FeedbackMetrics = {
    webhookEvent: () => {},
    webhookRejected: (_p, reason) => void rejected.push(reason),
    unknownMessage: () => {},
    unknownStatus: () => {},
    suppressionAdded: () => {},
    suppressedSend: () => {},
  };
  // A database that never answers: every event waits.
  const pool = { connect: () => new Promise(() => {}) } as unknown as Pool;
  const writer = new FeedbackWriter({ pool, metrics, log: testLogger('feedback'), maxItems: 2, maxQueued: 3, maxDelayMs: 1 });
  const event = (k: string) => ({
    provider: 'twilio' as const,
    channel: 'sms' as const,
    eventKey: k,
    providerMessageId: 'SM1',
    kind: 'delivered' as const,
    providerType: 'delivered',
    suppress: [],
  });
  for (const k of ['a', 'b', 'c', 'd', 'e']) void writer.submit(event(k)).catch(() => {});
  // The first batch takes two and then waits on the database for ever: the queue settles at three.
  await waitFor(() => writer.queued === 3, { what: 'the first batch of two to be taken' });
  t.equal(writer.queued, 3, 'two in the batch being written, three waiting');
  await t.rejects(writer.submit(event('f')), { code: 'unavailable' });
  t.same(rejected, ['overloaded']);
});

t.test('property: replaying any event again later never changes where a delivery ends', async (t) => {
  const random = seededRandom(15);
  const states: FeedbackState[] = ['delivered', 'bounced', 'complained', 'undelivered', 'failed'];
  const apply = (from: DeliveryStatus, events: readonly FeedbackState[]): DeliveryStatus =>
    events.reduce<DeliveryStatus>((s, e) => (canApplyFeedback(s, e) ? e : s), from);
  for (let run = 0; run < 2_000; run++) {
    const start: DeliveryStatus = (['sent', 'delivered', 'opened'] as const)[Math.floor(random() * 3)]!;
    const events = Array.from({ length: 1 + Math.floor(random() * 5) }, () => states[Math.floor(random() * states.length)]!);
    const end = apply(start, events);
    // Every event replayed once more, each at a random later position.
    const originals = events.map((e) => ({ e }));
    const replayed = [...originals];
    for (const o of originals) {
      const at = replayed.indexOf(o);
      replayed.splice(at + 1 + Math.floor(random() * (replayed.length - at)), 0, { e: o.e });
    }
    const again = apply(
      start,
      replayed.map((x) => x.e),
    );
    if (again !== end) {
      t.fail(`${start} + ${events.join(',')} ends ${end}, but with replays ${again}`);
      return;
    }
  }
  t.pass('2,000 random sequences');
});
