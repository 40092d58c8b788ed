/**
 * The operator's lookups through a real notifier with scripted providers: a user's notifications
 * newest first by cursor, everyone's filtered by type, channel and delivery status (the console's
 * recent activity), each with the status view and the reason for a failure or an opt-out;
 * one by id; the notification-type catalogue with its policy per tier. Operators only.
 */
import t from 'tap';
import { addDevice, createTemplate, putProfile, request, scriptedChannels, settled, startCore } from '../core/helpers.js';

t.test('notifications by recipient and by id, with per-channel status and why', async (t) => {
  const channels = scriptedChannels();
  channels.primary.email.script = () => ({ ok: false, kind: 'permanent', reason: 'invalid_recipient', detail: 'no such mailbox' });
  const core = await startCore(t, 'admin_notification_lookup', { channels });
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u1', { email: 'ada@example.test' });
  await addDevice(core, 'u1', 'tok-1');
  // The user turns marketing push off: a later marketing send is opted out, with that reason.
  const pref = await core.api('PATCH', '/api/v1/users/u1/preferences', { marketing: { push: false } }, core.user('u1'));
  t.equal(pref.status, 200, JSON.stringify(pref.body));

  const ids: string[] = [];
  for (const body of [
    request({ channels: ['push'] }),
    request({ channels: ['email'], priority: 'high', event_type: 'order.shipped' }),
    request({ channels: ['push'], priority: 'low', event_type: 'marketing.promo' }),
  ]) {
    const r = await core.notify(body);
    t.equal(r.status, 202);
    ids.push(r.body.notification_id);
  }
  t.equal((await core.notify(request({ recipient_id: 'u2' }))).status, 202, 'another user');
  for (const id of ids) await core.waitStatus(id, settled);

  const first = await core.api('GET', '/api/v1/admin/notifications?user_id=u1&limit=2', undefined, core.admin);
  t.equal(first.status, 200);
  t.equal(first.body.notifications.length, 2);
  t.type(first.body.next_cursor, 'string');
  const second = await core.api(
    'GET',
    `/api/v1/admin/notifications?user_id=u1&limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`,
    undefined,
    core.admin,
  );
  t.equal(second.body.notifications.length, 1);
  t.equal(second.body.next_cursor, null, 'the last page');
  const all = [...first.body.notifications, ...second.body.notifications];
  t.same(
    all.map((n: { id: string }) => n.id),
    [...ids].reverse(),
    'newest first, each once, only u1',
  );

  const [promo, shipped, code] = all;
  t.match(code, {
    recipient_id: 'u1',
    event_type: 'auth.code',
    priority: 'transactional',
    template_id: 'code_v1',
    requested_channels: ['push'],
    status_view: { status: 'sent', channels: { push: 'sent' } },
  });
  t.type(code.created_at, 'number');
  t.match(shipped.status_view, {
    status: 'failed',
    channels: { email: 'failed' },
    details: { email: { status: 'failed', reason: /invalid_recipient/, notification_type: 'order_updates' } },
  });
  t.match(promo.status_view, {
    status: 'opted_out',
    details: { push: { status: 'opted_out', notification_type: 'marketing' } },
  });
  t.type(promo.status_view.details.push.reason, 'string', 'the opt-out says why');

  const one = await core.api('GET', `/api/v1/admin/notifications/${shipped.id.toUpperCase()}`, undefined, core.admin);
  t.equal(one.status, 200);
  t.same(one.body, shipped, 'by id: the same item');
  t.equal((await core.api('GET', '/api/v1/admin/notifications/00000000-0000-4000-8000-000000000000', undefined, core.admin)).status, 404);
  t.equal((await core.api('GET', '/api/v1/admin/notifications/not-a-uuid', undefined, core.admin)).status, 404);

  // Everyone's (the console's recent activity), and the filters.
  const ids4 = async (q: string): Promise<string[]> => {
    const r = await core.api('GET', `/api/v1/admin/notifications?${q}`, undefined, core.admin);
    t.equal(r.status, 200, `${q || '(none)'}: ${JSON.stringify(r.body).slice(0, 200)}`);
    return (r.body.notifications as { id: string }[]).map((n) => n.id);
  };
  const everyone = await ids4('');
  t.equal(everyone.length, 4, "without user_id: everyone's");
  t.same(everyone.slice(1), [...ids].reverse(), "newest first (u2's last, so first)");
  // u1's three, whose states are settled (u2's is still on its way: left out of the comparison).
  const ofU1 = async (q: string) => (await ids4(q)).filter((id) => ids.includes(id));
  t.same(await ofU1('channel=email'), [ids[1]], 'channel=email: the one with an e-mail delivery');
  t.same(await ofU1('status=opted_out'), [ids[2]], 'status=opted_out: the marketing push');
  t.same(await ofU1('channel=email&status=failed'), [ids[1]], 'channel and status together');
  t.same(await ofU1('channel=push&status=failed'), [], 'no push of u1 failed');
  t.same(await ofU1('channel=push&status=sent'), [ids[0]], 'the push that was sent');
  t.same(await ofU1('notification_type=marketing'), [ids[2]], 'by notification type');
  t.same(await ids4('user_id=u1&notification_type=order_updates'), [ids[1]], "a user's, by type");

  for (const [q, field] of [
    ['status=nonsense', 'status'],
    ['channel=fax', 'channel'],
    ['user_id=has%20space', 'user_id'],
    ['user_id=u1&limit=0', 'limit'],
    ['user_id=u1&limit=101', 'limit'],
    ['user_id=u1&cursor=bm90LW91cnM', 'cursor'],
    ['user=u1', 'user'],
  ] as const) {
    const r = await core.api('GET', `/api/v1/admin/notifications?${q}`, undefined, core.admin);
    t.match([r.status, r.body], [400, { code: 'invalid_field', field }], `${q || '(none)'}: names ${field}`);
    t.equal(r.headers.get('content-type'), 'application/problem+json');
  }
  const nobody = await core.api('GET', '/api/v1/admin/notifications?user_id=nobody', undefined, core.admin);
  t.same(nobody.body, { notifications: [], next_cursor: null });

  for (const who of [core.service, core.user('u1')]) {
    t.equal((await core.api('GET', '/api/v1/admin/notifications?user_id=u1', undefined, who)).status, 403);
    t.equal((await core.api('GET', `/api/v1/admin/notifications/${code.id}`, undefined, who)).status, 403);
  }
  t.equal((await core.api('GET', '/api/v1/admin/notifications?user_id=u1', undefined, {})).status, 401);
});

