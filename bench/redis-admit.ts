/**
 * CPU per decision of the Redis counter store's client side: `admitReply` through the store's own
 * RESP2 connection (limiter/admission/resp-connection.ts) against the same store with decisions on
 * ioredis (`ioredisDecisions: true`, auto-pipelining off as the store sets it on a standalone
 * Redis), on one redis-server of the bench's own.
 *
 *   npx tsc -b && node dist/bench/redis-admit.js [decisions per round, default 200000] [window, default 64]
 *
 * Each round sends N decisions with `window` in flight at a time (what a loaded sidecar has), over
 * 1,000 subjects of a token bucket, and reads this process's CPU time (`process.cpuUsage`, user +
 * system) per decision; Redis runs in another process, so its CPU is not counted. Rounds alternate
 * the two clients, three each; the lowest of each is printed (CPU time is what is compared; the
 * machine is shared, so a round may be disturbed upwards, not downwards).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisCounterStore } from '../limiter/admission/counter-store.redis.js';
import type { AdmitRequest, LimitParams } from '../limiter/admission/index.js';
import { findRedisServer } from '../test/harness/redis-server.js';
import { startRedis } from './lib/redis.js';

const N = Number(process.argv[2] ?? 200_000);
const WINDOW = Number(process.argv[3] ?? 64);
const SUBJECTS = 1000;

const limit: LimitParams = { algorithm: 'token_bucket', rate: 100, burst: 100, intervalMs: 1000 };
const reqs: AdmitRequest[] = Array.from({ length: SUBJECTS }, (_, i) => ({ key: `key:bench-${i}`, limit, cost: 1 }));

async function round(store: RedisCounterStore): Promise<{ cpuUs: number; wallUs: number }> {
  let sent = 0;
  let done = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const next = (): void => {
      done++;
      if (sent < N) send();
      else if (done === N) resolve();
    };
    const send = (): void => {
      const r = reqs[sent++ % SUBJECTS]!;
      store.admitReply(r).then(next, reject);
    };
    for (let i = 0; i < WINDOW && i < N; i++) send();
  });
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { cpuUs: (c.user + c.system) / N, wallUs: (wall * 1000) / N };
}

const bin = findRedisServer();
if (bin === undefined) throw new Error('redis-server is needed');
const dir = await mkdtemp(join(tmpdir(), 'bench-redis-admit-'));
const redis = await startRedis(bin, dir, process.env.BENCH_REDIS_CPU);
try {
  const ours = new RedisCounterStore({ url: redis.url, prefix: 'ours', deadlineMs: 5000 });
  const io = new RedisCounterStore({ url: redis.url, prefix: 'io', deadlineMs: 5000, ioredisDecisions: true });
  await Promise.all([ours.ready(), io.ready()]);
  // Warm up both (JIT, script load).
  for (const s of [ours, io]) await round(s);
  const best = { ours: { cpuUs: Infinity, wallUs: Infinity }, io: { cpuUs: Infinity, wallUs: Infinity } };
  for (let i = 0; i < 3; i++) {
    for (const [name, s] of [
      ['ioredis', io],
      ['ours', ours],
    ] as const) {
      const r = await round(s);
      const b = name === 'ours' ? best.ours : best.io;
      if (r.cpuUs < b.cpuUs) b.cpuUs = r.cpuUs;
      if (r.wallUs < b.wallUs) b.wallUs = r.wallUs;
      console.log(
        `  round ${i + 1} ${name.padEnd(8)} ${r.cpuUs.toFixed(2).padStart(6)} µs CPU/decision   ${r.wallUs.toFixed(2).padStart(6)} µs wall/decision`,
      );
    }
  }
  console.log(`\n${N} decisions per round, ${WINDOW} in flight, Node ${process.version}`);
  console.log(`  ioredis (EVALSHA, no auto-pipelining)  ${best.io.cpuUs.toFixed(2)} µs CPU per decision (lowest of 3)`);
  console.log(`  own RESP2 connection                   ${best.ours.cpuUs.toFixed(2)} µs CPU per decision (lowest of 3)`);
  console.log(`  ratio                                  ${(best.io.cpuUs / best.ours.cpuUs).toFixed(2)}×`);
  await Promise.all([ours.close(), io.close()]);
} finally {
  await redis.process.stop();
  await rm(dir, { recursive: true, force: true });
}
