// @tier: pure
// @alone
/**
 * Deadlines that measure Redis, not our event loop (issue 23, item 5): three sidecars on one Redis
 * under load, on a machine whose two cores are kept busy by two `nice 19` child processes, with
 * LIMITER_REDIS_TIMEOUT at its 50 ms default and fail mode `open`. Redis (default priority) answers
 * every call in well under a millisecond; what is late is the sidecars' own event loop, which here
 * also runs the load generator. Counted, not timed: every subject is admitted exactly its burst
 * (no over-admission), and no decision fails open, because a reply that was already in the socket
 * when a deadline timer ran late is read before the call is judged (resp-connection.ts).
 *
 * The late replies the loop caused are counted in `ratelimit_redis_late_reply_seconds` by part;
 * the figures are printed (not asserted: how late the loop runs depends on the machine).
 *
 * Its own redis-server (pure tier: no shared server), and a bounded load (a fixed number of
 * requests), so it does not hold the machine for long.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { findRedisServer, REDIS_SERVER_MISSING, startRedisServer } from '../harness/redis-server.js';
import { startUpstream } from '../harness/upstream.js';
import {
  client,
  fixedQuota,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  startTestSidecar,
  writeQuotaFile,
  type QuotaJson,
  type TestSidecar,
} from './fixtures/sidecar.js';

const bin = findRedisServer();
if (!bin) throw new Error(REDIS_SERVER_MISSING);
const redis = await startRedisServer(bin);
t.teardown(() => redis.stop());

// Two busy children at the lowest priority, one per core: they take every cycle nobody else wants,
// so the sidecars' loop is scheduled late, while redis-server (default priority) is not.
const busy: ChildProcess[] = [];
for (let i = 0; i < 2; i++) {
  const child = spawn('nice', ['-n', '19', process.execPath, '-e', 'for(;;){}'], { stdio: 'ignore' });
  busy.push(child);
}
t.teardown(() => {
  for (const child of busy) child.kill('SIGKILL');
});

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const SUBJECTS = 24;
const BURST = 40;
// Twice the burst per subject: half must be refused.
const PER_SUBJECT = 2 * BURST;
const CONCURRENCY = 96;
const ALGORITHMS = ['token_bucket', 'leaky_bucket', 'sliding_window', 'fixed_window'] as const;
const keys = Array.from({ length: SUBJECTS }, (_, i) => newApiKey(`load${i}`));
const quotas: QuotaJson[] = keys.map((k, i) =>
  fixedQuota(keySubject(k), BURST, {
    fail_mode: 'open',
    plan: 'load',
    algorithm: ALGORITHMS[i % ALGORITHMS.length]!,
    // The window algorithms' limit is `rate` per window: one window of an hour.
    rate: i % ALGORITHMS.length >= 2 ? BURST : 1,
  }),
);
const quotaFile = await writeQuotaFile(t, quotas);
// LIMITER_REDIS_TIMEOUT unset: its default, 50 ms.
const env = { REDIS_URL: redis.url, LIMITER_QUOTA_FILE: quotaFile };
const sidecars: TestSidecar[] = [];
for (let i = 0; i < 3; i++) sidecars.push(await startTestSidecar(t, { upstream: up.url, env }));
await Promise.all(sidecars.map((s) => (s.sidecar.store as RedisCounterStore).ready(5_000)));

t.test('three sidecars at load beside busy processes: no over-admission, no fail_open', async (t) => {
  const admitted = new Map<string, number>();
  const statuses = new Map<number, number>();
  // Round robin over subjects and sidecars, CONCURRENCY requests in flight.
  const jobs: Array<{ key: string; s: TestSidecar }> = [];
  for (let i = 0; i < SUBJECTS * PER_SUBJECT; i++) jobs.push({ key: keys[i % SUBJECTS]!, s: sidecars[i % 3]! });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < jobs.length) {
      const job = jobs[next++]!;
      const r = await call(`${job.s.base}/v1/load`, { headers: { 'x-api-key': job.key } });
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 200) admitted.set(job.key, (admitted.get(job.key) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));

  const metrics = await Promise.all(sidecars.map(async (s) => parseMetrics((await call(`${s.admin}/metrics`)).text)));
  const sum = (name: string, labels: Record<string, string> = {}) => metrics.reduce((n, m) => n + metricSum(m, name, labels), 0);
  const failOpen = sum('ratelimit_decisions', { result: 'fail_open' });
  const trips = sum('ratelimit_failmode_trips');
  const over = keys.reduce((n, k) => n + Math.max(0, (admitted.get(k) ?? 0) - BURST), 0);
  const late = {
    event_loop: sum('ratelimit_redis_late_reply_seconds_count', { part: 'event_loop' }),
    redis: sum('ratelimit_redis_late_reply_seconds_count', { part: 'redis' }),
    eventLoopSeconds: sum('ratelimit_redis_late_reply_seconds_sum', { part: 'event_loop' }),
    redisSeconds: sum('ratelimit_redis_late_reply_seconds_sum', { part: 'redis' }),
  };
  t.comment(
    `statuses ${JSON.stringify(Object.fromEntries(statuses))}; fail_open ${failOpen}; breaker trips ${trips}; over-admitted ${over}; ` +
      `late replies ${JSON.stringify(late)}`,
  );
  t.equal(statuses.get(200), SUBJECTS * BURST, 'exactly every subject’s burst admitted in all');
  t.equal(over, 0, 'no subject admitted above its burst');
  t.same(
    keys.map((k) => admitted.get(k) ?? 0),
    keys.map(() => BURST),
    'each subject admitted exactly its burst',
  );
  // Redis itself is not loaded here (default priority against nice 19), so no reply of its is late
  // and no decision fails open; were it starved by other load, a decision waiting for it would
  // fail open as it should, and be counted in part="redis".
  t.ok(failOpen <= late.redis, `no decision failed open but for a reply Redis itself was late with (${failOpen} ≤ ${late.redis})`);
  t.equal(trips, 0, 'the circuit never opened');
  t.equal(statuses.get(429), SUBJECTS * (PER_SUBJECT - BURST), 'the rest refused with 429');
});
