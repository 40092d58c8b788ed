// @tier: pure
// @alone
/**
 * A live Redis Cluster reshard under traffic (issue 23, item 6): MOVED, ASK and TRYAGAIN are the
 * cluster working as designed, so a sidecar follows them and never counts them as failures. The
 * slots holding every one of the sidecar's keys (the 16 hash tags `{s0}`…`{s15}`: subjects and
 * global shards) are migrated to another node twice, key by key, as `redis-cli --cluster reshard`
 * does (SETSLOT IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE), while requests keep coming, with
 * LIMITER_REDIS_TIMEOUT at its 50 ms default and a global bucket (two keys per call: the case that
 * meets TRYAGAIN while a slot is half moved).
 *
 * Counted, not timed: every admission was charged in Redis exactly once (one more request per
 * subject afterwards reports `remaining` = burst − admitted − 1: no admission without a charge, so
 * no over-admission), the circuit never opened, and the nodes did answer redirections (their
 * `errorstat_ASK|MOVED|TRYAGAIN` grew), so the test saw a reshard and not a quiet cluster. The
 * decisions that failed open, and the late replies by cause, are printed.
 *
 * Its own 3-master cluster (pure tier), since it moves slots.
 */
import t from 'tap';
import { Redis } from 'ioredis';
import type { RedisCounterStore } from '../../limiter/admission/counter-store.redis.js';
import { findRedisServer, REDIS_SERVER_MISSING, startRedisCluster } from '../harness/redis-server.js';
import { startUpstream } from '../harness/upstream.js';
import {
  client,
  fixedQuota,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  startTestSidecar,
  type QuotaJson,
} from './fixtures/sidecar.js';

const bin = findRedisServer();
if (!bin) throw new Error(REDIS_SERVER_MISSING);
const cluster = await startRedisCluster(bin, 3);
t.teardown(() => cluster.stop());
const nodes = cluster.nodes.map((n) => {
  const port = Number(n.slice(n.lastIndexOf(':') + 1));
  return { port, redis: new Redis({ host: '127.0.0.1', port, lazyConnect: true }) };
});
await Promise.all(nodes.map((n) => n.redis.connect()));
t.teardown(() => Promise.all(nodes.map((n) => n.redis.quit())));
const ids = await Promise.all(nodes.map((n) => n.redis.call('CLUSTER', 'MYID') as Promise<string>));

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const SHARDS = 16;
const SUBJECTS = 48;
// Large enough that no subject runs out: every request reaches Redis (a refused subject would be
// answered by the sidecar's refusal cache), and the charge count can be read back exactly.
const BURST = 1_000_000;
const keys = Array.from({ length: SUBJECTS }, (_, i) => newApiKey(`reshard${i}`));
const quotas: QuotaJson[] = keys.map((k) => fixedQuota(keySubject(k), BURST, { fail_mode: 'open', plan: 'reshard' }));
const s = await startTestSidecar(t, {
  upstream: up.url,
  quotas,
  env: {
    REDIS_CLUSTER_NODES: cluster.nodes.join(','),
    LIMITER_GLOBAL_SHARDS: String(SHARDS),
    LIMITER_GLOBAL_RATE: '1000000',
    LIMITER_GLOBAL_BURST: '2000000',
    // LIMITER_REDIS_TIMEOUT unset: its default, 50 ms.
  },
});
await (s.sidecar.store as RedisCounterStore).ready(10_000);

/** Redirections each node has answered so far (INFO errorstats). */
async function redirections(): Promise<number> {
  let n = 0;
  for (const node of nodes) {
    const info = (await node.redis.call('INFO', 'errorstats')) as string;
    for (const m of info.matchAll(/^errorstat_(?:ASK|MOVED|TRYAGAIN):count=(\d+)/gm)) n += Number(m[1]);
  }
  return n;
}

/** Which node (index) owns `slot` now. */
async function owner(slot: number): Promise<number> {
  const slots = (await nodes[0]!.redis.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, string]]>;
  for (const [from, to, [, port]] of slots) if (slot >= from && slot <= to) return nodes.findIndex((n) => n.port === port);
  throw new Error(`slot ${slot} has no owner`);
}

