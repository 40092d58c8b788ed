// @tier: pure
/**
 * SMS over the Twilio-style API against the sandbox: the form it posts, idempotency keys that make
 * a retried request a no-op at the provider, the answer mapping, and lookup for reconciliation.
 */
import t from 'tap';
import { createTwilioChannel, classifyTwilio } from '../../../notifier/channels/sms-twilio.js';
import type { Channel } from '../../../notifier/channels/channel.js';
import { systemClock } from '../../../shared/clock.js';
import type { Sandbox } from '../../../notifier/sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { closedPort, ctx, guardDeps, message, useSandbox } from './helpers.js';

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

t.test('posts To, From and Body with the idempotency key and delivery id', async (t) => {
  const s = await useSandbox(t);
  const c = sms(t, s);
  t.equal(c.provider, 'twilio');
  const r = await c.send(message('+15551230001'), { deliveryId: 'd-sms-1', idempotencyKey: 'key-sms-1', deadlineMs: 2_000 });
  t.match(r, { ok: true, providerMessageId: /^SM[0-9a-f]{32}$/ });
  t.match(s.messages({ channel: 'sms' }), [
    { to: '+15551230001', from: '+15005550006', body: 'Your code is 123456', delivery_id: 'd-sms-1', idempotency_key: 'key-sms-1' },
  ]);
});

t.test('a retried send with the same key is not a second message at the provider', async (t) => {
  const s = await useSandbox(t);
  const c = sms(t, s);
  const context = ctx(2_000, 'd-retry');
  const first = await c.send(message('+15551230002'), context);
  const again = await c.send(message('+15551230002'), context);
  t.same(again, first, 'the same message sid');
  t.equal(s.messages({ channel: 'sms' }).length, 1);
  t.match(s.core.store.delivery('d-retry'), [{ requests: 2, accepted: 1 }]);
});

t.test('an answer lost after the provider accepted: lookup finds the message, and the retry sends nothing new', async (t) => {
  const s = await useSandbox(t, { faults: [{ channel: 'sms', lost_response_rate: 1, hold_ms: 5_000 }] });
  const c = sms(t, s);
  const context = ctx(200, 'd-lost');
  t.match(await c.send(message('+15551230003'), context), { ok: false, kind: 'retry', reason: 'timeout' });
  const found = await c.lookup!('d-lost');
  t.match(found, { state: 'found', providerMessageId: /^SM/, providerStatus: 'queued' });
  s.clearFaults();
  const retried = await c.send(message('+15551230003'), { ...context, deadlineMs: 2_000 });
  t.same(retried, { ok: true, providerMessageId: (found as { providerMessageId: string }).providerMessageId });
  t.same(s.core.store.duplicates(), [], 'the provider saw the delivery once');
  t.same(await c.lookup!('never-sent'), { state: 'not_found' });
});

t.test('lookup while the provider is unreachable → unknown', async (t) => {
  const c = sms(t, `http://127.0.0.1:${await closedPort()}`);
  t.same(await c.lookup!('d-any'), { state: 'unknown', reason: 'connection_failed' });
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
