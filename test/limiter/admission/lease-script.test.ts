/**
 * The lease scripts (limiter/admission/lease-script.ts) on a real Redis: a take grants the most
 * tokens both buckets can give up to `want`, charged like one admission of that cost; below the
 * waiting request's cost it grants nothing and answers as the admission script refuses, states
 * included; a give-back credits unspent tokens, capped at the burst (token bucket) or at empty
 * (leaky bucket), and never creates state for a bucket at rest.
 */
import t from 'tap';
import type { Redis } from 'ioredis';
import { LEASE_GIVE_LUA, LEASE_TAKE_LUA } from '../../../limiter/admission/lease-script.js';
import { ALGORITHM_CODE, type LimitParams } from '../../../limiter/admission/index.js';
import { useRedis } from '../../harness/redis.js';
import { waitFor } from '../../harness/wait.js';

const HOUR = 3_600_000;
const tb = (burst: number): LimitParams => ({ algorithm: 'token_bucket', rate: 1, burst, intervalMs: HOUR });
const lb = (burst: number): LimitParams => ({ algorithm: 'leaky_bucket', rate: 1, burst, intervalMs: HOUR });
const args = (L: LimitParams) => [ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs];

interface Cmds {
  take1(k: string, ...a: number[]): Promise<number[]>;
  take2(k: string, g: string, ...a: number[]): Promise<number[]>;
  give1(k: string, ...a: number[]): Promise<number>;
  give2(k: string, g: string, ...a: number[]): Promise<number>;
}

t.test('lease scripts', async (t) => {
  const { redis, prefix } = await useRedis(t, 'lease-script');
  redis.defineCommand('take1', { lua: LEASE_TAKE_LUA, numberOfKeys: 1 });
  redis.defineCommand('take2', { lua: LEASE_TAKE_LUA, numberOfKeys: 2 });
  redis.defineCommand('give1', { lua: LEASE_GIVE_LUA, numberOfKeys: 1 });
  redis.defineCommand('give2', { lua: LEASE_GIVE_LUA, numberOfKeys: 2 });
  const c = redis as Redis & Cmds;
  const granted = (r: number[]) => r[r.length - 1];

  t.test('take: up to want, what is there, or nothing below the cost', async (t) => {
    const k = `${prefix}take`;
    const a = await c.take1(k, ...args(tb(10)), 4, 1);
    t.same([a[0], granted(a), a[3]], [1, 4, 6], 'want 4 of 10: granted 4, 6 remaining');
    const b = await c.take1(k, ...args(tb(10)), 9, 1);
    t.same([b[0], granted(b), b[3]], [1, 6, 0], 'want 9: the 6 there');
    const none = await c.take1(k, ...args(tb(10)), 3, 1);
    t.same([none[0], granted(none), none[3]], [0, 0, 0], 'nothing left: refused, granted 0');
    t.ok(none[5]! >= 1000, "the refusal's retry-after");
    t.same(
      [none[7], none[8]! < HOUR, none[10]],
      [1, true, HOUR],
      "the refusal carries the bucket's state (token bucket, under a token, its interval)",
    );
  });

  t.test('take with a global bucket: the smaller of the two, scaled by the shard count', async (t) => {
    const k = `${prefix}tk`;
    const g = `${prefix}tg`;
    // The global bucket holds 12 charged ×4 (one shard of four): 3 tokens for this shard.
    const r = await c.take2(k, g, ...args(tb(10)), 8, ...args(tb(12)), 4, 1);
    t.same([r[0], granted(r), r[3]], [1, 3, 7], 'granted 3 (the shard share), charged to both');
    t.equal(Number((await redis.get(g))!.split(':')[1]) / HOUR, 0, 'the global shard is spent');
    const denied = await c.take2(k, g, ...args(tb(10)), 8, ...args(tb(12)), 4, 1);
    t.same([denied[0], denied[1], granted(denied)], [0, 1, 0], 'then refused, bound by the global bucket');
  });

  t.test('give: credits back, capped; never creates state', async (t) => {
    const k = `${prefix}give`;
    await c.take1(k, ...args(tb(10)), 5, 1);
    await c.give1(k, ...args(tb(10)), 3);
    const after = await c.take1(k, ...args(tb(10)), 0, 0);
    t.equal(after[3], 8, '5 taken, 3 given back: 8 left');
    await c.give1(k, ...args(tb(10)), 50);
    t.equal((await c.take1(k, ...args(tb(10)), 0, 0))[3], 10, 'capped at the burst');
    const rest = `${prefix}rest`;
    await c.give1(rest, ...args(tb(10)), 3);
    t.equal(await redis.exists(rest), 0, 'a bucket at rest (full) is left alone');
    const leaky = `${prefix}leaky`;
    const l = await c.take1(leaky, ...args(lb(10)), 6, 1);
    t.same([granted(l), l[3]], [6, 4], 'a leaky bucket leases its free room');
    await c.give1(leaky, ...args(lb(10)), 2);
    t.equal((await c.take1(leaky, ...args(lb(10)), 0, 0))[3], 6, 'and takes back the unspent (level lowered)');
    await c.give1(leaky, ...args(lb(10)), 20);
    t.equal((await c.take1(leaky, ...args(lb(10)), 0, 0))[3], 10, 'floored at empty');
    await c.give1(leaky, ...args(tb(10)), 5);
    t.equal((await c.take1(leaky, ...args(lb(10)), 0, 0))[3], 10, "another algorithm's give-back is ignored");
  });

  t.test('a give-back under a lease taken before a quota change credits its tokens, not the old rate', async (t) => {
    const k = `${prefix}changed`;
    // Leased under a fast quota (a token per ms), then the quota drops to a token per hour.
    const fast: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 100, intervalMs: 1 };
    const lease = await c.take1(k, ...args(fast), 10, 1);
    t.equal(granted(lease), 10, '10 tokens leased under the fast quota');
    const drained = await c.take1(k, ...args(tb(100)), 90, 90);
    t.same([granted(drained), drained[3]], [90, 0], 'the slow quota spends the other 90');
    const last = drained[6]!;
    // Redis time moves on past the last charge (the fast quota would refill 1 token per ms).
    await waitFor(async () => {
      const [s, us] = await redis.time();
      return Number(s) * 1000 + Math.floor(Number(us) / 1000) > last + 20;
    });
    // The old lease's unspent 10 come back, given back with the limits it was taken under.
    await c.give1(k, ...args(fast), 10);
    t.equal((await c.take1(k, ...args(tb(100)), 0, 0))[3], 10, 'the slow quota has the 10 given back, not a refill at the old rate');
  });

  t.test('give with a global bucket credits both', async (t) => {
    const k = `${prefix}gk`;
    const g = `${prefix}gg`;
    await c.take2(k, g, ...args(tb(10)), 2, ...args(tb(8)), 2, 1);
    await c.give2(k, g, ...args(tb(10)), 2, ...args(tb(8)), 4);
    const r = await c.take2(k, g, ...args(tb(10)), 0, ...args(tb(8)), 2, 0);
    t.equal(r[3], 10, 'the key bucket is full again');
    const gv = await redis.get(g);
    t.ok(
      gv === null || Number(gv.split(':')[1]) / HOUR === 8,
      `and so is the global shard (full, i.e. at rest: its key may have expired already): ${gv}`,
    );
  });
});
