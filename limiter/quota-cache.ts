/**
 * The sidecar's local copy of the quota table, compiled for the request path.
 *
 * Filled from a quota snapshot (a JSON file for standalone use, or the control plane's stream) and
 * applied in version order: an older snapshot is ignored; a delta applies on top of the version it
 * was cut from. Records are compiled once when they arrive (limit parameters, route rules sorted
 * longest prefix first), so a lookup is one or two map reads and no allocation.
 *
 * Plans are quota records whose subject is `plan:<name>`. A record with `rate` 0 and a `plan` is a
 * reference: its limits, cost, route rules and fail mode come from that plan at lookup time, so a
 * plan change applies to every key on it at once; `shadow` applies when either sets it.
 *
 * A working set, not a replica (README, "Working set"): the plans are held whole, key records only
 * once seen. With a control plane, a subject not held is looked up (quota-lookup.ts) and installed
 * here with the version it was read at; deltas update the records held and skip the rest. Bounded:
 * at most `maxRecords` non-plan records, least recently used evicted (counted by `evictions`); an
 * evicted key is looked up again on its next request, never refused as unknown. Standalone (a quota
 * file, nobody to ask), the sidecar sizes the bound to hold the whole file.
 *
 * Versions (seed 001: "versioned snapshots prevent stale unlimited plans"): a record is replaced
 * only by one at least as new; a lookup in flight remembers the newest change a delta brought for
 * its subject, and when its answer is older that change wins ({@link QuotaCache.finishLookup}).
 */
import { readFile } from 'node:fs/promises';
import { create } from '@bufbuild/protobuf';
import { LRUCache } from 'lru-cache';
import { Accuracy, Algorithm, FailMode, SnapshotSchema, type Quota, type Snapshot } from '../proto/gen/quota/v1/quota_pb.js';
import { fromJson } from '../shared/proto-json.js';
import type { LimitParams } from './admission/limit.js';
import type { Accuracy as AccuracyName } from './admission/counter-store.js';

export type FailModeName = 'open' | 'closed';

export interface CompiledRule {
  /** Path prefix, matched on a segment boundary. */
  prefix: string;
  /** Upper-case methods; empty means every method. */
  methods: readonly string[];
  cost: number;
  /** Set when the rule overrides rate/burst: the route gets its own bucket with these limits. */
  limit: LimitParams | null;
  /** Suffix of that bucket's key. */
  bucketSuffix: string;
}

export interface CompiledQuota {
  subject: string;
  /** Plan name shown in the RateLimit-Policy header; `default` when the record names none. */
  policy: string;
  /** null for a plan reference (rate 0): resolve through `plan`. */
  limit: LimitParams | null;
  plan: string;
  cost: number;
  failMode: FailModeName | null;
  shadow: boolean;
  version: number;
  rules: readonly CompiledRule[];
  /** Seconds the limit is counted over, for the IETF RateLimit-Policy `w` parameter. */
  windowSec: number;
  /** `approximate` only for a token or leaky bucket that asks for it (lease.ts); else `exact`. */
  accuracy: AccuracyName;
  /** The record as received, for the last-known-good file (snapshot-store.ts). */
  source: Quota;
}

const ALGORITHM_NAMES: Record<number, LimitParams['algorithm']> = {
  [Algorithm.TOKEN_BUCKET]: 'token_bucket',
  [Algorithm.SLIDING_WINDOW]: 'sliding_window',
  [Algorithm.LEAKY_BUCKET]: 'leaky_bucket',
  [Algorithm.FIXED_WINDOW]: 'fixed_window',
};

/** interval_ms defaults to 1000 (README, "Quota records"). */
const DEFAULT_INTERVAL_MS = 1000;
const POLICY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

function limitOf(algorithm: Algorithm, rate: number, burst: number, intervalMs: number): LimitParams {
  return {
    algorithm: ALGORITHM_NAMES[algorithm] ?? 'token_bucket',
    rate,
    // A record without a burst allows no burst above its rate.
    burst: burst > 0 ? burst : rate,
    intervalMs: intervalMs > 0 ? intervalMs : DEFAULT_INTERVAL_MS,
  };
}

