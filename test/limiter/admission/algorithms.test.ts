// @tier: pure
/**
 * The four algorithms against reference models under a fake clock (fast-check): exact admit
 * counts for the token and leaky buckets, exact per-window counts and the documented bounds for
 * the window algorithms, and the invariants every decision keeps (integer remaining in
 * [0, limit], Retry-After never "now" for a denial, and exactly the wait the bucket needs).
 */
import t from 'tap';
import fc from 'fast-check';
import { FakeClock } from '../../../shared/clock.js';
import {
  ALGORITHMS,
  checkLimit,
  fixedWindow,
  leakyBucket,
  newStep,
  slidingWindow,
  step,
  tokenBucket,
  type BucketState,
  type LimitParams,
} from '../../../limiter/admission/index.js';
import { capacityOf, limitArb, modelFor, requestsArb, START_MS, type Req } from './models.js';

const RUNS = 300;

interface Admitted {
  t: number;
  cost: number;
}

/** Runs `reqs` through the algorithm and the model, checking every decision; returns the admitted requests. */
function runAgainstModel(p: LimitParams, reqs: Req[], keepOldOnDeny: boolean): Admitted[] {
  const clock = new FakeClock(START_MS);
  const model = modelFor(p);
  let state: BucketState | undefined;
  const admitted: Admitted[] = [];
  for (const [i, r] of reqs.entries()) {
    const now = clock.advance(r.dt);
    const before = state && { ...state };
    const s = step(p, state, now, r.cost);
    const m = model.admit(now, r.cost);
    const where = `request ${i} (t=${now - START_MS}, cost ${r.cost}) of ${JSON.stringify(p)}`;
    if (state !== undefined && JSON.stringify(state) !== JSON.stringify(before)) throw new Error(`${where}: the input state was mutated`);
    if (s.allowed !== m.allowed) throw new Error(`${where}: allowed ${s.allowed}, model says ${m.allowed}`);
    if (s.remaining !== m.remaining) throw new Error(`${where}: remaining ${s.remaining}, model says ${m.remaining}`);
    checkInvariants(p, s, now, r.cost, where);
    // The probes below start from the state after this request, whichever copy the caller keeps.
    const after = s.allowed || !keepOldOnDeny ? { ...s.newState } : state;
    if (!s.allowed && r.cost <= capacityOf(p)) {
      const later = step(p, after, now + s.retryAfterMs, r.cost);
      if (!later.allowed) throw new Error(`${where}: denied, Retry-After ${s.retryAfterMs} ms, but denied again at that time`);
      if (s.retryAfterMs > 1000 && step(p, after, now + s.retryAfterMs - 1, r.cost).allowed) {
        throw new Error(`${where}: Retry-After ${s.retryAfterMs} ms is later than needed (admitted 1 ms before)`);
      }
    }
    const atRest = step(p, after, s.resetAtMs, 0);
    if (atRest.remaining !== s.limit) throw new Error(`${where}: at resetAtMs remaining is ${atRest.remaining}, not the limit ${s.limit}`);
    // From resetAtMs on, the stored state decides exactly like no state: why Redis keys may expire then.
    const kept = step(p, after, s.resetAtMs + r.dt, r.cost);
    const fresh = step(p, undefined, s.resetAtMs + r.dt, r.cost);
    if (JSON.stringify(kept) !== JSON.stringify(fresh)) throw new Error(`${where}: after resetAtMs the state still matters`);
    if (s.allowed) admitted.push({ t: now, cost: r.cost });
    state = after;
  }
  return admitted;
}

function checkInvariants(p: LimitParams, s: ReturnType<typeof step>, now: number, cost: number, where: string): void {
  const limit = p.algorithm === 'token_bucket' || p.algorithm === 'leaky_bucket' ? p.burst : p.rate;
  if (s.limit !== limit) throw new Error(`${where}: limit ${s.limit}, expected ${limit}`);
  if (!Number.isInteger(s.remaining) || s.remaining < 0 || s.remaining > s.limit)
    throw new Error(`${where}: remaining ${s.remaining} outside [0, limit]`);
  if (s.allowed && s.retryAfterMs !== 0) throw new Error(`${where}: allowed with retryAfterMs ${s.retryAfterMs}`);
  if (!s.allowed && !(Number.isInteger(s.retryAfterMs) && s.retryAfterMs >= 1000))
    throw new Error(`${where}: denied with retryAfterMs ${s.retryAfterMs}`);
  if (!Number.isInteger(s.resetAtMs) || s.resetAtMs < now) throw new Error(`${where}: resetAtMs ${s.resetAtMs} before now`);
  if (cost > capacityOf(p) && s.allowed) throw new Error(`${where}: a cost above the capacity was admitted`);
}

