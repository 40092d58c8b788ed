/**
 * The Redis counter store against a real Redis: exact quotas at one instant, several sidecars
 * sharing one Redis, both-or-neither over key and global buckets, the sharded global bucket's
 * bound, the key layout and expiry, the shadow candidate script, NOSCRIPT recovery, and failing
 * fast (typed errors, within the deadline) when Redis hangs or is gone.
 *
 * Limits here refill at most one token per hour or count per day-long windows, so the
 * few hundred milliseconds a test takes cannot change a count: Redis TIME is the clock, and the
 * tests do not sleep to move it.
 */
import t from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import {
  ADMIT_LUA,
  ALGORITHMS,
  CounterStoreError,
  RedisCounterStore,
  shardOf,
  type AdmitRequest,
  type AdmitResult,
  type LimitParams,
} from '../../../limiter/admission/index.js';
import { useRedis } from '../../harness/redis.js';
import { findRedisServer, spawnRedisServer, startRedisServer } from '../../harness/redis-server.js';
import { freePort } from '../../harness/ports.js';
import { waitFor } from '../../harness/wait.js';

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** A limit of `n` that does not refill within a test. */
const still = (algorithm: LimitParams['algorithm'], n: number): LimitParams => ({
  algorithm,
  rate: algorithm === 'token_bucket' || algorithm === 'leaky_bucket' ? 1 : n,
  burst: n,
  intervalMs: algorithm === 'token_bucket' || algorithm === 'leaky_bucket' ? HOUR : DAY,
});

