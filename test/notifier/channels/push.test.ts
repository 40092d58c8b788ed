// @tier: pure
/**
 * Push over FCM HTTP v1 against the sandbox: the request it makes, and how every answer maps to a
 * send result (dead tokens, retries with Retry-After, permanent refusals, timeouts, no connection).
 */
import t from 'tap';
import { createFcmChannel, classifyFcm } from '../../../notifier/channels/push-fcm.js';
import type { Channel } from '../../../notifier/channels/channel.js';
import { FakeClock } from '../../../shared/clock.js';
import { closedPort, ctx, guardDeps, message, useSandbox } from './helpers.js';
import type { Sandbox } from '../../../sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { waitFor } from '../../harness/wait.js';

function push(t: TestContext, s: Sandbox | string, opts: { accessToken?: string; timeoutMs?: number } = {}): Channel {
  const c = createFcmChannel(
    {
      baseUrl: typeof s === 'string' ? s : s.url,
      projectId: 'proj',
      accessToken: opts.accessToken ?? 'fcm-token',
      timeoutMs: opts.timeoutMs ?? 2_000,
      connections: 4,
    },
    guardDeps(),
  );
  t.teardown(() => c.close());
  return c;
}

t.test('sends to the token with title, body, data, the delivery id and the tier priority', async (t) => {
  const s = await useSandbox(t);
  const c = push(t, s);
  t.equal(c.name, 'push');
  t.equal(c.provider, 'fcm');
  t.equal(c.lookup, undefined, 'FCM offers no lookup');
  const r = await c.send(message('device-1', { data: { order: '42' }, tier: 'transactional' }), ctx(2_000, 'd-push-1'));
  t.match(r, { ok: true, providerMessageId: /^projects\/proj\/messages\// });
  const [m] = s.messages({ channel: 'push' });
  t.match(m, {
    to: 'device-1',
    delivery_id: 'd-push-1',
    title: 'Hello',
    body: 'Your code is 123456',
    data: { order: '42', delivery_id: 'd-push-1', notification_id: 'n-1' },
  });
});

t.test('UNREGISTERED and INVALID_ARGUMENT about the token → invalid_token (prune, no retry)', async (t) => {
  const s = await useSandbox(t, { faults: [{ channel: 'push', unregistered_tokens: ['stale'] }] });
  const c = push(t, s);
  t.match(await c.send(message('stale'), ctx()), { ok: false, kind: 'invalid_token', token: 'stale' });
  t.match(await c.send(message('fault-unregistered-x'), ctx()), { ok: false, kind: 'invalid_token', token: 'fault-unregistered-x' });
  t.match(await c.send(message('fault-invalid_argument-x'), ctx()), {
    ok: false,
    kind: 'invalid_token',
    token: 'fault-invalid_argument-x',
  });
  t.equal(s.messages().length, 0);
});

t.test('QUOTA_EXCEEDED, UNAVAILABLE and INTERNAL → retry, honouring Retry-After', async (t) => {
  const s = await useSandbox(t);
  const c = push(t, s);
  const cases = [
    ['QUOTA_EXCEEDED', 'provider_quota_exceeded'],
    ['UNAVAILABLE', 'provider_unavailable'],
    ['INTERNAL', 'provider_internal'],
  ] as const;
  for (const [error, reason] of cases) {
    s.setFaults({ channel: 'push', error_rate: 1, error, retry_after_s: 7 });
    t.same(await c.send(message('device-1'), ctx()), {
      ok: false,
      kind: 'retry',
      reason,
      retryAfterMs: 7_000,
      detail: `FCM ${error === 'QUOTA_EXCEEDED' ? 429 : error === 'UNAVAILABLE' ? 503 : 500} ${error}`,
    });
  }
  s.setFaults({ channel: 'push', error_rate: 1, error: 'UNAVAILABLE' });
  const noHeader = await c.send(message('device-1'), ctx());
  t.match(noHeader, { kind: 'retry', reason: 'provider_unavailable' });
  t.notOk('retryAfterMs' in noHeader, 'no Retry-After, none reported');
});

t.test('refused credentials → permanent provider_auth_failed', async (t) => {
  const s = await useSandbox(t);
  const c = push(t, s, { accessToken: 'wrong' });
  t.match(await c.send(message('device-1'), ctx()), { ok: false, kind: 'permanent', reason: 'provider_auth_failed' });
});

t.test('no answer within the deadline → retry timeout, after about the deadline', async (t) => {
  // The provider holds every request for ten minutes, so in each case below the timer under test
  // is the only one that can end the send.
  const s = await useSandbox(t, { faults: [{ channel: 'push', timeout_rate: 1, hold_ms: 600_000 }] });
  const c = push(t, s, { timeoutMs: 600_000 });
  const started = performance.now();
  t.match(await c.send(message('device-1'), ctx(500, 'd-deadline')), { ok: false, kind: 'retry', reason: 'timeout' });
  t.comment(`gave up after ${Math.round(performance.now() - started)} ms (deadline 500 ms)`);
  // Not refused before the call: the provider got the request and was still holding it (on a loaded
  // machine the request's bytes may reach the sandbox after the sender gave up: wait for them).
  await waitFor(() => s.core.store.delivery('d-deadline').length > 0, { what: 'the request at the provider' });
  t.match(s.core.store.delivery('d-deadline'), [{ requests: 1, accepted: 0 }], 'the provider was called and never answered');
  // The channel's own timeout bounds a generous deadline too.
  const short = push(t, s, { timeoutMs: 100 });
  const s2 = performance.now();
  t.match(await short.send(message('device-1'), ctx(600_000)), { kind: 'retry', reason: 'timeout' });
  t.comment(`the 100 ms channel timeout gave up after ${Math.round(performance.now() - s2)} ms`);
});

t.test('a spent deadline is a timeout without calling the provider', async (t) => {
  const s = await useSandbox(t);
  const c = push(t, s);
  t.match(await c.send(message('device-1'), ctx(0)), { ok: false, kind: 'retry', reason: 'timeout' });
  t.equal(s.messages().length, 0);
});

t.test('nothing listening → retry connection_failed; an empty token → permanent missing_address', async (t) => {
  const c = push(t, `http://127.0.0.1:${await closedPort()}`);
  t.match(await c.send(message('device-1'), ctx()), { ok: false, kind: 'retry', reason: 'connection_failed' });
  t.match(await c.send(message(''), ctx()), { ok: false, kind: 'permanent', reason: 'missing_address' });
});

t.test('answer mapping without a server: other INVALID_ARGUMENT, SENDER_ID_MISMATCH, bare statuses, HTTP-date Retry-After', async (t) => {
  const clock = new FakeClock(Date.parse('2030-01-01T00:00:00Z'));
  const err = (status: number, grpc: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ error: { code: status, status: grpc, message: 'x', ...extra } });
  t.match(classifyFcm({ status: 400, headers: {}, text: err(400, 'INVALID_ARGUMENT', { message: 'Message too big' }) }, 'tk', clock), {
    kind: 'permanent',
    reason: 'invalid_message',
  });
  t.match(
    classifyFcm(
      { status: 403, headers: {}, text: err(403, 'PERMISSION_DENIED', { details: [{ errorCode: 'SENDER_ID_MISMATCH' }] }) },
      'tk',
      clock,
    ),
    { kind: 'permanent', reason: 'provider_rejected' },
    'a sender mismatch is not pruned',
  );
  t.match(classifyFcm({ status: 502, headers: {}, text: 'Bad Gateway' }, 'tk', clock), { kind: 'retry', reason: 'provider_error' });
  t.match(classifyFcm({ status: 418, headers: {}, text: '' }, 'tk', clock), { kind: 'permanent', reason: 'provider_rejected' });
  t.match(classifyFcm({ status: 200, headers: {}, text: '{}' }, 'tk', clock), { kind: 'retry', reason: 'provider_error' });
  t.match(
    classifyFcm({ status: 503, headers: { 'retry-after': 'Tue, 01 Jan 2030 00:00:30 GMT' }, text: err(503, 'UNAVAILABLE') }, 'tk', clock),
    { kind: 'retry', reason: 'provider_unavailable', retryAfterMs: 30_000 },
  );
});
