// @tier: pure
/**
 * Each provider behind its own circuit breaker and connection pool: a failing provider's breaker
 * opens and then answers `circuit_open` without calling it, probes it after the cool-down, and
 * never touches the other channels; a provider that only times out does not slow another
 * channel's sends (measured).
 */
import t from 'tap';
import { createFcmChannel } from '../../../notifier/channels/push-fcm.js';
import { createTwilioChannel } from '../../../notifier/channels/sms-twilio.js';
import type { GuardDeps } from '../../../notifier/channels/breaker.js';
import { FakeClock, systemClock } from '../../../shared/clock.js';
import { createRegistry } from '../../../shared/metrics.js';
import type { Sandbox } from '../../../notifier/sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { ctx, message, useSandbox } from './helpers.js';

function channels(t: TestContext, s: Sandbox, deps: GuardDeps) {
  const push = createFcmChannel({ baseUrl: s.url, projectId: 'p', accessToken: 'fcm-token', timeoutMs: 2_000, connections: 8 }, deps);
  const sms = createTwilioChannel(
    { baseUrl: s.url, accountSid: 'ACtest', authToken: 'sms-token', from: '+15005550006', timeoutMs: 2_000, connections: 8 },
    deps,
  );
  t.teardown(() => Promise.all([push.close(), sms.close()]));
  return { push, sms };
}

t.test('a failing provider: the breaker opens, stops calling it, probes after the cool-down, closes', async (t) => {
  const s = await useSandbox(t, { faults: [{ channel: 'sms', error_rate: 1, error: 'UNAVAILABLE' }] });
  const clock = new FakeClock(1_000_000);
  const registry = createRegistry('test', { defaults: false });
  const { push, sms } = channels(t, s, {
    clock,
    registry,
    breaker: { errorThreshold: 0.5, minVolume: 4, windowMs: 10_000, coolDownMs: 5_000 },
  });
  for (let i = 0; i < 4; i++) t.match(await sms.send(message('+15550000001'), ctx(2_000, `fail-${i}`)), { reason: 'provider_unavailable' });
  t.equal(sms.breakerState(), 'open');
  t.match(await registry.getSingleMetricAsString('circuit_breaker_state'), /breaker="sms:twilio"[^}]*} 2/);

  const refused = await sms.send(message('+15550000001'), ctx(2_000, 'while-open'));
  t.same(refused, { ok: false, kind: 'retry', reason: 'circuit_open', retryAfterMs: 5_000, detail: 'sms:twilio circuit is open' });
  t.same(s.core.store.delivery('while-open'), [], 'the provider was not called');

  t.equal(push.breakerState(), 'closed', 'the push breaker is untouched');
  t.ok((await push.send(message('device-1'), ctx())).ok, 'push still sends');

  clock.advance(5_000);
  s.clearFaults();
  t.equal(sms.breakerState(), 'half-open');
  t.ok((await sms.send(message('+15550000001'), ctx(2_000, 'probe-1'))).ok, 'probe 1 reaches the provider');
  t.ok((await sms.send(message('+15550000001'), ctx(2_000, 'probe-2'))).ok, 'probe 2 reaches the provider');
  t.equal(sms.breakerState(), 'closed');
  t.match(await registry.getSingleMetricAsString('provider_calls_total'), /result="circuit_open"[^}]*} 1/);
});

t.test('refusals of single messages and dead tokens do not open a breaker', async (t) => {
  const s = await useSandbox(t);
  const { push, sms } = channels(t, s, {
    clock: new FakeClock(0),
    breaker: { errorThreshold: 0.5, minVolume: 2, windowMs: 10_000, coolDownMs: 5_000 },
  });
  for (let i = 0; i < 4; i++) {
    t.match(await push.send(message('fault-unregistered'), ctx()), { kind: 'invalid_token' });
    t.match(await sms.send(message('+999400000'), ctx()), { kind: 'permanent' });
  }
  t.equal(push.breakerState(), 'closed');
  t.equal(sms.breakerState(), 'closed');
});

const percentile = (xs: number[], p: number): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

t.test('an SMS provider that only times out does not move push latency', async (t) => {
  const s = await useSandbox(t, { faults: [{ channel: 'sms', timeout_rate: 1, hold_ms: 10_000 }] });
  // A breaker that never opens: the worst case, every SMS send waits out its whole deadline.
  const { push, sms } = channels(t, s, {
    clock: systemClock,
    breaker: { errorThreshold: 1, minVolume: 1_000_000, windowMs: 10_000, coolDownMs: 1 },
  });
  const timePushes = async (n: number): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const started = performance.now();
      const r = await push.send(message('device-1'), ctx());
      out.push(performance.now() - started);
      if (!r.ok) throw new Error(`push failed: ${JSON.stringify(r)}`);
      // Paced, so the measurement spans more than one SMS deadline.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return out;
  };
  await timePushes(10); // warm the connection pool
  const baseline = await timePushes(60);

  let stop = false;
  let smsTimeouts = 0;
  const smsLoad = Array.from({ length: 16 }, async () => {
    while (!stop) {
      const r = await sms.send(message('+15550000002'), ctx(300));
      if (!r.ok && r.kind === 'retry' && r.reason === 'timeout') smsTimeouts++;
    }
  });
  await new Promise((r) => setTimeout(r, 50)); // every SMS connection is now held
  const loaded = await timePushes(60);
  stop = true;
  await Promise.all(smsLoad);

  const [b50, b95, l50, l95] = [percentile(baseline, 50), percentile(baseline, 95), percentile(loaded, 50), percentile(loaded, 95)];
  const figures = `push p50 ${b50.toFixed(1)} → ${l50.toFixed(1)} ms, p95 ${b95.toFixed(1)} → ${l95.toFixed(1)} ms, ${smsTimeouts} SMS timeouts meanwhile`;
  t.comment(figures);
  t.ok(smsTimeouts >= 32, `the SMS provider kept timing out throughout (${smsTimeouts})`);
  // Had push queued behind SMS, its sends would take about the SMS deadline (300 ms).
  t.ok(l95 < 150, `push p95 stays far below the SMS deadline: ${figures}`);
  t.ok(l50 < b50 + 25, `push p50 does not move: ${figures}`);
});
