// @tier: pure
import t from 'tap';
import fc from 'fast-check';
import { CircuitBreaker, breakerMetrics, type BreakerOptions, type BreakerState } from '../../shared/breaker.js';
import { FakeClock } from '../../shared/clock.js';
import { isPlatformError } from '../../shared/errors.js';
import { Registry } from '../../shared/metrics.js';

const T0 = 1_700_000_000_000;

function make(over: Partial<BreakerOptions> = {}) {
  const clock = new FakeClock(T0);
  const changes: [BreakerState | null, BreakerState][] = [];
  const breaker = new CircuitBreaker({
    name: 'dep',
    windowMs: 10_000,
    buckets: 10,
    errorThreshold: 0.5,
    minVolume: 10,
    coolDownMs: 5_000,
    halfOpenProbes: 1,
    clock,
    onStateChange: (_name, from, to) => void changes.push([from, to]),
    ...over,
  });
  return { clock, breaker, changes };
}

/** Records `n` outcomes (all allowed first, as a caller would). */
function outcomes(b: CircuitBreaker, ok: number, failed: number): void {
  for (let i = 0; i < ok; i++) if (b.allow()) b.success();
  for (let i = 0; i < failed; i++) if (b.allow()) b.failure();
}

function openIt(b: CircuitBreaker): void {
  outcomes(b, 0, 10);
  if (b.state !== 'open') throw new Error('setup: breaker did not open');
}

t.test('stays closed below the minimum volume, even at 100% errors', async (t) => {
  const { breaker } = make();
  outcomes(breaker, 0, 9);
  t.equal(breaker.state, 'closed');
  t.equal(breaker.volume, 9);
  t.equal(breaker.errorRate, 1);
  t.equal(breaker.allow(), true);
});

t.test('stays closed under the threshold at volume', async (t) => {
  const { breaker } = make();
  outcomes(breaker, 6, 4);
  t.equal(breaker.state, 'closed');
  outcomes(breaker, 100, 0);
  t.equal(breaker.state, 'closed');
});

t.test('opens when the error rate reaches the threshold at the minimum volume', async (t) => {
  const { breaker, changes } = make();
  outcomes(breaker, 5, 4);
  t.equal(breaker.state, 'closed', '4/9: below minimum volume');
  breaker.allow();
  breaker.failure();
  t.equal(breaker.state, 'open', '5/10 = threshold 0.5');
  t.same(changes, [
    [null, 'closed'],
    ['closed', 'open'],
  ]);
});

t.test('a success can complete the volume and open it', async (t) => {
  const { breaker } = make();
  outcomes(breaker, 0, 9);
  outcomes(breaker, 1, 0);
  t.equal(breaker.state, 'open', '9 failures of 10 outcomes');
});

t.test('the threshold is compared exactly (0.1 of 30 is 3, no float drift)', async (t) => {
  const { breaker } = make({ errorThreshold: 0.1, minVolume: 30 });
  outcomes(breaker, 27, 2);
  breaker.allow();
  breaker.failure();
  t.equal(breaker.state, 'open');
});

t.test('open rejects calls until the cool-down has passed', async (t) => {
  const { breaker, clock } = make();
  openIt(breaker);
  t.equal(breaker.allow(), false);
  t.equal(breaker.retryAfterMs(), 5_000);
  clock.advance(4_999);
  t.equal(breaker.allow(), false);
  t.equal(breaker.state, 'open');
  t.equal(breaker.retryAfterMs(), 1);
  let called = false;
  const err = await breaker
    .run(() => {
      called = true;
    })
    .catch((e: unknown) => e);
  t.equal(called, false, 'run does not call fn while open');
  t.ok(isPlatformError(err));
  if (isPlatformError(err)) {
    t.equal(err.code, 'circuit_open');
    t.equal(err.status, 503);
    t.same(err.headers, { 'retry-after': '1' });
  }
});

t.test('outcomes reported while open are ignored', async (t) => {
  const { breaker, clock, changes } = make();
  openIt(breaker);
  breaker.success();
  breaker.failure();
  t.equal(breaker.state, 'open');
  clock.advance(5_000);
  t.equal(breaker.state, 'half-open', 'cool-down not restarted by a late failure');
  t.equal(changes.length, 3);
});

t.test('half-open after the cool-down admits exactly the probes', async (t) => {
  const { breaker, clock } = make({ halfOpenProbes: 3 });
  openIt(breaker);
  clock.advance(5_000);
  t.equal(breaker.state, 'half-open');
  t.same(
    Array.from({ length: 5 }, () => breaker.allow()),
    [true, true, true, false, false],
  );
  t.equal(breaker.retryAfterMs(), 0, 'not open');
});

