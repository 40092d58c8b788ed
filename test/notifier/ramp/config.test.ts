/** The ramp's configuration: a new provider's name must not be another provider's of its channel; costs parse. */
import t from 'tap';
import { ConfigError, loadConfig } from '../../../shared/config.js';
import { channelsConfig, createChannels } from '../../../notifier/channels/index.js';

const deps = { writeInbox: async () => 'x', sendTimeoutMs: 1000 };

t.test('a new provider named like the old one stops the start, naming the variable', async (t) => {
  const config = loadConfig(channelsConfig, { SMS_RAMP_URL: 'http://127.0.0.1:9/providers/b', SMS_RAMP_NAME: 'twilio' });
  t.throws(() => createChannels(config, deps), new ConfigError('SMS_RAMP_NAME', 'names twilio, already the name of another sms provider'));
});

t.test('ramp providers are built beside the primaries', async (t) => {
  const config = loadConfig(channelsConfig, { FCM_RAMP_URL: 'http://127.0.0.1:9/providers/v2', FCM_RAMP_NAME: 'fcm-v2' });
  const set = createChannels(config, deps);
  t.teardown(() => set.close());
  t.equal(set.ramp.push?.provider, 'fcm-v2');
  t.equal(set.ramp.email, undefined);
  t.ok(set.all().includes(set.ramp.push!));
});

t.test('PROVIDER_COSTS: name=cost pairs, one message naming the bad item', async (t) => {
  t.same(
    [...loadConfig(channelsConfig, { PROVIDER_COSTS: 'twilio=0.0079, sms-b=0.0065' }).PROVIDER_COSTS],
    [
      ['twilio', 0.0079],
      ['sms-b', 0.0065],
    ],
  );
  t.throws(
    () => loadConfig(channelsConfig, { PROVIDER_COSTS: 'twilio=0.0079,sms-b' }),
    new ConfigError('PROVIDER_COSTS', 'item 2: must be name=cost, e.g. twilio=0.0079'),
  );
  t.throws(() => loadConfig(channelsConfig, { FCM_RAMP_NAME: 'FCM 2' }), { code: 'config_variable_invalid', variable: 'FCM_RAMP_NAME' });
});
