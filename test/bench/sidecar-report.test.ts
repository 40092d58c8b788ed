// @tier: pure
/**
 * The sidecar benchmark's arithmetic (bench/lib/): the decision-latency percentiles read from the
 * sidecar's own /metrics text (produced here by the real LimiterMetrics, so the bench's parser and
 * the exposition cannot drift apart), the ratios against issue 17's targets with their verdicts,
 * the median over rounds, and the wrk script that rotates the API key.
 */
import t from 'tap';
import { Registry } from 'prom-client';
import { FakeClock } from '../../shared/clock.js';
import { HotKeys } from '../../limiter/hot-keys.js';
import { LimiterMetrics } from '../../limiter/metrics.js';
import { decisionLatency, parseDecisionBuckets } from '../../bench/lib/decision-latency.js';
import { rotatingWrkScript, type Measurement } from '../../bench/lib/load.js';
import { medians, ratios, type Row } from '../../bench/lib/report.js';

function metrics(): { m: LimiterMetrics; registry: Registry } {
  const registry = new Registry();
  registry.setDefaultLabels({ service: 'limiter' });
  return { m: new LimiterMetrics(registry, new HotKeys(new FakeClock(0))), registry };
}

t.test('decision latency from the sidecar exposition: bucket deltas between two scrapes', async (t) => {
  const { m, registry } = metrics();
  for (let i = 0; i < 50; i++) m.decided('redis', 0.3); // before the measurement: not counted
  const before = parseDecisionBuckets(await registry.metrics());
  for (let i = 0; i < 98; i++) m.decided('redis', 0.2); // ≤ 0.25 ms
  m.decided('redis', 1.4); // ≤ 1.5 ms
  m.decided('redis', 7); // ≤ 10 ms
  m.decided('memory', 0.004);
  const after = parseDecisionBuckets(await registry.metrics());
  const redis = decisionLatency('redis', before, after);
  t.same(redis, { store: 'redis', count: 100, p50Ms: 0.25, p99Ms: 1.5 });
  t.same(decisionLatency('memory', before, after), { store: 'memory', count: 1, p50Ms: 0.01, p99Ms: 0.01 });
  t.equal(decisionLatency('local', before, after), undefined, 'a store that answered nothing');
  t.equal(decisionLatency('redis', after, after), undefined, 'nothing between two equal scrapes');
});

const measurement = (tool: 'wrk' | 'autocannon', rps: number, serverCpu = 1): Measurement => ({
  tool,
  rps,
  p50Ms: 1,
  p99Ms: 2,
  responses: rps * 10,
  errors: 0,
  non2xx: 0,
  statuses: {},
  serverCpu,
});
const row = (id: string, rps: number, serverCpu = 1): Row => ({ id, label: id, m: measurement('wrk', rps, serverCpu) });

t.test('ratios: each target with its verdict, missing rows explained, empty rows not divided', async (t) => {
  const rows = [
    row('sidecar-memory-abuse', 40_000),
    row('sidecar-redis-abuse', 37_000),
    row('sidecar-memory-admit', 20_000, 0.5),
    row('bare-admit', 24_000, 0.5),
    row('fastify-memory-admit', 8_500),
    row('sidecar-memory-deny', 60_000),
    row('fastify-memory-deny', 21_000),
    row('sidecar-redis-admit', 13_000),
    row('baseline-redis-admit', 0),
  ];
  const text = ratios(rows, { stores: ['memory', 'redis'], decisions: [], approxMissing: 'needs the field' });
  t.match(text, /abuse workload, Redis store vs in-process \(requests\/s\): \*\*0\.93×\*\* \(37,000 vs 40,000 req\/s; target ≥ 0\.9×: met/);
  t.match(
    text,
    /in-process vs the bare uWS \+ h1 proxy \(the floor: the sidecar's own upstream client\): \*\*0\.83×\*\*.*target ≥ 0\.8×: met; by CPU per request 0\.83×/,
  );
  t.match(text, /admitted, in-process vs the fastify gateway \(in-process\): \*\*2\.35×\*\*.*target ≥ 2\.5×: not met/);
  t.match(text, /denied, in-process vs the fastify gateway \(in-process\): \*\*2\.86×\*\*.*target ≥ 3×: not met/);
  t.match(text, /approximate mode vs in-process: not measured \(needs the field\); target ≥ 0\.8×/);
  t.match(text, /vs the baseline build: not measurable \(13,000 vs 0 req\/s/);
  t.notMatch(text, /Infinity/);
});

t.test('latency: the in-process added p99 against nginx’s + 0.5 ms, the Redis decision p99 against 2 ms', async (t) => {
  const at = (id: string, p99Ms: number): Row => ({ id, label: id, m: { ...measurement('autocannon', 5000), p99Ms } });
  const rows = [at('rate-direct', 1), at('rate-sidecar-memory', 2.4), at('rate-nginx', 2)];
  const decisions = [{ store: 'redis', count: 50_000, p50Ms: 0.5, p99Ms: 2.5 }];
  const text = ratios(rows, { stores: ['memory'], decisions });
  t.match(text, /added p99, sidecar, memory store: \*\*\+1\.400 ms\*\*.*target ≤ nginx's added p99 \+ 0\.5 ms = 1\.500 ms: met/);
  t.match(text, /redis store: p99 \*\*≤ 2\.500 ms\*\*.*target < 2 ms: not met/);
});

t.test('medians over rounds: the middle figure, every round named', async (t) => {
  const out = medians([row('bare-admit', 30_000), row('bare-admit', 10_000), row('bare-admit', 20_000), row('direct', 5)]);
  t.equal(out.length, 2);
  const bare = out.find((r) => r.id === 'bare-admit')!;
  t.equal(bare.m.rps, 20_000);
  t.match(bare.label, /median of 3: 30,000 · 10,000 · 20,000/);
  t.equal(out.find((r) => r.id === 'direct')!.label, 'direct', 'a single round keeps its label');
});

t.test('the wrk script formats each key once and cycles through all of them', async (t) => {
  const lua = rotatingWrkScript({ header: 'x-api-key', prefix: 'bench-abuse-', count: 10_000 });
  t.match(lua, /local n = 10000/);
  t.match(lua, /wrk\.headers\["x-api-key"\] = "bench-abuse-" \.\. k/);
  t.match(lua, /i = i % n \+ 1/);
});
