/**
 * A log line that may repeat in a burst (one per failed call while a dependency is down) is
 * written at most once per interval; the ones held back are counted and reported on the next line
 * written (`suppressed`). Without it, a Redis outage with 100,000 live leases writes 100,000 warnings
 * in one sweep (limiter/admission/lease.ts gives each lease back on its own).
 */
import type { Clock } from './clock.js';
import type { Logger } from './log.js';

export class LimitedLog {
  #last = -Infinity;
  #held = 0;

  constructor(
    private readonly log: Logger,
    private readonly msg: string,
    private readonly clock: Clock,
    private readonly intervalMs = 1000,
  ) {}

  /** Writes a warning now, or counts it when one was written less than `intervalMs` ago. */
  warn(fields: Record<string, unknown>): void {
    const now = this.clock.now();
    if (now - this.#last < this.intervalMs) {
      this.#held++;
      return;
    }
    this.#last = now;
    const suppressed = this.#held;
    this.#held = 0;
    this.log.warn(suppressed > 0 ? { ...fields, suppressed } : fields, this.msg);
  }
}
