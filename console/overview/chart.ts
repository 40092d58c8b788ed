/**
 * A small line chart of one series over the last hour, as inline SVG rendered by the server (no
 * script, nothing the strict CSP has to allow: the colours come from the stylesheet through
 * classes). Pure. Time runs left to right over the whole window, so a chart with few points
 * shows how recently the console started scraping; a gap (a scrape that did not answer) breaks
 * the line. The y axis starts at 0 and ends at the larger of the series' maximum and `minMax`.
 */
import { html, type Html } from '../html.js';
import type { Point } from './history.js';

export interface ChartOptions {
  /** The clock's now and the window the x axis spans. */
  now: number;
  windowMs: number;
  /** What the chart shows, for screen readers (`<title>`) and its label. */
  label: string;
  /** The y axis ends at least here (1 for a ratio, so 2 % does not fill the chart). */
  minMax?: number;
  width?: number;
  height?: number;
}

const round = (n: number): string => (Math.round(n * 10) / 10).toString();

/** The polyline runs of `points`: consecutive points with values, split at gaps. */
export function runs(points: readonly Point[]): Point[][] {
  const out: Point[][] = [];
  let cur: Point[] = [];
  for (const p of points) {
    if (p.v === null) {
      if (cur.length > 0) out.push(cur);
      cur = [];
    } else cur.push(p);
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

export function lineChart(points: readonly Point[], o: ChartOptions): Html {
  const w = o.width ?? 240;
  const h = o.height ?? 48;
  const pad = 2;
  const values = points.flatMap((p) => (p.v === null ? [] : [p.v]));
  const top = Math.max(o.minMax ?? 1, ...values);
  const x = (t: number) => pad + ((t - (o.now - o.windowMs)) / o.windowMs) * (w - 2 * pad);
  const y = (v: number) => h - pad - (v / top) * (h - 2 * pad);
  const lines = runs(points).map((run) =>
    run.length === 1
      ? html`<circle class="chart-dot" cx="${round(x(run[0]!.t))}" cy="${round(y(run[0]!.v!))}" r="2" />`
      : html`<polyline class="chart-line" fill="none" points="${run.map((p) => `${round(x(p.t))},${round(y(p.v!))}`).join(' ')}" />`,
  );
  return html`<svg
    class="chart"
    viewBox="0 0 ${w} ${h}"
    width="${w}"
    height="${h}"
    role="img"
    aria-label="${o.label}"
    data-points="${values.length}"
  >
    <title>${o.label}</title>
    <line class="chart-axis" x1="${pad}" y1="${h - pad}" x2="${w - pad}" y2="${h - pad}" />
    ${lines}
  </svg>`;
}
