/**
 * Approximate mode: a quota with `accuracy: approximate` (token or leaky bucket) is not decided by
 * Redis request by request. A sidecar takes a lease of a few tokens from the shared buckets (the
 * subject's and the global one, both or neither, lease-script.ts), spends it locally (a synchronous
 * answer, no round trip), and gives back what it did not spend once the lease is past its TTL.
 *
 * Lease size (README, "Approximate mode"): `min(share, ⌈rate × ttl⌉)`, at least the request's cost,
 * where `share = ⌊capacity / (4 × N)⌋`, `capacity` the bucket's burst, `N` the number of sidecars
 * that registered as lessees within the last three heartbeats (lease-peers, every 2 s), and `rate`
 * this sidecar's recent spending on the subject (tokens per ms, averaged over its last leases).
 * When `share` is below the cost (a small limit, many sidecars) or N is not known yet (or no
 * heartbeat has succeeded for three periods), the request is decided exactly instead. A lease denied by Redis (fewer tokens there than the cost) is a
 * refusal with Redis's figures, remembered by the refusal cache like any other.
 *
 * The bound (property-tested in test/limiter/admission/lease-bound.test.ts): every token spent
 * locally was taken from Redis, and gives credit back only what was never spent, so over any span
 * of `t` ms a subject is admitted at most what its bucket admits exactly (`capacity + rate × t /
 * interval`) plus the tokens its leases held unspent when the span began: at most one lease per
 * sidecar, so `Σ_i share_i ≤ capacity / 4` when every sidecar counts all N. A dead sidecar's lease
 * is never given back: an under-count of at most one share, healed by the refill.
 *
 * Headers of a locally admitted request are approximate: `remaining` is Redis's remaining at the
 * lease plus the lease's unspent tokens (capped at the limit), `reset` the lease's.
 *
 * Timing: leases expire `ttlMs` (default 1000) after their take was *sent*, on the local monotonic
 * clock; expired leases are given back by a sweep every `ttlMs / 2`, and before a new lease of the
 * same subject. While the caller's breaker is not closed (`active()` false) requests go to the
 * exact path (the gate's fail modes apply as without leases); leases held then simply expire, and
 * a give-back that fails is dropped (an under-count).
 *
 * Bounded: at most `maxEntries` subjects (default {@link DEFAULT_LEASE_ENTRIES}), the oldest given
 * back and evicted first.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { CounterStoreError, type AdmitRequest, type AdmitResult, type CounterStore, type GlobalBucket } from './counter-store.js';
import { toResult, type AdmitReply, type RedisCounterStore } from './counter-store.redis.js';
import { shardOf } from './key-layout.js';
import { LEASE_GIVE_LUA, LEASE_PEERS_LUA, LEASE_TAKE_LUA } from './lease-script.js';
import { ALGORITHM_CODE, type LimitParams } from './limit.js';
import type { RefusalCache } from './refusal-cache.js';

export const DEFAULT_LEASE_TTL_MS = 1000;
export const DEFAULT_LEASE_ENTRIES = 100_000;
/** The share of a bucket's capacity all sidecars' leases may hold together. */
export const LEASE_SHARE = 0.25;
export const PEERS_PERIOD_MS = 2000;

/** Whether a limit can be leased: the bucket algorithms (a window's count cannot be given back). */
export function leasable(l: LimitParams): boolean {
  return l.algorithm === 'token_bucket' || l.algorithm === 'leaky_bucket';
}

/** One subject's lease on one sidecar. */
export interface Lease {
  readonly key: string;
  limit: LimitParams;
  global: GlobalBucket | undefined;
  /** Tokens taken and not spent yet. */
  tokens: number;
  /** Local monotonic time the current lease's take was sent (0: none taken yet). */
  takenAt: number;
  expiresAt: number;
  /** Tokens spent from the current lease. */
  spent: number;
  /** Recent spending on this sidecar, tokens per ms. */
  rate: number;
  /** Redis's remaining and reset at the last grant, for headers. */
  remaining: number;
  resetAtMs: number;
  /** A take in flight, which later requests wait for. */
  pending: Promise<unknown> | undefined;
}

