/**
 * Routing and delivery end to end, through a real notifier over its own database, with scripted
 * channels: push to every device (dead tokens pruned), e-mail with the signed open pixel, SMS,
 * in-app into the inbox; the status view per channel; and the rule that a delivery already sent
 * is never sent again.
 */
import t from 'tap';
import { addDevice, createTemplate, deliveries, putProfile, request, scriptedChannels, startCore, summary } from './helpers.js';
import { waitFor } from '../../harness/wait.js';
import { getProfiles } from '../../../notifier/profiles/index.js';

t.test('a notification reaches every requested channel, once', async (t) => {
  const channels = scriptedChannels();
  const core = await startCore(t, 'core_delivery', { channels });
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u1', { email: 'ada@example.test', phone: '+14155550123', locale: 'fr' });
  await addDevice(core, 'u1', 'token-a');
  await addDevice(core, 'u1', 'token-dead');
  channels.primary.push.script = (msg, ctx) =>
    msg.to === 'token-dead'
      ? { ok: false, kind: 'invalid_token', token: msg.to }
      : { ok: true, providerMessageId: `fcm-${ctx.idempotencyKey}` };

  const r = await core.notify(request({ channels: ['push', 'email', 'sms', 'in_app'], priority: 'high' }));
  t.equal(r.status, 202);
  t.same(Object.keys(r.body).sort(), ['notification_id', 'status']);
  t.equal(r.body.status, 'accepted');
  const id = r.body.notification_id as string;

  const s = await core.waitStatus(id, (s) => Object.values(s.channels).every((c) => c === 'sent'));
  t.same(summary(s), { status: 'sent', channels: { push: 'sent', email: 'sent', sms: 'sent', in_app: 'sent' } });

  const d = await deliveries(core, id);
  t.equal(d.push.attempts, 1, 'one attempt each');
  t.equal(d.push.idempotency_key.length, 64, 'delivery idempotency key is a sha256');
  t.equal(channels.primary.push.calls.length, 2, 'push went to both device tokens');
  const keys = channels.primary.push.calls.map((c) => c.ctx.idempotencyKey);
  t.ok(keys.every((k) => k.startsWith(`${d.push.id}:`)) && new Set(keys).size === 2, 'one provider key per token, from the delivery id');
  t.equal(channels.primary.push.calls[0]!.msg.title, 'Salut Ada', "rendered in the profile's locale");
  t.same(channels.primary.push.calls[0]!.msg.data, { notification_id: id, delivery_id: d.push.id, event_type: 'auth.code' });

  const devices = await core.api('GET', '/api/v1/users/u1/devices', undefined, core.service);
  t.same(
    devices.body.devices?.map((x: { token: string }) => x.token) ?? devices.body.map?.((x: { token: string }) => x.token),
    ['token-a'],
    'the dead token was pruned',
  );

  const [email] = channels.primary.email.calls;
  t.equal(email!.msg.to, 'ada@example.test');
  t.equal(email!.ctx.idempotencyKey, d.email.id, 'the delivery id is the provider idempotency key');
  t.match(email!.msg.html, new RegExp(`<img src="http://edge\\.test/api/v1/track/open/${d.email.id}\\.[A-Za-z0-9_-]{22}\\.gif"`));
  t.equal(channels.primary.sms.calls[0]!.msg.to, '+14155550123');

  const inbox = await core.api('GET', '/api/v1/users/u1/notifications', undefined, core.user('u1'));
  t.equal(inbox.status, 200);
  t.equal(inbox.body.notifications.length, 1);
  t.match(inbox.body.notifications[0], {
    notification_id: id,
    event_type: 'auth.code',
    title: 'Bonjour Ada',
    body: 'Code 123456',
    read: false,
  });

  // Any redelivery of the same job finds it sent and sends nothing.
  await core.notifier.boss.send('notify-deliver-email-high', { delivery_id: d.email.id });
  await waitFor(
    async () =>
      (
        await core.db.pool.query(
          `SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'notify-deliver-email-high' AND state = 'completed'`,
        )
      ).rows[0].n === 2,
  );
  t.equal(channels.primary.email.calls.length, 1, 'a sent delivery is skipped, not sent again');
});

t.test('without channels a type whose defaults are push only goes to push; a request locale overrides the profile', async (t) => {
  const channels = scriptedChannels();
  const core = await startCore(t, 'core_default', { channels });
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u2', { locale: 'fr' });
  await addDevice(core, 'u2', 'tok');
  // user.* matches only the default catalogue's fallback type, `general`, whose channels are push.
  const r = await core.notify(request({ recipient_id: 'u2', priority: 'normal', locale: 'en-US', event_type: 'user.welcome' }));
  t.equal(r.status, 202);
  const s = await core.waitStatus(r.body.notification_id, (s) => s.status === 'sent');
  t.same(s.channels, { push: 'sent' });
  t.equal(channels.primary.push.calls[0]!.msg.title, 'Hi Ada', 'en_US falls back to en, not the profile locale');
});

t.test('recipients are read once per fetched batch; a failed batch read falls back to each send reading its own', async (t) => {
  const channels = scriptedChannels();
  const calls: string[][] = [];
  let failNext = true;
  const core = await startCore(t, 'core_batch_read', {
    channels,
    deps: {
      directory: {
        getProfiles: async (ids) => {
          calls.push([...ids]);
          if (failNext) {
            failNext = false;
            throw new Error('the batch read failed');
          }
          return getProfiles(core.notifier.pool, ids);
        },
      },
    },
  });
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u3', { email: 'grace@example.test', phone: '+14155550199' });
  await addDevice(core, 'u3', 'tok-3');
  const r = await core.notify(request({ recipient_id: 'u3', channels: ['push', 'email', 'sms'], priority: 'high' }));
  const s = await core.waitStatus(r.body.notification_id, (s) => Object.values(s.channels).every((c) => c === 'sent'));
  t.same(s.channels, { push: 'sent', email: 'sent', sms: 'sent' }, 'every channel sent, the one whose batch read failed too');
  t.equal(channels.primary.email.calls[0]!.msg.to, 'grace@example.test');
  t.equal(channels.primary.sms.calls[0]!.msg.to, '+14155550199');
  t.equal(channels.primary.push.calls.length, 1);
  // Three batches (one per channel queue), the first read failed and its send read again: four reads.
  t.equal(calls.length, 4, 'one read per batch, plus the fallback');
  t.ok(
    calls.every((ids) => ids.length === 1 && ids[0] === 'u3'),
    'each read asks for the recipient once',
  );
});