/** Compiles one record for the request path. */
export function compileQuota(q: Quota): CompiledQuota {
  const intervalMs = q.intervalMs > 0 ? q.intervalMs : DEFAULT_INTERVAL_MS;
  const limit = q.rate > 0 ? limitOf(q.algorithm, q.rate, q.burst, intervalMs) : null;
  const rules: CompiledRule[] = q.routes
    .map((r) => {
      const prefix = r.pathPrefix.length > 1 ? r.pathPrefix.replace(/\/+$/, '') : r.pathPrefix;
      const overrides = r.rate !== undefined || r.burst !== undefined;
      const rate = r.rate ?? q.rate;
      return {
        prefix,
        methods: r.methods.map((m) => m.toUpperCase()),
        // A rule without a cost of its own takes the quota's (proto: 0 means the quota's cost).
        cost: r.cost > 0 ? r.cost : q.cost > 0 ? q.cost : 1,
        limit: overrides && rate > 0 ? limitOf(q.algorithm, rate, r.burst ?? q.burst, intervalMs) : null,
        bucketSuffix: `|${prefix}`,
      };
    })
    .sort((a, b) => b.prefix.length - a.prefix.length);
  const policy = q.plan && POLICY_NAME.test(q.plan) ? q.plan : q.subjectId.startsWith('plan:') ? q.subjectId.slice(5) : 'default';
  return {
    subject: q.subjectId,
    policy: POLICY_NAME.test(policy) ? policy : 'default',
    limit,
    plan: q.plan,
    cost: q.cost > 0 ? q.cost : 1,
    failMode: q.failMode === FailMode.OPEN ? 'open' : q.failMode === FailMode.CLOSED ? 'closed' : null,
    shadow: q.shadow,
    version: Number(q.version),
    rules,
    windowSec: Math.max(1, Math.round(intervalMs / 1000)),
    // The control plane refuses approximate windows; a hand-written quota file is held exact.
    accuracy:
      q.accuracy === Accuracy.APPROXIMATE && (q.algorithm === Algorithm.TOKEN_BUCKET || q.algorithm === Algorithm.LEAKY_BUCKET)
        ? 'approximate'
        : 'exact',
    source: q,
  };
}

/** The first rule (longest prefix first) that matches this method and path. */
export function matchRule(rules: readonly CompiledRule[], method: string, path: string): CompiledRule | undefined {
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i]!;
    if (!path.startsWith(r.prefix)) continue;
    const next = path.charCodeAt(r.prefix.length);
    if (r.prefix !== '/' && !(Number.isNaN(next) || next === 47 || next === 63)) continue;
    if (r.methods.length === 0 || r.methods.includes(method)) return r;
  }
  return undefined;
}

export interface ApplyResult {
  applied: boolean;
  version: number;
  /** Why a snapshot was not applied (older than ours, or a delta from another base). */
  reason?: 'stale' | 'base_mismatch';
}

/** The newest change a delta brought for a subject whose lookup is in flight. */
interface SeenChange {
  /** The record's version for an upsert; the delta's version for a delete (an upper bound of it). */
  version: number;
  quota: Quota | undefined;
}

interface InFlightLookup {
  seen: SeenChange | undefined;
  /** A full snapshot arrived meanwhile (changes may have been missed): its answer is not kept. */
  void: boolean;
}

