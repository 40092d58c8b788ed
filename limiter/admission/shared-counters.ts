/**
 * Counters shared by worker threads: the in-process counter table (counter-table.ts) and the
 * global buckets laid out in one `SharedArrayBuffer`, and the lock that makes each admission
 * (decide, then charge) atomic across threads, as nginx's `limit_req` zones are across workers.
 *
 * One thread calls {@link createSharedCounters} and hands the result (plain numbers and the
 * buffer: structured-cloneable, the buffer shared, not copied) to the others, e.g. in
 * `workerData`; every thread, the creator included, builds a `MemoryCounterStore` over it
 * (`new MemoryCounterStore({ clock, shared })`) and so decides on the same counters.
 *
 * Layout: a 64-byte control block (the lock word first), the subjects' table at its bound
 * (`maxKeys`), the globals' table (`maxGlobals`, never evicted). The buffer is allocated once at
 * its full size; the OS commits its pages as they are first written, so resident memory follows
 * the subjects held (README "Counters shared by worker threads" has the measured figure).
 *
 * The lock: a futex-style mutex on one Int32 (0 free, 1 held, 2 held with waiters; Drepper,
 * "Futexes Are Tricky", mutex 2): a compare-exchange, a short spin (a decision holds the lock
 * for well under a microsecond, so a waiter usually gets it without sleeping), then
 * `Atomics.wait` until the holder's `Atomics.notify`. `Atomics` operations are sequentially
 * consistent, so everything a holder wrote is visible to the next holder.
 *
 * What it does not survive: a thread stopped from outside while it holds the lock
 * (`worker.terminate()` mid-decision) leaves the lock held and the table possibly half-updated.
 * The store never throws while holding it except on a programming error (released by `finally`),
 * and a thread that must go exits by itself between decisions (process.exit from its own
 * handler), never by `terminate()` while it may be deciding.
 */
import { CounterTable, MAX_TABLE_KEYS, sharedTableBytes } from './counter-table.js';

/** What a thread needs to attach to the shared counters; pass it as is to a worker. */
export interface SharedCounters {
  readonly buffer: SharedArrayBuffer;
  readonly maxKeys: number;
  readonly maxGlobals: number;
}

export interface SharedCountersOptions {
  /** Most subject buckets (LRU beyond it, as the in-process store). Integer 1 … 2^28. */
  maxKeys: number;
  /** Most global buckets: a global bucket is never evicted; one more name throws. Default 64. */
  maxGlobals?: number;
  /** Eight 32-bit seed words for the subjects' table (tests); random by default. */
  seed?: readonly number[];
}

export const DEFAULT_MAX_GLOBALS = 64;

const CONTROL_BYTES = 64;
const LOCK = 0;
const SPINS = 128;

/** Allocates and initialises shared counters (empty tables, fresh random seeds). */
export function createSharedCounters(opts: SharedCountersOptions): SharedCounters {
  const maxKeys = opts.maxKeys;
  const maxGlobals = opts.maxGlobals ?? DEFAULT_MAX_GLOBALS;
  for (const [name, v] of [
    ['maxKeys', maxKeys],
    ['maxGlobals', maxGlobals],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 1 || v > MAX_TABLE_KEYS)
      throw new RangeError(`createSharedCounters: ${name} must be an integer between 1 and 2^28, got ${v}`);
  }
  const buffer = new SharedArrayBuffer(CONTROL_BYTES + sharedTableBytes(maxKeys) + sharedTableBytes(maxGlobals));
  const shared: SharedCounters = { buffer, maxKeys, maxGlobals };
  const o = offsets(shared);
  new CounterTable({ maxKeys, seed: opts.seed, shared: { buffer, byteOffset: o.keys, init: true } });
  new CounterTable({ maxKeys: maxGlobals, shared: { buffer, byteOffset: o.globals, init: true } });
  return shared;
}

/** Byte offsets of the two tables in the buffer. */
export function offsets(s: SharedCounters): { keys: number; globals: number } {
  return { keys: CONTROL_BYTES, globals: CONTROL_BYTES + sharedTableBytes(s.maxKeys) };
}

/** The lock word of shared counters (an Int32Array of the control block). */
export function lockWord(s: SharedCounters): Int32Array {
  return new Int32Array(s.buffer, 0, CONTROL_BYTES / 4);
}

/** Takes the lock at `l[0]`; blocks the thread (spin, then `Atomics.wait`) while another holds it. */
export function lock(l: Int32Array): void {
  let c = Atomics.compareExchange(l, LOCK, 0, 1);
  if (c === 0) return;
  for (let i = 0; i < SPINS; i++) {
    if (Atomics.load(l, LOCK) === 0) {
      c = Atomics.compareExchange(l, LOCK, 0, 1);
      if (c === 0) return;
    }
  }
  // Mark it contended (2) so the holder knows to wake someone, then sleep until it is free.
  if (c !== 2) c = Atomics.exchange(l, LOCK, 2);
  while (c !== 0) {
    Atomics.wait(l, LOCK, 2);
    c = Atomics.exchange(l, LOCK, 2);
  }
}

/** Releases the lock at `l[0]`, waking one waiter when there are any. */
export function unlock(l: Int32Array): void {
  if (Atomics.sub(l, LOCK, 1) !== 1) {
    Atomics.store(l, LOCK, 0);
    Atomics.notify(l, LOCK, 1);
  }
}
