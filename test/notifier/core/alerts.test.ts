/**
 * notifier/alerts.rules.yml: valid Prometheus alerting rules with the four alerts of README,
 * "Metrics and alerts"
 * (transactional p99 above 10 s; a breaker open longer than 2 minutes; unbounded dead-letter
 * growth; delivery success below 98% on any channel), each using only metrics a running notifier
 * exports (scraped from its /metrics, with the real channels so their breakers publish).
 */
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseYamlSubset } from '../../limiter/fixtures/yaml-subset.js';
import { startCore } from './helpers.js';
import { sourceUrl } from '../../harness/source.js';

const RULES = resolve(fileURLToPath(sourceUrl(import.meta.url)), '../../../../notifier/alerts.rules.yml');

/** Metric names an expression refers to: identifiers that are not functions, keywords, labels or durations. */
function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const keywords = new Set(['by', 'without', 'on', 'ignoring', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);
  const out = new Set<string>();
  for (const m of s.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    if (m[2] !== undefined || keywords.has(m[1]!.toLowerCase())) continue;
    out.add(m[1]!);
  }
  return [...out];
}

const seconds = (d: string): number => {
  const unit: Record<string, number> = { s: 1, m: 60, h: 3600 };
  let total = 0;
  for (const m of d.matchAll(/(\d+)(s|m|h)/g)) total += Number(m[1]) * unit[m[2]!]!;
  return total;
};

interface Rule {
  alert?: string;
  expr?: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

t.test('notifier/alerts.rules.yml has the seed alerts over exported metrics', async (t) => {
  const doc = parseYamlSubset(await readFile(RULES, 'utf8')) as unknown as { groups: { name: string; rules: Rule[] }[] };
  const rules = doc.groups.flatMap((g) => g.rules);
  for (const r of rules) {
    t.type(r.alert, 'string');
    t.type(r.expr, 'string');
    t.type(r.labels?.severity, 'string', `${r.alert}: a severity`);
    t.type(r.annotations?.summary, 'string', `${r.alert}: a summary`);
  }
  const expr = (r: Rule): string => String(r.expr).replace(/\s+/g, ' ').trim();
  const one = (what: string, test: (e: string) => boolean): Rule | undefined => {
    const found = rules.filter((r) => test(expr(r)));
    t.equal(found.length, 1, `one alert for ${what}`);
    return found[0];
  };
  one(
    'transactional p99 above 10 s',
    (e) => /histogram_quantile\(0\.99,/.test(e) && e.includes('send_latency_seconds_bucket{tier="transactional"}') && /> 10$/.test(e),
  );
  const breaker = one('a breaker open longer than 2 minutes', (e) => e.includes('circuit_breaker_state'));
  t.equal(seconds(breaker?.for ?? ''), 120, 'open for 2 minutes');
  one('unbounded dead-letter growth', (e) => e.includes('dlq_depth') && /deriv|delta|increase/.test(e));
  one('webhook signature failures rising', (e) => e.includes('webhook_rejected_total') && /bad_signature/.test(e));
  one('e-mail complaint rate', (e) => e.includes('type="complaint"') && /> 0\.001$/.test(e));
  one(
    'delivery success below 98% per channel',
    (e) => e.includes('delivery_outcomes_total') && /by \(channel\)/.test(e) && /< 0\.98$/.test(e),
  );

  const core = await startCore(t, 'core_alerts', {});
  const exposition = await (await fetch(`${core.url}/metrics`)).text();
  const exported = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exported.add(m[1]!);
    if (m[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(m[1]! + suffix);
  }
  for (const r of rules) for (const name of metricNames(String(r.expr))) t.ok(exported.has(name), `${r.alert}: ${name} is exported`);
  for (const name of ['notification_ingest_rate', 'send_latency_seconds', 'delivery_success_rate', 'provider_error_rate', 'dlq_depth']) {
    t.ok(exported.has(name), `the seed's ${name} is on /metrics`);
  }
  t.match(exposition, /circuit_breaker_state\{breaker="push:fcm"/, 'each provider breaker publishes its state');
});
