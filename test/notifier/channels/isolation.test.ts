// @tier: pure
/**
 * Each provider behind its own circuit breaker and connection pool: a failing provider's breaker
 * opens and then answers `circuit_open` without calling it, probes it after the cool-down, and
 * never touches the other channels; a provider that only times out does not slow another
 * channel's sends: they go out while every SMS connection is held.
 */
import t from 'tap';
import { createFcmChannel } from '../../../notifier/channels/push-fcm.js';
import { createTwilioChannel } from '../../../notifier/channels/sms-twilio.js';
import type { GuardDeps } from '../../../notifier/channels/breaker.js';
import { FakeClock, systemClock } from '../../../shared/clock.js';
import { createRegistry } from '../../../shared/metrics.js';
import type { Sandbox } from '../../../sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { waitFor } from '../../harness/wait.js';
import { ctx, message, useSandbox } from './helpers.js';

function channels(t: TestContext, s: Sandbox, deps: GuardDeps, smsTimeoutMs = 2_000) {
  const push = createFcmChannel({ baseUrl: s.url, projectId: 'p', accessToken: 'fcm-token', timeoutMs: 2_000, connections: 8 }, deps);
  const sms = createTwilioChannel(
    { baseUrl: s.url, accountSid: 'ACtest', authToken: 'sms-token', from: '+15005550006', timeoutMs: smsTimeoutMs, connections: 8 },
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

t.test('an SMS provider that only times out does not hold up push sends', async (t) => {
  // Every SMS request is held for ten minutes and the SMS sends allow as long: while they are in
  // flight, every SMS connection stays taken. Had push shared SMS's pool or queue, its sends could
  // not finish at all.
  const registry = createRegistry('sandbox', { defaults: false });
  const s = await useSandbox(t, { registry, faults: [{ channel: 'sms', timeout_rate: 1, hold_ms: 600_000 }] });
  // A breaker that never opens: the worst case, every SMS send waits.
  const { push, sms } = channels(
    t,
    s,
    { clock: systemClock, breaker: { errorThreshold: 1, minVolume: 1_000_000, windowMs: 10_000, coolDownMs: 1 } },
    600_000,
  );
  const timePushes = async (n: number): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const started = performance.now();
      const r = await push.send(message('device-1'), ctx());
      out.push(performance.now() - started);
      if (!r.ok) throw new Error(`push failed: ${JSON.stringify(r)}`);
    }
    return out;
  };
  await timePushes(10); // warm the connection pool
  const baseline = await timePushes(60);

  const smsHeld = async (): Promise<number> => {
    const m = (await registry.getSingleMetric('sandbox_requests_total')?.get())?.values ?? [];
    return m.filter((v) => v.labels.channel === 'sms' && v.labels.outcome === 'timeout').reduce((n, v) => n + v.value, 0);
  };
  let smsSettled = 0;
  const smsSends = Array.from({ length: 16 }, (_, i) =>
    sms.send(message('+15550000002'), ctx(600_000, `sms-held-${i}`)).finally(() => smsSettled++),
  );
  await waitFor(async () => (await smsHeld()) >= 8, { what: 'the provider to hold all 8 SMS connections' });
  const loaded = await timePushes(60);
  t.equal(smsSettled, 0, 'no SMS send ended while the pushes went out');
  t.equal(await smsHeld(), 8, 'all 8 SMS connections were held throughout (the other 8 sends queued behind them)');
  t.pass('60 pushes went out with every SMS connection held');

  const [b50, b95, l50, l95] = [percentile(baseline, 50), percentile(baseline, 95), percentile(loaded, 50), percentile(loaded, 95)];
  t.comment(`push p50 ${b50.toFixed(1)} → ${l50.toFixed(1)} ms, p95 ${b95.toFixed(1)} → ${l95.toFixed(1)} ms with SMS held`);
  s.core.releaseWaits(); // the held SMS requests are answered now
  await Promise.all(smsSends);
});