export class QuotaCache {
  private readonly records: LRUCache<string, CompiledQuota>;
  private readonly plans = new Map<string, CompiledQuota>();
  private readonly lookups = new Map<string, InFlightLookup>();
  private versionApplied = 0;
  private appliedAtMs = 0;
  evictions = 0;
  /** Called with each subject a snapshot writes or deletes (the refusal cache forgets it). */
  onChange: ((subject: string) => void) | undefined;
  /**
   * Called for a change to a subject not held (and not being looked up), which is dropped;
   * `created` for an upsert (the negative cache forgets the subject), false for a delete.
   */
  onUnheld: ((subject: string, created: boolean) => void) | undefined;
  /** Called after a full snapshot replaced everything (the negative cache is cleared). */
  onReset: (() => void) | undefined;
  /**
   * True once a snapshot held an approximate quota (plans included), until a full snapshot holds
   * none: leases may then credit the global bucket (the refusal cache's `globalCredited`). A delta
   * only ever sets it, so it errs towards true.
   */
  approximate = false;

  constructor(private readonly maxRecords: number) {
    this.records = new LRUCache<string, CompiledQuota>({
      max: maxRecords,
      dispose: (_v, _k, reason) => {
        if (reason === 'evict') this.evictions++;
      },
    });
  }

  get version(): number {
    return this.versionApplied;
  }
  /** When the last snapshot was applied (epoch ms), for the max-age rule. */
  get appliedAt(): number {
    return this.appliedAtMs;
  }
  get size(): number {
    return this.records.size + this.plans.size;
  }
  /** Key records held (plans not counted): the gauge `ratelimit_quota_records_held`. */
  get held(): number {
    return this.records.size;
  }

  /**
   * Applies a snapshot in version order. A full snapshot replaces everything; a delta applies its
   * upserts and deletions on top of `base_version`, which must be the version we hold.
   */
  apply(s: Snapshot, nowMs: number, opts: { force?: boolean } = {}): ApplyResult {
    const version = Number(s.version);
    // `force` (full snapshots only): the authoritative source's table went back (a restored or
    // rebuilt control plane); its table wins over our higher version.
    const forced = opts.force === true && !s.delta;
    if (!forced && (version < this.versionApplied || (version === this.versionApplied && this.appliedAtMs !== 0))) {
      return { applied: false, version: this.versionApplied, reason: 'stale' };
    }
    if (s.delta && Number(s.baseVersion) !== this.versionApplied) {
      return { applied: false, version: this.versionApplied, reason: 'base_mismatch' };
    }
    if (!s.delta) {
      this.records.clear();
      this.plans.clear();
      this.approximate = false;
      for (const l of this.lookups.values()) l.void = true;
      this.onReset?.();
      for (const q of s.quotas) this.install(q);
    } else {
      for (const id of s.deletedSubjectIds) this.change(id, undefined, version);
      for (const q of s.quotas) this.change(q.subjectId, q, Number(q.version));
    }
    this.versionApplied = version;
    this.appliedAtMs = nowMs;
    return { applied: true, version };
  }

  /** One change of a delta: to a plan, a record held, a lookup in flight, or nothing held (dropped). */
  private change(id: string, q: Quota | undefined, version: number): void {
    if (id.startsWith('plan:')) {
      if (q) this.install(q);
      else {
        this.plans.delete(id.slice(5));
        this.onChange?.(id);
      }
      return;
    }
    const held = this.records.peek(id);
    if (held !== undefined) {
      // A record looked up may be newer than this delta (read after it was cut): keep the newer.
      // (For a delete `version` is the delta's, so a record written inside the delta loses to it.)
      if (version >= held.version) {
        if (q) this.install(q);
        else {
          this.records.delete(id);
          this.onChange?.(id);
        }
      }
      return;
    }
    const l = this.lookups.get(id);
    if (l !== undefined) {
      if (l.seen === undefined || version > l.seen.version) l.seen = { version, quota: q };
      return;
    }
    this.onUnheld?.(id, q !== undefined);
  }

  /** Holds a record (compiled once here) and tells `onChange`. */
  private install(q: Quota): CompiledQuota {
    const c = compileQuota(q);
    if (c.accuracy === 'approximate') this.approximate = true;
    if (c.subject.startsWith('plan:')) this.plans.set(c.subject.slice(5), c);
    else this.records.set(c.subject, c);
    this.onChange?.(c.subject);
    return c;
  }

