// @tier: pure
/**
 * The over-admission bound of approximate mode (limiter/admission/README.md, "Approximate mode"),
 * property-tested: N sidecars, each a real `LeaseStore`, share one token bucket (a model of the
 * Redis bucket and its take and give-back scripts, written here as plain level arithmetic).
 * Requests of costs 1 to 3 arrive at random sidecars at random times; sidecars sweep their expired
 * leases at random moments, and some die holding a lease (never given back). Whatever happens:
 *
 *   over any span [t0, t1], admitted ≤ burst + ⌊rate × (t1 − t0) / interval⌋ + Σ_i share_i,
 *   share_i = ⌊burst / (4 × N)⌋ (a sidecar's largest lease),
 *
 * and a lease never holds more than a share; after one TTL every live sidecar has given its unspent
 * tokens back. The same runs with every quota exact stay within the exact bound (Σ share = 0).
 */
import t from 'tap';
import fc from 'fast-check';
import type { AdmitReply } from '../../../limiter/admission/counter-store.redis.js';
import type { AdmitRequest, AdmitResult, CounterStore, LimitParams } from '../../../limiter/admission/index.js';
import { LEASE_SHARE, LeaseStore, type Lease, type Lessor } from '../../../limiter/admission/lease.js';

/** The shared bucket, in token × interval units, refilled continuously and capped at the burst. */
class Bucket {
  level: number;
  last = 0;
  constructor(readonly p: LimitParams) {
    this.level = p.burst * p.intervalMs;
  }
  private at(now: number): void {
    if (now > this.last) {
      this.level = Math.min(this.p.burst * this.p.intervalMs, this.level + (now - this.last) * this.p.rate);
      this.last = now;
    }
  }
  available(now: number): number {
    this.at(now);
    return Math.floor(this.level / this.p.intervalMs);
  }
  charge(now: number, n: number): boolean {
    if (this.available(now) < n) return false;
    this.level -= n * this.p.intervalMs;
    return true;
  }
  credit(now: number, n: number): void {
    this.at(now);
    this.level = Math.min(this.p.burst * this.p.intervalMs, this.level + n * this.p.intervalMs);
  }
  reply(now: number, allowed: boolean, granted: number): AdmitReply {
    const rem = this.available(now);
    return [allowed ? 1 : 0, 0, this.p.burst, rem, now, allowed ? 0 : 1000, now, 1, this.level, this.last, this.p.intervalMs, granted];
  }
}

/** The take and give-back scripts over the model bucket, answered at once. */
class ModelLessor implements Lessor {
  constructor(
    private readonly b: Bucket,
    private readonly clock: { now: number },
    private readonly n: number,
  ) {}
  take(req: AdmitRequest, want: number): Promise<AdmitReply> {
    const now = this.clock.now;
    const n = Math.min(want, this.b.available(now));
    if (n < req.cost) return Promise.resolve(this.b.reply(now, false, 0));
    this.b.charge(now, n);
    return Promise.resolve(this.b.reply(now, true, n));
  }
  give(_l: Lease, tokens: number): Promise<unknown> {
    this.b.credit(this.clock.now, tokens);
    return Promise.resolve();
  }
  peers(): Promise<number> {
    return Promise.resolve(this.n);
  }
}

/** The exact path: one charge per request. */
class ModelExact implements CounterStore {
  readonly kind = 'redis' as const;
  constructor(
    private readonly b: Bucket,
    private readonly clock: { now: number },
  ) {}
  admit(req: AdmitRequest): AdmitResult {
    const ok = this.b.charge(this.clock.now, req.cost);
    return {
      allowed: ok,
      binding: 'key',
      limit: req.limit.burst,
      remaining: this.b.available(this.clock.now),
      resetAtMs: 0,
      retryAfterMs: ok ? 0 : 1000,
    };
  }
  ready(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const scenario = fc.record({
  rate: fc.integer({ min: 1, max: 50 }),
  burst: fc.integer({ min: 1, max: 200 }),
  n: fc.integer({ min: 1, max: 6 }),
  ttl: fc.integer({ min: 20, max: 2000 }),
  events: fc.array(
    fc.record({
      sidecar: fc.nat(5),
      dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 1500 })),
      cost: fc.integer({ min: 1, max: 3 }),
      kind: fc.oneof(
        { weight: 60, arbitrary: fc.constant('request' as const) },
        { weight: 2, arbitrary: fc.constant('sweep' as const) },
        { weight: 1, arbitrary: fc.constant('die' as const) },
      ),
    }),
    { minLength: 1, maxLength: 400, size: 'large' },
  ),
});

interface Admit {
  at: number;
  cost: number;
}

/** Runs one scenario; returns the admissions and the sum of the shares. */
type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

