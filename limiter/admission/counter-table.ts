/**
 * The in-process counter table: bucket state for up to `maxKeys` subjects in a few typed arrays,
 * about 65 bytes per subject at full occupancy instead of the 200-odd a `Map`/lru-cache of string
 * keys and state objects costs (bench/memory.ts measures both; the figure is in the README).
 *
 * Layout. A subject lives in a slot `s` (0 ≤ s < size; slots are dense, filled in order and reused
 * only by eviction):
 *   - `#fp[4s..4s+3]`: a 128-bit fingerprint of its key (the key string itself is not kept);
 *   - `alg[s]`, `a[s]`, `b[s]`, `c[s]`: its `BucketState` (Float64: every field is an integer up
 *     to 2^50 or an epoch ms, exact in a double, as in the algorithms themselves);
 *   - `rest[s]`: when it is back at rest (epoch ms), to tell live evictions from harmless ones;
 *   - `#prev[s]`, `#next[s]`: its place in the recency list (exact LRU).
 * An open-addressing index (`Int32Array`, linear probing, load ≤ 0.75, backward-shift deletion, so
 * no tombstones) maps a fingerprint to its slot. Arrays start at `initialCapacity` slots and double
 * up to `maxKeys`; once full, each new subject takes the least recently used subject's slot.
 *
 * Fingerprints (why 128 bits are enough, and why no one can choose them):
 *   - `key:<64 lowercase hex>` (an API key's SHA-256, limiter/subject.ts) is parsed, not hashed:
 *     its 32 bytes folded to 16 (words i and i+4 xored). No allocation.
 *   - any other key (`user:<id>`, `ip:<addr>`, `key:<hex>|/route`, ...) is hashed by a seeded
 *     non-cryptographic 128-bit hash (four murmur3-style lanes over its UTF-16 code units, each
 *     lane with its own constant and a random per-table seed; the length mixed in last). No
 *     allocation.
 *   Accidental collisions: two distinct live subjects share a fingerprint (and so a bucket) with
 *   probability about n² / 2^129, 1.5e-27 for a million subjects.
 *   Chosen collisions: an API key's fingerprint is a SHA-256 the caller cannot choose (landing on
 *   a given 128-bit fold of a digest is a preimage search); the other keys' fingerprints depend on
 *   a secret seed, so no API key can be ground to land on a user's or an address's fingerprint.
 *   A murmur-style hash may have seed-independent collisions between inputs crafted together;
 *   those can only merge two subjects both of whose strings the attacker chooses, and merged
 *   subjects share one bucket, so one limit: fewer admissions for them, never more. (The hashed
 *   strings are not freely chosen anyway: addresses, token subjects issued by the identity
 *   service, route suffixes from the configuration.)
 *   - The index position mixes the fingerprint with another random per-table seed, so digests
 *     ground offline for a common position cannot flood a probe sequence.
 *
 * Shared memory (`shared`): the same table over one region of a `SharedArrayBuffer`, so worker
 * threads decide on one set of counters (shared-counters.ts). Every scalar (size, the recency
 * list's head and tail, the eviction counts, the seeds, the bound) lives in the region's header, so
 * a thread attached to the region sees the same table; only the last fingerprint computed is kept
 * per thread (it depends on the key and the shared seeds alone, so it is valid in every thread).
 * A shared table is laid out at its bound at once and never grows (a region cannot be reallocated
 * under another thread); the OS commits its pages as they are first written, so the memory it
 * takes grows with the subjects held, not with `maxKeys` (README, "Counters shared by worker
 * threads", has the measured RSS). The table itself takes no lock: its caller holds one around
 * each use (the shared store's lock, shared-counters.ts).
 *
 * Not thread-safe by itself, synchronous, no allocation per call (growth aside).
 */
import { randomBytes } from 'node:crypto';

