// @tier: pure
/**
 * The notifier core's pure parts: request fingerprints, delivery states and the overall status,
 * the retry / failover / dead-letter policy, push fan-out results, load shedding levels, sliding
 * rates under a fake clock, pixel signatures, cursors, database-outage classification and the
 * configuration parsers.
 */
import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import { loadConfig } from '../../../shared/config.js';
import { notifierConfig } from '../../../notifier/config.js';
import { requestHash, validateNotificationRequest } from '../../../notifier/ingest/validate.js';
import { isDatabaseUnavailable } from '../../../shared/db-errors.js';
import { advanceableFrom, canAdvance, channelStatus, overallStatus, type DeliveryStatus } from '../../../notifier/tracking/states.js';
import { combineTokenResults, nextStep, retryDelay, type AttemptContext } from '../../../notifier/workers/retry-policy.js';
import { mayRun, pressureLevel } from '../../../notifier/queues/backpressure.js';
import { SlidingCounter } from '../../../notifier/metrics.js';
import { pixelFile, pixelSigner, verifyPixelFile } from '../../../notifier/tracking/pixel.js';
import { decodeCursor, encodeCursor } from '../../../notifier/tracking/inbox.js';
import { deliveryKey } from '../../../notifier/workers/delivery-sql.js';
import { leaseMs, withPixel } from '../../../notifier/workers/deliver.js';
import { DEFAULT_NOTIFICATION_TYPES, parseTypeCatalog } from '../../../notifier/policy/types.js';
import { allQueues } from '../../../notifier/queues/names.js';

const policies = { catalog: parseTypeCatalog(DEFAULT_NOTIFICATION_TYPES), settings: { quietHoursTiers: ['normal' as const] } };

const base = {
  event_type: 'order.shipped',
  recipient_id: 'u1',
  template_id: 'order_shipped_v2',
  template_data: { a: '1', b: '2' },
  priority: 'high',
  channels: ['push', 'email'],
};

t.test('request fingerprints ignore key order and channel order, nothing else', async (t) => {
  const h = requestHash(validateNotificationRequest(base, policies));
  t.equal(
    requestHash(validateNotificationRequest({ ...base, template_data: { b: '2', a: '1' }, channels: ['email', 'push'] }, policies)),
    h,
  );
  t.equal(requestHash(validateNotificationRequest({ ...base, idempotency_key: 'k' }, policies)), h, 'the key itself is not part of it');
  t.not(requestHash(validateNotificationRequest({ ...base, template_data: { a: '1', b: '3' } }, policies)), h);
  t.not(requestHash(validateNotificationRequest({ ...base, priority: 'transactional' }, policies)), h);
  t.not(requestHash(validateNotificationRequest({ ...base, locale: 'fr' }, policies)), h);
  const n = validateNotificationRequest({ ...base, locale: 'pt-br', campaign_id: 'spring' }, policies);
  t.match(n, {
    eventType: 'order.shipped',
    recipientId: 'u1',
    priority: 'high',
    channels: ['push', 'email'],
    locale: 'pt_BR',
    campaignId: 'spring',
  });
  const { template_data: _omit, ...withoutData } = base;
  t.same(validateNotificationRequest(withoutData, policies).templateData, {}, 'template_data is optional');
});

t.test('delivery states move forward only', async (t) => {
  const all: DeliveryStatus[] = ['queued', 'sending', 'sent', 'delivered', 'opened', 'read', 'failed', 'dead_lettered'];
  t.ok(canAdvance('sent', 'delivered'));
  t.ok(canAdvance('sending', 'opened'), 'an open seen before the send was recorded still counts');
  t.notOk(canAdvance('delivered', 'sent'), 'a late sent never overwrites delivered');
  t.notOk(canAdvance('opened', 'opened'));
  t.notOk(canAdvance('failed', 'opened'));
  t.notOk(canAdvance('dead_lettered', 'delivered'));
  t.same(advanceableFrom('delivered'), ['queued', 'sending', 'sent']);
  t.same(advanceableFrom('read'), ['queued', 'sending', 'sent', 'delivered', 'opened']);
  for (const s of all) t.notOk(canAdvance(s, 'sent') && (s === 'sent' || s === 'opened'), `${s} → sent is never sideways or back`);
});