async function run(s: Scenario, accuracy: 'exact' | 'approximate') {
  const limit: LimitParams = { algorithm: 'token_bucket', rate: s.rate, burst: s.burst, intervalMs: 1000 };
  const clock = { now: 1_000_000 };
  const bucket = new Bucket(limit);
  bucket.last = clock.now;
  const exact = new ModelExact(bucket, clock);
  const stores = Array.from(
    { length: s.n },
    (_, i) =>
      new LeaseStore(exact, new ModelLessor(bucket, clock, s.n), undefined, {
        ttlMs: s.ttl,
        monotonic: () => clock.now,
        sweepTimer: false,
        id: `s${i}`,
      }),
  );
  for (const st of stores) await st.start();
  const dead = new Set<number>();
  const admits: Admit[] = [];
  const share = Math.floor((s.burst * LEASE_SHARE) / s.n);
  let maxHeld = 0;
  for (const e of s.events) {
    clock.now += e.dt;
    const i = e.sidecar % s.n;
    if (dead.has(i)) continue;
    const st = stores[i]!;
    if (e.kind === 'die') {
      // The last live sidecar stays up (there would be nothing left to measure).
      if (dead.size < s.n - 1) dead.add(i);
    } else if (e.kind === 'sweep') st.sweep();
    else {
      const p = st.admit({ key: 'subject', limit, cost: e.cost, accuracy });
      const r = p instanceof Promise ? await p : p;
      if (r.allowed) admits.push({ at: clock.now, cost: e.cost });
      maxHeld = Math.max(maxHeld, st.book.get('subject')?.tokens ?? 0);
    }
  }
  // One TTL later, a sweep gives every live lease back.
  clock.now += s.ttl;
  let heldAfter = 0;
  for (const [i, st] of stores.entries()) {
    if (dead.has(i)) continue;
    st.sweep();
    heldAfter += st.book.get('subject')?.tokens ?? 0;
  }
  return { admits, extra: accuracy === 'exact' ? 0 : s.n * share, share, maxHeld, heldAfter };
}

/** The worst span: the largest admitted − (burst + refill) over every [t_i, t_j]; ≤ 0 means within the exact bound. */
function worstExcess(admits: Admit[], limit: { rate: number; burst: number }): { excess: number; span: string } {
  let excess = -Infinity;
  let span = '';
  for (let i = 0; i < admits.length; i++) {
    let sum = 0;
    for (let j = i; j < admits.length; j++) {
      sum += admits[j]!.cost;
      const allowed = limit.burst + Math.floor((limit.rate * (admits[j]!.at - admits[i]!.at)) / 1000);
      if (sum - allowed > excess) {
        excess = sum - allowed;
        span = `[${admits[i]!.at}, ${admits[j]!.at}]: ${sum} admitted, exact bound ${allowed}`;
      }
    }
  }
  return { excess, span };
}

t.test('N sidecars leasing from one bucket never exceed burst + refill + Σ shares', async (t) => {
  let runs = 0;
  let sawExcess = 0;
  let localAdmits = 0;
  await fc.assert(
    fc.asyncProperty(scenario, async (s) => {
      runs++;
      const r = await run(s, 'approximate');
      const w = worstExcess(r.admits, s);
      if (w.excess > r.extra) throw new Error(`over the bound by ${w.excess - r.extra} in ${w.span} (Σ shares ${r.extra})`);
      if (r.maxHeld > r.share) throw new Error(`a lease held ${r.maxHeld} tokens, more than a share (${r.share})`);
      if (r.heldAfter !== 0) throw new Error(`${r.heldAfter} tokens still held one TTL after the last request`);
      if (w.excess > 0) sawExcess++;
      localAdmits += r.admits.length;
    }),
    {
      numRuns: 400,
      // A steady subject grows its lease to a full share, pauses while the bucket refills to its
      // burst, then bursts: the lease held over the pause is admitted on top of the full bucket.
      examples: [
        [
          {
            rate: 10,
            burst: 40,
            n: 1,
            ttl: 2000,
            events: [
              ...Array.from({ length: 20 }, () => ({ sidecar: 0, dt: 100, cost: 1, kind: 'request' as const })),
              ...Array.from({ length: 60 }, (_, i) => ({ sidecar: 0, dt: i === 0 ? 1000 : 0, cost: 1, kind: 'request' as const })),
            ],
          },
        ],
      ],
    },
  );
  t.ok(runs >= 400, `${runs} scenarios, ${localAdmits} admissions`);
  t.ok(
    sawExcess > 0,
    `${sawExcess} scenarios went over the exact bound (within Σ shares): leases do over-admit, so the bound is tight enough to test`,
  );
});

t.test('the same runs with every quota exact stay within the exact bound', async (t) => {
  await fc.assert(
    fc.asyncProperty(scenario, async (s) => {
      const r = await run(s, 'exact');
      const w = worstExcess(r.admits, s);
      if (w.excess > 0) throw new Error(`exact over its bound by ${w.excess} in ${w.span}`);
    }),
    { numRuns: 150 },
  );
  t.pass('exact: admitted ≤ burst + refill over every span');
});