export interface CounterTableOptions {
  /** Most subjects held; the least recently used beyond it are evicted. Integer 1 … 2^28. */
  maxKeys: number;
  /**
   * Slots allocated at first (default min(maxKeys, 1024)); the arrays double from there up to
   * `maxKeys`. Set it to `maxKeys` to allocate everything up front (no copy while growing).
   */
  initialCapacity?: number;
  /** Called on each eviction; `live` when the evicted bucket was not yet back at rest. */
  onEvict?: (live: boolean) => void;
  /**
   * Eight 32-bit words: four seed the index positions, four the string hash's lanes (tests);
   * random per table by default.
   */
  seed?: readonly number[];
  /**
   * Lay the table out in `buffer` from `byteOffset` (8-aligned, {@link sharedTableBytes} bytes)
   * at its bound, instead of in arrays of its own. `init`: write a fresh, empty table there (the
   * seeds included); otherwise attach to the table another thread wrote (its seeds, its bound:
   * `maxKeys` must be the same).
   */
  shared?: { buffer: SharedArrayBuffer; byteOffset: number; init: boolean } | undefined;
  /**
   * `false`: a full table refuses a new key (`insert` returns −1) instead of evicting one (the
   * global buckets: few, never evicted). Default true.
   */
  evict?: boolean;
}

// The header: every scalar of the table, so threads sharing the table share them.
const H_SIZE = 0; // Int32: subjects held
const H_HEAD = 1; // Int32: most recently used slot, −1 when empty
const H_TAIL = 2; // Int32: least recently used slot, −1 when empty
const H_MAX = 3; // Int32: maxKeys (checked on attach)
const H_SEED = 4; // Int32 × 8: the seeds
const HF_EVICTIONS = 6; // Float64 (bytes 48..55): evictions
const HF_LIVE = 7; // Float64 (bytes 56..63): live evictions
const HEADER_BYTES = 64;

const align8 = (n: number): number => (n + 7) & ~7;

/** Bytes a shared table of `maxKeys` subjects takes (header, columns and index). */
export function sharedTableBytes(maxKeys: number): number {
  return HEADER_BYTES + maxKeys * (4 * 8 + 16 + 4 + 4) + indexSizeFor(maxKeys) * 4 + align8(maxKeys);
}

/** The largest `maxKeys`: slots and index positions stay within an Int32. */
export const MAX_TABLE_KEYS = 2 ** 28;

/** Hex digit value of each ASCII code, −1 for anything else (lowercase only: subject.ts emits that). */
const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = 10 + i;

/** The 32-bit word of the 8 hex digits of `s` at `off`, or −1 when one is not a lowercase hex digit. */
function hexWord(s: string, off: number): number {
  let v = 0;
  for (let i = off; i < off + 8; i++) {
    const c = s.charCodeAt(i);
    const d = c < 128 ? HEX[c]! : -1;
    if (d < 0) return -1;
    v = (v << 4) | d;
  }
  return v >>> 0;
}

/** Index slots for `cap` entries: a power of two with load ≤ 0.75. */
function indexSizeFor(cap: number): number {
  let n = 8;
  while (n * 3 < cap * 4) n *= 2;
  return n;
}