t.test('channel and overall status', async (t) => {
  t.equal(channelStatus(['sending']), 'queued', 'sending shows as queued');
  t.equal(channelStatus(['failed', 'sent']), 'sent');
  t.equal(channelStatus(['failed', 'dead_lettered']), 'dead_lettered');
  t.equal(channelStatus(['failed']), 'failed');
  t.equal(overallStatus(['failed', 'queued']), 'queued', 'failed only when every channel is');
  t.equal(overallStatus(['failed', 'sent', 'delivered']), 'delivered', 'the most advanced channel');
  t.equal(overallStatus(['read', 'sent']), 'opened', 'read counts as opened overall');
  t.equal(overallStatus(['failed', 'failed']), 'failed');
  t.equal(overallStatus(['failed', 'dead_lettered']), 'dead_lettered');
});

const ctx = (over: Partial<AttemptContext> = {}): AttemptContext => ({
  tier: 'high',
  channel: 'email',
  attempts: 1,
  scheduleMs: [1000, 5000, 30_000, 120_000, 600_000],
  usedSecondary: false,
  hasSecondary: false,
  failedOver: false,
  failoverTo: undefined,
  ...over,
});
const transient = { kind: 'retry', reason: 'provider_unavailable' } as const;

t.test('the retry schedule, failover and the dead-letter queue', async (t) => {
  t.same(nextStep({ kind: 'sent', providerMessageId: 'x' }, ctx()), { do: 'sent', providerMessageId: 'x' });
  const delays = [1, 2, 3, 4, 5].map((a) => nextStep(transient, ctx({ attempts: a })));
  t.same(
    delays.map((s) => (s.do === 'retry' ? s.delayMs : s.do)),
    [1000, 5000, 30_000, 120_000, 600_000],
    'retries follow 1 s, 5 s, 30 s, 2 min, 10 min',
  );
  t.same(nextStep(transient, ctx({ attempts: 6 })), { do: 'dead_letter', reason: 'retries_exhausted', last: 'provider_unavailable' });
  t.same(
    nextStep(transient, ctx({ attempts: 6, hasSecondary: true })),
    { do: 'secondary', reason: 'provider_unavailable' },
    'high: then the secondary',
  );
  t.same(nextStep(transient, ctx({ attempts: 6, hasSecondary: true, tier: 'normal' })).do, 'dead_letter', 'normal has no secondary');
  t.same(nextStep(transient, ctx({ attempts: 7, usedSecondary: true, hasSecondary: true })), {
    do: 'dead_letter',
    reason: 'secondary_failed',
    last: 'provider_unavailable',
  });
  t.same(
    nextStep({ ...transient, retryAfterMs: 20_000 }, ctx({ attempts: 1 })),
    { do: 'retry', delayMs: 20_000, reason: 'provider_unavailable' },
    'a longer Retry-After wins',
  );
  t.equal(retryDelay([1000], 1, 9e12), 3_600_000, 'Retry-After is capped at an hour');
  t.equal(retryDelay([1000, 2000], 9), 2000, 'past the end: the last delay');

  // transactional push: failover on the first failure of any kind, once
  const tx = ctx({ tier: 'transactional', channel: 'push', failoverTo: 'sms' });
  t.same(nextStep({ kind: 'retry', reason: 'circuit_open' }, tx), { do: 'failover', to: 'sms', reason: 'circuit_open' });
  t.same(nextStep({ kind: 'permanent', reason: 'missing_address' }, tx), { do: 'failover', to: 'sms', reason: 'missing_address' });
  t.same(nextStep(transient, { ...tx, failoverTo: 'in_app' }), { do: 'failover', to: 'in_app', reason: 'provider_unavailable' });
  t.equal(nextStep(transient, { ...tx, failedOver: true }).do, 'retry', 'after a failover, its own retries');
  t.equal(nextStep(transient, { ...tx, failoverTo: undefined }).do, 'retry');

  // high: retries first, then the secondary provider if any, then channel failover, once
  const high = ctx({ channel: 'push', failoverTo: 'sms' });
  t.equal(nextStep(transient, high).do, 'retry', 'high push retries before it changes channel');
  t.same(
    nextStep(transient, { ...high, attempts: 6 }),
    { do: 'failover', to: 'sms', reason: 'provider_unavailable', after: 'retries_exhausted' },
    'no secondary',
  );
  t.equal(nextStep(transient, { ...high, attempts: 6, hasSecondary: true }).do, 'secondary');
  t.same(
    nextStep(transient, { ...high, attempts: 7, hasSecondary: true, usedSecondary: true }),
    { do: 'failover', to: 'sms', reason: 'provider_unavailable', after: 'secondary_failed' },
    'the secondary failed too',
  );
  t.same(nextStep(transient, { ...high, attempts: 7, failedOver: true }).do, 'dead_letter', 'never twice');
  t.same(nextStep({ kind: 'permanent', reason: 'provider_auth_failed' }, high), {
    do: 'failover',
    to: 'sms',
    reason: 'provider_auth_failed',
  });
  t.same(
    nextStep({ kind: 'permanent', reason: 'missing_address' }, high),
    { do: 'fail', reason: 'missing_address' },
    'a failure of this message or recipient does not change channel',
  );
  t.equal(nextStep(transient, ctx({ tier: 'normal', channel: 'push', attempts: 6, failoverTo: 'in_app' })).do, 'dead_letter');

  t.same(nextStep({ kind: 'permanent', reason: 'invalid_recipient' }, ctx()), { do: 'fail', reason: 'invalid_recipient' });
  t.same(nextStep({ kind: 'permanent', reason: 'provider_auth_failed' }, ctx({ hasSecondary: true })), {
    do: 'secondary',
    reason: 'provider_auth_failed',
  });
});

