// @tier: pure
/**
 * Faults while local answers are live (issue 17, Faults): a real redis-server of this file's own is
 * paused (SIGSTOP) and later killed while the sidecar holds a lease of an approximate quota and a
 * local refusal of an exact one. Throughout: fail modes as without local answers (open: the
 * emergency cap, held exactly; closed: 503), never another 5xx; a refusal Redis certainly gives is
 * still given while Redis is merely slow; the lease is spent, then expires and its give-back
 * fails (an under-count, never an over-count): what is admitted for the approximate quota while
 * Redis is away is at most the lease it held plus the emergency cap. After Redis returns (and after
 * a restart that lost every key), exact admission resumes with no stale local answer.
 */
import t from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { freePort } from '../harness/ports.js';
import { findRedisServer, REDIS_SERVER_MISSING, spawnRedisServer, type RedisProcess } from '../harness/redis-server.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { client, keySubject, newApiKey, type QuotaJson, type Reply, startTestSidecar } from './fixtures/sidecar.js';

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const HOUR = 3_600_000;
const BURST = 40;
const FACTOR = 2;
const SHARE = BURST / 4; // one sidecar: a lease is at most burst / (4 × 1)
const K = { approx: newApiKey('approx'), approx2: newApiKey('approx2'), refused: newApiKey('refused'), closed: newApiKey('closed') };
const quotas: QuotaJson[] = [
  {
    subject_id: keySubject(K.approx),
    algorithm: 'token_bucket',
    rate: 1,
    burst: BURST,
    interval_ms: HOUR,
    fail_mode: 'open',
    accuracy: 'approximate',
  },
  {
    subject_id: keySubject(K.approx2),
    algorithm: 'token_bucket',
    rate: 1,
    burst: BURST,
    interval_ms: HOUR,
    fail_mode: 'open',
    accuracy: 'approximate',
  },
  { subject_id: keySubject(K.refused), algorithm: 'token_bucket', rate: 1, burst: 2, interval_ms: HOUR, fail_mode: 'open' },
  { subject_id: keySubject(K.closed), algorithm: 'token_bucket', rate: 1, burst: 2, interval_ms: HOUR, fail_mode: 'closed' },
];

