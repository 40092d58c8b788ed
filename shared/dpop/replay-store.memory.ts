/**
 * The in-process replay store: exact for one process, per process when there are several (a proof
 * replayed to another sidecar is not caught unless the sidecars share Redis).
 *
 * Two generations instead of a sweep: keys go into the current map; every `generationMs` (at least
 * the longest TTL asked for) the current map becomes the previous one and the previous one is
 * dropped whole, so a key is remembered at least its TTL and at most two generations, and no
 * request ever pays for walking the map. When `maxEntries` keys are held, new proofs are refused
 * (the caller answers 503) until a generation passes: forgetting a live `jti` would let it be
 * replayed.
 *
 * Keys are held as 48 bits of their SHA-256 (a number, not the ~90-character string): about 60 MB
 * per million remembered proofs. A collision (a fresh proof refused as a replay, which the client
 * answers with a new proof) has odds of about 1 in 10^8 per proof with 3 million remembered.
 */
import { hash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { DpopReplayStore } from './replay-store.js';

export class MemoryReplayStore implements DpopReplayStore {
  private current = new Map<number, number>();
  private previous = new Map<number, number>();
  private rotateAt: number;

  constructor(
    private readonly clock: Clock,
    private readonly maxEntries = 2_000_000,
    private generationMs = 125_000,
  ) {
    this.rotateAt = clock.now() + generationMs;
  }

  /** Keys held (both generations; some may have expired). */
  get size(): number {
    return this.current.size + this.previous.size;
  }

  claim(key: string, ttlMs: number): Promise<boolean> {
    try {
      return Promise.resolve(this.claimSync(key, ttlMs));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** The same as `claim`, without the promise. Throws when full. */
  claimSync(key: string, ttlMs: number): boolean {
    const now = this.clock.now();
    if (ttlMs > this.generationMs) this.generationMs = ttlMs;
    if (now >= this.rotateAt) {
      // Idle for more than a generation: both maps hold only expired keys.
      this.previous = now >= this.rotateAt + this.generationMs ? new Map() : this.current;
      this.current = new Map();
      this.rotateAt = now + this.generationMs;
    }
    const k = hash('sha256', key, 'buffer').readUIntBE(0, 6);
    const until = this.current.get(k) ?? this.previous.get(k);
    if (until !== undefined && until > now) return false;
    if (this.current.size + this.previous.size >= this.maxEntries) throw new Error('dpop replay store is full');
    this.current.set(k, now + Math.max(1, ttlMs));
    return true;
  }
}
