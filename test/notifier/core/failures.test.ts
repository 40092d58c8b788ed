/**
 * What happens when sends fail, through a real notifier with scripted providers: retries on the
 * schedule (never inline), the dead-letter queue with its reason and an idempotent re-drive,
 * transactional push → SMS failover (and push resuming when SMS fails too), the secondary provider
 * for high, high's channel failover without one (SMS with a phone, else in-app; once), render errors dead-lettered without touching other sends, and the crash window closed
 * by a provider lookup.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import {
  addDevice,
  createTemplate,
  deliveries,
  putProfile,
  request,
  scriptedChannels,
  startCore,
  type Core,
  type TestChannels,
  summary,
} from './helpers.js';
import { waitFor } from '../../harness/wait.js';
import { deliveryKey } from '../../../notifier/workers/delivery-sql.js';
import type { TestContext } from '../../harness/db.js';

const retry = { ok: false, kind: 'retry', reason: 'provider_unavailable' } as const;

async function setup(t: TestContext, channels: TestChannels, env: Record<string, string> = {}): Promise<Core> {
  const core = await startCore(t, 'core_failures', { channels, env });
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u1', { email: 'ada@example.test', phone: '+14155550123' });
  await addDevice(core, 'u1', 'tok-1');
  return core;
}

t.test('a failing send is retried on the schedule, then dead-lettered; a re-drive is idempotent', async (t) => {
  const channels = scriptedChannels();
  channels.primary.email.script = () => retry;
  const core = await setup(t, channels, { NOTIFIER_RETRY_SCHEDULE: '100ms,300ms' });

  const r = await core.notify(request({ channels: ['email'], priority: 'normal' }));
  const id = r.body.notification_id;
  const s = await core.waitStatus(id, (s) => s.status === 'dead_lettered');
  t.same(summary(s), { status: 'dead_lettered', channels: { email: 'dead_lettered' } });
  const calls = channels.primary.email.calls;
  t.equal(calls.length, 3, 'one attempt and two retries');
  t.ok(calls[1]!.at - calls[0]!.at >= 90, `first retry after the first delay (${calls[1]!.at - calls[0]!.at} ms)`);
  t.ok(calls[2]!.at - calls[1]!.at >= 290, `second retry after the second delay (${calls[2]!.at - calls[1]!.at} ms)`);
  const d = (await deliveries(core, id)).email;
  t.equal(d.attempts, 3);
  t.match(d.last_error, /^retries_exhausted: provider_unavailable/);

  const dlq = await core.api('GET', '/api/v1/admin/dlq?channel=email', undefined, core.admin);
  t.equal(dlq.status, 200);
  t.equal(dlq.body.dead_letters.length, 1);
  const entry = dlq.body.dead_letters[0];
  t.match(entry, {
    delivery_id: d.id,
    notification_id: id,
    channel: 'email',
    priority: 'normal',
    reason: 'retries_exhausted',
    attempts: 3,
  });
  t.equal((await core.api('GET', '/api/v1/admin/dlq', undefined, core.service)).status, 403, 'the DLQ is for admins');
  const depth = await (await fetch(`${core.url}/metrics`)).text();
  t.match(depth, /dlq_depth\{channel="email"[^}]*\} 1/);

  channels.primary.email.script = (_m, ctx) => ({ ok: true, providerMessageId: `ok-${ctx.deliveryId}` });
  const first = await core.api('POST', `/api/v1/admin/dlq/${entry.id}/redrive`, undefined, core.admin);
  t.same(first.body, { id: entry.id, delivery_id: d.id, result: 'redriven' });
  const again = await core.api('POST', '/api/v1/admin/dlq', { ids: [entry.id, randomUUID()] }, core.admin);
  t.equal(again.status, 200);
  t.match(again.body.results, [{ id: entry.id, result: 'already_redriven' }, { result: 'not_found' }]);
  await core.waitStatus(id, (s) => s.status === 'sent');
  t.equal(channels.primary.email.calls.length, 4, 're-driven once: one more send, not two');
  const open = await core.api('GET', '/api/v1/admin/dlq', undefined, core.admin);
  t.same(open.body.dead_letters, [], 'nothing open after the re-drive');
  const all = await core.api('GET', '/api/v1/admin/dlq?all=true', undefined, core.admin);
  t.equal(all.body.dead_letters[0].redriven_by, 'user:operator');
});

t.test('transactional push fails over to SMS at once; push resumes only if SMS fails too', async (t) => {
  const channels = scriptedChannels();
  channels.primary.push.script = () => ({ ok: false, kind: 'retry', reason: 'circuit_open', retryAfterMs: 10 });
  const core = await setup(t, channels, { NOTIFIER_RETRY_SCHEDULE: '50ms' });

  const r = await core.notify(request({ channels: ['push'] }));
  const id = r.body.notification_id;
  const s = await core.waitStatus(id, (s) => s.channels.sms === 'sent');
  t.same(summary(s), { status: 'sent', channels: { push: 'failed', sms: 'sent' } });
  t.equal(channels.primary.push.calls.length, 1, 'push tried once, no retries while SMS works');
  const d = await deliveries(core, id);
  t.equal(d.push.failed_over_to, d.sms.id);
  t.equal(d.sms.idempotency_key, deliveryKey(id, 'sms', 'u1'));
  t.match(d.push.last_error, /^failed_over_to_sms: circuit_open/);

  // Both fail: SMS dead-letters after its retries, and push goes back to its own retries.
  channels.primary.sms.script = () => retry;
  const r2 = await core.notify(request({ channels: ['push'], idempotency_key: 'second' }));
  const id2 = r2.body.notification_id;
  const s2 = await core.waitStatus(id2, (s) => s.channels.push === 'dead_lettered' && s.channels.sms === 'dead_lettered');
  t.equal(s2.status, 'dead_lettered');
  const d2 = await deliveries(core, id2);
  t.equal(d2.push.attempts, 2, 'push resumed: its first attempt, then one retry of the schedule');
  t.equal(d2.sms.attempts, 2);
});

t.test('high retries, then one attempt on the secondary provider', async (t) => {
  const channels = scriptedChannels(['sms']);
  channels.primary.sms.script = () => retry;
  const core = await setup(t, channels, { NOTIFIER_RETRY_SCHEDULE: '30ms,30ms' });
  const r = await core.notify(request({ channels: ['sms'], priority: 'high' }));
  const s = await core.waitStatus(r.body.notification_id, (s) => s.status === 'sent');
  t.same(s.channels, { sms: 'sent' });
  t.equal(channels.primary.sms.calls.length, 3, 'the primary: first attempt and both retries');
  t.equal(channels.secondary.sms!.calls.length, 1, 'then the secondary, once');
  const d = (await deliveries(core, r.body.notification_id)).sms;
  t.equal(d.provider, 'twilio-secondary');
  t.equal(d.use_secondary, true);

  channels.secondary.sms!.script = () => retry;
  const r2 = await core.notify(request({ channels: ['sms'], priority: 'high', idempotency_key: 'k2' }));
  const s2 = await core.waitStatus(r2.body.notification_id, (s) => s.channels.in_app === 'sent');
  t.same(s2.channels, { sms: 'dead_lettered', in_app: 'sent' }, 'the secondary failed too: then the channel failover, SMS → in-app');
  t.match(s2.details.sms.reason, /^failed_over_to_in_app: secondary_failed: provider_unavailable/);
  t.equal(channels.secondary.sms!.calls.length, 2, 'the secondary is tried once per delivery');

  // In-app fails too: both end in the dead-letter queue, nothing else is tried.
  channels.primary.in_app.script = () => retry;
  const r3 = await core.notify(request({ channels: ['sms'], priority: 'high', idempotency_key: 'k3' }));
  const s3 = await core.waitStatus(
    r3.body.notification_id,
    (s) => s.channels.sms === 'dead_lettered' && s.channels.in_app === 'dead_lettered',
  );
  t.same(s3.channels, { sms: 'dead_lettered', in_app: 'dead_lettered' });
  const dlq = await core.api('GET', '/api/v1/admin/dlq?reason=secondary_failed', undefined, core.admin);
  t.equal(dlq.body.dead_letters.length, 2, 'both SMS deliveries dead-lettered as secondary_failed');
  t.equal(channels.secondary.sms!.calls.length, 3, 'each tried the secondary once');
});

t.test('high without a secondary provider: after its retries, push fails over once, to SMS with a phone, else in-app', async (t) => {
  const channels = scriptedChannels();
  channels.primary.push.script = () => retry;
  const core = await setup(t, channels, { NOTIFIER_RETRY_SCHEDULE: '30ms,30ms' });
  const shipped = (over: Record<string, unknown>) =>
    request({ event_type: 'order.shipped', channels: ['push'], priority: 'high', ...over });

  // order_updates allows SMS at high, and u1 has a phone.
  const r = await core.notify(shipped({ idempotency_key: 'to-sms' }));
  const id = r.body.notification_id;
  const s = await core.waitStatus(id, (s) => s.channels.sms === 'sent');
  t.same(summary(s), { status: 'sent', channels: { push: 'dead_lettered', sms: 'sent' } }, 'the status view shows both deliveries');
  t.match(s.details.push.reason, /^failed_over_to_sms: retries_exhausted: provider_unavailable/, 'and why');
  const d = await deliveries(core, id);
  t.equal(channels.primary.push.callsFor(d.push.id).length, 3, 'push: its first attempt and both retries, no secondary provider');
  t.equal(d.push.failed_over_to, d.sms.id);
  t.equal(channels.primary.sms.callsFor(d.sms.id).length, 1);
  const dlq = await core.api('GET', `/api/v1/admin/dlq?reason=retries_exhausted`, undefined, core.admin);
  t.match(
    dlq.body.dead_letters,
    [{ delivery_id: d.push.id, channel: 'push', detail: /failed over to sms/ }],
    'the push is in the dead-letter queue',
  );

  // No phone: in-app.
  await putProfile(core, 'u2', { email: 'bob@example.test' });
  await addDevice(core, 'u2', 'tok-2');
  const r2 = await core.notify(shipped({ recipient_id: 'u2', idempotency_key: 'to-inbox' }));
  const s2 = await core.waitStatus(r2.body.notification_id, (s) => s.channels.in_app !== undefined && s.channels.in_app !== 'queued');
  t.same(summary(s2), { status: 'sent', channels: { push: 'dead_lettered', in_app: 'sent' } });
  t.match(s2.details.push.reason, /^failed_over_to_in_app: retries_exhausted/);
  t.equal(
    (await core.api('GET', '/api/v1/users/u2/notifications', undefined, core.user('u2'))).body.notifications.length,
    1,
    'in the inbox',
  );

  // A type that may not use SMS (marketing) goes in-app though u1 has a phone.
  const r3 = await core.notify(shipped({ event_type: 'marketing.spring', idempotency_key: 'promo' }));
  const s3 = await core.waitStatus(r3.body.notification_id, (s) => s.channels.in_app !== undefined && s.channels.in_app !== 'queued');
  t.same(s3.channels, { push: 'dead_lettered', in_app: 'sent' }, 'marketing never fails over to SMS');

  // Once: the SMS fails too; it does not fail over in turn (nor does the push again).
  channels.primary.sms.script = () => retry;
  const r4 = await core.notify(shipped({ idempotency_key: 'both-fail' }));
  const s4 = await core.waitStatus(
    r4.body.notification_id,
    (s) => s.channels.push === 'dead_lettered' && s.channels.sms === 'dead_lettered',
  );
  t.same(s4.channels, { push: 'dead_lettered', sms: 'dead_lettered' }, 'no in-app after the SMS: a failover does not fail over in turn');
  const d4 = await deliveries(core, r4.body.notification_id);
  t.equal(channels.primary.sms.callsFor(d4.sms.id).length, 3, 'the SMS ran its own retries');
  t.equal(channels.primary.push.callsFor(d4.push.id).length, 3, 'the push was dead-lettered when it failed over, not resumed');

  // normal never changes channel.
  channels.primary.sms.script = (_m, ctx) => ({ ok: true, providerMessageId: `ok-${ctx.deliveryId}` });
  const r5 = await core.notify(shipped({ priority: 'normal', idempotency_key: 'normal' }));
  const s5 = await core.waitStatus(r5.body.notification_id, (s) => s.status === 'dead_lettered');
  t.same(s5.channels, { push: 'dead_lettered' });
});

t.test('a render error dead-letters that send only; permanent failures fail without retries', async (t) => {
  const channels = scriptedChannels();
  const core = await setup(t, channels);
  const r = await core.notify(request({ channels: ['push', 'in_app'], priority: 'high', template_data: { name: 'Ada' } }));
  const s = await core.waitStatus(r.body.notification_id, (s) => s.status === 'dead_lettered');
  t.same(s.channels, { push: 'dead_lettered', in_app: 'dead_lettered' }, 'the missing variable fails every channel that uses it');
  t.equal(channels.primary.push.calls.length, 0, 'nothing was sent');
  const dlq = await core.api('GET', '/api/v1/admin/dlq?reason=render_failed', undefined, core.admin);
  t.equal(dlq.body.dead_letters.length, 2);
  t.match(dlq.body.dead_letters[0].detail, /^missing_variable/);

  // The worker is unaffected: the next notification goes out.
  const ok = await core.notify(request({ channels: ['push'], priority: 'high', idempotency_key: 'fine' }));
  await core.waitStatus(ok.body.notification_id, (s) => s.status === 'sent');

  // No e-mail address: failed at once, never retried, not in the DLQ.
  await putProfile(core, 'u1', {});
  const noAddr = await core.notify(request({ channels: ['email'], priority: 'high', idempotency_key: 'noaddr' }));
  const s3 = await core.waitStatus(noAddr.body.notification_id, (s) => s.status === 'failed');
  t.same(s3.channels, { email: 'failed' });
  t.equal(channels.primary.email.calls.length, 0);
  t.match((await deliveries(core, noAddr.body.notification_id)).email.last_error, /^missing_address/);
});

t.test('a crashed send is reconciled with the provider instead of being sent twice', async (t) => {
  const channels = scriptedChannels();
  const sentByProvider = new Set<string>();
  channels.primary.sms.script = (_m, ctx) => {
    sentByProvider.add(ctx.idempotencyKey);
    return { ok: true, providerMessageId: `SM-${ctx.idempotencyKey}` };
  };
  channels.primary.sms.withLookup((key) =>
    sentByProvider.has(key) ? { state: 'found', providerMessageId: `SM-${key}`, providerStatus: 'sent' } : { state: 'not_found' },
  );
  const core = await setup(t, channels, { NOTIFIER_SEND_TIMEOUT: '100ms' });
  const r = await core.notify(request({ channels: ['sms'] }));
  const id = r.body.notification_id;
  await core.waitStatus(id, (s) => s.status === 'sent');
  const d = (await deliveries(core, id)).sms;

  // Replay the crash: the provider accepted it, the worker died before recording `sent`.
  await core.db.pool.query(`UPDATE deliveries SET status = 'sending', sending_since = now() - interval '1 minute' WHERE id = $1`, [d.id]);
  await core.notifier.boss.send('notify-deliver-sms-transactional', { delivery_id: d.id });
  await core.waitStatus(id, (s) => s.status === 'sent');
  await waitFor(() => channels.primary.sms.lookups.length === 1, { what: 'the reconciliation lookup' });
  t.same(channels.primary.sms.lookups, [d.id], 'the provider was asked about this delivery id');
  t.equal(channels.primary.sms.calls.length, 1, 'and it was not sent again');

  // A live claim (lease not run out) is left alone: the job comes back later.
  await core.db.pool.query(`UPDATE deliveries SET status = 'sending', sending_since = now() WHERE id = $1`, [d.id]);
  await core.notifier.boss.send('notify-deliver-sms-transactional', { delivery_id: d.id });
  await waitFor(() => channels.primary.sms.lookups.length === 2, { what: 'the takeover after the lease', timeoutMs: 8000 });
  t.equal(channels.primary.sms.calls.length, 1, 'still one send');
  await core.waitStatus(id, (s) => s.status === 'sent');

  // The provider cannot be asked at first: the delivery stays `sending` and is asked again later.
  let unknownOnce = true;
  channels.primary.sms.withLookup((key) => {
    if (unknownOnce) {
      unknownOnce = false;
      return { state: 'unknown', reason: 'provider_unavailable' };
    }
    return sentByProvider.has(key) ? { state: 'found', providerMessageId: `SM-${key}`, providerStatus: 'sent' } : { state: 'not_found' };
  });
  channels.primary.sms.lookups = [];
  await core.db.pool.query(
    `UPDATE deliveries SET status = 'sending', attempts = 1, sending_since = now() - interval '1 minute' WHERE id = $1`,
    [d.id],
  );
  await core.notifier.boss.send('notify-deliver-sms-transactional', { delivery_id: d.id });
  await waitFor(() => channels.primary.sms.lookups.length === 2, { what: 'a second lookup', timeoutMs: 8000 });
  await core.waitStatus(id, (s) => s.status === 'sent');
  t.equal(channels.primary.sms.calls.length, 1, 'an unanswered lookup is asked again, never a blind resend');
});
