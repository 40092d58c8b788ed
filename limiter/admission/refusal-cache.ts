/**
 * Exact local refusals over the shared Redis counters: once Redis has answered for a subject, the
 * sidecar answers that subject's requests that Redis would certainly refuse itself, without a round
 * trip, and sends to Redis everything else.
 *
 * How it stays exact. The admission script returns, with its decision, Redis `TIME` and each
 * bucket's state as Redis holds it after the call (admit-script.ts). A later request of cost `c` is
 * checked by running the same pure algorithms (`decide.ts`) on that state at `T`, an upper bound of
 * the Redis time at this moment, and refused here only when they refuse. That answer is Redis's:
 * - other sidecars (and this one) can only charge the buckets, never credit them, so the state in
 *   Redis is the remembered one or worse for the subject;
 * - every algorithm admits at least as much later as earlier and with less charged, so a request
 *   refused at `T` on the remembered state is refused at any earlier time on any worse state;
 * - `T` is Redis's `nowMs` plus the local monotonic time elapsed since the request was *sent* (Redis
 *   read its clock after that), plus 1 ms (TIME is truncated to ms) and 0.1% of the elapsed time
 *   (clock rate differences): never earlier than Redis's clock, so entries expire a little early,
 *   never late;
 * - the cost is checked per request, so a refusal of cost 5 never refuses a request of cost 1 that
 *   would pass;
 * - a request admitted here never happens: whatever is not refused locally goes to Redis.
 * The figures of a local refusal are the algorithms' at `T` (remaining, reset and retry-after tick
 * with the local clock); the global bucket's state is kept with the subject's, so a refusal bound
 * by the global bucket is answered locally too (`binding: 'global'`, the subject's figures). The
 * remembered state predates the other sidecars' charges since, so against Redis's own answer at
 * that moment: the limit is the same, Retry-After never later, remaining never lower (and below
 * the cost) — except that a stale key bucket may leave the global bucket binding where Redis's key
 * bucket binds first, and a global refusal reports remaining 0.
 *
 * When it is not exact, and what is done about it:
 * - a quota change: an entry holds the `LimitParams` object it was made with, and a request whose
 *   limit (or global bucket) is another object (a recompiled quota) drops the entry and goes to
 *   Redis; `forget(key)` drops a subject's entries at once (wired to the quota cache);
 * - Redis losing its data (a restart without persistence, a fail-over to a lagging replica): the
 *   whole cache is dropped on every connection event of either of the store's connections
 *   (`onConnectionEvent`: `ready`, `close`, `reconnecting`, cluster node changes) and on every
 *   failed call; a `FLUSHALL` without a reconnect is not seen;
 * - a Redis clock stepped forward (NTP) admits earlier than its own numbers said: not seen;
 * - lease give-backs (lease.ts) credit the global bucket, so while any quota is approximate
 *   (`globalCredited()`) the global bucket's remembered state is not used: only refusals by the
 *   subject's own bucket are answered locally. (An approximate subject's own bucket is credited
 *   too: its local refusals may outlast Redis's by the other sidecars' leases outstanding when it
 *   was remembered, at most a quarter of its burst; approximate mode accepts that.)
 *
 * Only answers that leave the subject unable to pass another request of the same cost are
 * remembered (a refusal, or an admission with `remaining < cost`); an admission with room drops
 * the entry. Bounded: at most `maxEntries` subjects (default {@link DEFAULT_REFUSAL_ENTRIES}, about
 * 280 bytes of heap each measured, beside the key string), the oldest entry evicted first; an entry
 * is dropped once every bucket it holds
 * is back at rest. Bypassed (`active()` false) while the caller's circuit breaker is not closed, so
 * half-open probes always reach Redis.
 */
import { decide, newAdmission, type Admission, type Bucket } from './decide.js';
import type { AdmitRequest, AdmitResult, CounterStore, GlobalBucket } from './counter-store.js';
import { toResult, type AdmitReply, type RedisCounterStore } from './counter-store.redis.js';
import type { BucketState, LimitParams } from './limit.js';

/** Default bound on remembered subjects. */
export const DEFAULT_REFUSAL_ENTRIES = 100_000;