  /** True when the subject's record is held (without touching its recency). */
  has(subject: string): boolean {
    return this.records.has(subject, { updateAgeOnHas: false });
  }

  /** A lookup of `subject` starts: deltas for it are remembered until {@link finishLookup}. */
  beginLookup(subject: string): void {
    if (!this.lookups.has(subject)) this.lookups.set(subject, { seen: undefined, void: false });
  }

  /** The lookup failed: nothing is installed. */
  abortLookup(subject: string): void {
    this.lookups.delete(subject);
  }

  /**
   * A lookup answered: `found` (with its version), or no record at `readVersion`. The newer of that
   * answer and any change a delta brought meanwhile is installed and returned (undefined: the
   * subject has no record). After a full snapshot arrived meanwhile the answer serves the request
   * that asked but is not kept.
   */
  finishLookup(subject: string, found: Quota | undefined, readVersion: number): CompiledQuota | undefined {
    const l = this.lookups.get(subject);
    this.lookups.delete(subject);
    let quota = found;
    const version = found ? Number(found.version) : readVersion;
    if (l?.seen !== undefined && l.seen.version > version) quota = l.seen.quota;
    const held = this.records.peek(subject);
    if (held !== undefined && (quota === undefined || held.version > Number(quota.version))) return held;
    if (quota === undefined) return undefined;
    if (l?.void === true) return compileQuota(quota);
    return this.install(quota);
  }

  /** Lookups in flight. */
  get lookupsInFlight(): number {
    return this.lookups.size;
  }

  /**
   * Everything held as one full snapshot at our version (plans and the key records of the working
   * set, as received), for the last-known-good file; `issued_at` is `syncedAtMs`. With
   * `maxRecords`, only that many key records, the most recently used (a worker thread's start,
   * quota-relay.ts).
   */
  snapshot(syncedAtMs: number, maxRecords = Infinity): Snapshot {
    const quotas: Quota[] = [];
    for (const p of this.plans.values()) quotas.push(p.source);
    let n = 0;
    for (const r of this.records.values()) {
      if (n++ >= maxRecords) break;
      quotas.push(r.source);
    }
    return create(SnapshotSchema, { version: BigInt(this.versionApplied), delta: false, quotas, issuedAt: syncedAtMs / 1000 });
  }

  /** The record held for a subject, without touching its recency (quota-relay.ts: is an answer kept?). */
  peek(subject: string): CompiledQuota | undefined {
    return this.records.peek(subject);
  }

  /** The record stored for a subject (not resolved through its plan). */
  record(subject: string): CompiledQuota | undefined {
    return this.records.get(subject);
  }

  plan(name: string): CompiledQuota | undefined {
    return this.plans.get(name);
  }

  /**
   * The quota that governs `subject`: its own record, resolved through its plan when it is a
   * reference; else, when `fallbackPlan` is given, that plan's record. Undefined when neither exists.
   */
  resolve(subject: string, fallbackPlan?: string): CompiledQuota | undefined {
    const own = this.records.get(subject);
    if (own) return this.resolveRecord(own, fallbackPlan);
    return fallbackPlan === undefined ? undefined : this.plans.get(fallbackPlan);
  }

  /** `resolve` for a record already in hand (from `record`): the request path's one lookup instead of two. */
  resolveRecord(own: CompiledQuota, fallbackPlan?: string): CompiledQuota | undefined {
    if (own.limit !== null) return own;
    const plan = this.plans.get(own.plan) ?? (fallbackPlan === undefined ? undefined : this.plans.get(fallbackPlan));
    if (!plan) return undefined;
    return own.shadow && !plan.shadow ? { ...plan, shadow: true } : plan;
  }
}

/** Reads a quota snapshot from a JSON file (the JSON mapping of quota.v1.Snapshot). */
export async function readSnapshotFile(path: string): Promise<Snapshot> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read quota file ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`quota file ${path} is not valid JSON`);
  }
  try {
    return fromJson(SnapshotSchema, json);
  } catch (err) {
    throw new Error(`quota file ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