t.test('probe successes close it, with an empty window', async (t) => {
  const { breaker, clock, changes } = make({ halfOpenProbes: 2 });
  openIt(breaker);
  clock.advance(5_000);
  t.equal(breaker.allow(), true);
  t.equal(breaker.allow(), true);
  breaker.success();
  t.equal(breaker.state, 'half-open', 'one of two probes is not enough');
  breaker.success();
  t.equal(breaker.state, 'closed');
  t.equal(breaker.volume, 0);
  outcomes(breaker, 0, 9);
  t.equal(breaker.state, 'closed', 'old failures are not held against it');
  t.same(
    changes.map(([, to]) => to),
    ['closed', 'open', 'half-open', 'closed'],
  );
});

t.test('a probe failure re-opens it with a fresh cool-down', async (t) => {
  const { breaker, clock, changes } = make({ halfOpenProbes: 2 });
  openIt(breaker);
  clock.advance(5_000);
  breaker.allow();
  breaker.allow();
  breaker.success();
  clock.advance(1_000);
  breaker.failure();
  t.equal(breaker.state, 'open');
  t.equal(breaker.allow(), false);
  clock.advance(4_999);
  t.equal(breaker.state, 'open', 'cool-down counts from the failed probe');
  clock.advance(1);
  t.equal(breaker.state, 'half-open');
  t.same(
    changes.map(([, to]) => to),
    ['closed', 'open', 'half-open', 'open', 'half-open'],
  );
});

t.test('probes that never report are written off after a cool-down', async (t) => {
  const { breaker, clock } = make({ halfOpenProbes: 1 });
  openIt(breaker);
  clock.advance(5_000);
  t.equal(breaker.allow(), true);
  clock.advance(4_999);
  t.equal(breaker.allow(), false);
  clock.advance(1);
  t.equal(breaker.allow(), true, 'a new probe after one more cool-down');
  t.equal(breaker.allow(), false);
  breaker.success();
  t.equal(breaker.state, 'closed');
});

t.test('the rolling window forgets old errors', async (t) => {
  const { breaker, clock } = make();
  outcomes(breaker, 0, 5); // slot 0
  clock.advance(5_000);
  outcomes(breaker, 0, 4); // slot 5
  t.equal(breaker.volume, 9);
  clock.advance(5_000); // slot 10: slot 0 has left the 10 s window
  t.equal(breaker.volume, 4);
  outcomes(breaker, 0, 5);
  t.equal(breaker.state, 'closed', '9 failures in the window: below the minimum volume');
  outcomes(breaker, 0, 1);
  t.equal(breaker.state, 'open', '10 in the window');
});

t.test('a gap longer than the window empties it', async (t) => {
  const { breaker, clock } = make();
  outcomes(breaker, 3, 6);
  clock.advance(60_000);
  t.equal(breaker.volume, 0);
  t.equal(breaker.errorRate, 0);
  outcomes(breaker, 0, 1);
  t.equal(breaker.state, 'closed');
});

t.test('run reports outcomes and passes results and errors through', async (t) => {
  const { breaker } = make({ minVolume: 2 });
  t.equal(await breaker.run(() => 42), 42);
  t.equal(breaker.volume, 1);
  t.equal(breaker.errorRate, 0);
  const boom = new Error('boom');
  await t.rejects(
    breaker.run(async () => {
      throw boom;
    }),
    boom,
  );
  t.equal(breaker.state, 'open', '1 of 2 failed at threshold 0.5');
});

t.test('bad options are refused', async (t) => {
  t.throws(() => make({ windowMs: 0 }), /windowMs must be a positive number/);
  t.throws(() => make({ buckets: 2.5 }), /buckets must be a positive integer/);
  t.throws(() => make({ minVolume: 0 }), /minVolume/);
  t.throws(() => make({ halfOpenProbes: 0 }), /halfOpenProbes/);
  t.throws(() => make({ coolDownMs: -1 }), /coolDownMs/);
  t.throws(() => make({ errorThreshold: 0 }), /errorThreshold/);
  t.throws(() => make({ errorThreshold: 1.5 }), /errorThreshold/);
});

t.test('breakerMetrics publishes the state gauge and transition counts', async (t) => {
  const registry = new Registry();
  const onStateChange = breakerMetrics(registry);
  const clock = new FakeClock(T0);
  const opts = { windowMs: 1000, buckets: 4, errorThreshold: 0.5, minVolume: 1, coolDownMs: 100, halfOpenProbes: 1, clock, onStateChange };
  const redis = new CircuitBreaker({ name: 'redis', ...opts });
  const fcm = new CircuitBreaker({ name: 'fcm', ...opts, onStateChange: breakerMetrics(registry) });
  const value = async (metric: string, labels: Record<string, string>) => {
    const m = (await registry.getSingleMetric(metric)?.get())?.values.find((v) =>
      Object.entries(labels).every(([k, x]) => v.labels[k] === x),
    );
    return m?.value;
  };
  t.equal(await value('circuit_breaker_state', { breaker: 'redis' }), 0, 'closed at start');
  t.equal(await value('circuit_breaker_transitions_total', { breaker: 'redis', to: 'open' }), 0, 'series exist from the start');
  redis.failure();
  t.equal(await value('circuit_breaker_state', { breaker: 'redis' }), 2);
  clock.advance(100);
  t.equal(redis.state, 'half-open');
  t.equal(await value('circuit_breaker_state', { breaker: 'redis' }), 1);
  redis.allow();
  redis.failure();
  t.equal(await value('circuit_breaker_state', { breaker: 'redis' }), 2);
  t.equal(await value('circuit_breaker_transitions_total', { breaker: 'redis', to: 'open' }), 2);
  t.equal(await value('circuit_breaker_transitions_total', { breaker: 'redis', to: 'half-open' }), 1);
  t.equal(await value('circuit_breaker_transitions_total', { breaker: 'redis', to: 'closed' }), 0, 'construction is not a transition');
  t.equal(await value('circuit_breaker_state', { breaker: 'fcm' }), 0, 'a second breaker on the same registry');
  fcm.success();
  const text = await registry.metrics();
  t.match(text, /circuit_breaker_state\{breaker="redis"\} 2/);
  t.match(text, /circuit_breaker_transitions_total\{breaker="redis",to="open"\} 2/);
});

