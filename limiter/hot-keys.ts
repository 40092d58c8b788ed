/**
 * The hottest subjects over a rolling window, bounded in memory: the figures behind
 * `ratelimit_hot_key_ops` and the "one key above 15% of evaluations" alert.
 *
 * Each window counts evaluations per subject in a map capped at `capacity` entries; once full, new
 * subjects in that window are counted only in the total. A subject hot enough to matter (15% of
 * traffic) is among the first seen in any window, so the cap loses nothing that the alert needs.
 * At the window's end the top `k` are kept for scraping and the map starts afresh.
 */
import { hashSubject } from '../shared/log.js';
import type { Clock } from '../shared/clock.js';

export interface HotKey {
  /** The subject, hashed: raw keys never reach metrics. */
  subject: string;
  ops: number;
  share: number;
}

export class HotKeys {
  private counts = new Map<string, number>();
  private total = 0;
  private windowStart: number;
  private last: HotKey[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly windowMs = 10_000,
    private readonly k = 10,
    private readonly capacity = 100_000,
  ) {
    this.windowStart = clock.now();
  }

  /**
   * Counts one evaluation. One in four is sampled into the per-subject map (the shares and the
   * ops, scaled back, are estimates within a few percent at the rates that matter); the total is
   * exact.
   */
  record(subject: string): void {
    if ((++this.total & 3) !== 0) return;
    const n = this.counts.get(subject);
    if (n !== undefined) this.counts.set(subject, n + 4);
    else if (this.counts.size < this.capacity) this.counts.set(subject, 4);
  }

  /** The top subjects of the last complete window (rolls the window when it is over). */
  top(): HotKey[] {
    const now = this.clock.now();
    if (now - this.windowStart >= this.windowMs) {
      const total = this.total;
      this.last = [...this.counts.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, this.k)
        .map(([s, ops]) => ({ subject: hashSubject(s), ops, share: total > 0 ? ops / total : 0 }));
      this.counts = new Map();
      this.total = 0;
      this.windowStart = now;
    }
    return this.last;
  }
}