t.test('push fan-out results', async (t) => {
  const ok = { ok: true, providerMessageId: 'm1' } as const;
  const dead = (token: string) => ({ ok: false, kind: 'invalid_token', token }) as const;
  const slow = { ok: false, kind: 'retry', reason: 'timeout', retryAfterMs: 500 } as const;
  t.same(combineTokenResults([dead('a'), ok, slow]), { outcome: { kind: 'sent', providerMessageId: 'm1' }, deadTokens: ['a'] });
  t.same(combineTokenResults([dead('a'), slow, { ...slow, retryAfterMs: 900 }]).outcome, {
    kind: 'retry',
    reason: 'timeout',
    retryAfterMs: 900,
  });
  t.same(combineTokenResults([dead('a'), dead('b')]), {
    outcome: { kind: 'permanent', reason: 'missing_address', detail: 'every device token was unregistered' },
    deadTokens: ['a', 'b'],
  });
  t.equal(combineTokenResults([]).outcome.kind, 'permanent', 'no device: nothing to send to');
});

t.test('load shedding: low first, then normal, never the urgent tiers', async (t) => {
  t.equal(pressureLevel(0, 0, 100), 0);
  t.equal(pressureLevel(101, 0, 100), 1);
  t.equal(pressureLevel(1, 3, 100), 1, 'urgent work waiting while callers queue for a connection is pressure');
  t.equal(pressureLevel(0, 3, 100), 0, 'a busy pool with no urgent work waiting is not');
  t.equal(pressureLevel(201, 0, 100), 2);
  t.same(
    ([0, 1, 2] as const).map((l) => ['transactional', 'high', 'normal', 'low'].map((tier) => mayRun(tier as 'low', l))),
    [
      [true, true, true, true],
      [true, true, true, false],
      [true, true, false, false],
    ],
  );
});

t.test('sliding counters follow the clock', async (t) => {
  const clock = new FakeClock(1_000_000);
  const c = new SlidingCounter(60_000, 12, clock);
  c.add('x', 3);
  clock.advance(30_000);
  c.add('x', 2);
  t.equal(c.sum('x'), 5);
  clock.advance(35_000);
  t.equal(c.sum('x'), 2, 'the first adds left the window');
  clock.advance(120_000);
  t.equal(c.sum('x'), 0);
  t.equal(c.sum('never'), 0);
});

