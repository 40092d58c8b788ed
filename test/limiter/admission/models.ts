/**
 * Reference models for the admission algorithms, written in a different form from the code under
 * test so that agreement means something:
 * - token bucket: GCRA (a theoretical arrival time), the classic equivalent formulation;
 * - leaky bucket: the queue level recomputed from the whole admitted history (Reich's formula);
 * - fixed and sliding window: a map of every window's count, indexed by `floor(t / interval)`.
 * All in exact integer units (× interval), like the code.
 */
import fc from 'fast-check';
import type { Algorithm, LimitParams, RateParams } from '../../../limiter/admission/index.js';

export interface ModelAnswer {
  allowed: boolean;
  remaining: number;
}

export interface Model {
  admit(now: number, cost: number): ModelAnswer;
}

/** Token bucket as GCRA: times in ms × rate, one token = `interval` units. */
export class GcraModel implements Model {
  private tat = -Infinity;
  constructor(private readonly p: RateParams) {}
  admit(now: number, cost: number): ModelAnswer {
    const unit = this.p.intervalMs;
    const nowU = now * this.p.rate;
    const tat = Math.max(this.tat, nowU);
    const next = tat + cost * unit;
    const allowed = next - nowU <= this.p.burst * unit;
    if (allowed) this.tat = next;
    const after = allowed ? next : tat;
    return { allowed, remaining: Math.floor((this.p.burst * unit - (after - nowU)) / unit) };
  }
}

/** Leaky bucket: level(t) = max(0, max_j Σ_{i ≥ j} cost_i − (t − t_j) × rate), over admitted arrivals. */
export class ReichModel implements Model {
  private readonly admitted: { t: number; c: number }[] = [];
  constructor(private readonly p: RateParams) {}
  private level(now: number): number {
    let best = 0;
    let sum = 0;
    for (let j = this.admitted.length - 1; j >= 0; j--) {
      const a = this.admitted[j]!;
      sum += a.c * this.p.intervalMs;
      best = Math.max(best, sum - (now - a.t) * this.p.rate);
    }
    return best;
  }
  admit(now: number, cost: number): ModelAnswer {
    const cap = this.p.burst * this.p.intervalMs;
    let level = this.level(now);
    const allowed = level + cost * this.p.intervalMs <= cap;
    if (allowed) {
      this.admitted.push({ t: now, c: cost });
      level += cost * this.p.intervalMs;
    }
    return { allowed, remaining: Math.max(0, Math.floor((cap - level) / this.p.intervalMs)) };
  }
}

/** Per-window counts, epoch-aligned. */
class WindowCounts {
  readonly counts = new Map<number, number>();
  constructor(readonly iv: number) {}
  index(t: number): number {
    return Math.floor(t / this.iv);
  }
  get(i: number): number {
    return this.counts.get(i) ?? 0;
  }
  add(t: number, c: number): void {
    const i = this.index(t);
    this.counts.set(i, this.get(i) + c);
  }
}

export class FixedWindowModel implements Model {
  private readonly w: WindowCounts;
  constructor(private readonly p: RateParams) {
    this.w = new WindowCounts(p.intervalMs);
  }
  admit(now: number, cost: number): ModelAnswer {
    const count = this.w.get(this.w.index(now));
    const allowed = count + cost <= this.p.rate;
    if (allowed) this.w.add(now, cost);
    return { allowed, remaining: Math.max(0, this.p.rate - this.w.get(this.w.index(now))) };
  }
}

export class SlidingWindowModel implements Model {
  private readonly w: WindowCounts;
  constructor(private readonly p: RateParams) {
    this.w = new WindowCounts(p.intervalMs);
  }
  private used(now: number): number {
    const iv = this.p.intervalMs;
    const i = this.w.index(now);
    return this.w.get(i - 1) * (iv - (now - i * iv)) + this.w.get(i) * iv;
  }
  admit(now: number, cost: number): ModelAnswer {
    const iv = this.p.intervalMs;
    const allowed = this.used(now) + cost * iv <= this.p.rate * iv;
    if (allowed) this.w.add(now, cost);
    return { allowed, remaining: Math.max(0, Math.floor((this.p.rate * iv - this.used(now)) / iv)) };
  }
}

export function modelFor(p: LimitParams): Model {
  switch (p.algorithm) {
    case 'token_bucket':
      return new GcraModel(p);
    case 'leaky_bucket':
      return new ReichModel(p);
    case 'fixed_window':
      return new FixedWindowModel(p);
    case 'sliding_window':
      return new SlidingWindowModel(p);
  }
}

/** The most one request can cost and still ever pass. */
export function capacityOf(p: LimitParams): number {
  return p.algorithm === 'token_bucket' || p.algorithm === 'leaky_bucket' ? p.burst : p.rate;
}

// ── arbitraries ──────────────────────────────────────────────────────────────

export const START_MS = 1_700_000_000_000;

export const intervalArb = fc.oneof(fc.constantFrom(1, 7, 100, 1000, 60_000), fc.integer({ min: 1, max: 5000 }));

export function limitArb(algorithms: readonly Algorithm[]): fc.Arbitrary<LimitParams> {
  return fc.record({
    algorithm: fc.constantFrom(...algorithms),
    rate: fc.integer({ min: 1, max: 20 }),
    burst: fc.integer({ min: 1, max: 30 }),
    intervalMs: intervalArb,
  });
}

export interface Req {
  dt: number;
  cost: number;
}

/** Gaps that hit the interesting spots: same instant, a few ms, around window boundaries, long idle. */
export function gapArb(iv: number): fc.Arbitrary<number> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 5 }) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 2 * iv }) },
    { weight: 1, arbitrary: fc.constantFrom(iv - 1, iv, iv + 1) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 10 * iv }) },
  );
}

export function costArb(maxCost: number): fc.Arbitrary<number> {
  return fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: maxCost }) });
}

export function requestsArb(p: LimitParams, maxLength = 80): fc.Arbitrary<Req[]> {
  return fc.array(fc.record({ dt: gapArb(p.intervalMs), cost: costArb(capacityOf(p) + 2) }), { minLength: 1, maxLength });
}
