// @tier: pure
/**
 * SMS over the Twilio-style API against the sandbox: the form it posts, idempotency keys that make
 * what a repeated request is at the provider (a second message, as at Twilio), the answer mapping.
 */
import t from 'tap';
import { createTwilioChannel, classifyTwilio } from '../../../notifier/channels/sms-twilio.js';
import type { Channel } from '../../../notifier/channels/channel.js';
import { systemClock } from '../../../shared/clock.js';
import type { Sandbox } from '../../../sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { ctx, guardDeps, message, useSandbox } from './helpers.js';

function sms(t: TestContext, s: Sandbox | string, opts: { authToken?: string } = {}): Channel {
  const c = createTwilioChannel(
    {
      baseUrl: typeof s === 'string' ? s : s.url,
      accountSid: 'ACtest',
      authToken: opts.authToken ?? 'sms-token',
      from: '+15005550006',
      timeoutMs: 2_000,
      connections: 4,
    },
    guardDeps(),
  );
  t.teardown(() => c.close());
  return c;
}

t.test('posts To, From and Body with the delivery id, and no idempotency key (Twilio takes none)', async (t) => {
  const s = await useSandbox(t);
  const c = sms(t, s);
  t.equal(c.provider, 'twilio');
  t.equal(c.lookup, undefined, 'Twilio cannot be asked whether it has a message of ours');
  const r = await c.send(message('+15551230001'), { deliveryId: 'd-sms-1', idempotencyKey: 'key-sms-1', deadlineMs: 2_000 });
  t.match(r, { ok: true, providerMessageId: /^SM[0-9a-f]{32}$/ });
  const [m] = s.messages({ channel: 'sms' });
  t.match(m, { to: '+15551230001', from: '+15005550006', body: 'Your code is 123456', delivery_id: 'd-sms-1' });
  t.notOk('idempotency_key' in m!);
});

t.test('a retried send is a second message at the provider, and a second message on the phone', async (t) => {
  const s = await useSandbox(t);
  const c = sms(t, s);
  const context = ctx(2_000, 'd-retry');
  const first = await c.send(message('+15551230002'), context);
  const again = await c.send(message('+15551230002'), context);
  t.not((again as { providerMessageId: string }).providerMessageId, (first as { providerMessageId: string }).providerMessageId);
  t.equal(s.messages({ channel: 'sms' }).length, 2);
  t.match(s.core.store.delivery('d-retry'), [{ requests: 2, accepted: 2 }]);
});

t.test('429, 503 and 500 → retry with Retry-After; invalid number → permanent invalid_recipient', async (t) => {
  const s = await useSandbox(t, { faults: [{ channel: 'sms', retry_after_s: 4 }] });
  const c = sms(t, s);
  t.match(await c.send(message('+999429000'), ctx()), { kind: 'retry', reason: 'provider_quota_exceeded', retryAfterMs: 4_000 });
  t.match(await c.send(message('+999503000'), ctx()), { kind: 'retry', reason: 'provider_unavailable', retryAfterMs: 4_000 });
  t.match(await c.send(message('+999500000'), ctx()), { kind: 'retry', reason: 'provider_internal', retryAfterMs: 4_000 });
  t.match(await c.send(message('+999400000'), ctx()), { kind: 'permanent', reason: 'invalid_recipient' });
  t.match(await c.send(message('+999404000'), ctx()), { kind: 'permanent', reason: 'invalid_recipient' });
  t.match(await c.send(message('+999408000'), ctx(150)), { kind: 'retry', reason: 'timeout' });
  t.match(await c.send(message(''), ctx()), { kind: 'permanent', reason: 'missing_address' });
  t.equal(s.messages().length, 0);
});

t.test('refused credentials → permanent provider_auth_failed', async (t) => {
  const s = await useSandbox(t);
  t.match(await sms(t, s, { authToken: 'wrong' }).send(message('+15551230004'), ctx()), {
    kind: 'permanent',
    reason: 'provider_auth_failed',
  });
});

t.test('answer mapping without a server: other 4xx and 5xx', async (t) => {
  const answer = (status: number, body: unknown) => ({ status, headers: {}, text: JSON.stringify(body) });
  t.match(classifyTwilio(answer(400, { code: 21610, message: 'unsubscribed' }), systemClock), {
    kind: 'permanent',
    reason: 'invalid_recipient',
  });
  t.match(classifyTwilio(answer(400, { code: 30001, message: 'queue overflow' }), systemClock), {
    kind: 'permanent',
    reason: 'provider_rejected',
  });
  t.match(classifyTwilio(answer(502, {}), systemClock), { kind: 'retry', reason: 'provider_error' });
  t.match(classifyTwilio(answer(201, {}), systemClock), { kind: 'retry', reason: 'provider_error' }, 'accepted without a sid');
});