const scenario = (algorithms: LimitParams['algorithm'][]) =>
  limitArb(algorithms).chain((p) => fc.tuple(fc.constant(p), requestsArb(p), fc.boolean()));

t.test('token bucket: exact admit sequence and remaining against GCRA', async (t) => {
  let admittedTotal = 0;
  fc.assert(
    fc.property(scenario(['token_bucket']), ([p, reqs, keep]) => {
      admittedTotal += runAgainstModel(p, reqs, keep).length;
    }),
    { numRuns: RUNS },
  );
  t.ok(admittedTotal > 0, `${RUNS} random sequences agreed with the model (${admittedTotal} admissions)`);
});

t.test('leaky bucket: exact admit sequence and remaining against the queue-level model', async (t) => {
  let admittedTotal = 0;
  fc.assert(
    fc.property(scenario(['leaky_bucket']), ([p, reqs, keep]) => {
      admittedTotal += runAgainstModel(p, reqs, keep).length;
    }),
    { numRuns: RUNS },
  );
  t.ok(admittedTotal > 0, `${RUNS} random sequences agreed with the model (${admittedTotal} admissions)`);
});

/** Σ cost of admitted requests with t in [from, to]. */
function sumIn(adm: Admitted[], from: number, to: number): number {
  let s = 0;
  for (const a of adm) if (a.t >= from && a.t <= to) s += a.cost;
  return s;
}

function perWindowWithin(p: LimitParams, adm: Admitted[]): void {
  const byWindow = new Map<number, number>();
  for (const a of adm) {
    const w = Math.floor(a.t / p.intervalMs);
    byWindow.set(w, (byWindow.get(w) ?? 0) + a.cost);
  }
  for (const [w, n] of byWindow) if (n > p.rate) throw new Error(`window ${w} admitted ${n} > rate ${p.rate}`);
}

t.test('fixed window: exact per-window counts; at most 2 × rate in any span shorter than the interval', async (t) => {
  fc.assert(
    fc.property(scenario(['fixed_window']), ([p, reqs, keep]) => {
      const adm = runAgainstModel(p, reqs, keep);
      perWindowWithin(p, adm);
      for (const a of adm) {
        const n = sumIn(adm, a.t, a.t + p.intervalMs - 1);
        if (n > 2 * p.rate) throw new Error(`${n} admitted within one interval from t=${a.t - START_MS}, above 2 × ${p.rate}`);
      }
    }),
    { numRuns: RUNS },
  );
  t.pass(`${RUNS} random sequences within the documented bound`);
});

t.test(
  'sliding window: matches the weighted model; ≤ rate per window and ≤ rate × (1 + d/interval) in any span d ≤ interval',
  async (t) => {
    fc.assert(
      fc.property(scenario(['sliding_window']), ([p, reqs, keep]) => {
        const adm = runAgainstModel(p, reqs, keep);
        perWindowWithin(p, adm);
        for (const a of adm) {
          for (const b of adm) {
            const d = b.t - a.t;
            if (d < 0 || d > p.intervalMs) continue;
            const n = sumIn(adm, a.t, b.t);
            if (n * p.intervalMs > p.rate * (p.intervalMs + d)) {
              throw new Error(`${n} admitted in a span of ${d} ms, above ${p.rate} × (1 + ${d}/${p.intervalMs})`);
            }
          }
        }
      }),
      { numRuns: RUNS },
    );
    t.pass(`${RUNS} random sequences within the documented bound`);
  },
);

t.test('the window bounds are tight where documented: a boundary burst', async (t) => {
  const p: LimitParams = { algorithm: 'fixed_window', rate: 10, burst: 10, intervalMs: 1000 };
  const w = { ...p, algorithm: 'sliding_window' as const };
  const end = 1_700_000_000_999; // last ms of a window
  const count = (fn: typeof fixedWindow, q: LimitParams) => {
    let s: BucketState | undefined;
    let n = 0;
    for (const now of [end, end + 1]) {
      for (let i = 0; i < 20; i++) {
        const r = fn(q, s, now, 1);
        if (r.allowed) {
          n++;
          s = { ...r.newState };
        }
      }
    }
    return n;
  };
  t.equal(count(fixedWindow, p), 20, 'fixed window: 2 × rate within 2 ms across a boundary');
  t.equal(count(slidingWindow, w), 10, 'sliding window: the previous window weighs in fully right after the boundary');
});

