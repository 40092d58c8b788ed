/**
 * The cost of `ratelimit_decision_duration_seconds` per decision (issue 17, item 4): what the data
 * plane adds to every request, two `performance.now()` calls and `LimiterMetrics.decided` (a bucket
 * scan and two additions into typed arrays), against an empty loop, and against prom-client's own
 * `Histogram.observe` with a label for comparison.
 *
 *   npx tsc -b && node dist/bench/decision-histogram.js [iterations, default 10000000]
 *
 * Prints ns per decision. Single process, no server: the figure is CPU time, stable enough to
 * read on a shared machine (take the lowest of the three rounds).
 */
import { Histogram, Registry } from 'prom-client';
import { FakeClock } from '../shared/clock.js';
import { HotKeys } from '../limiter/hot-keys.js';
import { DECISION_BUCKETS, LimiterMetrics } from '../limiter/metrics.js';

const N = Number(process.argv[2] ?? 10_000_000);
const metrics = new LimiterMetrics(new Registry(), new HotKeys(new FakeClock(0)));
const prom = new Histogram({ name: 'x', help: 'x', labelNames: ['store'], buckets: [...DECISION_BUCKETS], registers: [] });

function round(label: string, fn: (i: number) => void): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) fn(i);
  const ns = Number(process.hrtime.bigint() - t0) / N;
  console.log(`  ${label.padEnd(58)} ${ns.toFixed(1).padStart(7)} ns`);
  return ns;
}

let sink = 0;
const best = { empty: Infinity, ours: Infinity, prom: Infinity };
for (let r = 1; r <= 3; r++) {
  console.log(`round ${r}, ${N.toLocaleString('en')} iterations:`);
  best.empty = Math.min(
    best.empty,
    round('empty loop', (i) => void (sink += i)),
  );
  best.ours = Math.min(
    best.ours,
    round('performance.now() ×2 + LimiterMetrics.decided', () => {
      const t0 = performance.now();
      metrics.decided('memory', performance.now() - t0);
    }),
  );
  best.prom = Math.min(
    best.prom,
    round('performance.now() ×2 + prom-client observe({store})', () => {
      const t0 = performance.now();
      prom.observe({ store: 'memory' }, (performance.now() - t0) / 1000);
    }),
  );
}
console.log(
  `\nper decision: ${(best.ours - best.empty).toFixed(1)} ns (prom-client's own histogram: ${(best.prom - best.empty).toFixed(1)} ns)${sink < 0 ? '' : ''}`,
);
