/**
 * Time-ordered UUIDs (version 7, RFC 9562 §5.7) for the deliveries a shard writes: 48 bits of
 * Unix milliseconds, then a counter that keeps ids made in the same millisecond in order, then
 * random bits. A million campaign rows with random (v4) ids would land all over the primary key's
 * index, a page read and a page write each once it outgrows memory; ordered ids land at its end.
 * They remain UUIDs to everything else (the API's isUuid, the uuid columns).
 */
import { randomBytes } from 'node:crypto';

let lastMs = 0;
let seq = 0;

/** `n` ordered ids, after every id made before in this process. */
export function orderedIds(n: number, nowMs: number): string[] {
  const out: string[] = [];
  const rand = randomBytes(8 * n);
  for (let i = 0; i < n; i++) {
    if (nowMs > lastMs) {
      lastMs = nowMs;
      seq = 0;
    } else if (++seq > 0xfff) {
      // 4,096 ids in one millisecond: borrow the next one (ids stay ordered and unique).
      lastMs++;
      seq = 0;
    }
    const ms = lastMs.toString(16).padStart(12, '0');
    const r = rand.subarray(8 * i, 8 * i + 8);
    // Variant 10xx in the top bits of the clock_seq byte.
    r[0] = (r[0]! & 0x3f) | 0x80;
    const hex = r.toString('hex');
    out.push(`${ms.slice(0, 8)}-${ms.slice(8, 12)}-7${seq.toString(16).padStart(3, '0')}-${hex.slice(0, 4)}-${hex.slice(4, 16)}`);
  }
  return out;
}
