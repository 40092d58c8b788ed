/**
 * The in-process counter store: the default, exact for a single sidecar, O(1) per decision, and
 * synchronous (no promise, no allocation but the returned result).
 *
 * Subject buckets live in a {@link CounterTable} (counter-table.ts): typed arrays keyed by a
 * 128-bit fingerprint of the subject, exact LRU, bounded to `maxKeys`: about 65 bytes allocated per
 * subject at the bound (RSS per live subject: bench/memory.ts, bench/RESULTS.md). Evicting a bucket forgets it, so an evicted subject starts again
 * at rest (a full token bucket, an empty window): a reset in the subject's favour. That only
 * matters when the evicted bucket had not yet refilled by itself, so every eviction is reported
 * with `live` saying which kind it was (`liveEvictions` counts the ones that reset a bucket early);
 * only those cost accuracy. Size `maxKeys` above the number of distinct subjects seen within one
 * refill time (burst / rate × interval) and live evictions stay at 0. The key strings themselves
 * are not kept, so the eviction callback is told only whether the eviction was live.
 *
 * Global buckets are few and never evicted: they live in a plain map by name.
 *
 * The same store, built with scaled limits, serves as the sidecar's local emergency cap while the
 * shared store is down.
 */
import type { Clock } from '../../shared/clock.js';
import type { AdmitRequest, AdmitResult, CounterStore } from './counter-store.js';
import { CounterTable } from './counter-table.js';
import { decide, newAdmission, type Bucket } from './decide.js';
import type { AlgorithmCode, BucketState, Step } from './limit.js';

export interface MemoryCounterStoreOptions {
  /** The time source (epoch ms): the system clock in production, a fake one in tests. */
  clock: Clock;
  /** Most subject buckets kept; the least recently used beyond it are evicted. Default 1,000,000. */
  maxKeys?: number;
  /**
   * Slots allocated at start (default min(maxKeys, 1024)); the table doubles from there up to
   * `maxKeys`. `maxKeys` allocates the whole bound at once (about 65 bytes × maxKeys).
   */
  initialCapacity?: number;
  /**
   * Called on each eviction of a subject bucket. `live` is true when the bucket had not yet come
   * back to rest by itself, so the eviction handed the subject a fresh bucket early. Keep it cheap.
   */
  onEvict?: (live: boolean) => void;
}

export const DEFAULT_MAX_KEYS = 1_000_000;

/** A global bucket: its state plus when it is back at rest. */
class Entry implements BucketState {
  alg: AlgorithmCode;
  a: number;
  b: number;
  c: number;
  constructor(from: Step) {
    const s = from.newState;
    this.alg = s.alg;
    this.a = s.a;
    this.b = s.b;
    this.c = s.c;
  }
}

function store(into: Entry, from: Step): void {
  const s = from.newState;
  into.alg = s.alg;
  into.a = s.a;
  into.b = s.b;
  into.c = s.c;
}

export class MemoryCounterStore implements CounterStore {
  readonly kind = 'memory' as const;

  readonly #clock: Clock;
  readonly #table: CounterTable;
  readonly #globals = new Map<string, Entry>();
  // Scratch reused by every call: the store is synchronous, so one set is enough.
  readonly #key: Bucket = { params: undefined as never, state: undefined };
  readonly #global: Bucket = { params: undefined as never, state: undefined };
  readonly #state: BucketState = { alg: 1, a: 0, b: 0, c: 0 };
  readonly #adm = newAdmission();

  constructor(opts: MemoryCounterStoreOptions) {
    const max = opts.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`MemoryCounterStore: maxKeys must be a positive integer, got ${max}`);
    this.#clock = opts.clock;
    this.#table = new CounterTable({ maxKeys: max, initialCapacity: opts.initialCapacity, onEvict: opts.onEvict });
  }

  /** Subject buckets evicted to stay within `maxKeys`. */
  get evictions(): number {
    return this.#table.evictions;
  }

  /** Of those, the ones evicted before they were back at rest (each one a reset in a subject's favour). */
  get liveEvictions(): number {
    return this.#table.liveEvictions;
  }

  /** Subject buckets currently held. */
  get size(): number {
    return this.#table.size;
  }

  /** True when a bucket is held for `key` (does not count as a use for the LRU order). */
  has(key: string): boolean {
    return this.#table.peek(key) >= 0;
  }

  admit(req: AdmitRequest): AdmitResult {
    const now = this.#clock.now();
    const t = this.#table;
    const slot = t.get(req.key);
    const kb = this.#key;
    kb.params = req.limit;
    if (slot < 0) kb.state = undefined;
    else {
      const st = this.#state;
      st.alg = t.alg[slot] as AlgorithmCode;
      st.a = t.a[slot]!;
      st.b = t.b[slot]!;
      st.c = t.c[slot]!;
      kb.state = st;
    }
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
      // insert() may evict and may grow the table: read the columns through `t` after it.
      const s = slot < 0 ? t.insert(req.key, now) : slot;
      const ns = a.key.newState;
      t.alg[s] = ns.alg;
      t.a[s] = ns.a;
      t.b[s] = ns.b;
      t.c[s] = ns.c;
      t.rest[s] = a.key.resetAtMs;
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
    this.#table.clear();
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
