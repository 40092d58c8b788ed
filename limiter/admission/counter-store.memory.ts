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
 * Global buckets are few and never evicted: they live in a plain map by name (over shared memory,
 * in a small table of their own that refuses a name beyond its bound rather than evict one).
 *
 * Over shared memory (`shared`, from `createSharedCounters` in shared-counters.ts) the same store
 * decides on counters every worker thread attached to them shares: each admission takes the
 * shared lock around reading the clock, deciding and charging, so N threads enforce one limit
 * exactly. Without `shared` nothing is locked and nothing changes on the single-thread path.
 *
 * The same store, built with scaled limits, serves as the sidecar's local emergency cap while the
 * shared store is down.
 */
import type { Clock } from '../../shared/clock.js';
import type { AdmitRequest, AdmitResult, CounterStore } from './counter-store.js';
import { CounterTable } from './counter-table.js';
import { lock, lockWord, offsets, unlock, type SharedCounters } from './shared-counters.js';
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
  /**
   * Decide on counters shared with other threads (createSharedCounters); `maxKeys` and
   * `initialCapacity` are then the shared bound's. `close()` leaves shared counters to the others.
   */
  shared?: SharedCounters | undefined;
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
  /** Shared memory only: the lock word, and the global buckets' table. */
  readonly #lock: Int32Array | undefined;
  readonly #gtable: CounterTable | undefined;
  readonly #gstate: BucketState = { alg: 1, a: 0, b: 0, c: 0 };
  // Scratch reused by every call: the store is synchronous, so one set is enough.
  readonly #key: Bucket = { params: undefined as never, state: undefined };
  readonly #global: Bucket = { params: undefined as never, state: undefined };
  readonly #state: BucketState = { alg: 1, a: 0, b: 0, c: 0 };
  readonly #adm = newAdmission();

  constructor(opts: MemoryCounterStoreOptions) {
    const max = opts.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`MemoryCounterStore: maxKeys must be a positive integer, got ${max}`);
    this.#clock = opts.clock;
    const sh = opts.shared;
    if (sh === undefined) {
      this.#table = new CounterTable({ maxKeys: max, initialCapacity: opts.initialCapacity, onEvict: opts.onEvict });
    } else {
      const o = offsets(sh);
      this.#table = new CounterTable({
        maxKeys: sh.maxKeys,
        onEvict: opts.onEvict,
        shared: { buffer: sh.buffer, byteOffset: o.keys, init: false },
      });
      this.#gtable = new CounterTable({
        maxKeys: sh.maxGlobals,
        evict: false,
        shared: { buffer: sh.buffer, byteOffset: o.globals, init: false },
      });
      this.#lock = lockWord(sh);
    }
  }

  /** Whether the counters are shared with other threads. */
  get shared(): boolean {
    return this.#lock !== undefined;
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
    const l = this.#lock;
    if (l === undefined) return this.#table.peek(key) >= 0;
    lock(l);
    try {
      return this.#table.peek(key) >= 0;
    } finally {
      unlock(l);
    }
  }

  admit(req: AdmitRequest): AdmitResult {
    const l = this.#lock;
    if (l === undefined) return this.#admit(req);
    // The clock is read under the lock too: successive holders see time in order.
    lock(l);
    try {
      return this.#admit(req);
    } finally {
      unlock(l);
    }
  }

  #admit(req: AdmitRequest): AdmitResult {
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
    let gslot = -1;
    const g = req.global;
    const gt = this.#gtable;
    if (g !== undefined) {
      gb = this.#global;
      gb.params = g.limit;
      if (gt === undefined) {
        gEntry = this.#globals.get(g.name);
        gb.state = gEntry;
      } else {
        gslot = gt.get(g.name);
        if (gslot >= 0) {
          const gs = this.#gstate;
          gs.alg = gt.alg[gslot] as AlgorithmCode;
          gs.a = gt.a[gslot]!;
          gs.b = gt.b[gslot]!;
          gs.c = gt.c[gslot]!;
          gb.state = gs;
        } else {
          // Checked before anything is charged: both buckets or neither.
          if (gt.size >= gt.maxKeys) throw new RangeError(`MemoryCounterStore: more than ${gt.maxKeys} global buckets in shared counters`);
          gb.state = undefined;
        }
      }
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
        if (gt !== undefined) {
          const s = gslot < 0 ? gt.insert(g.name, now) : gslot;
          const gs = a.global.newState;
          gt.alg[s] = gs.alg;
          gt.a[s] = gs.a;
          gt.b[s] = gs.b;
          gt.c[s] = gs.c;
          gt.rest[s] = a.global.resetAtMs;
        } else if (gEntry === undefined) this.#globals.set(g.name, new Entry(a.global));
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

  /** Forgets every bucket (not counted as evictions); shared counters: every thread's. */
  clear(): void {
    const l = this.#lock;
    if (l !== undefined) lock(l);
    try {
      this.#table.clear();
      this.#gtable?.clear();
      this.#globals.clear();
    } finally {
      if (l !== undefined) unlock(l);
    }
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  /** Forgets this store's buckets; shared counters stay as they are for the other threads. */
  close(): Promise<void> {
    if (this.#lock === undefined) this.clear();
    return Promise.resolve();
  }
}