// ── property: the ring buffer against a plain list of timestamped outcomes ────

/** The specification, written the obvious way: every outcome kept with its slot, filtered on read. */
class ModelBreaker {
  state: BreakerState = 'closed';
  events: { slot: number; failed: boolean }[] = [];
  openedAt = 0;
  halfSince = 0;
  admitted = 0;
  successes = 0;
  constructor(
    readonly o: Omit<BreakerOptions, 'clock' | 'name'>,
    readonly clock: FakeClock,
  ) {}
  slot = () => Math.floor(this.clock.now() / (this.o.windowMs / this.o.buckets));
  inWindow = () => this.events.filter((e) => e.slot > this.slot() - this.o.buckets);
  enter(s: BreakerState) {
    this.state = s;
    this.events = [];
    if (s === 'open') this.openedAt = this.clock.now();
    if (s === 'half-open') [this.halfSince, this.admitted, this.successes] = [this.clock.now(), 0, 0];
  }
  read(): BreakerState {
    if (this.state === 'open' && this.clock.now() - this.openedAt >= this.o.coolDownMs) this.enter('half-open');
    return this.state;
  }
  allow(): boolean {
    const s = this.read();
    if (s !== 'half-open') return s === 'closed';
    if (this.admitted < this.o.halfOpenProbes) return ++this.admitted > 0;
    if (this.clock.now() - this.halfSince < this.o.coolDownMs) return false;
    [this.halfSince, this.admitted, this.successes] = [this.clock.now(), 1, 0];
    return true;
  }
  outcome(failed: boolean) {
    if (this.state === 'half-open') {
      if (failed) this.enter('open');
      else if (++this.successes >= this.o.halfOpenProbes) this.enter('closed');
    } else if (this.state === 'closed') {
      this.events.push({ slot: this.slot(), failed });
      const w = this.inWindow();
      const fails = w.filter((e) => e.failed).length;
      if (w.length >= this.o.minVolume && fails / w.length >= this.o.errorThreshold) this.enter('open');
    }
  }
}

type Cmd = { op: 'advance'; ms: number } | { op: 'allow' } | { op: 'success' } | { op: 'failure' };

t.test('property: matches the list model under any sequence of calls and time steps', async (t) => {
  const optsArb = fc.record({
    windowMs: fc.integer({ min: 10, max: 10_000 }),
    buckets: fc.integer({ min: 1, max: 20 }),
    errorThreshold: fc.integer({ min: 1, max: 100 }).map((p) => p / 100),
    minVolume: fc.integer({ min: 1, max: 20 }),
    coolDownMs: fc.integer({ min: 0, max: 5_000 }),
    halfOpenProbes: fc.integer({ min: 1, max: 4 }),
  });
  const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
    fc.record({ op: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 20_000 })) }),
    fc.constant({ op: 'allow' as const }),
    fc.constant({ op: 'success' as const }),
    fc.constant({ op: 'failure' as const }),
  );
  let runs = 0;
  fc.assert(
    fc.property(optsArb, fc.integer({ min: 0, max: 2 ** 40 }), fc.array(cmdArb, { maxLength: 300 }), (o, start, cmds) => {
      runs++;
      const clock = new FakeClock(start);
      const real = new CircuitBreaker({ name: 'p', clock, ...o });
      const model = new ModelBreaker(o, clock);
      for (const c of cmds) {
        if (c.op === 'advance') clock.advance(c.ms);
        else if (c.op === 'allow') {
          if (real.allow() !== model.allow()) return false;
        } else if (c.op === 'success') {
          real.success();
          model.outcome(false);
        } else {
          real.failure();
          model.outcome(true);
        }
        if (real.state !== model.read()) return false;
        if (real.state === 'closed' && real.volume !== model.inWindow().length) return false;
      }
      return true;
    }),
    { numRuns: 300 },
  );
  t.equal(runs >= 300, true, 'ran the property');
});
