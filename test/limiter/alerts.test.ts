// @tier: pure
/**
 * limiter/alerts.rules.yml: valid Prometheus alerting rules with the four alerts of README,
 * "Observability" (global
 * deny ratio above 20%; store round trip p99 above 5 ms; one key above 15% of evaluations;
 * fail-open active longer than 30 s), each referring only to metrics a running sidecar really
 * exports (scraped from its /metrics). Read with a parser for the YAML subset rule files use
 * (fixtures/yaml-subset.ts), itself checked first.
 */
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { client, startTestSidecar } from './fixtures/sidecar.js';
import { parseYamlSubset, type YamlValue } from './fixtures/yaml-subset.js';
import { sourceUrl } from '../harness/source.js';

const RULES = resolve(fileURLToPath(sourceUrl(import.meta.url)), '../../../limiter/alerts.rules.yml');

t.test('the YAML subset parser', async (t) => {
  const doc = parseYamlSubset(
    [
      '# comment',
      'groups:',
      '  - name: g # trailing comment',
      '    rules:',
      '      - alert: A',
      '        expr: |',
      '          sum(rate(x{a="b"}[5m]))',
      '            / 2 > 0.2',
      '        for: 30s',
      '        labels: { severity: "critical", team: \'edge\' }',
      '      - alert: B',
      '        expr: >-',
      '          max(y)',
      '          > 1',
      '        annotations:',
      '          summary: "quoted: with colon"',
      '    list:',
      '    - one',
      '    - [two, three]',
    ].join('\n'),
  );
  t.same(doc, {
    groups: [
      {
        name: 'g',
        rules: [
          { alert: 'A', expr: 'sum(rate(x{a="b"}[5m]))\n  / 2 > 0.2\n', for: '30s', labels: { severity: 'critical', team: 'edge' } },
          { alert: 'B', expr: 'max(y) > 1', annotations: { summary: 'quoted: with colon' } },
        ],
        list: ['one', ['two', 'three']],
      },
    ],
  });
  t.throws(
    () => parseYamlSubset('a: 1\na: 2'),
    { name: 'YamlSubsetError', message: 'line 2: duplicate key a' },
    'duplicate keys are refused',
  );
  t.throws(() => parseYamlSubset('a: &x 1'), { name: 'YamlSubsetError', message: /line 1: anchors/ }, 'anchors are refused');
  t.throws(() => parseYamlSubset('a:\n  b: 1\n c: 2'), { name: 'YamlSubsetError', message: /^line 3: / }, 'bad indentation is refused');
});

/** Metric names an expression refers to: identifiers that are not functions, keywords, labels or durations. */
function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ') // strings
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // grouping label lists
    .replace(/\boffset\s+\S+/g, ' ');
  const keywords = new Set([
    'by',
    'without',
    'on',
    'ignoring',
    'group_left',
    'group_right',
    'bool',
    'and',
    'or',
    'unless',
    'offset',
    'inf',
    'nan',
  ]);
  const out = new Set<string>();
  for (const m of s.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    if (m[2] !== undefined || keywords.has(m[1]!.toLowerCase())) continue;
    out.add(m[1]!);
  }
  return [...out];
}

t.test('metricNames', async (t) => {
  t.same(metricNames('histogram_quantile(0.99, sum by (le) (rate(ratelimit_redis_rtt_ms_bucket{job="x"}[5m]))) > 5'), [
    'ratelimit_redis_rtt_ms_bucket',
  ]);
  t.same(metricNames('sum(rate(a{result=~"deny|decoy"}[5m])) / sum(rate(a[5m])) > 0.2 and on(instance) b == 1'), ['a', 'b']);
});

interface Rule {
  alert?: YamlValue;
  record?: YamlValue;
  expr?: YamlValue;
  for?: YamlValue;
  labels?: YamlValue;
  annotations?: YamlValue;
}

const DURATION = /^(\d+(ms|s|m|h|d|w|y))+$/;
const seconds = (d: string): number => {
  const unit: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
  let total = 0;
  for (const m of d.matchAll(/(\d+)(ms|s|m|h|d|w|y)/g)) total += Number(m[1]) * unit[m[2]!]!;
  return total;
};

