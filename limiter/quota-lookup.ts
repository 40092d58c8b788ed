/**
 * Looks up the subjects the sidecar's working set does not hold (README, "Working set"): every
 * subject first seen in one turn of the event loop goes to the control plane in one batched
 * `Lookup` call, and concurrent requests for one subject share one lookup. What it finds is
 * installed in the {@link QuotaCache} with its version (the cache decides between an answer and a
 * delta that raced it).
 *
 * Three bounds keep a flood of random keys cheap:
 * - a **negative cache** (LIMITER_NEGATIVE_CACHE_MAX entries for LIMITER_NEGATIVE_CACHE_TTL) of
 *   subjects the control plane does not know, forgotten for a subject when the watch stream says it
 *   was created: one lookup per random key per sidecar per TTL at most;
 * - a **per-address budget** of API keys a lookup found unknown (LIMITER_UNKNOWN_KEY_BUDGET per
 *   LIMITER_UNKNOWN_KEY_WINDOW): past it, keys that address presents and the sidecar does not hold
 *   are refused without a lookup until the window ends. Keys that exist never count;
 * - after {@link FAIL_FAST_AFTER} calls in a row failed (no answer between them), lookups fail at
 *   once for LIMITER_LOOKUP_TIMEOUT, so an unreachable control plane does not hold every
 *   first-seen request for a deadline.
 *
 * One failed call does not trip that: under load on a 20M-key table, one Lookup in a few hundred
 * outlasted its 1 s deadline (a batch whose pages came from disk) while the calls beside it were
 * answered in milliseconds, and when one such call stopped every lookup for the next second, a
 * quarter of a quiet machine's traffic got the unknown-key 429 (bench/RESULTS.md, "Quota working
 * set", third run). Calls in flight at once share the fate of a control plane that is really gone:
 * every one of them fails, so the rule still trips within one deadline of an outage.
 *
 * A failed lookup answers "no record" for that request and caches nothing: with the control plane
 * down, a key not held is refused (the decoy), never admitted. An outage never makes a key exist.
 */
import { LRUCache } from 'lru-cache';
import type { Quota } from '../proto/gen/quota/v1/quota_pb.js';
import type { Clock } from '../shared/clock.js';
import type { Logger } from '../shared/log.js';
import { LimitedLog } from '../shared/log-limit.js';
import type { CompiledQuota, QuotaCache } from './quota-cache.js';

/** Most subjects in one call (the control plane refuses more: grpc-sync.ts MAX_LOOKUP_SUBJECTS). */
export const LOOKUP_BATCH_MAX = 1000;
/** Failed calls in a row (no answer between them) after which lookups fail at once for a while. */
export const FAIL_FAST_AFTER = 3;
/** Addresses whose unknown-key budget is tracked at once (least recently charged forgotten first). */
const BUDGET_ADDRESSES = 100_000;
/** Addresses remembered per lookup in flight, to charge when it finds nothing. */
const ADDRESSES_PER_LOOKUP = 8;

/** The control plane's answer to one batch. */
export interface LookupAnswer {
  quotas: readonly Quota[];
  unknown: readonly string[];
  /** The table version the control plane read at. */
  version: number;
}

export interface QuotaLookupOptions {
  cache: QuotaCache;
  /** One batched call to the control plane (QuotaSync.lookup). */
  call: (subjects: string[]) => Promise<LookupAnswer>;
  clock: Clock;
  log: Logger;
  negativeMax: number;
  negativeTtlMs: number;
  /** Unknown keys per address per window; 0 turns the budget off. */
  budget: number;
  budgetWindowMs: number;
  /** After {@link FAIL_FAST_AFTER} failed calls in a row, new lookups fail at once for this long, ms. */
  failFastMs: number;
  /** Runs the batch after this turn of the event loop. Default setImmediate. */
  defer?: (fn: () => void) => void;
  /** After a batch installed records (the last-known-good file is rewritten). */
  onInstalled?: () => void;
}

/**
 * What the data plane asks about a subject its cache does not hold: {@link QuotaLookup} (one
 * thread, or the main thread of `LIMITER_WORKERS`), or a worker thread's `QuotaReplica`
 * (quota-replica.ts), which asks the main thread.
 */
export interface SubjectLookup {
  /** The subject's record (undefined: none, or not known now); `address` is charged when an API key turns out unknown. */
  find(subject: string, address?: string): CompiledQuota | undefined | Promise<CompiledQuota | undefined>;
}

/** Counts for /metrics (`ratelimit_quota_lookups_total{result}`). */
export interface LookupCounts {
  found: number;
  unknown: number;
  failed: number;
  /** Answered from the negative cache, no call. */
  negative: number;
  /** Refused without a call: the address spent its unknown-key budget. */
  budget: number;
  batches: number;
}

interface Waiting {
  promise: Promise<CompiledQuota | undefined>;
  resolve: (q: CompiledQuota | undefined) => void;
  addresses: string[];
}

export class QuotaLookup implements SubjectLookup {
  readonly counts: LookupCounts = { found: 0, unknown: 0, failed: 0, negative: 0, budget: 0, batches: 0 };
  private readonly negative: LRUCache<string, number>;
  private readonly spent = new LRUCache<string, { count: number; resetAt: number }>({ max: BUDGET_ADDRESSES });
  private readonly waiting = new Map<string, Waiting>();
  private queue: string[] = [];
  private scheduled = false;
  private downUntil = 0;
  /** Calls failed since the last one answered. */
  private failedInRow = 0;
  private readonly failures: LimitedLog;
  private readonly defer: (fn: () => void) => void;