t.test('the notification-type catalogue with its policy per tier', async (t) => {
  const core = await startCore(t, 'admin_notification_types', { env: { NOTIFIER_WORKERS: 'false' } });
  const r = await core.api('GET', '/api/v1/admin/notification-types', undefined, core.admin);
  t.equal(r.status, 200);
  const byName = Object.fromEntries(r.body.notification_types.map((x: { name: string }) => [x.name, x]));
  t.same(Object.keys(byName), ['order_updates', 'social_activity', 'security_alerts', 'marketing', 'general'], 'in catalogue order');
  t.match(byName.marketing, {
    events: ['marketing.*', 'campaign.*'],
    channels: ['push', 'email', 'in_app'],
    mandatory: false,
    sms: false,
    caps: { push: { limit: 5, window: '1h' }, email: { limit: 3, window: '24h' } },
    digest: null,
  });
  t.same(byName.marketing.policies.low, {
    allowed_channels: ['push', 'email', 'in_app'],
    opt_out: true,
    caps: true,
    quiet_hours: true,
    digest: false,
  });
  t.same(byName.security_alerts.policies.low, {
    allowed_channels: ['push', 'email', 'sms', 'in_app'],
    opt_out: false,
    caps: false,
    quiet_hours: false,
    digest: false,
  });
  t.same(byName.order_updates.policies.transactional.opt_out, false);
  t.same(byName.order_updates.failover, { push: ['sms', 'in_app'], email: ['in_app'], sms: ['in_app'] });
  t.equal((await core.api('GET', '/api/v1/admin/notification-types', undefined, core.user('u1'))).status, 403);
});