/**
 * The pure core of leasing, one per sidecar: which lease to spend from, how large a lease to ask
 * for, what to give back. No I/O and no clock of its own (times are passed in), so the bound can
 * be property-tested with a model of N sidecars on one bucket.
 */
export class LeaseBook {
  readonly #leases = new Map<string, Lease>();
  constructor(
    readonly ttlMs: number = DEFAULT_LEASE_TTL_MS,
    readonly maxEntries: number = DEFAULT_LEASE_ENTRIES,
  ) {}

  get size(): number {
    return this.#leases.size;
  }

  get(key: string): Lease | undefined {
    return this.#leases.get(key);
  }

  /**
   * Spends `cost` from `key`'s lease when it is live (same limits, not expired, enough tokens).
   * Returns the lease spent from, or undefined.
   */
  spend(key: string, limit: LimitParams, global: GlobalBucket | undefined, cost: number, now: number): Lease | undefined {
    const l = this.#leases.get(key);
    if (l === undefined || l.limit !== limit || l.global !== global || now >= l.expiresAt || l.tokens < cost) return undefined;
    l.tokens -= cost;
    l.spent += cost;
    return l;
  }

  /**
   * How many tokens to ask for, or 0 when this request should be decided exactly (the share per
   * sidecar is below its cost, or the number of sidecars is not known).
   */
  want(key: string, limit: LimitParams, cost: number, now: number, peers: number): number {
    if (peers < 1) return 0;
    const share = Math.floor((limit.burst * LEASE_SHARE) / peers);
    if (share < cost || cost < 1) return 0;
    const l = this.#leases.get(key);
    let rate = 0;
    if (l !== undefined && l.takenAt > 0 && l.limit === limit) {
      const observed = l.spent / Math.max(1, now - l.takenAt);
      rate = l.rate === 0 ? observed : (l.rate + observed) / 2;
    }
    const n = Math.ceil(rate * this.ttlMs);
    return n < cost ? cost : n > share ? share : n;
  }

  /**
   * Takes the unspent tokens out of `key`'s lease before a new take (they are to be given back):
   * returns the lease and how many, or undefined when there are none.
   */
  reclaim(key: string): { lease: Lease; tokens: number } | undefined {
    const l = this.#leases.get(key);
    if (l === undefined || l.tokens <= 0) return undefined;
    const tokens = l.tokens;
    l.tokens = 0;
    return { lease: { ...l, pending: undefined }, tokens };
  }

  /**
   * `key`'s lease, created empty when there is none (the oldest pushed out by the bound goes to
   * `evicted`, to give back); a lease made under other limits (a quota change) gives its tokens to
   * `evicted` and starts over.
   */
  open(key: string, limit: LimitParams, global: GlobalBucket | undefined, evicted: (l: Lease, tokens: number) => void): Lease {
    let l = this.#leases.get(key);
    if (l === undefined) {
      if (this.#leases.size >= this.maxEntries) {
        const [oldKey, old] = this.#leases.entries().next().value!;
        this.#leases.delete(oldKey);
        if (old.tokens > 0) evicted(old, old.tokens);
      }
      l = { key, limit, global, tokens: 0, takenAt: 0, expiresAt: 0, spent: 0, rate: 0, remaining: 0, resetAtMs: 0, pending: undefined };
      this.#leases.set(key, l);
    } else if (l.limit !== limit || l.global !== global) {
      if (l.tokens > 0) evicted({ ...l }, l.tokens);
      l.tokens = 0;
      l.rate = 0;
      l.takenAt = 0;
      l.expiresAt = 0;
      l.limit = limit;
      l.global = global;
    }
    return l;
  }

  /**
   * Records a grant of `granted` tokens for a take sent at `sentAt`, `cost` of which the waiting
   * request spends at once.
   */
  granted(
    key: string,
    limit: LimitParams,
    global: GlobalBucket | undefined,
    granted: number,
    cost: number,
    sentAt: number,
    figures: { remaining: number; resetAtMs: number },
    evicted: (l: Lease, tokens: number) => void,
  ): Lease {
    const l = this.open(key, limit, global, evicted);
    if (l.takenAt > 0) {
      const observed = l.spent / Math.max(1, sentAt - l.takenAt);
      l.rate = l.rate === 0 ? observed : (l.rate + observed) / 2;
    }
    // Unspent tokens of an overlapping earlier take are kept (they were taken too).
    l.tokens += granted - cost;
    l.spent = cost;
    l.takenAt = sentAt;
    l.expiresAt = sentAt + this.ttlMs;
    l.remaining = figures.remaining;
    l.resetAtMs = figures.resetAtMs;
    return l;
  }

