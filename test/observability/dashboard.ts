/**
 * docs/grafana/edge-platform.json read for the tests: its panels with the row each sits under,
 * and every PromQL query they run, checked against the series a service exports.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exprRefs, PROMQL_FUNCTIONS } from './promql.js';
import { sourceUrl } from '../harness/source.js';

export const DASHBOARD_FILE = resolve(fileURLToPath(sourceUrl(import.meta.url)), '../../../docs/grafana/edge-platform.json');

export type Service = 'limiter' | 'control-plane' | 'notifier' | 'identity';

/** Which service a row draws, from the start of its title. */
export const ROW_SERVICE: ReadonlyArray<readonly [prefix: string, service: Service]> = [
  ['Sidecar', 'limiter'],
  ['Quota control plane', 'control-plane'],
  ['Notifier', 'notifier'],
  ['Identity', 'identity'],
];

export interface Target {
  refId?: string;
  expr?: string;
  datasource?: { type?: string; uid?: string };
}

export interface Panel {
  id?: number;
  type?: string;
  title?: string;
  collapsed?: boolean;
  datasource?: { type?: string; uid?: string };
  gridPos?: { h: number; w: number; x: number; y: number };
  targets?: Target[];
  panels?: Panel[];
}

export interface Dashboard {
  uid?: string;
  title?: string;
  schemaVersion?: number;
  panels?: Panel[];
  templating?: { list?: Array<{ name?: string; type?: string; query?: unknown }> };
}

export async function loadDashboard(file = DASHBOARD_FILE): Promise<Dashboard> {
  return JSON.parse(await readFile(file, 'utf8')) as Dashboard;
}

/** Each panel that is not a row, with the title of the row above it (or inside it, when collapsed). */
export function panelsByRow(d: Dashboard): Array<{ row: string | undefined; panel: Panel }> {
  const out: Array<{ row: string | undefined; panel: Panel }> = [];
  let row: string | undefined;
  for (const p of d.panels ?? []) {
    if (p.type === 'row') {
      row = p.title;
      for (const inner of p.panels ?? []) out.push({ row, panel: inner });
    } else out.push({ row, panel: p });
  }
  return out;
}

export function serviceOfRow(row: string | undefined): Service | undefined {
  return ROW_SERVICE.find(([prefix]) => row?.startsWith(prefix))?.[1];
}

export interface Query {
  where: string;
  service: Service | undefined;
  expr: string;
}

/** Every expression the dashboard runs: panel targets, and template variables' queries. */
export function queries(d: Dashboard): Query[] {
  const out: Query[] = [];
  for (const { row, panel } of panelsByRow(d)) {
    for (const t of panel.targets ?? []) {
      out.push({
        where: `${row ?? '(no row)'} / ${panel.title ?? panel.id} / ${t.refId ?? '?'}`,
        service: serviceOfRow(row),
        expr: t.expr ?? '',
      });
    }
  }
  for (const v of d.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const q = typeof v.query === 'string' ? v.query : String((v.query as { query?: unknown } | undefined)?.query ?? '');
    // label_values(metric, label) and metrics(regex) are Grafana's, not PromQL.
    const lv = /^\s*label_values\(\s*(.*),\s*\w+\s*\)\s*$/.exec(q);
    out.push({ where: `variable ${v.name}`, service: undefined, expr: lv ? lv[1]! : q });
  }
  return out;
}

/**
 * What is wrong with the queries against what the services export: a metric no service (or, for a
 * panel under a service's row, not that service) exports, or a function PromQL does not have.
 */
export function problems(qs: Query[], exported: ReadonlyMap<Service, ReadonlySet<string>>): string[] {
  const out: string[] = [];
  const anywhere = new Set<string>();
  for (const names of exported.values()) for (const n of names) anywhere.add(n);
  for (const q of qs) {
    const refs = exprRefs(q.expr);
    if (refs.metrics.length === 0) out.push(`${q.where}: no metric in ${JSON.stringify(q.expr)}`);
    for (const f of refs.functions) if (!PROMQL_FUNCTIONS.has(f)) out.push(`${q.where}: ${f}() is not a PromQL function`);
    for (const m of refs.metrics) {
      const own = q.service ? exported.get(q.service) : anywhere;
      if (own?.has(m)) continue;
      const elsewhere = [...exported].filter(([, names]) => names.has(m)).map(([s]) => s);
      out.push(
        `${q.where}: ${m} is not exported by ${q.service ?? 'any service'}` +
          (elsewhere.length ? ` (it is by ${elsewhere.join(', ')})` : ''),
      );
    }
  }
  return out;
}
