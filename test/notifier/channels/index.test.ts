// @tier: pure
/** Building every channel from configuration: primaries, configured secondaries, metrics, close. */
import t from 'tap';
import { loadConfig } from '../../../shared/config.js';
import { createRegistry } from '../../../shared/metrics.js';
import { channelsConfig, createChannels, CHANNEL_ENV_NAMES } from '../../../notifier/channels/index.js';
import { ENV } from '../../../bin/env-catalogue.js';
import { ctx, message, useSandbox } from './helpers.js';

t.test('the defaults point at the sandbox under npm start', async (t) => {
  const c = loadConfig(channelsConfig, {});
  t.equal(c.FCM_URL, 'http://127.0.0.1:8089');
  t.equal(c.SMS_URL, 'http://127.0.0.1:8089');
  t.equal(c.SMTP_URL, 'smtp://127.0.0.1:8090');
  t.equal(c.FCM_ACCESS_TOKEN, ENV.FCM_ACCESS_TOKEN.default);
  t.equal(c.SMS_SECONDARY_URL, undefined);
  t.ok(
    CHANNEL_ENV_NAMES.every((n) => n in ENV),
    'every name is in the catalogue',
  );
  t.throws(() => loadConfig(channelsConfig, { SMTP_URL: 'http://mail' }), /^config: SMTP_URL must be a URL with scheme smtp or smtps$/);
  t.throws(() => loadConfig(channelsConfig, { SMTP_FROM: 'nobody' }), /config: SMTP_FROM must contain an e-mail address/);
});

t.test('every channel and secondary, sending through the sandbox, with breaker metrics', async (t) => {
  const s = await useSandbox(t, { credentials: {} });
  const config = loadConfig(channelsConfig, {
    FCM_URL: s.url,
    SMS_URL: s.url,
    SMTP_URL: s.smtpUrl,
    SMS_SECONDARY_URL: `${s.url}/providers/backup`,
    FCM_SECONDARY_URL: `${s.url}/providers/backup`,
  });
  const registry = createRegistry('test', { defaults: false });
  const inbox: string[] = [];
  const set = createChannels(config, {
    sendTimeoutMs: 2_000,
    registry,
    writeInbox: async (_m, c) => void inbox.push(c.deliveryId),
  });
  t.teardown(() => set.close());
  t.same(
    set.all().map((c) => `${c.name}:${c.provider}`),
    ['push:fcm', 'email:smtp', 'sms:twilio', 'in_app:inbox', 'push:fcm-secondary', 'sms:twilio-secondary'],
  );
  t.equal(set.secondary.email, undefined, 'no SMTP_SECONDARY_URL, no secondary e-mail');
  t.ok((await set.primary.push.send(message('tok'), ctx())).ok);
  t.ok((await set.primary.email.send(message('a@example.test'), ctx())).ok);
  t.ok((await set.primary.sms.send(message('+15551110000'), ctx())).ok);
  t.ok((await set.primary.in_app.send(message('user-1'), ctx(1_000, 'd-inbox'))).ok);
  t.ok((await set.secondary.sms!.send(message('+15551110000'), ctx())).ok);
  t.same(inbox, ['d-inbox']);
  t.equal(s.messages({ provider: 'backup' }).length, 1, 'the secondary is its own provider at the sandbox');
  const states = await registry.getSingleMetricAsString('circuit_breaker_state');
  for (const b of ['push:fcm', 'email:smtp', 'sms:twilio', 'in_app:inbox', 'sms:twilio-secondary']) t.match(states, `breaker="${b}"`);
});