t.test('every algorithm: Retry-After never says "now", a request after it passes, and a cost above capacity never does', async (t) => {
  fc.assert(
    fc.property(scenario(ALGORITHMS as LimitParams['algorithm'][]), ([p, reqs, keep]) => {
      runAgainstModel(p, reqs, keep);
    }),
    { numRuns: RUNS },
  );
  const p: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 3, intervalMs: 1000 };
  const s = tokenBucket(p, undefined, START_MS, 4);
  t.equal(s.allowed, false, 'cost 4 > burst 3 is denied even on a full bucket');
  t.equal(s.retryAfterMs, 1000, 'and is told to wait (never 0), here until the bucket would be full, floored at 1 s');
  const l = leakyBucket(p, undefined, START_MS, 4);
  t.equal(l.allowed, false, 'leaky bucket: cost above capacity denied on an empty bucket');
  t.ok(l.retryAfterMs >= 1000);
});

t.test('token bucket: the seed example, by hand', async (t) => {
  const p: LimitParams = { algorithm: 'token_bucket', rate: 2, burst: 5, intervalMs: 1000 };
  const out = newStep();
  let s: BucketState | undefined;
  const take = (now: number, cost = 1) => {
    const r = tokenBucket(p, s, now, cost, out);
    if (r.allowed) s = { ...r.newState };
    return { allowed: r.allowed, remaining: r.remaining, retryAfterMs: r.retryAfterMs, resetAtMs: r.resetAtMs };
  };
  t.same(take(0), { allowed: true, remaining: 4, retryAfterMs: 0, resetAtMs: 500 }, 'starts full: 5 − 1 = 4');
  take(0);
  take(0);
  take(0);
  t.same(take(0), { allowed: true, remaining: 0, retryAfterMs: 0, resetAtMs: 2500 });
  t.same(take(0), { allowed: false, remaining: 0, retryAfterMs: 1000, resetAtMs: 2500 }, 'empty: needs 500 ms, told 1 s (never less)');
  t.same(take(499), { allowed: false, remaining: 0, retryAfterMs: 1000, resetAtMs: 2500 });
  t.same(take(500), { allowed: true, remaining: 0, retryAfterMs: 0, resetAtMs: 3000 }, 'one token after 500 ms at 2/s');
  t.same(take(2000, 3), { allowed: true, remaining: 0, retryAfterMs: 0, resetAtMs: 4500 }, '3 tokens refilled by t=2000, cost 3');
  t.same(take(2000, 2), { allowed: false, remaining: 0, retryAfterMs: 1000, resetAtMs: 4500 });
  t.same(take(2600, 2), { allowed: false, remaining: 1, retryAfterMs: 1000, resetAtMs: 4500 }, '1.2 tokens: remaining 1, cost 2 denied');
  t.same(take(9000, 2), { allowed: true, remaining: 3, retryAfterMs: 0, resetAtMs: 10_000 }, 'capped at burst 5 after a long idle');
});

t.test('a changed interval rescales stored tokens; a changed algorithm starts fresh', async (t) => {
  const a: LimitParams = { algorithm: 'token_bucket', rate: 10, burst: 10, intervalMs: 1000 };
  const b: LimitParams = { ...a, intervalMs: 60_000 };
  let s = tokenBucket(a, undefined, 0, 4).newState; // 6 tokens left
  s = { ...s };
  const r = tokenBucket(b, s, 0, 0);
  t.equal(r.remaining, 6, 'the same 6 tokens under the new interval');
  const w = slidingWindow(a, s, 0, 1);
  t.equal(w.remaining, 9, 'a token-bucket state is not read as a window');
});

t.test('checkLimit rejects what the arithmetic cannot hold exactly', async (t) => {
  const ok: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 1, intervalMs: 1000 };
  t.doesNotThrow(() => checkLimit(ok));
  t.throws(() => checkLimit({ ...ok, rate: 0 }), { code: 'invalid_field', field: 'limit.rate' });
  t.throws(() => checkLimit({ ...ok, burst: 1.5 }), { code: 'invalid_field', field: 'limit.burst' });
  t.throws(() => checkLimit({ ...ok, intervalMs: -1 }), { code: 'invalid_field', field: 'limit.intervalMs' });
  t.throws(() => checkLimit({ ...ok, algorithm: 'sliding_log' as never }), { code: 'invalid_field', field: 'limit.algorithm' });
  t.throws(() => checkLimit({ ...ok, burst: 2 ** 30, intervalMs: 2 ** 21 }), { code: 'invalid_field', field: 'limit' });
});
