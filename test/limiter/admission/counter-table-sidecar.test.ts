// @tier: pure
/**
 * The counter table's bound seen from outside: a sidecar with LIMITER_COUNTER_MAX_KEYS=1000 and
 * 1,001 client addresses (a route without credentials, the per-IP cap, addresses from a trusted
 * proxy's X-Forwarded-For). The least recently used address is evicted and starts full again, the
 * others keep their counts, and `ratelimit_counter_evictions{live}` tells evictions of buckets still
 * refilling from those of buckets back at rest (the FakeClock moves past the refill time).
 */
import t from 'tap';
import { startUpstream } from '../../harness/upstream.js';
import { client, metricSum, parseMetrics, startTestSidecar } from '../fixtures/sidecar.js';

const up = await startUpstream();
t.teardown(() => up.close());
const call = client(t);

const MAX = 1000;
const sc = await startTestSidecar(t, {
  upstream: up.url,
  env: {
    LIMITER_ROUTES: `/v1=${up.url};auth=optional`,
    LIMITER_TRUST_PROXY: 'true',
    LIMITER_COUNTER_MAX_KEYS: String(MAX),
    LIMITER_IP_RATE: '1',
    LIMITER_IP_BURST: '10',
  },
});

const addr = (i: number): string => `198.18.${i >> 8}.${i & 255}`;
/** One request from address `i`; its X-RateLimit-Remaining. */
async function from(i: number): Promise<number> {
  const r = await call(`${sc.base}/v1/x`, { headers: { 'x-forwarded-for': addr(i) } });
  if (r.status !== 200) throw new Error(`address ${i}: ${r.status} ${r.text}`);
  return Number(r.headers['x-ratelimit-remaining']);
}
async function evictions(live: boolean): Promise<number> {
  const r = await call(`${sc.admin}/metrics`);
  return metricSum(parseMetrics(r.text), 'ratelimit_counter_evictions', { live: String(live) });
}

t.test('bounded to LIMITER_COUNTER_MAX_KEYS: LRU eviction, live ones counted apart', async (t) => {
  for (let i = 0; i < MAX; i++) {
    const remaining = await from(i);
    if (remaining !== 9) throw new Error(`address ${i}: remaining ${remaining}, want 9`);
  }
  t.equal(await evictions(true), 0, 'no eviction within the bound');
  t.equal(await from(MAX), 9, 'address 1000 admitted');
  t.equal(await evictions(true), 1, 'it evicted one bucket, still refilling: live');
  t.equal(await from(500), 8, 'address 500 kept its count');
  t.equal(await from(0), 9, 'address 0, the least recently used, was the one evicted: it starts full again');
  t.equal(await evictions(true), 2, 'and took address 1 out in turn');
  t.equal(await from(2), 8, 'address 2 is still held');
  sc.clock.advance(60_000); // every bucket back at rest
  await from(MAX + 1);
  t.equal(await evictions(false), 1, 'a bucket back at rest evicted: not live');
  t.equal(await evictions(true), 2);
});