t.test('a shared Redis', async (t) => {
  const { redis, prefix, url } = await useRedis(t, 'admission-redis-store');
  const base = prefix.slice(0, -1);
  const stores: RedisCounterStore[] = [];
  const open = (opts: Partial<ConstructorParameters<typeof RedisCounterStore>[0]> = {}) => {
    const s = new RedisCounterStore({ url, prefix: base, deadlineMs: 2000, ...opts });
    stores.push(s);
    return s;
  };
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  const store = open();
  await store.ready();

  t.test('each algorithm admits exactly its limit from a burst at one instant', async (t) => {
    for (const alg of ALGORITHMS) {
      const limit = still(alg, 10);
      const results: AdmitResult[] = [];
      for (let i = 0; i < 25; i++) results.push(await store.admit({ key: `burst:${alg}`, limit, cost: 1 }));
      t.equal(results.filter((r) => r.allowed).length, 10, `${alg}: 10 of 25`);
      t.same(
        results.slice(0, 10).map((r) => r.remaining),
        [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
        `${alg}: remaining counts down`,
      );
      const denied = results[24]!;
      t.equal(denied.allowed, false);
      t.equal(denied.limit, 10);
      t.ok(denied.retryAfterMs >= 1000 && Number.isInteger(denied.retryAfterMs), `${alg}: Retry-After ${denied.retryAfterMs} ms`);
      t.ok(denied.resetAtMs > Date.now() - 5000, `${alg}: reset is an epoch time from Redis`);
    }
  });

  t.test('point costs: a request is admitted only with at least its cost left', async (t) => {
    const limit = still('token_bucket', 10);
    const take = async (cost: number) => (await store.admit({ key: 'cost', limit, cost })).allowed;
    t.same([await take(4), await take(4), await take(4), await take(2), await take(1)], [true, true, false, true, false]);
  });

  t.test('keys: layout v1, hash-tagged, expiring when the bucket is back at rest', async (t) => {
    await store.admit({ key: 'user:layout', limit: still('token_bucket', 10), cost: 3 });
    const key = `${base}:v1:{s0}:k:user:layout`;
    t.equal(store.bucketKey('user:layout'), key);
    const value = await redis.get(key);
    t.match(value, /^1:\d+:\d+:3600000$/, 'algorithm code 1, level, last update, interval');
    const pttl = await redis.pttl(key);
    t.ok(pttl > 3 * HOUR - 10_000 && pttl <= 3 * HOUR, `expires when the 3 spent tokens are back (PTTL ${pttl})`);
  });

  t.test('three sidecars on one Redis hold one quota exactly', async (t) => {
    const sidecars = [open(), open(), open()];
    await Promise.all(sidecars.map((s) => s.ready()));
    const limit = still('token_bucket', 50);
    const req: AdmitRequest = { key: 'shared', limit, cost: 1 };
    const all = await Promise.all(sidecars.flatMap((s) => Array.from({ length: 40 }, () => s.admit(req))));
    t.equal(all.length, 120);
    t.equal(all.filter((r) => r.allowed).length, 50, 'exactly the burst, across 3 connections hammering concurrently');
    const remaining = all.filter((r) => r.allowed).map((r) => r.remaining);
    t.same(
      [...remaining].sort((a, b) => a - b),
      Array.from({ length: 50 }, (_, i) => i),
      'each remaining value 49..0 reported exactly once',
    );
  });

  t.test('key and global buckets: both or neither', async (t) => {
    const limit = still('token_bucket', 3);
    const global = { name: 'g-both', limit: still('token_bucket', 5) };
    const outcomes: string[] = [];
    for (const key of ['a', 'b', 'c']) {
      for (let i = 0; i < 3; i++) {
        const r = await store.admit({ key: `both:${key}`, limit, global, cost: 1 });
        outcomes.push(r.allowed ? 'ok' : `${r.binding}:${r.remaining}/${r.limit}`);
      }
    }
    t.same(outcomes, ['ok', 'ok', 'ok', 'ok', 'ok', 'global:0/3', 'global:0/3', 'global:0/3', 'global:0/3']);
    const probe = await store.admit({ key: 'both:c', limit, cost: 0 });
    t.equal(probe.remaining, 3, 'c was never charged: its three requests were denied by the global bucket');
    const probeB = await store.admit({ key: 'both:b', limit, cost: 0 });
    t.equal(probeB.remaining, 1, 'b was charged for its two admitted requests only');
  });

  t.test('a global bucket sharded 4 ways on a standalone Redis: never over, under only when skewed', async (t) => {
    const sharded = open({ shards: 4 });
    await sharded.ready();
    const limit = still('token_bucket', 100);
    const global = { name: 'g-sharded', limit: still('token_bucket', 40) };
    const keys = Array.from({ length: 64 }, (_, i) => `spread:${i}`);
    t.same(new Set(keys.map((k) => shardOf(k, 4))).size, 4, 'the keys cover every shard');
    let admitted = 0;
    for (let round = 0; round < 5; round++) {
      const rs = await Promise.all(keys.map((key) => sharded.admit({ key, limit, global, cost: 1 })));
      admitted += rs.filter((r) => r.allowed).length;
    }
    t.equal(admitted, 40, 'spread over every shard, exactly the global burst');
    const skewGlobal = { name: 'g-skewed', limit: still('token_bucket', 40) };
    const skewed = Array.from({ length: 400 }, (_, i) => `skew:${i}`)
      .filter((k) => shardOf(k, 4) === 0)
      .slice(0, 30);
    let skewAdmitted = 0;
    for (const key of skewed) if ((await sharded.admit({ key, limit, global: skewGlobal, cost: 1 })).allowed) skewAdmitted++;
    t.equal(skewAdmitted, 10, 'all traffic in one of 4 shards: a quarter of the global burst (the documented under-admission)');
    const g0 = sharded.globalShardKey('g-sharded', 0);
    t.equal(g0, `${base}:v1:{s0}:g:g-sharded`);
    t.equal(sharded.bucketKey('spread:0').split('}')[0] + '}', `${base}:v1:{s${shardOf('spread:0', 4)}}`, 'a key sits beside its shard');
  });

  t.test('shadow candidate: its own keys, disagreements counted', async (t) => {
    const same = open({ candidate: { source: ADMIT_LUA, version: 'v1-shadow' } });
    await same.ready();
    const limit = still('token_bucket', 5);
    for (let i = 0; i < 8; i++) await same.admit({ key: 'shadow:same', limit, cost: 1 });
    await waitFor(() => same.shadowStats.compared === 8, { what: '8 shadow comparisons' });
    t.same(same.shadowStats, { compared: 8, disagreed: 0, errors: 0 }, 'the same script agrees on every call');
    t.ok(await redis.exists(`${base}:v1-shadow:{s0}:k:shadow:same`), 'the candidate wrote its own key');
    t.ok(await redis.exists(`${base}:v1:{s0}:k:shadow:same`), 'beside the enforcing one');

    const seen: [string, boolean, boolean][] = [];
    const generous = ADMIT_LUA.replace(
      'ALGORITHMS[alg](tonumber(ARGV[2]), tonumber(ARGV[3])',
      'ALGORITHMS[alg](tonumber(ARGV[2]), 2 * tonumber(ARGV[3])',
    );
    t.not(generous, ADMIT_LUA, 'the candidate really differs (double burst)');
    const diff = open({
      candidate: { source: generous, version: 'v2' },
      onShadowDisagreement: (key, enforced, candidate) => seen.push([key, enforced.allowed, candidate.allowed]),
    });
    await diff.ready();
    const results: boolean[] = [];
    for (let i = 0; i < 12; i++) results.push((await diff.admit({ key: 'shadow:diff', limit, cost: 1 })).allowed);
    await waitFor(() => diff.shadowStats.compared === 12, { what: '12 shadow comparisons' });
    t.equal(results.filter(Boolean).length, 5, 'the enforcing script still decides');
    t.same(diff.shadowStats, { compared: 12, disagreed: 5, errors: 0 }, 'requests 6-10: denied, candidate would admit');
    t.same(seen[0], ['shadow:diff', false, true]);

    const broken = open({ candidate: { source: 'return redis.call("NOSUCHCOMMAND")', version: 'v-broken' } });
    await broken.ready();
    const r = await broken.admit({ key: 'shadow:broken', limit, cost: 1 });
    t.equal(r.allowed, true, 'a failing candidate never affects the caller');
    await waitFor(() => broken.shadowStats.errors === 1, { what: 'the candidate error counted' });
  });

  t.test('the candidate may not share the enforcing keys', async (t) => {
    t.throws(() => new RedisCounterStore({ url, prefix: base, candidate: { source: ADMIT_LUA, version: 'v1' } }), RangeError);
    t.throws(() => new RedisCounterStore({ url, prefix: 'a{b}' }), RangeError);
  });
});

t.test('a Redis of our own: NOSCRIPT recovery, hangs and outages fail fast with typed errors', async (t) => {
  const bin = findRedisServer();
  if (bin === undefined) throw new Error('redis-server is needed for this test');
  const server = await startRedisServer(bin);
  t.teardown(() => server.stop());
  const admin = new Redis(server.url);
  admin.on('error', () => undefined);
  t.teardown(() => admin.quit().catch(() => admin.disconnect()));
  const store = new RedisCounterStore({ url: server.url, prefix: 'own', deadlineMs: 50 });
  t.teardown(() => store.close());
  await store.ready();
  const req: AdmitRequest = { key: 'k', limit: still('token_bucket', 100), cost: 1 };

  t.equal((await store.admit(req)).allowed, true);
  await admin.script('FLUSH');
  t.equal((await store.admit(req)).remaining, 98, 'after SCRIPT FLUSH the script is loaded again (NOSCRIPT fallback)');

  // A hung Redis: every client paused for 1.5 s. The call fails at its 50 ms deadline, not when the
  // pause ends (then it would succeed).
  await admin.client('PAUSE', 1500, 'ALL');
  let started = Date.now();
  const hung = await store.admit(req).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.comment(`timed out after ${Date.now() - started} ms (deadline 50 ms)`);
  t.type(hung, CounterStoreError);
  t.equal((hung as CounterStoreError).code, 'counter_store_timeout');
  await admin.client('UNPAUSE');

  // Gone: stopped server. Refused at once (no offline queue), not after a connect timeout.
  await server.stop();
  await waitFor(() => store.status !== 'ready', { what: 'the store to notice' });
  started = Date.now();
  const gone = await store.admit(req).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.comment(`refused in ${Date.now() - started} ms`);
  t.type(gone, CounterStoreError);
  // Refused, not queued: a queued command would have failed later with counter_store_timeout.
  t.equal((gone as CounterStoreError).code, 'counter_store_unavailable');
  t.equal((gone as CounterStoreError).status, 503);
  t.match((gone as Error).cause, { message: /offline ?queue/i }, 'refused by the client at once (no offline queue)');

  // Back again on the same port: the store reconnects by itself (what the breaker's probes rely on).
  const port = Number(new URL(server.url).port);
  const dir = await mkdtemp(join(tmpdir(), 'admission-redis-'));
  const again = await spawnRedisServer({ bin, dir, choosePort: () => Promise.resolve(port) });
  t.teardown(async () => {
    await again.stop();
    await rm(dir, { recursive: true, force: true });
  });
  await waitFor(() => store.status === 'ready', { timeoutMs: 10_000, what: 'the store to reconnect' });
  const back = await store.admit(req);
  t.same([back.allowed, back.remaining], [true, 99], 'answering again without a restart (counters were lost with the server)');
});

t.test('a Redis that was never there: refused at once, and ready() gives up after its timeout', async (t) => {
  const port = await freePort();
  const store = new RedisCounterStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 200, deadlineMs: 1000 });
  t.teardown(() => store.close());
  const started = Date.now();
  const err = await store.admit({ key: 'k', limit: still('token_bucket', 1), cost: 1 }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.comment(`refused in ${Date.now() - started} ms`);
  // Refused at once: waiting for a connection would have ended at the 1 s deadline, counter_store_timeout.
  t.match(err, { code: 'counter_store_unavailable', name: 'CounterStoreError' });
  t.match((err as Error).cause, { message: /offline ?queue/i }, 'refused by the client at once (no offline queue)');
  await t.rejects(store.ready(300), { code: 'counter_store_unavailable' });
});