  constructor(private readonly o: QuotaLookupOptions) {
    this.negative = new LRUCache<string, number>({ max: Math.max(1, o.negativeMax) });
    this.defer = o.defer ?? ((fn) => setImmediate(fn));
    this.failures = new LimitedLog(o.log, 'quota lookup failed; keys not held are refused until the control plane answers', o.clock);
    o.cache.onUnheld = (subject, created) => {
      if (created) this.negative.delete(subject);
    };
    o.cache.onReset = () => this.negative.clear();
  }

  /** Subjects in the negative cache (expired ones included until touched). */
  get negativeSize(): number {
    return this.negative.size;
  }

  /**
   * The record of a subject the cache does not hold: at once when the answer is known here (the
   * negative cache, a spent budget, a control plane known to be down: all undefined), else a
   * promise settled by the next batch. Never rejects. `address` (API keys only) is charged when
   * the key turns out unknown.
   */
  find(subject: string, address?: string): CompiledQuota | undefined | Promise<CompiledQuota | undefined> {
    const now = this.o.clock.now();
    const expires = this.negative.get(subject);
    if (expires !== undefined) {
      if (expires > now) {
        this.counts.negative++;
        return undefined;
      }
      this.negative.delete(subject);
    }
    const w = this.waiting.get(subject);
    if (w !== undefined) {
      if (address !== undefined && w.addresses.length < ADDRESSES_PER_LOOKUP && !w.addresses.includes(address)) w.addresses.push(address);
      return w.promise;
    }
    if (address !== undefined && this.overBudget(address, now)) {
      this.counts.budget++;
      return undefined;
    }
    if (now < this.downUntil) {
      this.counts.failed++;
      return undefined;
    }
    let resolve!: (q: CompiledQuota | undefined) => void;
    const promise = new Promise<CompiledQuota | undefined>((r) => (resolve = r));
    this.waiting.set(subject, { promise, resolve, addresses: address === undefined ? [] : [address] });
    this.o.cache.beginLookup(subject);
    this.queue.push(subject);
    if (!this.scheduled) {
      this.scheduled = true;
      this.defer(() => this.flush());
    }
    return promise;
  }

  private flush(): void {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    for (let i = 0; i < queue.length; i += LOOKUP_BATCH_MAX) void this.send(queue.slice(i, i + LOOKUP_BATCH_MAX));
  }

  private async send(subjects: string[]): Promise<void> {
    this.counts.batches++;
    let answer: LookupAnswer;
    try {
      answer = await this.o.call(subjects);
    } catch (err) {
      if (++this.failedInRow >= FAIL_FAST_AFTER) this.downUntil = this.o.clock.now() + this.o.failFastMs;
      this.failures.warn({ err: { message: err instanceof Error ? err.message : String(err) }, subjects: subjects.length });
      for (const s of subjects) {
        this.o.cache.abortLookup(s);
        this.settle(s, undefined);
      }
      this.counts.failed += subjects.length;
      return;
    }
    this.failedInRow = 0;
    const now = this.o.clock.now();
    let installed = false;
    const answered = new Set<string>();
    for (const q of answer.quotas) {
      if (!this.waiting.has(q.subjectId) || answered.has(q.subjectId)) continue;
      answered.add(q.subjectId);
      const c = this.o.cache.finishLookup(q.subjectId, q, answer.version);
      installed ||= c !== undefined;
      this.counts.found++;
      this.settle(q.subjectId, c);
    }
    for (const s of answer.unknown) {
      const w = this.waiting.get(s);
      if (w === undefined || answered.has(s)) continue;
      answered.add(s);
      // A creation that raced the lookup wins over its "unknown" (QuotaCache.finishLookup).
      const c = this.o.cache.finishLookup(s, undefined, answer.version);
      if (c === undefined) {
        this.counts.unknown++;
        this.negative.set(s, now + this.o.negativeTtlMs);
        for (const a of w.addresses) this.charge(a, now);
      } else installed = true;
      this.settle(s, c);
    }
    // A subject the answer did not mention: nothing is known about it, so nothing is kept.
    for (const s of subjects) {
      if (answered.has(s)) continue;
      this.o.cache.abortLookup(s);
      this.counts.failed++;
      this.settle(s, undefined);
    }
    if (installed) this.o.onInstalled?.();
  }

  private settle(subject: string, q: CompiledQuota | undefined): void {
    const w = this.waiting.get(subject);
    if (w === undefined) return;
    this.waiting.delete(subject);
    w.resolve(q);
  }

  private overBudget(address: string, now: number): boolean {
    if (this.o.budget <= 0) return false;
    const e = this.spent.get(address);
    return e !== undefined && e.resetAt > now && e.count >= this.o.budget;
  }

  private charge(address: string, now: number): void {
    if (this.o.budget <= 0) return;
    const e = this.spent.get(address);
    if (e === undefined || e.resetAt <= now) this.spent.set(address, { count: 1, resetAt: now + this.o.budgetWindowMs });
    else e.count++;
  }
}
