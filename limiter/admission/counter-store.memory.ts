/**
 * The in-process counter store: the default, exact for a single sidecar, O(1) per decision, and
 * synchronous (no promise, no allocation but the returned result).
 *
 * Buckets live in an LRU (lru-cache) bounded to `maxKeys`. Evicting a bucket forgets it, so an
 * evicted subject starts again at rest (a full token bucket, an empty window): a reset in the
 * subject's favour. That only matters when the evicted bucket had not yet refilled by itself, so
 * every eviction is reported with `live` saying which kind it was (`liveEvictions` counts the ones
 * that reset a bucket early); only those cost accuracy. Size `maxKeys` above the number of distinct
 * subjects seen within one refill time (burst / rate × interval) and live evictions stay at 0; the
 * default, 1,000,000, holds a million subjects in roughly 150 MB.
 *
 * Global buckets are few and never evicted: they live in a plain map by name.
 *
 * The same store, built with scaled limits, serves as the sidecar's local emergency cap while the
 * shared store is down.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../shared/clock.js';
import type { AdmitRequest, AdmitResult, CounterStore } from './counter-store.js';
import { decide, newAdmission, type Bucket } from './decide.js';
import type { AlgorithmCode, BucketState, Step } from './limit.js';

export interface MemoryCounterStoreOptions {
  /** The time source (epoch ms): the system clock in production, a fake one in tests. */
  clock: Clock;
  /** Most subject buckets kept; the least recently used beyond it are evicted. Default 1,000,000. */
  maxKeys?: number;
  /**
   * Called on each eviction of a subject bucket. `live` is true when the bucket had not yet come
   * back to rest by itself, so the eviction handed the subject a fresh bucket early. Keep it cheap.
   */
  onEvict?: (key: string, live: boolean) => void;
}

export const DEFAULT_MAX_KEYS = 1_000_000;

/** A stored bucket: its state plus when it is back at rest (an eviction after that is harmless). */
class Entry implements BucketState {
  alg: AlgorithmCode;
  a: number;
  b: number;
  c: number;
  restAtMs: number;
  constructor(from: Step) {
    const s = from.newState;
    this.alg = s.alg;
    this.a = s.a;
    this.b = s.b;
    this.c = s.c;
    this.restAtMs = from.resetAtMs;
  }
}

function store(into: Entry, from: Step): void {
  const s = from.newState;
  into.alg = s.alg;
  into.a = s.a;
  into.b = s.b;
  into.c = s.c;
  into.restAtMs = from.resetAtMs;
}

export class MemoryCounterStore implements CounterStore {
  readonly kind = 'memory' as const;
  /** Subject buckets evicted to stay within `maxKeys`. */
  evictions = 0;
  /** Of those, the ones evicted before they were back at rest (each one a reset in a subject's favour). */
  liveEvictions = 0;

  readonly #clock: Clock;
  readonly #buckets: LRUCache<string, Entry>;
  readonly #globals = new Map<string, Entry>();
  readonly #onEvict: ((key: string, live: boolean) => void) | undefined;
  // Scratch reused by every call: the store is synchronous, so one set is enough.
  readonly #key: Bucket = { params: undefined as never, state: undefined };
  readonly #global: Bucket = { params: undefined as never, state: undefined };
  readonly #adm = newAdmission();

  constructor(opts: MemoryCounterStoreOptions) {
    const max = opts.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`MemoryCounterStore: maxKeys must be a positive integer, got ${max}`);
    this.#clock = opts.clock;
    this.#onEvict = opts.onEvict;
    this.#buckets = new LRUCache<string, Entry>({
      max,
      dispose: (entry, key, reason) => {
        if (reason !== 'evict') return;
        const live = entry.restAtMs > this.#clock.now();
        this.evictions++;
        if (live) this.liveEvictions++;
        this.#onEvict?.(key, live);
      },
    });
  }

  /** Subject buckets currently held. */
  get size(): number {
    return this.#buckets.size;
  }

  admit(req: AdmitRequest): AdmitResult {
    const now = this.#clock.now();
    const entry = this.#buckets.get(req.key);
    const kb = this.#key;
    kb.params = req.limit;
    kb.state = entry;
    let gb: Bucket | undefined;
    let gEntry: Entry | undefined;
    const g = req.global;
    if (g !== undefined) {
      gEntry = this.#globals.get(g.name);
      gb = this.#global;
      gb.params = g.limit;
      gb.state = gEntry;
    }
    const a = decide(kb, gb, now, req.cost, this.#adm);
    if (a.allowed) {
      if (entry === undefined) this.#buckets.set(req.key, new Entry(a.key));
      else store(entry, a.key);
      if (g !== undefined) {
        if (gEntry === undefined) this.#globals.set(g.name, new Entry(a.global));
        else store(gEntry, a.global);
      }
    }
    return {
      allowed: a.allowed,
      limit: a.limit,
      remaining: a.remaining,
      resetAtMs: a.resetAtMs,
      retryAfterMs: a.retryAfterMs,
      binding: a.binding,
    };
  }

  /** Forgets every bucket (not counted as evictions). */
  clear(): void {
    this.#buckets.clear();
    this.#globals.clear();
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.clear();
    return Promise.resolve();
  }
}