  /**
   * Expired leases at `now`: each one's unspent tokens go to `give` (and leave the lease); leases
   * idle for two TTLs with nothing left are forgotten.
   */
  sweep(now: number, give: (l: Lease, tokens: number) => void): void {
    for (const [key, l] of this.#leases) {
      if (l.pending !== undefined || now < l.expiresAt) continue;
      if (l.tokens > 0) {
        const n = l.tokens;
        l.tokens = 0;
        give(l, n);
      } else if (now >= l.expiresAt + this.ttlMs) {
        this.#leases.delete(key);
      }
    }
  }

  /** Every lease's unspent tokens to `give`, and forgets them all. */
  drain(give: (l: Lease, tokens: number) => void): void {
    for (const l of this.#leases.values()) if (l.tokens > 0) give(l, l.tokens);
    this.#leases.clear();
  }
}

export interface LeaseStoreOptions {
  ttlMs?: number;
  maxEntries?: number;
  /** Local monotonic clock, ms (default `performance.now`). */
  monotonic?: () => number;
  /** False while leases must not be used (the breaker is not closed). */
  active?: () => boolean;
  /** This sidecar's lessee id (default host, pid and a random part). */
  id?: string;
  /** Lease figures for metrics. */
  onLease?: (event: 'granted' | 'denied' | 'local_admit', tokens: number) => void;
  onGiveBack?: (tokens: number) => void;
  /** A failed give-back or heartbeat (the lease tokens are lost: an under-count). */
  onError?: (err: unknown) => void;
  /** false: no sweep timer (tests call `sweep()`). Default true. */
  sweepTimer?: boolean;
}

/**
 * Where leases come from: the shared store's take and give-back scripts and the lessee count
 * ({@link RedisLessor}). An interface so the bound can be property-tested over a model bucket.
 */
export interface Lessor {
  /** Takes up to `want` tokens, at least `req.cost` or none: the take script's reply (granted last). */
  take(req: AdmitRequest, want: number): Promise<AdmitReply>;
  /** Gives `tokens` unspent tokens of `lease` back. */
  give(lease: Lease, tokens: number): Promise<unknown>;
  /** Registers `id` as a lessee and counts the ones seen within `ttlMs`. */
  peers(id: string, ttlMs: number): Promise<number>;
}

interface LeaseCommands {
  rlLeaseTake1(key: string, ...argv: (number | string)[]): Promise<AdmitReply>;
  rlLeaseTake2(key: string, global: string, ...argv: (number | string)[]): Promise<AdmitReply>;
  rlLeaseGive1(key: string, ...argv: (number | string)[]): Promise<number>;
  rlLeaseGive2(key: string, global: string, ...argv: (number | string)[]): Promise<number>;
  rlLeasePeers(key: string, id: string, ttlMs: number): Promise<number>;
}

/** Leases from the Redis counter store (lease-script.ts), under the same keys as its decisions. */
export class RedisLessor implements Lessor {
  readonly #redis: RedisCounterStore;
  readonly #cmd: LeaseCommands;
  readonly #peersKey: string;

  constructor(redis: RedisCounterStore) {
    this.#redis = redis;
    const head = redis.globalShardKey('x', 0);
    this.#peersKey = head.slice(0, head.length - 'g:x'.length) + 'lessees';
    const c = redis.client;
    c.defineCommand('rlLeaseTake1', { lua: LEASE_TAKE_LUA, numberOfKeys: 1 });
    c.defineCommand('rlLeaseTake2', { lua: LEASE_TAKE_LUA, numberOfKeys: 2 });
    c.defineCommand('rlLeaseGive1', { lua: LEASE_GIVE_LUA, numberOfKeys: 1 });
    c.defineCommand('rlLeaseGive2', { lua: LEASE_GIVE_LUA, numberOfKeys: 2 });
    c.defineCommand('rlLeasePeers', { lua: LEASE_PEERS_LUA, numberOfKeys: 1 });
    this.#cmd = c as unknown as LeaseCommands;
  }

