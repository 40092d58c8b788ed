/**
 * A circuit breaker: closed → open → half-open → closed.
 *
 * - **closed**: every call is allowed; outcomes are counted in a rolling window of `windowMs` split
 *   into `buckets` slots (fixed memory, no per-call allocation). After any outcome, when the window
 *   holds at least `minVolume` outcomes and the failure share is at or above `errorThreshold`, it opens.
 * - **open**: calls are refused for `coolDownMs`.
 * - **half-open**: the first `allow()` after the cool-down moves here and lets `halfOpenProbes` calls
 *   through. When that many probes have succeeded it closes (with an empty window); a failed probe
 *   re-opens it with a fresh cool-down. A probe that never reports back is written off after one
 *   cool-down and a new batch is admitted, so a lost result cannot wedge the breaker.
 *
 * Outcomes reported while open are ignored: they belong to calls admitted before it opened. The
 * breaker does not tell probes from late outcomes of older calls in half-open; with the short
 * timeouts the breaker protects, that is rare and at worst closes or re-opens it one probe early.
 *
 * Time comes from the injected clock; `allow`, `success` and `failure` do not allocate.
 */
import type { Clock } from './clock.js';
import { PlatformError } from './errors.js';
import { Counter, Gauge, type Registry } from './metrics.js';

export type BreakerState = 'closed' | 'open' | 'half-open';

/**
 * Called on every state change, and once at construction with `from === null` (so metrics can
 * publish the initial state). Keep it cheap: it runs inside `allow`/`success`/`failure`.
 */
export type StateChangeListener = (breaker: string, from: BreakerState | null, to: BreakerState) => void;

export interface BreakerOptions {
  /** Names the protected dependency in metrics and errors (e.g. `redis`, `fcm`). */
  name: string;
  /** Length of the rolling window the error rate is measured over, ms. */
  windowMs: number;
  /** Slots the window is split into; the window rolls forward one slot (windowMs / buckets) at a time. */
  buckets: number;
  /** Failure share, 0 < x ≤ 1, at or above which the breaker opens. */
  errorThreshold: number;
  /** Fewest outcomes in the window before the error rate counts. */
  minVolume: number;
  /** How long it stays open before letting probes through, ms. */
  coolDownMs: number;
  /** Probe calls let through in half-open; all must succeed to close. */
  halfOpenProbes: number;
  clock: Clock;
  onStateChange?: StateChangeListener;
}

export class CircuitBreaker {
  readonly name: string;
  readonly #clock: Clock;
  readonly #bucketMs: number;
  readonly #threshold: number;
  readonly #minVolume: number;
  readonly #coolDownMs: number;
  readonly #probes: number;
  readonly #onStateChange: StateChangeListener | undefined;

  // Rolling window: a ring of per-slot counts plus running totals.
  readonly #fail: Float64Array;
  readonly #total: Float64Array;
  #head = 0; // absolute slot number (floor(now / bucketMs)) of the newest slot
  #windowFail = 0;
  #windowTotal = 0;

  #state: BreakerState = 'closed';
  #openedAt = 0;
  #halfOpenSince = 0;
  #probesAdmitted = 0;
  #probeSuccesses = 0;

  constructor(opts: BreakerOptions) {
    const positive = (k: keyof BreakerOptions, v: number, integer: boolean) => {
      if (!(v > 0) || !Number.isFinite(v) || (integer && !Number.isInteger(v))) {
        throw new RangeError(`CircuitBreaker ${opts.name}: ${k} must be a positive ${integer ? 'integer' : 'number'}, got ${v}`);
      }
    };
    positive('windowMs', opts.windowMs, false);
    positive('buckets', opts.buckets, true);
    positive('minVolume', opts.minVolume, true);
    positive('halfOpenProbes', opts.halfOpenProbes, true);
    if (!(opts.coolDownMs >= 0) || !Number.isFinite(opts.coolDownMs)) {
      throw new RangeError(`CircuitBreaker ${opts.name}: coolDownMs must be >= 0, got ${opts.coolDownMs}`);
    }
    if (!(opts.errorThreshold > 0 && opts.errorThreshold <= 1)) {
      throw new RangeError(`CircuitBreaker ${opts.name}: errorThreshold must be in (0, 1], got ${opts.errorThreshold}`);
    }
    this.name = opts.name;
    this.#clock = opts.clock;
    this.#bucketMs = opts.windowMs / opts.buckets;
    this.#threshold = opts.errorThreshold;
    this.#minVolume = opts.minVolume;
    this.#coolDownMs = opts.coolDownMs;
    this.#probes = opts.halfOpenProbes;
    this.#onStateChange = opts.onStateChange;
    this.#fail = new Float64Array(opts.buckets);
    this.#total = new Float64Array(opts.buckets);
    this.#head = Math.floor(this.#clock.now() / this.#bucketMs);
    this.#onStateChange?.(this.name, null, 'closed');
  }