/** Moves `slot` to node `to`, one key per MIGRATE, as redis-cli --cluster reshard does. */
async function moveSlot(slot: number, to: number): Promise<void> {
  const from = await owner(slot);
  if (from === to) return;
  const src = nodes[from]!.redis;
  const dst = nodes[to]!.redis;
  await dst.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids[from]!);
  await src.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids[to]!);
  for (;;) {
    const batch = (await src.call('CLUSTER', 'GETKEYSINSLOT', slot, 10)) as string[];
    if (batch.length === 0) break;
    await src.call('MIGRATE', '127.0.0.1', nodes[to]!.port, '', 0, 5000, 'KEYS', ...batch);
  }
  await dst.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids[to]!);
  await src.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids[to]!);
  for (const [i, n] of nodes.entries()) if (i !== from && i !== to) await n.redis.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids[to]!);
}

t.test('a reshard under traffic: every admission charged once, the circuit never opened', async (t) => {
  const slots = await Promise.all(
    Array.from({ length: SHARDS }, (_, i) => nodes[0]!.redis.call('CLUSTER', 'KEYSLOT', `{s${i}}`) as Promise<number>),
  );
  const admitted = new Map<string, number>();
  const statuses = new Map<number, number>();
  let sent = 0;
  let moving = true;
  const hit = async (key: string): Promise<void> => {
    const r = await call(`${s.base}/v1/reshard`, { headers: { 'x-api-key': key } });
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    if (r.status === 200) admitted.set(key, (admitted.get(key) ?? 0) + 1);
  };
  // Every subject once first, so their keys exist and have to be moved.
  await Promise.all(keys.map(hit));
  const before = await redirections();
  const worker = async (): Promise<void> => {
    while (moving) await hit(keys[sent++ % SUBJECTS]!);
  };
  const workers = Array.from({ length: 32 }, worker);
  try {
    // Twice: each slot to the next node, then to the one after.
    for (let round = 1; round <= 2; round++) {
      for (const slot of slots) await moveSlot(slot, ((await owner(slot)) + 1) % nodes.length);
    }
  } finally {
    moving = false;
    await Promise.all(workers);
  }
  const seen = (await redirections()) - before;

  // One more request per subject: Redis's remaining after it tells how many it charged before.
  const last = await Promise.all(keys.map((k) => call(`${s.base}/v1/reshard`, { headers: { 'x-api-key': k } })));
  const metrics = parseMetrics((await call(`${s.admin}/metrics`)).text);
  const failOpen = metricSum(metrics, 'ratelimit_decisions', { result: 'fail_open' });
  const lateByRedis = metricSum(metrics, 'ratelimit_redis_late_reply_seconds_count', { part: 'redis' });
  const uncharged = keys.map((k, i) => (admitted.get(k) ?? 0) - (BURST - 1 - Number(last[i]!.headers['x-ratelimit-remaining'])));
  const over = uncharged.reduce((n, x) => n + Math.max(0, x), 0);
  t.comment(
    `requests ${sent + 2 * SUBJECTS}; statuses ${JSON.stringify(Object.fromEntries(statuses))}; redirections answered ${seen}; ` +
      `fail_open ${failOpen}; admitted without a charge ${over}; breaker trips ${metricSum(metrics, 'ratelimit_failmode_trips')}; ` +
      `late replies ${['event_loop', 'redis'].map((part) => `${part} ${metricSum(metrics, 'ratelimit_redis_late_reply_seconds_count', { part })} (${metricSum(metrics, 'ratelimit_redis_late_reply_seconds_sum', { part }).toFixed(3)} s)`).join(', ')}`,
  );
  t.ok(seen > 0, 'the nodes answered redirections: the reshard met the traffic');
  t.same(
    last.map((r) => r.status),
    keys.map(() => 200),
    'every subject still admitted after the reshard',
  );
  t.equal(over, 0, 'no admission without its charge in Redis (no over-admission)');
  t.same(
    uncharged,
    keys.map(() => 0),
    'each subject charged exactly once per admission',
  );
  // Not asserted: a handful of decisions may still fail open during the reshard on a machine this
  // loaded (a source node blocks while it MIGRATEs; 0 to 12 per run at load 30, printed above).
  // Each was charged in Redis (asserted above), and none opens the circuit (below); before the
  // fix, redirections failed open by the thousand and opened the circuit.
  void lateByRedis;
  t.equal(metricSum(metrics, 'ratelimit_failmode_trips'), 0, 'the circuit never opened');
  t.same([...statuses.keys()], [200], 'only 200s');
});