  /** Under the store's loop-aware deadline (RedisCounterStore.guard), as a decision is. */
  take(req: AdmitRequest, want: number): Promise<AdmitReply> {
    const L = req.limit;
    const g = req.global;
    const key = this.#redis.bucketKey(req.key);
    if (g === undefined) {
      return this.#redis.guard(this.#cmd.rlLeaseTake1(key, ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, want, req.cost));
    }
    const G = g.limit;
    const S = this.#redis.shards;
    return this.#redis.guard(
      this.#cmd.rlLeaseTake2(
        key,
        this.#redis.globalShardKey(g.name, S === 1 ? 0 : shardOf(req.key, S)),
        ...[ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, want],
        ...[ALGORITHM_CODE[G.algorithm], G.rate, G.burst, G.intervalMs, S, req.cost],
      ),
    );
  }

  give(l: Lease, tokens: number): Promise<number> {
    const L = l.limit;
    const g = l.global;
    const key = this.#redis.bucketKey(l.key);
    if (g === undefined) return this.#cmd.rlLeaseGive1(key, ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, tokens);
    const S = this.#redis.shards;
    return this.#cmd.rlLeaseGive2(
      key,
      this.#redis.globalShardKey(g.name, S === 1 ? 0 : shardOf(l.key, S)),
      ...[ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, tokens],
      ...[ALGORITHM_CODE[g.limit.algorithm], g.limit.rate, g.limit.burst, g.limit.intervalMs, tokens * S],
    );
  }

  peers(id: string, ttlMs: number): Promise<number> {
    return this.#cmd.rlLeasePeers(this.#peersKey, id, ttlMs).then(Number);
  }
}

/**
 * The counter store of the sidecar over Redis: approximate requests through leases, everything
 * else through `inner` (the refusal cache over the Redis store).
 */
export class LeaseStore implements CounterStore {
  readonly kind = 'redis' as const;
  readonly book: LeaseBook;
  /** Sidecars counted as lessees at the last heartbeat (0 until the first). */
  peers = 0;
  readonly #inner: CounterStore;
  readonly #refusals: RefusalCache | undefined;
  readonly #lessor: Lessor;
  readonly #mono: () => number;
  readonly #active: () => boolean;
  readonly #o: LeaseStoreOptions;
  readonly #id: string;
  readonly #sweep: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Local monotonic time of the last successful heartbeat. */
  #lastBeat = -Infinity;
  readonly #out: AdmitResult = { allowed: true, binding: 'key', limit: 0, remaining: 0, resetAtMs: 0, retryAfterMs: 0 };
  #closed = false;

  /**
   * @param inner the exact path (the refusal cache over the Redis store)
   * @param refusals answers refused leases' subjects locally while Redis certainly would refuse
   */
  constructor(inner: CounterStore, lessor: Lessor, refusals: RefusalCache | undefined, opts: LeaseStoreOptions = {}) {
    const ttl = opts.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    if (!(ttl >= 10)) throw new RangeError(`LeaseStore: ttlMs must be ≥ 10, got ${ttl}`);
    this.book = new LeaseBook(ttl, opts.maxEntries ?? DEFAULT_LEASE_ENTRIES);
    this.#inner = inner;
    this.#refusals = refusals;
    this.#lessor = lessor;
    this.#o = opts;
    this.#mono = opts.monotonic ?? (() => performance.now());
    this.#active = opts.active ?? (() => true);
    this.#id = opts.id ?? `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.#sweep = opts.sweepTimer === false ? undefined : setInterval(() => this.sweep(), Math.max(5, Math.floor(ttl / 2))).unref();
  }

  /** Registers as a lessee now and every {@link PEERS_PERIOD_MS}; resolves after the first attempt. */
  async start(): Promise<void> {
    await this.beat();
    this.#heartbeat ??= setInterval(() => void this.beat(), PEERS_PERIOD_MS).unref();
  }

