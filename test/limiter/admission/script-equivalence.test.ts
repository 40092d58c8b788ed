/**
 * The Lua script decides exactly like the TypeScript algorithms: same allow/deny, same figures,
 * same stored state, for random sequences of requests over every algorithm, with and without a
 * (sharded) global bucket, across changes of a subject's algorithm and interval.
 *
 * How time is driven: the production script reads Redis TIME, which a test cannot move. The script
 * is built around a one-line clock (`admitScript(clockLua)`), so this test loads the identical
 * algorithm code with a clock taken from the last argument, and with key expiry left out (expiry
 * runs on Redis's real clock, which would fight the fake one; that expiry at `resetAtMs` is
 * harmless is checked in algorithms.test.ts, and the PX itself in redis-store.test.ts). The store
 * never loads this variant.
 */
import t from 'tap';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { admitScript } from '../../../limiter/admission/admit-script.js';
import {
  ALGORITHM_CODE,
  ALGORITHMS,
  commit,
  decide,
  newAdmission,
  type BucketState,
  type LimitParams,
} from '../../../limiter/admission/index.js';
import { useRedis } from '../../harness/redis.js';
import { costArb, gapArb, limitArb, START_MS } from './models.js';

const TEST_CLOCK = `local now = tonumber(ARGV[#ARGV])
local function save(key, alg, a, b, c, reset, now)
  redis.call('SET', key, string.format('%d:%.17g:%.17g:%.17g', alg, a, b, c))
end`;

type Reply = [number, number, number, number, number, number, number, ...number[]];
interface AtClock {
  rlAdmitAt(...args: (string | number)[]): Promise<Reply>;
}

const algs = ALGORITHMS as LimitParams['algorithm'][];

const scenarioArb = fc
  .record({
    pool: fc.array(limitArb(algs), { minLength: 1, maxLength: 3 }),
    global: fc.option(limitArb(algs), { nil: undefined }),
    shards: fc.integer({ min: 1, max: 4 }),
  })
  .chain((s) =>
    fc.tuple(
      fc.constant(s),
      fc.array(
        fc.record({
          dt: gapArb(Math.min(...s.pool.map((p) => p.intervalMs))),
          // Mostly the first limit; sometimes a quota change.
          limit: fc.oneof(
            { weight: 6, arbitrary: fc.constant(0) },
            { weight: 1, arbitrary: fc.integer({ min: 0, max: s.pool.length - 1 }) },
          ),
          cost: costArb(6),
        }),
        { minLength: 5, maxLength: 50 },
      ),
    ),
  );

function parseState(v: string | null | undefined): BucketState | undefined {
  if (v == null) return undefined;
  const [alg, a, b, c] = v.split(':').map(Number);
  return { alg: alg as BucketState['alg'], a: a!, b: b!, c: c! };
}

t.test('Lua and TypeScript agree on every decision and every stored state', async (t) => {
  const { redis, prefix } = await useRedis(t, 'admission-script-equivalence');
  redis.defineCommand('rlAdmitAt', { lua: admitScript(TEST_CLOCK) });
  const cmd = redis as Redis & AtClock;
  let run = 0;
  let decisions = 0;
  let denials = 0;
  await fc.assert(
    fc.asyncProperty(scenarioArb, async ([s, reqs]) => {
      run++;
      const kKey = `${prefix}eq:${run}:k`;
      const gKey = `${prefix}eq:${run}:g`;
      let kState: BucketState | undefined;
      let gState: BucketState | undefined;
      const out = newAdmission();
      let now = START_MS;
      for (const [i, r] of reqs.entries()) {
        now += r.dt;
        const L = s.pool[r.limit]!;
        const G = s.global;
        const ts = decide({ params: L, state: kState }, G && { params: G, state: gState, costScale: s.shards }, now, r.cost, out);
        const head = [ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, r.cost];
        const reply = G
          ? await cmd.rlAdmitAt(2, kKey, gKey, ...head, ALGORITHM_CODE[G.algorithm], G.rate, G.burst, G.intervalMs, r.cost * s.shards, now)
          : await cmd.rlAdmitAt(1, kKey, ...head, now);
        const want: Reply = [
          ts.allowed ? 1 : 0,
          ts.binding === 'global' ? 1 : 0,
          ts.limit,
          ts.remaining,
          ts.resetAtMs,
          ts.retryAfterMs,
          now,
        ];
        if (JSON.stringify(reply.slice(0, 7)) !== JSON.stringify(want)) {
          throw new Error(
            `request ${i} (limit ${JSON.stringify(L)}, cost ${r.cost}): Lua ${JSON.stringify(reply)}, TypeScript ${JSON.stringify(want)}`,
          );
        }
        if (ts.allowed) {
          kState = kState ?? { alg: 1, a: 0, b: 0, c: 0 };
          commit(kState, ts.key);
          if (G) {
            gState = gState ?? { alg: 1, a: 0, b: 0, c: 0 };
            commit(gState, ts.global);
          }
        } else denials++;
        decisions++;
        const [kv, gv] = await redis.mget(kKey, gKey);
        // The reply's tail is the state Redis holds after the call (refusal-cache.ts re-runs it).
        const tail = (at: number): BucketState | undefined =>
          reply[at] === 0 ? undefined : { alg: reply[at] as BucketState['alg'], a: reply[at + 1]!, b: reply[at + 2]!, c: reply[at + 3]! };
        if (
          JSON.stringify(tail(7)) !== JSON.stringify(parseState(kv)) ||
          (G && JSON.stringify(tail(11)) !== JSON.stringify(parseState(gv)))
        ) {
          throw new Error(`request ${i}: the reply's states ${JSON.stringify(reply.slice(7))} differ from the stored ${kv} / ${gv}`);
        }
        if (JSON.stringify(parseState(kv)) !== JSON.stringify(kState) || JSON.stringify(parseState(gv)) !== JSON.stringify(gState)) {
          throw new Error(
            `request ${i}: stored state differs: Lua ${kv} / ${gv}, TypeScript ${JSON.stringify(kState)} / ${JSON.stringify(gState)}`,
          );
        }
      }
    }),
    { numRuns: 250 },
  );
  t.ok(decisions > 1000, `${decisions} decisions compared (${denials} denials) over ${run} sequences`);
  t.ok(denials > 100, 'denials are exercised too');
});
