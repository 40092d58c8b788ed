/**
 * The console's home: what needs attention now, from the numbers the scraper (overview/scraper.ts)
 * reads off every service's /metrics: dead letters waiting, campaigns waiting for approval,
 * sidecars behind on quotas, circuit breakers open, sidecars failing open, and the share of
 * requests the sidecars refuse. Each has its chart over the last hour (server-rendered SVG) and a
 * link to the page that acts on it. The page reloads itself once per scrape interval
 * (assets/console.js, `data-refresh`); without JavaScript the numbers are as of the page load.
 */
import { html, type Html } from '../html.js';
import { table } from '../forms.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { lineChart } from '../overview/chart.js';
import { HISTORY_WINDOW_MS, type Scraper, type TargetStatus } from '../overview/scraper.js';
import type { SignalName, Signals } from '../overview/signals.js';
import { count, timeEl } from './ops-format.js';

interface Card {
  signal: SignalName;
  title: string;
  /** What the number is, in a sentence. */
  what: string;
  /** The page that acts on it. */
  href: string;
  action: string;
  /** The number as text. */
  format: (v: number) => string;
  /** Whether this value needs someone. */
  attention: (v: number) => boolean;
  /** The chart's y axis ends at least here. */
  minMax: number;
  /** Names behind the number (which breakers, which sidecars). */
  names?: (s: Signals) => readonly string[];
}

const percent = (v: number): string => `${(v * 100).toFixed(v < 0.1 ? 1 : 0)} %`;

export const CARDS: readonly Card[] = [
  {
    signal: 'dlq_depth',
    title: 'Dead letters',
    what: 'deliveries that gave up and wait for a re-drive',
    href: '/dlq',
    action: 'Open the dead-letter queues',
    format: count,
    attention: (v) => v > 0,
    minMax: 5,
  },
  {
    signal: 'campaigns_pending',
    title: 'Campaigns awaiting approval',
    what: 'nothing is sent to their audience until an operator decides',
    href: '/campaigns?pending=true',
    action: 'Approve or reject',
    format: count,
    attention: (v) => v > 0,
    minMax: 2,
  },
  {
    signal: 'sidecars_behind',
    title: 'Sidecars behind',
    what: 'sidecars that have not acked the latest quota table version',
    href: '/quotas',
    action: 'See the sidecars and quotas',
    format: count,
    attention: (v) => v > 0,
    minMax: 2,
    names: (s) => s.behind,
  },
  {
    signal: 'breakers_open',
    title: 'Breakers open',
    what: 'circuit breakers refusing calls to a failing dependency (a provider, Redis, a service)',
    href: '/providers',
    action: 'See the providers',
    format: count,
    attention: (v) => v > 0,
    minMax: 2,
    names: (s) => s.openBreakers,
  },
  {
    signal: 'fail_open',
    title: 'Sidecars failing open',
    what: 'sidecars admitting requests unlimited since the last scrape because their counter store is unreachable',
    href: '/quotas',
    action: 'See the quotas and their fail mode',
    format: count,
    attention: (v) => v > 0,
    minMax: 2,
    names: (s) => s.failingOpen,
  },
  {
    signal: 'deny_ratio',
    title: 'Deny ratio',
    what: 'share of the sidecars’ decisions since the last scrape that refused the request (429 or 503)',
    href: '/quotas',
    action: 'Adjust the quotas',
    format: percent,
    attention: (v) => v >= 0.25,
    minMax: 1,
  },
];

function card(c: Card, scraper: Scraper, now: number): Html {
  const latest = scraper.latest;
  const value = latest?.signals.values[c.signal] ?? null;
  const names = latest && c.names ? c.names(latest.signals) : [];
  const needs = value !== null && c.attention(value);
  const shown =
    latest === undefined
      ? 'waiting for the first scrape'
      : value === null
        ? c.signal === 'deny_ratio'
          ? 'no decisions'
          : 'no data'
        : c.format(value);
  return html`<article class="card${needs ? ' attention' : ''}" data-signal="${c.signal}" aria-labelledby="card-${c.signal}">
    <h2 id="card-${c.signal}">${c.title}</h2>
    <p class="value" data-value="${value ?? ''}">${shown}</p>
    <p class="hint">${c.what}</p>
    ${names.length > 0 && html`<p class="names">${names.slice(0, 5).join(', ')}${names.length > 5 ? ` and ${names.length - 5} more` : ''}</p>`}
    ${lineChart(scraper.history.points(c.signal), { now, windowMs: HISTORY_WINDOW_MS, label: `${c.title} over the last hour`, minMax: c.minMax })}
    <p><a href="${c.href}">${c.action}</a></p>
  </article>`;
}

function targetsTable(targets: readonly TargetStatus[]): Html {
  return table<TargetStatus>({
    caption: 'What the console scrapes',
    id: 'scrape-targets',
    rows: targets,
    columns: [
      { header: 'Target', rowHeader: true, cell: (x) => x.id },
      { header: 'Kind', cell: (x) => x.kind },
      { header: 'Metrics', cell: (x) => html`<code>${x.url}</code>` },
      {
        header: 'Last scrape',
        cell: (x) => (x.up ? html`<span class="badge ok">answered</span>` : html`<span class="badge bad">${x.error ?? 'failed'}</span>`),
      },
    ],
  });
}

function render(ctx: PageContext, scraper: Scraper | undefined): PageResult {
  if (!scraper)
    return ctx.render({ title: 'Overview', body: html`<p>This console does not scrape the services (no scraper configured).</p>` });
  const now = ctx.now();
  const latest = scraper.latest;
  const seconds = Math.round(scraper.intervalMs / 1000);
  const needing = latest
    ? CARDS.filter((c) => {
        const v = latest.signals.values[c.signal];
        return v !== null && c.attention(v);
      })
    : [];
  return ctx.render({
    title: 'Overview',
    body: html`<div id="overview" data-refresh="${Math.max(5, seconds)}">
      <p class="summary" role="status">
        ${
          latest === undefined
            ? 'The first scrape of the services has not finished yet.'
            : needing.length === 0
              ? html`Nothing needs attention. As of ${timeEl(latest.at / 1000)}.`
              : html`<strong>${needing.length} ${needing.length === 1 ? 'thing needs' : 'things need'} attention:</strong>
                  ${needing.map((c) => c.title.toLowerCase()).join(', ')}. As of ${timeEl(latest.at / 1000)}.`
        }
        Scraped every ${seconds} s; the charts show the last hour.
      </p>
      <div class="cards">${CARDS.map((c) => card(c, scraper, now))}</div>
      ${latest && targetsTable(latest.targets)}
    </div>`,
  });
}

/** The overview page over `scraper` (undefined: a console that does not scrape, e.g. some tests). */
export function overviewPage(scraper: Scraper | undefined): ConsolePage {
  return {
    id: 'overview',
    title: 'Overview',
    path: '/',
    register(r) {
      r.get('/', (ctx) => render(ctx, scraper));
    },
  };
}