  /**
   * One heartbeat (also run by a timer every {@link PEERS_PERIOD_MS}). When none has succeeded for
   * as long as a lessee stays counted (three periods), the count is dropped to 0 (approximate
   * requests decided exactly): sidecars may have joined since, and shares sized for the old count
   * would together exceed the bound.
   */
  async beat(): Promise<void> {
    try {
      this.peers = await this.#lessor.peers(this.#id, 3 * PEERS_PERIOD_MS);
      this.#lastBeat = this.#mono();
    } catch (err) {
      if (this.#mono() - this.#lastBeat >= 3 * PEERS_PERIOD_MS) this.peers = 0;
      this.#o.onError?.(err);
    }
  }

  admit(req: AdmitRequest): AdmitResult | Promise<AdmitResult> {
    if (req.accuracy !== 'approximate' || !leasable(req.limit) || !this.#active()) return this.#inner.admit(req);
    const now = this.#mono();
    const l = this.book.spend(req.key, req.limit, req.global, req.cost, now);
    if (l !== undefined) {
      this.#o.onLease?.('local_admit', req.cost);
      const out = this.#out;
      out.limit = req.limit.burst;
      const rem = l.remaining + l.tokens;
      out.remaining = rem < out.limit ? rem : out.limit;
      out.resetAtMs = l.resetAtMs;
      return out;
    }
    const pending = this.book.get(req.key)?.pending;
    if (pending !== undefined) return pending.then(() => this.admit(req));
    const want = this.book.want(req.key, req.limit, req.cost, now, this.peers);
    if (want === 0) return this.#inner.admit(req);
    // A subject Redis refused moments ago is refused here while Redis certainly would.
    const refused = this.#refusals?.check(req);
    if (refused !== undefined) return refused;
    return this.#take(req, want, now);
  }

  #take(req: AdmitRequest, want: number, sentAt: number): Promise<AdmitResult> {
    const back = this.book.reclaim(req.key);
    if (back !== undefined) this.#give(back.lease, back.tokens);
    const entry = this.book.open(req.key, req.limit, req.global, (old, n) => this.#give(old, n));
    const L = req.limit;
    const g = req.global;
    const p = this.#lessor.take(req, want);
    const done = p.then(
      (reply) => {
        const granted = reply[reply.length - 1]!;
        const r = toResult(reply);
        if (granted < req.cost) {
          this.#o.onLease?.('denied', 0);
          this.#refusals?.remember(req, reply, sentAt);
          return r;
        }
        this.#o.onLease?.('granted', granted);
        const l = this.book.granted(req.key, L, g, granted, req.cost, sentAt, r, (old, n) => this.#give(old, n));
        const rem = r.remaining + l.tokens;
        r.remaining = rem < r.limit ? rem : r.limit;
        return r;
      },
      (err: unknown) => {
        // As for a failed decision: Redis may have lost its state, or be about to.
        this.#refusals?.clear();
        throw toStoreError(err);
      },
    );
    // Later requests of the subject wait for this take instead of sending their own.
    entry.pending = done;
    const clear = () => {
      if (entry.pending === done) entry.pending = undefined;
    };
    done.then(clear, clear);
    return done;
  }

  #give(l: Lease, tokens: number): void {
    if (tokens <= 0 || this.#closed) return;
    this.#lessor.give(l, tokens).then(
      () => this.#o.onGiveBack?.(tokens),
      (err: unknown) => this.#o.onError?.(err),
    );
  }

  /** Gives back the unspent tokens of expired leases (also run by a timer every TTL / 2). */
  sweep(): void {
    this.book.sweep(this.#mono(), (l, n) => this.#give(l, n));
  }

  ready(timeoutMs?: number): Promise<void> {
    return this.#inner.ready(timeoutMs);
  }

  /** Gives every lease back (best effort), then closes the inner store. */
  async close(): Promise<void> {
    clearInterval(this.#sweep);
    clearInterval(this.#heartbeat);
    this.book.drain((l, n) => this.#give(l, n));
    this.#closed = true;
    await this.#inner.close();
  }
}

function toStoreError(err: unknown): CounterStoreError {
  if (err instanceof CounterStoreError) return err;
  if (err instanceof Error && err.message === 'Command timed out') {
    return new CounterStoreError('counter_store_timeout', 'redis: no answer within the deadline', err);
  }
  return new CounterStoreError('counter_store_unavailable', 'redis: the counter store cannot answer', err);
}
