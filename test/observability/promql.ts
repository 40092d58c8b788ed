/**
 * What a PromQL expression reads, for checking dashboards against what the services export:
 * the metric (series) names it selects and the functions it calls. Not a full PromQL parser: it
 * removes what cannot be a metric name (strings, label matchers, ranges, grouping label lists,
 * numbers, Grafana variables such as `$__rate_interval`), then every identifier followed by `(` is
 * a function or aggregation and every other one, keywords aside, is a metric name.
 */

/** PromQL's functions and aggregation operators (Prometheus 3), so a misspelt one is caught. */
// prettier-ignore
export const PROMQL_FUNCTIONS: ReadonlySet<string> = new Set([
  // aggregation operators
  'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile',
  'limitk', 'limit_ratio',
  // functions
  'abs', 'absent', 'absent_over_time', 'acos', 'acosh', 'asin', 'asinh', 'atan', 'atanh', 'avg_over_time', 'ceil',
  'changes', 'clamp', 'clamp_max', 'clamp_min', 'cos', 'cosh', 'count_over_time', 'day_of_month', 'day_of_week',
  'day_of_year', 'days_in_month', 'deg', 'delta', 'deriv', 'double_exponential_smoothing', 'exp', 'floor',
  'histogram_avg', 'histogram_count', 'histogram_fraction', 'histogram_quantile', 'histogram_stddev',
  'histogram_stdvar', 'histogram_sum', 'holt_winters', 'hour', 'idelta', 'increase', 'info', 'irate', 'label_join',
  'label_replace', 'last_over_time', 'ln', 'log10', 'log2', 'mad_over_time', 'max_over_time', 'min_over_time',
  'minute', 'month', 'pi', 'predict_linear', 'present_over_time', 'quantile_over_time', 'rad', 'rate', 'resets',
  'round', 'scalar', 'sgn', 'sin', 'sinh', 'sort', 'sort_by_label', 'sort_by_label_desc', 'sort_desc', 'sqrt',
  'stddev_over_time', 'stdvar_over_time', 'sum_over_time', 'tan', 'tanh', 'time', 'timestamp', 'vector', 'year',
]);

const KEYWORDS = new Set([
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
  'atan2',
  'inf',
  'nan',
]);

export interface ExprRefs {
  metrics: string[];
  functions: string[];
}

/** The metric names and the functions an expression refers to, each once, in order of appearance. */
export function exprRefs(expr: string): ExprRefs {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ') // strings
    .replace(/#[^\n]*/g, ' ') // comments
    .replace(/\{[^}]*\}/g, ' ') // label matchers (may hold Grafana variables)
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries ([5m], [$__rate_interval])
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // label lists
    .replace(/\boffset\s+-?\S+/g, ' ')
    .replace(/@\s*(start\(\)|end\(\)|\S+)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ') // Grafana variables outside brackets
    .replace(/(?<![\w:])(0x[0-9a-fA-F]+|\d+(\.\d*)?([eE][+-]?\d+)?|\.\d+)/g, ' '); // numbers
  const metrics = new Set<string>();
  const functions = new Set<string>();
  for (const m of s.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const name = m[1]!;
    if (m[2] !== undefined) functions.add(name);
    else if (!KEYWORDS.has(name.toLowerCase())) metrics.add(name);
  }
  return { metrics: [...metrics], functions: [...functions] };
}

/**
 * The series names a /metrics exposition offers, from its `# TYPE` lines: a counter or gauge by its
 * name, a histogram only as `_bucket`, `_sum` and `_count` (its bare name selects nothing in
 * Prometheus), a summary by its name (the quantiles), `_sum` and `_count`.
 */
export function exportedSeries(exposition: string): Set<string> {
  const out = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) out.add(name + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) out.add(name + suffix);
    else out.add(name);
  }
  return out;
}