t.test('limiter/alerts.rules.yml', async (t) => {
  let text: string;
  try {
    text = await readFile(RULES, 'utf8');
  } catch {
    t.fail(`${RULES} does not exist: the sidecar's Prometheus alert rules belong there (issue 3, item 10)`);
    return;
  }
  const doc = parseYamlSubset(text) as { groups?: unknown };
  t.ok(Array.isArray(doc?.groups) && (doc.groups as unknown[]).length > 0, 'a non-empty `groups` list');
  const groups = (doc.groups ?? []) as Array<{ name?: YamlValue; interval?: YamlValue; rules?: YamlValue }>;
  const rules: Rule[] = [];
  const groupNames = new Set<string>();
  for (const g of groups) {
    t.type(g.name, 'string', 'each group has a name');
    t.notOk(groupNames.has(String(g.name)), `group names are unique (${String(g.name)})`);
    groupNames.add(String(g.name));
    if (g.interval !== undefined) t.match(String(g.interval), DURATION, 'interval is a duration');
    t.ok(Array.isArray(g.rules) && g.rules.length > 0, `group ${String(g.name)} has rules`);
    for (const r of (g.rules ?? []) as Rule[]) rules.push(r);
  }
  const alerts = rules.filter((r) => r.alert !== undefined);
  for (const r of rules) {
    t.ok((r.alert === undefined) !== (r.record === undefined), 'each rule is an alert or a recording rule, not both');
    t.type(r.expr, 'string', `${String(r.alert ?? r.record)}: expr is a string`);
    if (r.for !== undefined) t.match(String(r.for), DURATION, `${String(r.alert)}: for is a duration`);
    if (r.labels !== undefined) t.type(r.labels, 'object', `${String(r.alert)}: labels is a mapping`);
    if (r.annotations !== undefined) t.type(r.annotations, 'object', `${String(r.alert)}: annotations is a mapping`);
    for (const [k, v] of Object.entries({ ...(r.labels as object), ...(r.annotations as object) })) {
      t.type(v, 'string', `${String(r.alert)}: ${k} is a string`);
    }
  }
  t.equal(new Set(alerts.map((a) => a.alert)).size, alerts.length, 'alert names are unique');

  const expr = (r: Rule) => String(r.expr ?? '').replace(/\s+/g, ' ');
  const find = (what: string, test: (e: string, r: Rule) => boolean) => {
    const found = alerts.filter((r) => test(expr(r), r));
    t.equal(found.length, 1, `one alert for ${what}`);
    return found[0];
  };
  const deny = find(
    'the global deny ratio above 20%',
    (e) => e.includes('ratelimit_decisions') && /deny/.test(e) && />\s*(0?\.20*|20)\b/.test(e),
  );
  if (deny) t.match(expr(deny), /\/\s*sum\s*\(/, 'deny ratio: a ratio of sums, over every decision (global, not per key)');
  find(
    'the store round trip p99 above 5 ms',
    (e) => /histogram_quantile\s*\(\s*0?\.99\b/.test(e) && e.includes('ratelimit_redis_rtt_ms_bucket') && />\s*5(\.0+)?\b/.test(e),
  );
  find('one key above 15% of evaluations', (e) => e.includes('ratelimit_hot_key_share') && />\s*0?\.150*\b/.test(e));
  const failOpen = find('fail-open active longer than 30 s', (e) => /fail_open|circuit_breaker_state|failmode/.test(e));
  if (failOpen) t.equal(seconds(String(failOpen.for ?? '0s')), 30, 'fail-open: for 30s');

  // Every metric an expression names must exist on a running sidecar.
  const s = await startTestSidecar(t, {});
  const exposition = (await client(t)(`${s.admin}/metrics`)).text;
  const exported = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exported.add(m[1]!);
    if (m[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(m[1]! + suffix);
    if (m[2] === 'summary') for (const suffix of ['_sum', '_count']) exported.add(m[1]! + suffix);
  }
  for (const r of rules) {
    for (const name of metricNames(String(r.expr ?? ''))) {
      t.ok(exported.has(name), `${String(r.alert ?? r.record)}: ${name} is exported by the sidecar`);
    }
  }
});