/** One block of a murmur3_x86_32-style lane: 32 bits of input `k` (two UTF-16 code units) into `h`. */
function lane(h: number, k: number, m: number): number {
  k = Math.imul(k, m);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** murmur3's finaliser: every input bit reaches every output bit. */
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class CounterTable {
  readonly maxKeys: number;
  /** Slots allocated (size ≤ capacity ≤ maxKeys). */
  capacity: number;
  /** Whether the table lives in shared memory. */
  readonly shared: boolean;

  // The state columns, indexed by slot. Replaced when the table grows: read them through the
  // table on each use, never keep a reference across an insert.
  alg: Uint8Array;
  a: Float64Array;
  b: Float64Array;
  c: Float64Array;
  rest: Float64Array;

  #fp: Uint32Array;
  #prev: Int32Array;
  #next: Int32Array;
  /** Slot + 1 at each position, 0 for empty (so a fresh, zeroed array is an empty index). */
  #index: Int32Array;
  #mask: number;
  /** The header's scalars (H_*), and its eviction counts (HF_*), in shared memory when shared. */
  readonly #h: Int32Array;
  readonly #hf: Float64Array;

  readonly #initial: number;
  readonly #evict: boolean;
  readonly #onEvict: ((live: boolean) => void) | undefined;
  readonly #s0: number;
  readonly #s1: number;
  readonly #s2: number;
  readonly #s3: number;
  readonly #l0: number;
  readonly #l1: number;
  readonly #l2: number;
  readonly #l3: number;

  // The fingerprint of the last key looked at (a request looks its key up, then inserts it).
  #lastKey: string | undefined;
  #f0 = 0;
  #f1 = 0;
  #f2 = 0;
  #f3 = 0;

  constructor(opts: CounterTableOptions) {
    const max = opts.maxKeys;
    if (!Number.isSafeInteger(max) || max < 1 || max > MAX_TABLE_KEYS) {
      throw new RangeError(`CounterTable: maxKeys must be an integer between 1 and 2^28, got ${max}`);
    }
    const initial = opts.initialCapacity ?? Math.min(max, 1024);
    if (!Number.isSafeInteger(initial) || initial < 1) {
      throw new RangeError(`CounterTable: initialCapacity must be a positive integer, got ${initial}`);
    }
    this.maxKeys = max;
    this.#onEvict = opts.onEvict;
    this.#evict = opts.evict ?? true;
    const sh = opts.shared;
    this.shared = sh !== undefined;
    // A shared table is laid out at its bound: it cannot be reallocated under another thread.
    this.#initial = sh ? max : Math.min(initial, max);
    const hbuf = sh ? sh.buffer : new ArrayBuffer(HEADER_BYTES);
    const hoff = sh ? sh.byteOffset : 0;
    if (sh && (hoff % 8 !== 0 || hoff + sharedTableBytes(max) > sh.buffer.byteLength)) {
      throw new RangeError(`CounterTable: the shared region at ${hoff} does not hold ${max} keys`);
    }
    this.#h = new Int32Array(hbuf, hoff, HEADER_BYTES / 4);
    this.#hf = new Float64Array(hbuf, hoff, HEADER_BYTES / 8);
    const h = this.#h;
    if (sh && !sh.init) {
      if (h[H_MAX] !== max) throw new RangeError(`CounterTable: the shared table holds ${h[H_MAX]} keys, not ${max}`);
    } else {
      const r = randomBytes(32);
      const seed = opts.seed ?? Array.from({ length: 8 }, (_, i) => r.readUInt32LE(i * 4));
      if (seed.length !== 8) throw new RangeError('CounterTable: seed must be eight 32-bit words');
      for (let i = 0; i < 8; i++) h[H_SEED + i] = seed[i]! | 0;
      h[H_SIZE] = 0;
      h[H_HEAD] = -1;
      h[H_TAIL] = -1;
      h[H_MAX] = max;
      this.#hf[HF_EVICTIONS] = 0;
      this.#hf[HF_LIVE] = 0;
    }
    this.#s0 = h[H_SEED]! >>> 0;
    this.#s1 = h[H_SEED + 1]! >>> 0;
    this.#s2 = h[H_SEED + 2]! >>> 0;
    this.#s3 = h[H_SEED + 3]! >>> 0;
    this.#l0 = h[H_SEED + 4]! | 0;
    this.#l1 = h[H_SEED + 5]! | 0;
    this.#l2 = h[H_SEED + 6]! | 0;
    this.#l3 = h[H_SEED + 7]! | 0;
    this.capacity = this.#initial;
    const cap = this.capacity;
    if (sh) {
      const b = sh.buffer;
      let o = hoff + HEADER_BYTES;
      const f64 = (): Float64Array => {
        const v = new Float64Array(b, o, cap);
        o += cap * 8;
        return v;
      };
      this.a = f64();
      this.b = f64();
      this.c = f64();
      this.rest = f64();
      this.#fp = new Uint32Array(b, o, cap * 4);
      o += cap * 16;
      this.#prev = new Int32Array(b, o, cap);
      o += cap * 4;
      this.#next = new Int32Array(b, o, cap);
      o += cap * 4;
      this.#index = new Int32Array(b, o, indexSizeFor(cap));
      o += this.#index.byteLength;
      this.alg = new Uint8Array(b, o, cap);
    } else {
      this.alg = new Uint8Array(cap);
      this.a = new Float64Array(cap);
      this.b = new Float64Array(cap);
      this.c = new Float64Array(cap);
      this.rest = new Float64Array(cap);
      this.#fp = new Uint32Array(cap * 4);
      this.#prev = new Int32Array(cap);
      this.#next = new Int32Array(cap);
      this.#index = new Int32Array(indexSizeFor(cap));
    }
    this.#mask = this.#index.length - 1;
  }

  /** Subjects held. */
  get size(): number {
    return this.#h[H_SIZE]!;
  }

  /** Subjects evicted to stay within `maxKeys`. */
  get evictions(): number {
    return this.#hf[HF_EVICTIONS]!;
  }

  /** Of those, the ones evicted before they were back at rest. */
  get liveEvictions(): number {
    return this.#hf[HF_LIVE]!;
  }

  /** The slot of `key`, marked most recently used; −1 when absent. */
  get(key: string): number {
    // The same subject again (a burst, or lookup then insert): its fingerprint is still there.
    if (key !== this.#lastKey) this.#fingerprint(key);
    const s = this.#find();
    if (s >= 0) this.#touch(s);
    return s;
  }

  /** The slot of `key` without changing its recency; −1 when absent. */
  peek(key: string): number {
    if (key !== this.#lastKey) this.#fingerprint(key);
    return this.#find();
  }

  /**
   * The slot for `key`, added as most recently used when absent (its state columns then hold
   * whatever the slot held before: the caller writes them). When the table is full the least
   * recently used subject is evicted first; `now` (epoch ms) tells whether it was live. A full
   * table built with `evict: false` returns −1 instead.
   */
  insert(key: string, now: number): number {
    if (key !== this.#lastKey) this.#fingerprint(key);
    const found = this.#find();
    if (found >= 0) {
      this.#touch(found);
      return found;
    }
    const h = this.#h;
    let s: number;
    let evicted = false;
    let live = false;
    const size = h[H_SIZE]!;
    if (size < this.capacity) {
      s = size;
      h[H_SIZE] = size + 1;
    } else if (this.capacity < this.maxKeys) {
      this.#grow(Math.min(this.maxKeys, this.capacity * 2));
      s = size;
      h[H_SIZE] = size + 1;
    } else if (!this.#evict) {
      return -1;
    } else {
      s = h[H_TAIL]!;
      evicted = true;
      live = this.rest[s]! > now;
      this.#unindex(s);
      this.#unlink(s);
    }
    const o = s * 4;
    const fp = this.#fp;
    fp[o] = this.#f0;
    fp[o + 1] = this.#f1;
    fp[o + 2] = this.#f2;
    fp[o + 3] = this.#f3;
    this.#place(s);
    this.#pushHead(s);
    if (evicted) {
      const hf = this.#hf;
      hf[HF_EVICTIONS] = hf[HF_EVICTIONS]! + 1;
      if (live) hf[HF_LIVE] = hf[HF_LIVE]! + 1;
      this.#onEvict?.(live);
    }
    return s;
  }

  /** Slots from most to least recently used (tests and diagnostics; allocates). */
  recency(): number[] {
    const out: number[] = [];
    for (let s = this.#h[H_HEAD]!; s >= 0; s = this.#next[s]!) out.push(s);
    return out;
  }

  /**
   * Forgets every subject (not counted as evictions) and goes back to the initial allocation (a
   * shared table empties its index in place).
   */
  clear(): void {
    const h = this.#h;
    h[H_SIZE] = 0;
    h[H_HEAD] = -1;
    h[H_TAIL] = -1;
    this.#lastKey = undefined;
    if (this.shared) {
      this.#index.fill(0);
      return;
    }
    this.capacity = 0;
    this.#grow(this.#initial);
  }

  /** Bytes held by the arrays (allocated, whether or not touched). */
  get bytes(): number {
    return (
      this.alg.byteLength +
      this.a.byteLength +
      this.b.byteLength +
      this.c.byteLength +
      this.rest.byteLength +
      this.#fp.byteLength +
      this.#prev.byteLength +
      this.#next.byteLength +
      this.#index.byteLength
    );
  }

  #fingerprint(key: string): void {
    this.#lastKey = key;
    // `key:` + 64 hex digits: already a SHA-256, read it as it is.
    if (
      key.length === 68 &&
      key.charCodeAt(3) === 58 &&
      key.charCodeAt(0) === 107 &&
      key.charCodeAt(1) === 101 &&
      key.charCodeAt(2) === 121
    ) {
      const w0 = hexWord(key, 4);
      const w1 = hexWord(key, 12);
      const w2 = hexWord(key, 20);
      const w3 = hexWord(key, 28);
      const w4 = hexWord(key, 36);
      const w5 = hexWord(key, 44);
      const w6 = hexWord(key, 52);
      const w7 = hexWord(key, 60);
      if (w0 >= 0 && w1 >= 0 && w2 >= 0 && w3 >= 0 && w4 >= 0 && w5 >= 0 && w6 >= 0 && w7 >= 0) {
        this.#f0 = (w0 ^ w4) >>> 0;
        this.#f1 = (w1 ^ w5) >>> 0;
        this.#f2 = (w2 ^ w6) >>> 0;
        this.#f3 = (w3 ^ w7) >>> 0;
        return;
      }
    }
    const n = key.length;
    let h0 = this.#l0;
    let h1 = this.#l1;
    let h2 = this.#l2;
    let h3 = this.#l3;
    let i = 0;
    for (; i + 1 < n; i += 2) {
      const k = key.charCodeAt(i) | (key.charCodeAt(i + 1) << 16);
      h0 = lane(h0, k, 0xcc9e2d51);
      h1 = lane(h1, k, 0x85ebca6b);
      h2 = lane(h2, k, 0xc2b2ae35);
      h3 = lane(h3, k, 0x27d4eb2f);
    }
    if (i < n) {
      const k = key.charCodeAt(i);
      h0 = lane(h0, k, 0xcc9e2d51);
      h1 = lane(h1, k, 0x85ebca6b);
      h2 = lane(h2, k, 0xc2b2ae35);
      h3 = lane(h3, k, 0x27d4eb2f);
    }
    // The length last: "…c" and "…c\u0000" feed the same final block.
    this.#f0 = fmix(h0 ^ n);
    this.#f1 = fmix(h1 ^ n);
    this.#f2 = fmix(h2 ^ n);
    this.#f3 = fmix(h3 ^ n);
  }

  /** Index position of a fingerprint: the words mixed with the seed (murmur3's finaliser). */
  #home(f0: number, f1: number, f2: number, f3: number): number {
    let h = Math.imul(f0 ^ this.#s0, 0xcc9e2d51) ^ Math.imul(f1 ^ this.#s1, 0x1b873593);
    h ^= Math.imul(f2 ^ this.#s2, 0x85ebca6b) ^ Math.imul(f3 ^ this.#s3, 0xc2b2ae35);
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    return h & this.#mask;
  }

  #homeOfSlot(s: number): number {
    const o = s * 4;
    const fp = this.#fp;
    return this.#home(fp[o]!, fp[o + 1]!, fp[o + 2]!, fp[o + 3]!);
  }

  /** The slot holding the current fingerprint, or −1. */
  #find(): number {
    const f0 = this.#f0;
    const f1 = this.#f1;
    const f2 = this.#f2;
    const f3 = this.#f3;
    const idx = this.#index;
    const fp = this.#fp;
    const mask = this.#mask;
    for (let i = this.#home(f0, f1, f2, f3); ; i = (i + 1) & mask) {
      const e = idx[i]!;
      if (e === 0) return -1;
      const o = (e - 1) * 4;
      if (fp[o] === f0 && fp[o + 1] === f1 && fp[o + 2] === f2 && fp[o + 3] === f3) return e - 1;
    }
  }

  /** Puts slot `s` (its fingerprint already written) at the first free position from its home. */
  #place(s: number): void {
    const idx = this.#index;
    const mask = this.#mask;
    let i = this.#homeOfSlot(s);
    while (idx[i] !== 0) i = (i + 1) & mask;
    idx[i] = s + 1;
  }

  /** Removes slot `s` from the index, shifting later entries of its run back (no tombstones). */
  #unindex(s: number): void {
    const idx = this.#index;
    const mask = this.#mask;
    let i = this.#homeOfSlot(s);
    while (idx[i] !== s + 1) i = (i + 1) & mask;
    // Backward shift: an entry further along the run moves into the hole when the hole lies
    // between its home and its position (cyclically), so every entry stays reachable from its home.
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const e = idx[j]!;
      if (e === 0) break;
      const home = this.#homeOfSlot(e - 1);
      if (((j - home) & mask) >= ((j - i) & mask)) {
        idx[i] = e;
        i = j;
      }
    }
    idx[i] = 0;
  }

  #touch(s: number): void {
    if (s === this.#h[H_HEAD]) return;
    this.#unlink(s);
    this.#pushHead(s);
  }

  #unlink(s: number): void {
    const p = this.#prev[s]!;
    const n = this.#next[s]!;
    if (p >= 0) this.#next[p] = n;
    else this.#h[H_HEAD] = n;
    if (n >= 0) this.#prev[n] = p;
    else this.#h[H_TAIL] = p;
  }

  #pushHead(s: number): void {
    const head = this.#h[H_HEAD]!;
    this.#prev[s] = -1;
    this.#next[s] = head;
    if (head >= 0) this.#prev[head] = s;
    else this.#h[H_TAIL] = s;
    this.#h[H_HEAD] = s;
  }

  /** Reallocates every array for `cap` slots, keeping the first `size`, and rebuilds the index. */
  #grow(cap: number): void {
    const n = this.#h[H_SIZE]!;
    const keep = <T extends Uint8Array | Float64Array | Uint32Array | Int32Array>(old: T, fresh: T, per = 1): T => {
      if (n > 0) fresh.set(old.subarray(0, n * per));
      return fresh;
    };
    this.alg = keep(this.alg, new Uint8Array(cap));
    this.a = keep(this.a, new Float64Array(cap));
    this.b = keep(this.b, new Float64Array(cap));
    this.c = keep(this.c, new Float64Array(cap));
    this.rest = keep(this.rest, new Float64Array(cap));
    this.#fp = keep(this.#fp, new Uint32Array(cap * 4), 4);
    this.#prev = keep(this.#prev, new Int32Array(cap));
    this.#next = keep(this.#next, new Int32Array(cap));
    this.capacity = cap;
    const size = indexSizeFor(cap);
    if (n === 0 || size !== this.#index.length) {
      this.#index = new Int32Array(size);
      this.#mask = size - 1;
      for (let s = 0; s < n; s++) this.#place(s);
    }
  }
}
