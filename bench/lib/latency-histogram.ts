/**
 * Response times at microsecond resolution. autocannon's own histogram records whole
 * milliseconds, too coarse for a target of "added p99 ≤ 1 ms", so the bench records the float
 * response time autocannon reports for every response here instead.
 *
 * Fixed buckets of 1 µs up to 250 ms (1 MB of counters); slower responses are kept exactly in a
 * list, so percentiles stay exact however slow the tail.
 */
const MAX_US = 250_000;

export class LatencyHistogram {
  private readonly counts = new Uint32Array(MAX_US);
  private readonly slow: number[] = [];
  count = 0;

  /** Records one response time in milliseconds. */
  record(ms: number): void {
    const us = Math.round(ms * 1000);
    this.count++;
    if (us < MAX_US) this.counts[us < 0 ? 0 : us]!++;
    else this.slow.push(us);
  }

  /** The `p`-th percentile (0–100) in milliseconds; NaN when nothing was recorded. */
  percentile(p: number): number {
    if (this.count === 0) return NaN;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let us = 0; us < MAX_US; us++) {
      seen += this.counts[us]!;
      if (seen >= rank) return us / 1000;
    }
    this.slow.sort((a, b) => a - b);
    return this.slow[rank - seen - 1]! / 1000;
  }
}