  /** The current state (an open breaker whose cool-down has passed reads as half-open). */
  get state(): BreakerState {
    if (this.#state === 'open' && this.#clock.now() - this.#openedAt >= this.#coolDownMs) this.#to('half-open');
    return this.#state;
  }

  /** Outcomes currently in the rolling window (closed state only; 0 otherwise). */
  get volume(): number {
    this.#roll(this.#clock.now());
    return this.#windowTotal;
  }

  /** Failure share in the rolling window, 0 when it is empty. */
  get errorRate(): number {
    this.#roll(this.#clock.now());
    return this.#windowTotal === 0 ? 0 : this.#windowFail / this.#windowTotal;
  }

  /** Milliseconds until an open breaker lets probes through; 0 when not open. */
  retryAfterMs(): number {
    return this.state === 'open' ? Math.max(0, this.#openedAt + this.#coolDownMs - this.#clock.now()) : 0;
  }

  /**
   * May a call go ahead? Always in closed; never in open (until the cool-down ends); in half-open
   * only the probes. A `true` must be followed by exactly one `success()` or `failure()`.
   */
  allow(): boolean {
    switch (this.state) {
      case 'closed':
        return true;
      case 'open':
        return false;
      case 'half-open': {
        if (this.#probesAdmitted < this.#probes) {
          this.#probesAdmitted++;
          return true;
        }
        const now = this.#clock.now();
        if (now - this.#halfOpenSince >= this.#coolDownMs) {
          // The earlier probes never reported: write them off and admit a new batch.
          this.#halfOpenSince = now;
          this.#probesAdmitted = 1;
          this.#probeSuccesses = 0;
          return true;
        }
        return false;
      }
    }
  }

  /** Reports that an allowed call succeeded. */
  success(): void {
    if (this.#state === 'closed') {
      this.#record(false);
    } else if (this.#state === 'half-open') {
      if (++this.#probeSuccesses >= this.#probes) this.#to('closed');
    }
  }

  /** Reports that an allowed call failed (an error or timeout of the protected dependency). */
  failure(): void {
    if (this.#state === 'closed') {
      this.#record(true);
    } else if (this.#state === 'half-open') {
      this.#to('open');
    }
  }

  /**
   * Runs `fn` under the breaker: refuses with `circuit_open` (503, with Retry-After) when not
   * allowed; otherwise reports the outcome (any throw or rejection is a failure) and passes it on.
   */
  async run<T>(fn: () => Promise<T> | T): Promise<T> {
    if (!this.allow()) {
      const seconds = Math.max(1, Math.ceil(this.retryAfterMs() / 1000));
      throw new PlatformError('circuit_open', {
        detail: `${this.name} is unavailable (circuit open)`,
        headers: { 'retry-after': String(seconds) },
      });
    }
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      this.failure();
      throw err;
    }
    this.success();
    return result;
  }

  #record(failed: boolean): void {
    const now = this.#clock.now();
    this.#roll(now);
    const slot = this.#head % this.#fail.length;
    this.#total[slot]!++;
    this.#windowTotal++;
    if (failed) {
      this.#fail[slot]!++;
      this.#windowFail++;
    }
    if (this.#windowTotal >= this.#minVolume && this.#windowFail / this.#windowTotal >= this.#threshold) this.#to('open');
  }

  /** Moves the window forward to `now`, emptying the slots that fell out of it. */
  #roll(now: number): void {
    const slotNow = Math.floor(now / this.#bucketMs);
    const steps = slotNow - this.#head;
    if (steps <= 0) return; // same slot, or the clock stepped back: keep counting in the newest slot
    const n = this.#fail.length;
    if (steps >= n) {
      this.#fail.fill(0);
      this.#total.fill(0);
      this.#windowFail = 0;
      this.#windowTotal = 0;
    } else {
      for (let i = 1; i <= steps; i++) {
        const slot = (this.#head + i) % n;
        this.#windowFail -= this.#fail[slot]!;
        this.#windowTotal -= this.#total[slot]!;
        this.#fail[slot] = 0;
        this.#total[slot] = 0;
      }
    }
    this.#head = slotNow;
  }

  #to(next: BreakerState): void {
    const prev = this.#state;
    this.#state = next;
    const now = this.#clock.now();
    if (next === 'open') this.#openedAt = now;
    if (next === 'half-open') {
      this.#halfOpenSince = now;
      this.#probesAdmitted = 0;
      this.#probeSuccesses = 0;
    }
    // Every state starts with an empty window: outcomes from before an open say nothing about the
    // dependency after it recovers.
    this.#fail.fill(0);
    this.#total.fill(0);
    this.#windowFail = 0;
    this.#windowTotal = 0;
    this.#head = Math.floor(now / this.#bucketMs);
    this.#onStateChange?.(this.name, prev, next);
  }
}

/** Gauge values of `circuit_breaker_state`. */
export const BREAKER_STATE_VALUE: Readonly<Record<BreakerState, number>> = { closed: 0, 'half-open': 1, open: 2 };

/**
 * A state-change listener that publishes `circuit_breaker_state{breaker}` (0 closed, 1 half-open,
 * 2 open) and `circuit_breaker_transitions_total{breaker,to}` on `registry`. Safe to call more than
 * once for the same registry (the metrics are shared).
 */
export function breakerMetrics(registry: Registry): StateChangeListener {
  const gauge =
    (registry.getSingleMetric('circuit_breaker_state') as Gauge<'breaker'> | undefined) ??
    new Gauge({
      name: 'circuit_breaker_state',
      help: 'Circuit breaker state: 0 closed, 1 half-open, 2 open',
      // Worker threads (limiter LIMITER_WORKERS) each have a breaker: the worst state is the process's.
      aggregator: 'max',
      labelNames: ['breaker'] as const,
      registers: [registry],
    });
  const transitions =
    (registry.getSingleMetric('circuit_breaker_transitions_total') as Counter<'breaker' | 'to'> | undefined) ??
    new Counter({
      name: 'circuit_breaker_transitions_total',
      help: 'Circuit breaker state changes, by the state entered',
      labelNames: ['breaker', 'to'] as const,
      registers: [registry],
    });
  return (breaker, from, to) => {
    gauge.set({ breaker }, BREAKER_STATE_VALUE[to]);
    if (from === null) {
      // Publish every series at zero so rate() has a starting point.
      for (const s of ['closed', 'half-open', 'open'] as const) transitions.inc({ breaker, to: s }, 0);
    } else {
      transitions.inc({ breaker, to });
    }
  };
}