t.test('pixel signatures, cursors, keys and names', async (t) => {
  const s = pixelSigner('a-secret-of-16-chars', 'https://edge.example/');
  const id = '0b8f4d2e-1c3a-4e5f-9a7b-123456789abc';
  const file = pixelFile(s, id);
  t.equal(verifyPixelFile(s, file), id);
  t.equal(verifyPixelFile(pixelSigner('another-secret-16ch', 'x'), file), undefined, 'another key: refused');
  t.equal(verifyPixelFile(s, file.replace(id, '0b8f4d2e-1c3a-4e5f-9a7b-123456789abd')), undefined, 'another id: refused');
  t.equal(verifyPixelFile(s, 'x.gif'), undefined);
  t.match(withPixel('<html><body>Hi</body></html>', 'u'), /^<html><body>Hi<img src="u"[^>]*><\/body><\/html>$/);

  const c = encodeCursor({ t: '2025-01-02 03:04:05.123456+00', id });
  t.same(decodeCursor(c), { t: '2025-01-02 03:04:05.123456+00', id });
  t.throws(() => decodeCursor('nope'), { code: 'invalid_field', field: 'cursor' });
  t.throws(() => decodeCursor(Buffer.from(JSON.stringify(['1; DROP TABLE', id])).toString('base64url')), {
    code: 'invalid_field',
    field: 'cursor',
  });

  t.equal(deliveryKey('n', 'push', 'u'), deliveryKey('n', 'push', 'u'));
  t.not(deliveryKey('n', 'push', 'u'), deliveryKey('n', 'sms', 'u'));
  t.match(deliveryKey('n', 'push', 'u'), /^[0-9a-f]{64}$/);
  t.equal(allQueues().length, 24, '4 routing + 16 delivery + 3 campaign + retention');
  t.equal(leaseMs(10_000), 15_000);
  t.equal(leaseMs(1_000), 2_000);
});

t.test('database outages are told apart from other failures', async (t) => {
  t.ok(isDatabaseUnavailable(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })));
  t.ok(isDatabaseUnavailable(Object.assign(new Error('terminating connection'), { code: '57P01' })));
  t.ok(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect')));
  t.ok(isDatabaseUnavailable(new Error('wrapped', { cause: Object.assign(new Error('x'), { code: '08006' }) })));
  t.notOk(isDatabaseUnavailable(Object.assign(new Error('duplicate key'), { code: '23505' })));
  t.notOk(isDatabaseUnavailable('nope'));
});

t.test('configuration', async (t) => {
  const env = (over: Record<string, string>) => loadConfig(notifierConfig, { DATABASE_URL: 'postgres://x/y', ...over });
  const c = env({});
  t.same(c.NOTIFIER_RETRY_SCHEDULE, [1000, 5000, 30_000, 120_000, 600_000]);
  t.same(c.NOTIFIER_CONCURRENCY, { transactional: 32, high: 64, normal: 32, low: 16 });
  t.equal(c.NOTIFIER_IDEMPOTENCY_TTL, 86_400_000);
  t.equal(c.NOTIFIER_RETENTION, 90 * 86_400_000);
  t.throws(() => env({ NOTIFIER_CONCURRENCY: 'transactional=1,high=2,normal=3' }), {
    message: /^config: NOTIFIER_CONCURRENCY must give a value for low/,
  });
  t.throws(() => env({ NOTIFIER_CONCURRENCY: 'urgent=1' }), { message: /NOTIFIER_CONCURRENCY "urgent=1" is not tier=value/ });
  t.throws(() => env({ NOTIFIER_IDLE_POLL: 'transactional=1ms,high=1s,normal=1s,low=1s' }), {
    message: /^config: NOTIFIER_IDLE_POLL transactional: must be between 10ms and 60s/,
  });
  t.throws(() => env({ NOTIFIER_RETRY_SCHEDULE: 'soon' }), { message: /^config: NOTIFIER_RETRY_SCHEDULE item 1/ });
  t.throws(() => env({ NOTIFIER_TRACKING_SECRET: 'short' }), {
    message: 'config: NOTIFIER_TRACKING_SECRET must be at least 16 characters',
  });
  t.throws(() => env({ NOTIFIER_RETENTION_SCHEDULE: 'daily' }), { message: /5-field cron/ });
});
