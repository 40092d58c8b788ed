/**
 * The event store's and projectors' Prometheus metrics (on identity's /metrics).
 *
 * `identity_projection_lag_seconds` is computed when scraped: for each projector, the age of the
 * oldest committed event its live checkpoint has not passed yet (0 when it has passed them all).
 * It is the staleness of that read model, and it also shows a projector held back by a long
 * transaction (store-sql.ts), which a "last batch" figure would not.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface EventMetrics {
  readonly appended: Counter<'type'>;
  readonly applied: Counter<'projector'>;
  readonly batches: Counter<'projector'>;
  readonly deadLettered: Counter<'projector'>;
  readonly redriven: Counter<'projector' | 'outcome'>;
  readonly tickErrors: Counter<'projector'>;
  readonly position: Gauge<'projector'>;
  readonly lag: Gauge<'projector'>;
  readonly switches: Counter<'projector'>;
}

/**
 * Registers the metrics. `lagSeconds` is called on every scrape and returns each projector's lag;
 * when it fails, the previous values stay.
 */
export function createEventMetrics(registry: Registry, lagSeconds?: () => Promise<Record<string, number>>): EventMetrics {
  const registers = [registry];
  return {
    appended: new Counter({
      name: 'identity_events_appended_total',
      help: 'Events appended to the event store',
      labelNames: ['type'],
      registers,
    }),
    applied: new Counter({
      name: 'identity_projection_events_total',
      help: 'Events applied by each projector (live generation)',
      labelNames: ['projector'],
      registers,
    }),
    batches: new Counter({
      name: 'identity_projection_batches_total',
      help: 'Batches committed by each projector',
      labelNames: ['projector'],
      registers,
    }),
    deadLettered: new Counter({
      name: 'identity_projection_dead_letters_total',
      help: 'Events a projector gave up on after its retries and dead-lettered',
      labelNames: ['projector'],
      registers,
    }),
    redriven: new Counter({
      name: 'identity_projection_redriven_total',
      help: 'Dead letters re-driven, by outcome (applied, failed)',
      labelNames: ['projector', 'outcome'],
      registers,
    }),
    tickErrors: new Counter({
      name: 'identity_projection_errors_total',
      help: 'Batches that failed as a whole (database or infrastructure errors; retried, never dead-lettered)',
      labelNames: ['projector'],
      registers,
    }),
    position: new Gauge({
      name: 'identity_projection_position',
      help: 'Global position of the last event each projector passed (live generation)',
      labelNames: ['projector'],
      registers,
    }),
    lag: new Gauge({
      name: 'identity_projection_lag_seconds',
      help: 'Age of the oldest committed event each projector has not applied yet; 0 when caught up',
      labelNames: ['projector'],
      registers,
      async collect() {
        if (!lagSeconds) return;
        try {
          for (const [projector, seconds] of Object.entries(await lagSeconds())) this.set({ projector }, seconds);
        } catch {
          // Keep the previous values: a scrape must not fail because one query did.
        }
      },
    }),
    switches: new Counter({
      name: 'identity_projection_switches_total',
      help: 'Atomic switches of a live read model to a rebuilt generation',
      labelNames: ['projector'],
      registers,
    }),
  };
}