export interface RefusalCacheOptions {
  /** Most subjects remembered; 0 turns local refusals off. Default {@link DEFAULT_REFUSAL_ENTRIES}. */
  maxEntries?: number;
  /** A monotonic clock, ms (default `performance.now`). Must run at real speed: Redis TIME does. */
  monotonic?: () => number;
  /** False while local answers must not be given (the breaker is not closed). Default always true. */
  active?: () => boolean;
  /** Called for each request refused locally. */
  onLocalRefusal?: () => void;
  /**
   * True while lease give-backs (lease.ts) may credit the global bucket, i.e. while any quota is
   * approximate: then only the subject's own bucket is checked locally and refusals bound by the
   * global bucket go to Redis. Default: never.
   */
  globalCredited?: () => boolean;
}

/** The Redis store as this layer uses it. */
export type ReplyStore = Pick<RedisCounterStore, 'admitReply' | 'shards' | 'ready' | 'close' | 'onConnectionEvent'>;

interface Entry {
  limit: LimitParams;
  global: GlobalBucket | undefined;
  state: BucketState | undefined;
  gstate: BucketState | undefined;
  /** Redis TIME of the reply, epoch ms. */
  redisNow: number;
  /** Local monotonic time the request was sent, ms. */
  sentAt: number;
  /** Local monotonic time after which every bucket held is at rest (the entry refuses nothing). */
  restAt: number;
}

/** Redis time at most `elapsed` ms of local time after `redisNow`: 1 ms for TIME's truncation, 0.1% for clock rates. */
export function redisTimeBound(redisNow: number, elapsed: number): number {
  const e = elapsed > 0 ? elapsed : 0;
  return redisNow + e + 1 + Math.ceil(e / 1000);
}

/** A bucket state from a reply's tail at `at` (tag 0: none, i.e. at rest). */
export function stateAt(reply: AdmitReply, at: number): BucketState | undefined {
  const tag = reply[at];
  if (tag === undefined || tag === 0) return undefined;
  return { alg: tag as BucketState['alg'], a: reply[at + 1]!, b: reply[at + 2]!, c: reply[at + 3]! };
}

export class RefusalCache implements CounterStore {
  readonly kind = 'redis' as const;
  /** Requests answered here. */
  localRefusals = 0;
  readonly #store: ReplyStore;
  readonly #max: number;
  readonly #mono: () => number;
  readonly #active: () => boolean;
  readonly #onLocal: (() => void) | undefined;
  readonly #globalCredited: () => boolean;
  readonly #entries = new Map<string, Entry>();
  readonly #scratch: Admission = newAdmission();
  // Reused holders: a local answer allocates nothing.
  readonly #kb: Bucket = { params: undefined as unknown as LimitParams, state: undefined };
  readonly #gb: Bucket = { params: undefined as unknown as LimitParams, state: undefined, costScale: 1 };
  readonly #out: AdmitResult = { allowed: false, binding: 'key', limit: 0, remaining: 0, resetAtMs: 0, retryAfterMs: 0 };

  constructor(store: ReplyStore, opts: RefusalCacheOptions = {}) {
    const max = opts.maxEntries ?? DEFAULT_REFUSAL_ENTRIES;
    if (!Number.isInteger(max) || max < 0) throw new RangeError(`RefusalCache: maxEntries must be an integer ≥ 0, got ${max}`);
    this.#store = store;
    this.#max = max;
    this.#mono = opts.monotonic ?? (() => performance.now());
    this.#active = opts.active ?? (() => true);
    this.#onLocal = opts.onLocalRefusal;
    this.#globalCredited = opts.globalCredited ?? (() => false);
    store.onConnectionEvent(() => this.clear());
  }

