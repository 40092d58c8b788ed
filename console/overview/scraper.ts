/**
 * The overview's scraper: every CONSOLE_SCRAPE_INTERVAL, the /metrics of the control plane, the
 * notifier and identity (their API origins + `/metrics`, unauthenticated as on every service) and
 * of each sidecar: the ids the control plane's metrics list, each put into
 * CONSOLE_SIDECAR_METRICS_URL's `{sidecar}` (a URL without it is the one sidecar scraped). One
 * round's numbers (signals.ts) are kept in a {@link MetricHistory} for an hour.
 *
 * The targets are scraped concurrently, each with the API timeout; a round never overlaps the
 * previous one (a slow target delays the next round rather than piling requests up).
 */
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import { MetricHistory } from './history.js';
import { parsePrometheusText } from './prom-text.js';
import { listedSidecars, SIGNALS, SignalDeriver, type Scrape, type Signals, type TargetKind } from './signals.js';

/** How far back the overview's charts go. */
export const HISTORY_WINDOW_MS = 60 * 60_000;
/** At most this many sidecars are scraped in one round (the rest are counted, not scraped). */
export const MAX_SIDECARS = 50;

export interface ScraperOptions {
  clock: Clock;
  log: Logger;
  intervalMs: number;
  timeoutMs: number;
  /** Service origins. */
  controlPlaneUrl: string;
  notifierUrl: string;
  identityUrl: string;
  /** CONSOLE_SIDECAR_METRICS_URL. */
  sidecarMetricsUrl: string;
}

export interface TargetStatus {
  readonly kind: TargetKind;
  readonly id: string;
  readonly url: string;
  readonly up: boolean;
  readonly error?: string;
}

export interface Round {
  /** When the round ended (the clock's ms). */
  readonly at: number;
  readonly signals: Signals;
  readonly targets: readonly TargetStatus[];
}

const metricsUrl = (origin: string): string => `${origin.replace(/\/+$/, '')}/metrics`;

/** The sidecars' metrics URLs: one per listed id when the template names `{sidecar}`, else the URL itself. */
export function sidecarTargets(template: string, ids: readonly string[]): { id: string; url: string }[] {
  if (!template.includes('{sidecar}')) return [{ id: ids.length === 1 ? ids[0]! : 'sidecar', url: template }];
  return ids.slice(0, MAX_SIDECARS).map((id) => ({ id, url: template.replaceAll('{sidecar}', encodeURIComponent(id)) }));
}

export class Scraper {
  readonly history: MetricHistory;
  private readonly deriver = new SignalDeriver();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private last: Round | undefined;
  private rounds = 0;
  /** Aborts the scrapes in flight at stop, so a slow target does not hold up the console's drain. */
  private readonly stopping = new AbortController();

  constructor(private readonly o: ScraperOptions) {
    this.history = new MetricHistory({ clock: o.clock, windowMs: HISTORY_WINDOW_MS, intervalMs: o.intervalMs });
  }

  /** The latest round (undefined before the first one ends). */
  get latest(): Round | undefined {
    return this.last;
  }

  /** Rounds completed since start. */
  get completed(): number {
    return this.rounds;
  }

  get intervalMs(): number {
    return this.o.intervalMs;
  }

  private async scrape(kind: TargetKind, id: string, url: string): Promise<Scrape> {
    try {
      const res = await fetch(url, {
        signal: AbortSignal.any([AbortSignal.timeout(this.o.timeoutMs), this.stopping.signal]),
        headers: { accept: 'text/plain' },
      });
      const text = await res.text();
      if (res.status !== 200) return { kind, id, url, error: `HTTP ${res.status}` };
      return { kind, id, url, samples: parsePrometheusText(text) };
    } catch (err) {
      const timedOut = err instanceof Error && err.name === 'TimeoutError';
      return { kind, id, url, error: timedOut ? `no answer within ${this.o.timeoutMs} ms` : 'unreachable' };
    }
  }

  /** One round: scrape, derive, record. Concurrent callers share the round in progress. */
  scrapeOnce(): Promise<void> {
    if (this.stopping.signal.aborted) return Promise.resolve();
    this.running ??= this.round().finally(() => (this.running = undefined));
    return this.running;
  }

  private async round(): Promise<void> {
    const services = await Promise.all([
      this.scrape('control-plane', 'control-plane', metricsUrl(this.o.controlPlaneUrl)),
      this.scrape('notifier', 'notifier', metricsUrl(this.o.notifierUrl)),
      this.scrape('identity', 'identity', metricsUrl(this.o.identityUrl)),
    ]);
    const ids = listedSidecars(services[0].samples ?? []);
    const sidecars = await Promise.all(sidecarTargets(this.o.sidecarMetricsUrl, ids).map((s) => this.scrape('sidecar', s.id, s.url)));
    const scrapes = [...services, ...sidecars];
    const signals = this.deriver.derive(scrapes);
    for (const name of SIGNALS) this.history.record(name, signals.values[name]);
    this.last = {
      at: this.o.clock.now(),
      signals,
      targets: scrapes.map((s) => ({
        kind: s.kind,
        id: s.id,
        url: s.url,
        up: s.samples !== undefined,
        ...(s.error ? { error: s.error } : {}),
      })),
    };
    this.rounds++;
    const down = scrapes.filter((s) => !s.samples);
    if (down.length > 0)
      this.o.log.debug({ down: down.map((d) => `${d.id}: ${d.error}`) }, 'console overview: some targets did not answer');
  }

  /** Scrapes now, then every interval, until {@link stop}. */
  start(): void {
    const tick = () => {
      this.scrapeOnce().catch((err: unknown) => this.o.log.warn({ err }, 'console overview: a scrape round failed'));
    };
    tick();
    this.timer = setInterval(tick, this.o.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.stopping.abort();
    await this.running?.catch(() => {});
  }
}
