// @tier: pure
/**
 * Multi-bucket atomic admission (`decide`): a request is charged to its key bucket and the global
 * bucket both or neither, and the figures reported are only ever the key bucket's.
 */
import t from 'tap';
import fc from 'fast-check';
import { FakeClock } from '../../../shared/clock.js';
import {
  ALGORITHMS,
  commit,
  decide,
  newAdmission,
  step,
  type Bucket,
  type BucketState,
  type LimitParams,
} from '../../../limiter/admission/index.js';
import { costArb, gapArb, limitArb, START_MS } from './models.js';

const algs = ALGORITHMS as LimitParams['algorithm'][];

const scenarioArb = fc
  .record({
    keys: fc.array(limitArb(algs), { minLength: 1, maxLength: 4 }),
    global: limitArb(algs),
    scale: fc.integer({ min: 1, max: 4 }),
  })
  .chain((s) =>
    fc.tuple(
      fc.constant(s),
      fc.array(
        fc.record({
          dt: gapArb(Math.min(...s.keys.map((k) => k.intervalMs), s.global.intervalMs)),
          key: fc.integer({ min: 0, max: s.keys.length - 1 }),
          cost: costArb(8),
        }),
        { minLength: 1, maxLength: 100 },
      ),
    ),
  );

t.test('both or neither: never charged to one bucket and denied by the other', async (t) => {
  let admitted = 0;
  let globalDenials = 0;
  fc.assert(
    fc.property(scenarioArb, ([s, reqs]) => {
      const clock = new FakeClock(START_MS);
      const keyStates: (BucketState | undefined)[] = s.keys.map(() => undefined);
      let gState: BucketState | undefined;
      const out = newAdmission();
      for (const r of reqs) {
        const now = clock.advance(r.dt);
        const kp = s.keys[r.key]!;
        const kBefore = keyStates[r.key] && { ...keyStates[r.key]! };
        const gBefore = gState && { ...gState };
        // Each bucket on its own, as the reference.
        const k = step(kp, kBefore, now, r.cost);
        const g = step(s.global, gBefore, now, r.cost * s.scale);
        const key: Bucket = { params: kp, state: keyStates[r.key] };
        const global: Bucket = { params: s.global, state: gState, costScale: s.scale };
        const a = decide(key, global, now, r.cost, out);
        const where = `t=${now - START_MS} key ${r.key} cost ${r.cost}`;
        if (a.allowed !== (k.allowed && g.allowed))
          throw new Error(`${where}: allowed ${a.allowed}, key ${k.allowed}, global ${g.allowed}`);
        if (a.limit !== k.limit) throw new Error(`${where}: limit ${a.limit} is not the key bucket's ${k.limit}`);
        if (a.allowed) {
          if (a.binding !== 'key' || a.remaining !== k.remaining || a.retryAfterMs !== 0)
            throw new Error(`${where}: admitted with wrong figures`);
          admitted++;
          const ks = keyStates[r.key] ?? { alg: 1, a: 0, b: 0, c: 0 };
          commit(ks, a.key);
          keyStates[r.key] = ks;
          gState = gState ?? { alg: 1, a: 0, b: 0, c: 0 };
          commit(gState, a.global);
          if (JSON.stringify(keyStates[r.key]) !== JSON.stringify(k.newState)) throw new Error(`${where}: key charged differently`);
          if (JSON.stringify(gState) !== JSON.stringify(g.newState)) throw new Error(`${where}: global charged differently`);
        } else if (!k.allowed) {
          if (a.binding !== 'key' || a.remaining !== k.remaining) throw new Error(`${where}: key denial must report the key's figures`);
          const want = g.allowed ? k.retryAfterMs : Math.max(k.retryAfterMs, g.retryAfterMs);
          if (a.retryAfterMs !== want) throw new Error(`${where}: retryAfterMs ${a.retryAfterMs}, want ${want}`);
        } else {
          globalDenials++;
          if (a.binding !== 'global' || a.remaining !== 0 || a.retryAfterMs !== g.retryAfterMs) {
            throw new Error(`${where}: global denial must report the key's limit, remaining 0 and the global wait`);
          }
          if (a.resetAtMs < now + a.retryAfterMs) throw new Error(`${where}: reset before the retry`);
        }
        if (!a.allowed) {
          if (JSON.stringify(keyStates[r.key]) !== JSON.stringify(kBefore) || JSON.stringify(gState) !== JSON.stringify(gBefore)) {
            throw new Error(`${where}: a denied request changed a stored state`);
          }
        }
      }
    }),
    { numRuns: 300 },
  );
  t.ok(admitted > 0, `admissions checked: ${admitted}`);
  t.ok(globalDenials > 0, `denials by the global bucket alone checked: ${globalDenials}`);
});

t.test('a greedy key cannot take the global bucket from under another key, and is never charged when the global denies', async (t) => {
  const key: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 10, intervalMs: 60_000 };
  const glob: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 15, intervalMs: 60_000 };
  const states: Record<string, BucketState | undefined> = {};
  let g: BucketState | undefined;
  const out = newAdmission();
  const ask = (who: string) => {
    const a = decide({ params: key, state: states[who] }, { params: glob, state: g }, START_MS, 1, out);
    if (a.allowed) {
      states[who] = { ...a.key.newState };
      g = { ...a.global.newState };
    }
    return { allowed: a.allowed, binding: a.binding, remaining: a.remaining, limit: a.limit };
  };
  let greedy = 0;
  for (let i = 0; i < 20; i++) if (ask('greedy').allowed) greedy++;
  t.equal(greedy, 10, 'the greedy key is held to its own burst');
  let other = 0;
  let last;
  for (let i = 0; i < 10; i++) if ((last = ask('other')).allowed) other++;
  t.equal(other, 5, 'the other key gets what is left of the global bucket');
  t.same(last, { allowed: false, binding: 'global', remaining: 0, limit: 10 }, 'denied by the global bucket: its own limit, remaining 0');
  const probe = step(key, states.other, START_MS, 0);
  t.equal(probe.remaining, 5, 'the 5 global denials took nothing from the key bucket');
});