  /** Subjects remembered now. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Refuses locally when Redis certainly would (synchronously, the figures in an object reused by
   * the next call: copy them); otherwise asks Redis.
   */
  admit(req: AdmitRequest): AdmitResult | Promise<AdmitResult> {
    if (this.#max > 0 && this.#entries.size > 0 && this.#active()) {
      const e = this.#entries.get(req.key);
      if (e !== undefined) {
        const local = this.#check(e, req);
        if (local !== undefined) return local;
      }
    }
    const sentAt = this.#mono();
    return this.#store.admitReply(req).then(
      (reply) => this.#record(req, reply, sentAt),
      (err: unknown) => {
        this.clear();
        throw err;
      },
    );
  }

  /** The local refusal of `req` when Redis would certainly refuse it, else undefined (nothing is sent). */
  check(req: AdmitRequest): AdmitResult | undefined {
    if (this.#max === 0 || this.#entries.size === 0 || !this.#active()) return undefined;
    const e = this.#entries.get(req.key);
    return e === undefined ? undefined : this.#check(e, req);
  }

  /** Remembers a reply with the admission script's layout (a lease's too) to a request sent at `sentAt`. */
  remember(req: AdmitRequest, reply: AdmitReply, sentAt: number): void {
    this.#record(req, reply, sentAt);
  }

  #check(e: Entry, req: AdmitRequest): AdmitResult | undefined {
    const now = this.#mono();
    if (e.limit !== req.limit || e.global !== req.global || now >= e.restAt) {
      this.#entries.delete(req.key);
      return undefined;
    }
    const T = redisTimeBound(e.redisNow, now - e.sentAt);
    // A give-back credits the global shard: its remembered state is then no upper bound of Redis's.
    const g = this.#globalCredited() ? undefined : req.global;
    const d = decide(this.#bucket(e.limit, e.state), this.#global(g, e.gstate), T, req.cost, this.#scratch);
    if (d.allowed) return undefined;
    this.localRefusals++;
    this.#onLocal?.();
    const out = this.#out;
    out.allowed = false;
    out.binding = d.binding;
    out.limit = d.limit;
    out.remaining = d.remaining;
    out.resetAtMs = d.resetAtMs;
    out.retryAfterMs = d.retryAfterMs;
    return out;
  }

  #record(req: AdmitRequest, reply: AdmitReply, sentAt: number): AdmitResult {
    const allowed = reply[0] === 1;
    if (this.#max > 0 && (!allowed || reply[3] < req.cost)) {
      const redisNow = reply[6];
      const state = stateAt(reply, 7);
      const gstate = req.global === undefined ? undefined : stateAt(reply, 11);
      // When every bucket is back at rest nothing can be refused from this state any more.
      const g = req.global;
      const rest = decide(this.#bucket(req.limit, state), this.#global(g, gstate), redisNow, 0, this.#scratch);
      const restR = g === undefined || rest.key.resetAtMs > rest.global.resetAtMs ? rest.key.resetAtMs : rest.global.resetAtMs;
      const entries = this.#entries;
      if (entries.has(req.key)) entries.delete(req.key);
      else if (entries.size >= this.#max) entries.delete(entries.keys().next().value!);
      entries.set(req.key, { limit: req.limit, global: g, state, gstate, redisNow, sentAt, restAt: sentAt + (restR - redisNow) });
    } else if (this.#entries.size > 0) {
      this.#entries.delete(req.key);
    }
    return toResult(reply);
  }

  #bucket(params: LimitParams, state: BucketState | undefined): Bucket {
    const b = this.#kb;
    b.params = params;
    b.state = state;
    return b;
  }

  /** The global bucket's holder, charged `cost × shards` like the script's global shard. */
  #global(g: GlobalBucket | undefined, state: BucketState | undefined): Bucket | undefined {
    if (g === undefined) return undefined;
    const b = this.#gb;
    b.params = g.limit;
    b.state = state;
    b.costScale = this.#store.shards;
    return b;
  }

  /**
   * Drops the entry of `subject`'s own bucket (called by the quota cache when its record changes).
   * Its route buckets (`<subject>|<prefix>`) need no scan: a changed record is recompiled into new
   * `LimitParams` objects, which no remembered entry matches.
   */
  forget(subject: string): void {
    if (this.#entries.size > 0) this.#entries.delete(subject);
  }

  /** Drops every entry. */
  clear(): void {
    this.#entries.clear();
  }

  ready(timeoutMs?: number): Promise<void> {
    return this.#store.ready(timeoutMs);
  }

  async close(): Promise<void> {
    this.clear();
    await this.#store.close();
  }
}
