/**
 * Tracking through a real notifier: the signed open pixel, an app's receipt and open, forward-only
 * transitions (a late signal never moves a delivery back), the in-app inbox with its keyset cursor
 * and read mark, who may see what, and the scheduled retention job.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { FakeClock } from '../../../shared/clock.js';
import { pixelFile, pixelSigner } from '../../../notifier/tracking/pixel.js';
import { advanceDelivery } from '../../../notifier/tracking/advance.js';
import { runRetention } from '../../../notifier/tracking/retention.js';
import { RETENTION_QUEUE } from '../../../notifier/queues/names.js';
import { addDevice, createTemplate, deliveries, putProfile, request, scriptedChannels, startCore, FAST_ENV, summary } from './helpers.js';

t.test('tracking', async (t) => {
  const channels = scriptedChannels();
  const core = await startCore(t, 'core_tracking', { channels });
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u1', { email: 'ada@example.test' });
  await addDevice(core, 'u1', 'tok');

  await t.test('the open pixel moves a sent e-mail to opened, only when signed', async (t) => {
    const r = await core.notify(request({ channels: ['email'], priority: 'high' }));
    const id = r.body.notification_id;
    await core.waitStatus(id, (s) => s.status === 'sent');
    const d = (await deliveries(core, id)).email;
    const file = pixelFile(pixelSigner(FAST_ENV.NOTIFIER_TRACKING_SECRET, 'http://x'), d.id);
    t.ok(channels.primary.email.calls[0]!.msg.html!.includes(file), 'the e-mail carries this pixel');

    const forged = await fetch(`${core.url}/api/v1/track/open/${d.id}.AAAAAAAAAAAAAAAAAAAAAA.gif`);
    t.equal(forged.status, 200, 'a bad signature still gets the image');
    t.equal(forged.headers.get('content-type'), 'image/gif');
    t.equal((await core.status(id)).status, 'sent', 'but records nothing');

    const px = await fetch(`${core.url}/api/v1/track/open/${file}`);
    t.equal(px.status, 200);
    t.equal(px.headers.get('cache-control'), 'no-store, max-age=0');
    t.equal(
      Buffer.from(await px.arrayBuffer())
        .subarray(0, 6)
        .toString(),
      'GIF89a',
    );
    t.same(summary(await core.status(id)), { status: 'opened', channels: { email: 'opened' } });

    // Forward only: a late "sent" or "delivered" changes nothing.
    t.same(await advanceDelivery(core.db.pool, d.id, 'delivered'), { status: 'opened', moved: false });
    t.same(await advanceDelivery(core.db.pool, d.id, 'sent'), { status: 'opened', moved: false });
    t.equal((await core.status(id)).status, 'opened');
  });

  await t.test("an app reports receipt and open with the user's token", async (t) => {
    const r = await core.notify(request({ channels: ['push'], priority: 'high', idempotency_key: 'app' }));
    const id = r.body.notification_id;
    await core.waitStatus(id, (s) => s.status === 'sent');
    const d = (await deliveries(core, id)).push;
    const path = `/api/v1/deliveries/${d.id}/events`;
    t.equal(
      (await core.api('POST', path, { event: 'received' }, core.user('someone-else'))).status,
      404,
      "another user's delivery is not found",
    );
    t.equal((await core.api('POST', path, { event: 'clicked' }, core.user('u1'))).body.field, 'event');
    t.same((await core.api('POST', path, { event: 'received' }, core.user('u1'))).body, { delivery_id: d.id, status: 'delivered' });
    t.same((await core.api('POST', path, { event: 'opened' }, core.user('u1'))).body, { delivery_id: d.id, status: 'opened' });
    t.same(
      (await core.api('POST', path, { event: 'received' }, core.user('u1'))).body,
      { delivery_id: d.id, status: 'opened' },
      'never backward',
    );
    t.equal((await core.api('POST', `/api/v1/deliveries/${randomUUID()}/events`, { event: 'opened' })).status, 404);

    t.equal(
      (await core.api('GET', `/api/v1/notifications/${id}/status`, undefined, core.user('u1'))).status,
      200,
      'the recipient may see the status',
    );
    t.equal((await core.api('GET', `/api/v1/notifications/${id}/status`, undefined, core.user('u2'))).status, 404, 'others may not');
    t.equal((await core.api('GET', `/api/v1/notifications/not-a-uuid/status`)).status, 404);
  });

  await t.test('the inbox: newest first, an opaque cursor, unread filter, read visible on the next fetch', async (t) => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await core.notify(
        request({ recipient_id: 'reader', channels: ['in_app'], priority: 'normal', template_data: { name: `n${i}`, code: String(i) } }),
      );
      ids.push(r.body.notification_id);
      await core.waitStatus(r.body.notification_id, (s) => s.status === 'sent');
    }
    const me = core.user('reader');
    const base = '/api/v1/users/reader/notifications';
    const p1 = await core.api('GET', `${base}?limit=2`, undefined, me);
    t.equal(p1.status, 200);
    t.same(
      p1.body.notifications.map((n: { notification_id: string }) => n.notification_id),
      [ids[4], ids[3]],
    );
    t.type(p1.body.next_cursor, 'string');
    const p2 = await core.api('GET', `${base}?limit=2&cursor=${p1.body.next_cursor}`, undefined, me);
    t.same(
      p2.body.notifications.map((n: { notification_id: string }) => n.notification_id),
      [ids[2], ids[1]],
    );
    const p3 = await core.api('GET', `${base}?limit=2&cursor=${p2.body.next_cursor}`, undefined, me);
    t.same(
      p3.body.notifications.map((n: { notification_id: string }) => n.notification_id),
      [ids[0]],
    );
    t.notOk('next_cursor' in p3.body, 'no cursor on the last page');
    t.match((await core.api('GET', `${base}?cursor=garbage`, undefined, me)).body, { code: 'invalid_field', field: 'cursor' });
    t.equal((await core.api('GET', `${base}?limit=0`, undefined, me)).body.field, 'limit');
    t.equal((await core.api('GET', base, undefined, core.user('intruder'))).status, 403);

    const item = p1.body.notifications[0];
    t.match(item, { title: 'Hello n4', body: 'Code 4', read: false, event_type: 'auth.code' });
    t.type(item.created_at, 'number');
    const read = await core.api('POST', `${base}/${item.id}/read`, undefined, me);
    t.equal(read.status, 204);
    t.equal(read.body, undefined);
    t.equal((await core.api('POST', `${base}/${item.id}/read`, undefined, me)).status, 204, 'idempotent');
    t.equal((await core.api('POST', `${base}/${randomUUID()}/read`, undefined, me)).status, 404);
    const after = await core.api('GET', `${base}?limit=1`, undefined, me);
    t.match(after.body.notifications[0], { id: item.id, read: true });
    t.type(after.body.notifications[0].read_at, 'number');
    const unread = await core.api('GET', `${base}?unread=true`, undefined, me);
    t.equal(unread.body.notifications.length, 4);
    t.notOk(unread.body.notifications.some((n: { id: string }) => n.id === item.id));
    t.same(summary(await core.status(ids[4]!)), { status: 'opened', channels: { in_app: 'read' } }, 'the in_app delivery reports read');
  });

  await t.test('retention deletes what is older than the window, on a schedule', async (t) => {
    const schedules = await core.notifier.boss.getSchedules();
    t.ok(
      schedules.some((s) => s.name === RETENTION_QUEUE && s.cron === '17 3 * * *'),
      'the retention job is a scheduled pg-boss job',
    );
    const r = await core.notify(request({ channels: ['in_app'], priority: 'low', idempotency_key: 'old' }));
    const old = r.body.notification_id;
    await core.waitStatus(old, (s) => s.status === 'sent');
    await core.db.pool.query(`UPDATE notifications SET created_at = now() - interval '91 days' WHERE id = $1`, [old]);
    await core.db.pool.query(`UPDATE inbox_items SET created_at = now() - interval '91 days' WHERE notification_id = $1`, [old]);
    await core.db.pool.query(`UPDATE idempotency_keys SET expires_at = now() - interval '1 day' WHERE key = 'old'`);
    // A closed digest of that age, and an open one, which stays whatever its age.
    await core.db.pool.query(
      `INSERT INTO digests (id, user_id, notification_type, channel, status, delivery_id, opened_at)
       VALUES (gen_random_uuid(), 'u1', 'social_activity', 'push', 'closed', gen_random_uuid(), now() - interval '91 days'),
              (gen_random_uuid(), 'u1', 'social_activity', 'push', 'open', gen_random_uuid(), now() - interval '91 days')`,
    );
    // A provider event of that age (notifier/feedback), and a recent one.
    await core.db.pool.query(
      `INSERT INTO provider_events (provider, event_key, provider_message_id, kind, provider_type, result, received_at)
       VALUES ('ses', 'old', 'm1', 'delivered', 'Delivery', 'unknown', now() - interval '91 days'),
              ('ses', 'new', 'm2', 'delivered', 'Delivery', 'unknown', now())`,
    );
    const clock = new FakeClock(Date.now());
    const total = (await core.db.pool.query('SELECT count(*)::int AS n FROM notifications')).rows[0].n;
    const result = await runRetention(core.db.pool, new Date(clock.now() - 90 * 86_400_000));
    t.same(result, { notifications: 1, digests: 1, inboxItems: 1, idempotencyKeys: 1, providerEvents: 1 });
    t.same((await core.db.pool.query('SELECT event_key FROM provider_events')).rows, [{ event_key: 'new' }], 'recent provider events stay');
    t.same((await core.db.pool.query('SELECT status FROM digests')).rows, [{ status: 'open' }], 'an open digest is never deleted');
    t.equal((await core.db.pool.query('SELECT count(*)::int AS n FROM notifications')).rows[0].n, total - 1);
    t.equal(
      (await core.db.pool.query('SELECT count(*)::int AS n FROM deliveries WHERE notification_id = $1', [old])).rows[0].n,
      0,
      'its deliveries went with it',
    );
    t.equal((await core.api('GET', `/api/v1/notifications/${old}/status`)).status, 404);
  });
});
