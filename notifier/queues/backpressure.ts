/**
 * Load shedding by tier (`low` is shed first under backpressure; README, "Delivery, retries, failover, the
 * dead-letter queue"). Shedding here means
 * deferring: a shed tier's workers stop fetching until the pressure is gone; nothing is dropped,
 * and the deferred jobs wait in their queues.
 *
 * Pressure is the number of jobs ready to run (not delayed, not yet taken) on the transactional and
 * high queues, sampled every `intervalMs`. Above `threshold` the `low` tier is deferred, and as soon
 * as any urgent job waits while callers queue for a database connection; above twice the
 * threshold `normal` too. Transactional
 * and high are never deferred.
 */
import type { Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import type { Tier } from './names.js';

export type PressureLevel = 0 | 1 | 2;

/** The level for a sample: 0 none, 1 defer low, 2 defer low and normal. Pure. */
export function pressureLevel(readyJobs: number, waitingForConnection: number, threshold: number): PressureLevel {
  if (readyJobs > 2 * threshold) return 2;
  // Waiting for a connection counts only while urgent work is waiting too: a low-only backlog
  // saturating the pool is the drain working, not pressure on anyone.
  if (readyJobs > threshold || (waitingForConnection > 0 && readyJobs > 0)) return 1;
  return 0;
}

/** May a worker of `tier` fetch at this level? Pure. */
export function mayRun(tier: Tier, level: PressureLevel): boolean {
  if (tier === 'low') return level === 0;
  if (tier === 'normal') return level < 2;
  return true;
}

export interface BackpressureOptions {
  pool: Pool;
  /** The queues whose backlog counts (transactional and high routing and delivery queues). */
  queues: readonly string[];
  threshold: number;
  intervalMs: number;
  log: Logger;
  onChange?: (level: PressureLevel) => void;
}

const COUNT_READY = `SELECT count(*)::int AS n FROM (
  SELECT 1 FROM pgboss.job WHERE name = ANY($1) AND state < 'active' AND start_after < now() LIMIT $2
) ready`;

export class Backpressure {
  #level: PressureLevel = 0;
  #timer: NodeJS.Timeout | undefined;
  #sampling = false;
  readonly #o: BackpressureOptions;

  constructor(opts: BackpressureOptions) {
    this.#o = opts;
  }

  get level(): PressureLevel {
    return this.#level;
  }

  mayRun(tier: Tier): boolean {
    return mayRun(tier, this.#level);
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.sample(), this.#o.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Takes one sample now. */
  async sample(): Promise<PressureLevel> {
    if (this.#sampling) return this.#level;
    this.#sampling = true;
    try {
      const { rows } = await this.#o.pool.query<{ n: number }>(COUNT_READY, [this.#o.queues, 2 * this.#o.threshold + 1]);
      const next = pressureLevel(rows[0]?.n ?? 0, this.#o.pool.waitingCount, this.#o.threshold);
      if (next !== this.#level) {
        this.#o.log.info(
          { from: this.#level, to: next },
          next > this.#level ? 'backpressure: deferring lower tiers' : 'backpressure eased',
        );
        this.#level = next;
        this.#o.onChange?.(next);
      }
    } catch (err) {
      // The database is struggling: that is pressure too.
      this.#o.log.warn({ err }, 'backpressure sample failed');
      if (this.#level === 0) this.#level = 1;
    } finally {
      this.#sampling = false;
    }
    return this.#level;
  }
}
