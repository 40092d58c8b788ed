/**
 * The overview's memory: for each named series, its points over the last window (one hour), in a
 * ring buffer of fixed size per series, so memory is bounded however long the console runs
 * (window / interval points per series, plus slack for a late scrape). Pure: time comes from the
 * injected clock; nothing here schedules anything.
 */
import type { Clock } from '../../shared/clock.js';

export interface Point {
  /** Milliseconds since the epoch. */
  readonly t: number;
  /** `null`: no value at this scrape (the target did not answer): a gap in the chart. */
  readonly v: number | null;
}

class Ring {
  private readonly ts: Float64Array;
  private readonly vs: Float64Array;
  private head = 0;
  private size = 0;
  constructor(readonly capacity: number) {
    this.ts = new Float64Array(capacity);
    this.vs = new Float64Array(capacity);
  }
  push(t: number, v: number | null): void {
    this.ts[this.head] = t;
    // NaN marks a gap: the values stored are numbers, never NaN, once read back.
    this.vs[this.head] = v === null ? NaN : v;
    this.head = (this.head + 1) % this.capacity;
    if (this.size < this.capacity) this.size++;
  }
  /** Oldest first, those at or after `since`. */
  since(since: number): Point[] {
    const out: Point[] = [];
    const start = (this.head - this.size + this.capacity) % this.capacity;
    for (let k = 0; k < this.size; k++) {
      const i = (start + k) % this.capacity;
      const t = this.ts[i]!;
      if (t < since) continue;
      const v = this.vs[i]!;
      out.push({ t, v: Number.isNaN(v) ? null : v });
    }
    return out;
  }
}

export interface HistoryOptions {
  clock: Clock;
  /** How far back points are kept (one hour). */
  windowMs: number;
  /** How often points arrive (CONSOLE_SCRAPE_INTERVAL): sizes each ring. */
  intervalMs: number;
  /** At most this many series (a bound on labels turned into series, e.g. per sidecar). */
  maxSeries?: number;
}

export class MetricHistory {
  private readonly rings = new Map<string, Ring>();
  private readonly capacity: number;
  private readonly maxSeries: number;
  constructor(private readonly o: HistoryOptions) {
    // One point per interval over the window, the one at its start, and slack for jitter.
    this.capacity = Math.ceil(o.windowMs / o.intervalMs) + 2;
    this.maxSeries = o.maxSeries ?? 256;
  }

  get pointsPerSeries(): number {
    return this.capacity;
  }

  /** Appends a point at the clock's now; a series beyond `maxSeries` is dropped (false). */
  record(name: string, v: number | null): boolean {
    let r = this.rings.get(name);
    if (!r) {
      if (this.rings.size >= this.maxSeries) return false;
      r = new Ring(this.capacity);
      this.rings.set(name, r);
    }
    r.push(this.o.clock.now(), v);
    return true;
  }

  /** The series' points within the window, oldest first (empty when never recorded). */
  points(name: string): Point[] {
    return this.rings.get(name)?.since(this.o.clock.now() - this.o.windowMs) ?? [];
  }

  /** The newest point's value within the window (undefined: none, or a gap). */
  latest(name: string): number | undefined {
    const p = this.points(name);
    const last = p[p.length - 1];
    return last?.v ?? undefined;
  }

  get seriesCount(): number {
    return this.rings.size;
  }
}
