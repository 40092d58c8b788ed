/**
 * A worker thread's side of the process's one working set (`LIMITER_WORKERS` ≥ 2 with a control
 * plane; the main thread's side and the protocol: quota-relay.ts). The thread's own QuotaCache,
 * bounded by its share of LIMITER_QUOTA_CACHE_MAX, holds the plans and the records this thread
 * uses; it is kept by what the main thread relays, never by a stream of its own:
 *
 * - every snapshot the main thread applied is applied here in the same order, then confirmed
 *   (`applied`): the main thread acks a version to the control plane only after every thread has;
 * - a subject not held is asked of the main thread (every subject first seen in one turn in one
 *   message; concurrent requests for one subject share one question), and the answer is installed
 *   with `finishLookup`, which keeps the newer of it and a delta that raced it, only when the main
 *   thread holds that record (`keep`); otherwise it serves the waiting requests and is dropped;
 * - staleness (LIMITER_QUOTA_MAX_AGE) is read from the main thread's last sync time, kept in
 *   shared memory, so every thread caps quotas at the same moment.
 *
 * The negative cache, the unknown-key budget, the batching toward the control plane and the
 * last-known-good file are the main thread's, once for the process.
 */
import type { MessagePort } from 'node:worker_threads';
import type { Clock } from '../shared/clock.js';
import type { Snapshot } from '../proto/gen/quota/v1/quota_pb.js';
import type { Logger } from '../shared/log.js';
import { compileQuota, QuotaCache, type CompiledQuota } from './quota-cache.js';
import type { SubjectLookup } from './quota-lookup.js';
import {
  ADDRESSES_PER_SUBJECT,
  decodeQuota,
  decodeSnapshot,
  type FromReplica,
  type RelayAnswer,
  type ReplicaInit,
  type ToReplica,
} from './quota-relay.js';

export interface QuotaReplicaOptions {
  /** Key records this thread holds at most (its share of LIMITER_QUOTA_CACHE_MAX). */
  maxRecords: number;
  clock: Clock;
  log: Logger;
  /** Runs the batch after this turn of the event loop. Default setImmediate. */
  defer?: (fn: () => void) => void;
}

interface Asked {
  promise: Promise<CompiledQuota | undefined>;
  resolve: (q: CompiledQuota | undefined) => void;
  /** Still in the batch not yet sent (more addresses may join it). */
  queued: { subject: string; addresses: string[] } | undefined;
}

export class QuotaReplica implements SubjectLookup {
  /** This thread's quota cache (the sidecar's `quotas`). */
  readonly cache: QuotaCache;
  private readonly port: MessagePort;
  private readonly syncedAt: BigInt64Array;
  private readonly maxAgeMs: number;
  private readonly asked = new Map<string, Asked>();
  private batch: { subject: string; addresses: string[] }[] = [];
  private readonly defer: (fn: () => void) => void;
  /** A delta did not chain: deltas are skipped until the whole state comes back. */
  private resyncing = false;
  /** The parts of the state received so far (quota-relay.ts `state`). */
  private parts: Snapshot | undefined;
  private onStarted: (() => void) | undefined;
  /**
   * Settles once this thread holds the state it was started with (at once when there was none):
   * the thread listens only then, so it never serves a record older than the process's.
   */
  readonly started: Promise<void>;

  constructor(
    init: ReplicaInit,
    private readonly o: QuotaReplicaOptions,
  ) {
    this.cache = new QuotaCache(o.maxRecords);
    this.port = init.port;
    this.syncedAt = new BigInt64Array(init.syncedAt);
    this.maxAgeMs = init.maxAgeMs;
    this.defer = o.defer ?? ((fn) => setImmediate(fn));
    this.started = init.state ? new Promise((resolve) => (this.onStarted = resolve)) : Promise.resolve();
    // The state's parts come first on the channel, then whatever was relayed since it was taken.
    this.port.on('message', (m: ToReplica) => this.onMessage(m));
  }

  /** True once this thread holds a snapshot (for /readyz). */
  ready(): boolean {
    return this.cache.appliedAt !== 0;
  }

  /** Past LIMITER_QUOTA_MAX_AGE since the process's last successful sync (quota-sync-max-age.ts). */
  stale(): boolean {
    return this.maxAgeMs > 0 && this.o.clock.now() - Number(Atomics.load(this.syncedAt, 0)) > this.maxAgeMs;
  }

  find(subject: string, address?: string): Promise<CompiledQuota | undefined> {
    const a = this.asked.get(subject);
    if (a !== undefined) {
      const q = a.queued;
      if (address !== undefined && q && q.addresses.length < ADDRESSES_PER_SUBJECT && !q.addresses.includes(address))
        q.addresses.push(address);
      return a.promise;
    }
    let resolve!: (q: CompiledQuota | undefined) => void;
    const promise = new Promise<CompiledQuota | undefined>((r) => (resolve = r));
    const queued = { subject, addresses: address === undefined ? [] : [address] };
    this.asked.set(subject, { promise, resolve, queued });
    this.cache.beginLookup(subject);
    this.batch.push(queued);
    if (this.batch.length === 1) this.defer(() => this.flush());
    return promise;
  }

  private flush(): void {
    const items = this.batch;
    this.batch = [];
    for (const i of items) {
      const a = this.asked.get(i.subject);
      if (a) a.queued = undefined;
    }
    this.post({ op: 'lookup', items });
  }

  private post(m: FromReplica): void {
    this.port.postMessage(m);
  }

  private onMessage(m: ToReplica): void {
    if (m.op === 'found') {
      for (const a of m.answers) this.found(a);
      return;
    }
    if (m.op === 'state') {
      const part = decodeSnapshot(m.part);
      if (this.parts === undefined) this.parts = part;
      else for (const q of part.quotas) this.parts.quotas.push(q);
      if (!m.last) return;
      const whole = this.parts;
      this.parts = undefined;
      // The main thread's state: taken whole, whatever its version.
      this.cache.apply(whole, this.o.clock.now(), { force: true });
      this.resyncing = false;
      this.post({ op: 'applied', seq: m.seq });
      this.onStarted?.();
      this.onStarted = undefined;
      return;
    }
    const s = decodeSnapshot(m.snapshot);
    if (this.resyncing && s.delta) return;
    // A full snapshot from the main thread is its state: taken whole, whatever its version.
    const r = this.cache.apply(s, this.o.clock.now(), { force: !s.delta });
    if (!r.applied && r.reason === 'base_mismatch') {
      this.resyncing = true;
      this.o.log.error(
        { version: this.cache.version, base: Number(s.baseVersion) },
        'relayed quota delta does not chain; asking the main thread for the whole state',
      );
      this.post({ op: 'resync' });
      return;
    }
    if (!s.delta) this.resyncing = false;
    this.post({ op: 'applied', seq: m.seq });
  }

  private found(a: RelayAnswer): void {
    const asked = this.asked.get(a.subject);
    // Answered already (a subject is asked once at a time): nothing to install.
    if (asked === undefined) return;
    this.asked.delete(a.subject);
    const record = a.record === undefined ? undefined : decodeQuota(a.record);
    if (!a.keep) {
      // Not held by the main thread (quota-relay.ts, "Kept or not"): serves the waiting requests only.
      this.cache.abortLookup(a.subject);
      asked.resolve(record === undefined ? undefined : compileQuota(record));
      return;
    }
    asked.resolve(this.cache.finishLookup(a.subject, record, a.readVersion));
  }
}