t.test('Redis paused, then killed, with a lease and a local refusal live', async (t) => {
  const bin = findRedisServer();
  if (!bin) {
    t.fail(REDIS_SERVER_MISSING);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'limiter-lease-faults-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  let redis: RedisProcess = await spawnRedisServer({ bin, dir, choosePort: freePort });
  const port = redis.port;
  t.teardown(() => redis.stop());
  const admin = new Redis(port, '127.0.0.1');
  t.teardown(() => admin.disconnect());
  const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))![1]);
  let paused = false;
  t.teardown(() => {
    if (paused) process.kill(pid, 'SIGCONT');
  });

  const s = await startTestSidecar(t, {
    upstream: up.url,
    quotas,
    env: {
      REDIS_URL: `redis://127.0.0.1:${port}`,
      LIMITER_REDIS_TIMEOUT: '200ms',
      LIMITER_REDIS_CONNECT_TIMEOUT: '300ms',
      LIMITER_BREAKER_MIN_VOLUME: '3',
      LIMITER_BREAKER_THRESHOLD: '0.5',
      LIMITER_BREAKER_COOLDOWN: '5s',
      LIMITER_EMERGENCY_FACTOR: String(FACTOR),
    },
  });
  const store = s.sidecar.store as RedisCounterStore;
  await store.ready(5_000);
  const leases = s.sidecar.leases!;
  const local = s.sidecar.local!;
  const statuses: number[] = [];
  const get = async (key: string): Promise<Reply> => {
    const r = await call(`${s.base}/v1/x`, { headers: { 'x-api-key': key } });
    statuses.push(r.status);
    return r;
  };
  const held = (key = K.approx) => leases.book.get(keySubject(key))?.tokens ?? 0;

  // A live lease (its size grows with the subject's rate) and a live local refusal.
  let admittedApprox = 0;
  for (let i = 0; i < 30 && held() < 3; i++) if ((await get(K.approx)).status === 200) admittedApprox++;
  t.ok(held() >= 3, `a lease holds ${held()} tokens`);
  t.same([(await get(K.refused)).status, (await get(K.refused)).status], [200, 200]);
  const before = local.localRefusals;
  t.equal((await get(K.refused)).status, 429, 'the exact subject is spent');
  t.equal(local.localRefusals, before + 1, 'and refused locally');

  t.test('paused: the certain refusal still holds, the lease is spent, then fail modes', async (t) => {
    process.kill(pid, 'SIGSTOP');
    paused = true;
    const refusals = local.localRefusals;
    t.equal((await get(K.refused)).status, 429, 'Redis paused: the local refusal answers at once (Redis still holds that state)');
    t.equal(local.localRefusals, refusals + 1);
    const lease = held();
    let fromLease = 0;
    while (held() > 0) if ((await get(K.approx)).status === 200) fromLease++;
    t.equal(fromLease, lease, `the lease's ${lease} tokens are spent locally`);
    // The next ones need Redis: time-outs, the breaker opens, fail open to the emergency cap.
    let duringOutage = 0;
    for (let i = 0; i < FACTOR * BURST + 20; i++) if ((await get(K.approx)).status === 200) duringOutage++;
    t.equal(s.sidecar.breaker.state, 'open', 'the breaker opened');
    t.equal(duringOutage, FACTOR * BURST, `fail open: exactly the emergency cap (${FACTOR} × ${BURST}), held`);
    t.ok(fromLease + duringOutage <= SHARE + FACTOR * BURST, 'admitted while Redis was away ≤ the lease held + the emergency cap');
    admittedApprox += fromLease;
    t.equal(local.size, 0, 'the failed calls cleared every local refusal');
    t.equal((await get(K.closed)).status, 503, 'fail closed: 503');
    t.equal(
      (await get(K.refused)).status,
      200,
      'the formerly refused subject now gets its fail mode (open: emergency cap), as without local answers',
    );

    // Leases expire: a new lease cannot be taken while the breaker is open, and the sweep's
    // give-back fails (an under-count, never an over-count).
    await waitFor(() => held() === 0, { timeoutMs: 5_000, what: 'the lease to be empty' });
    t.equal(held(), 0, 'no lease tokens held');
    process.kill(pid, 'SIGCONT');
    paused = false;
  });

  t.test('Redis back: after the cool-down, exact again', async (t) => {
    await waitFor(async () => (await admin.ping()) === 'PONG', { timeoutMs: 5_000, what: 'redis to answer again' });
    s.clock.advance(5_000);
    // Half-open probes go to Redis (the lease store stands aside until the breaker is closed).
    for (let i = 0; i < 3; i++) await get(K.refused);
    t.equal(s.sidecar.breaker.state, 'closed', 'the probes closed the breaker');
    const inRedis = Math.floor(Number((await admin.get(store.bucketKey(keySubject(K.approx))))!.split(':')[1]) / HOUR);
    // Takes that timed out while Redis was paused ran when it resumed: their tokens are lost to
    // the subject (an under-count, at most one share per timed-out take), never handed out twice.
    t.ok(
      inRedis <= BURST - admittedApprox,
      `Redis holds ${inRedis} tokens: nothing given back that was spent (${admittedApprox} admitted from Redis and leases)`,
    );
  });

  t.test('killed with a lease live, restarted empty: no stale local answer, no 500', async (t) => {
    for (let i = 0; i < 30 && held(K.approx2) < 2; i++) await get(K.approx2);
    t.ok(held(K.approx2) >= 2, `a lease holds ${held(K.approx2)} tokens`);
    t.equal((await get(K.refused)).status, 429, 'the exact subject is refused (by Redis or locally)');
    await redis.stop();
    const during: number[] = [];
    for (let i = 0; i < 10; i++) during.push((await get(K.approx2)).status);
    t.notOk(
      during.some((x) => x >= 500),
      `Redis dead: ${during.join(' ')}`,
    );
    redis = await spawnRedisServer({ bin, dir, choosePort: async () => port });
    await waitFor(() => store.status === 'ready', { timeoutMs: 10_000, what: 'the sidecar to reconnect' });
    t.equal(local.size, 0, 'the reconnect dropped every local refusal (the new Redis has no state)');
    s.clock.advance(5_000);
    const after: number[] = [];
    for (let i = 0; i < 3; i++) after.push((await get(K.refused)).status);
    t.same(after, [200, 200, 429], 'the exact subject starts from a full bucket in the new Redis, exactly');
    t.equal(s.sidecar.breaker.state, 'closed');
  });

  t.test('never a 5xx other than fail-closed 503', async (t) => {
    t.same(
      statuses.filter((x) => x >= 500 && x !== 503),
      [],
      `${statuses.length} requests: ${[...new Set(statuses)].sort().join(', ')}`,
    );
  });
});
