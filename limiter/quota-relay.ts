/**
 * `LIMITER_WORKERS` ≥ 2 with a control plane: the main thread's side of the process's one working
 * set (limiter/README.md, "Worker threads"). The main thread holds the one Watch stream, the
 * lookups and the authoritative quota cache (working-set.ts); each worker thread holds a bounded
 * copy of the records it uses (quota-replica.ts), reached over a MessageChannel of its own:
 *
 * - **Deltas.** Every snapshot the main thread applies is relayed, whole and in order, to every
 *   worker (`apply`, numbered by `seq`), which applies it to its copy and says so (`applied`).
 *   An ack goes to the control plane only once every live worker has applied everything relayed
 *   before it ({@link QuotaRelay.settled}, QuotaSync's `beforeAck`): a Put returns only when the
 *   next request on any thread sees the new record.
 * - **First sight.** A worker that does not hold a subject asks here (`lookup`, every subject it
 *   first saw in one turn of its event loop in one message). A record the main thread holds is
 *   answered at once; any other subject goes through the process's one QuotaLookup: one batched
 *   call per turn for all workers, one negative cache, one per-address unknown-key budget.
 * - **Versions.** An answer carries the record as held here and the version the main thread held
 *   when it was decided; a delta relayed before the answer reaches the worker first (one channel,
 *   in order), so the worker's own QuotaCache keeps the newer of the two (`finishLookup`).
 * - **Kept or not.** A worker installs an answer only when the main thread holds that record
 *   (`keep`). A lookup voided here by a full snapshot (its answer may predate a delete the full
 *   snapshot carried) still answers every request waiting on it, a worker's that asked after the
 *   full snapshot included; that worker's own lookup was not voided, so without `keep` it would
 *   install the old record and serve a deleted key until evicted.
 * - **A new thread** (at start, or replacing one that died) starts from the current state: the
 *   plans and the most recently used key records, up to its bound, taken when it is attached and
 *   sent on its channel in parts of {@link STATE_PART} records, one part a turn of the main
 *   thread's event loop, each transferred, not copied (encoding 100,000 records at once was 8.5 MB
 *   and ~700 ms of a blocked main thread; at LIMITER_QUOTA_CACHE_MAX 1,000,000 and N=2, ~3.5 s per
 *   spawn). What is relayed meanwhile is held back and posted after the last part, so it applies
 *   on top of the state; the thread applies the whole state before it listens. A worker whose
 *   delta did not chain (`resync`) gets the state again the same way.
 *
 * Records cross threads as protobuf binary (proto/gen/quota/v1), not structured clones.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { QuotaSchema, SnapshotSchema, type Snapshot } from '../proto/gen/quota/v1/quota_pb.js';
import type { Logger } from '../shared/log.js';
import type { CompiledQuota, QuotaCache } from './quota-cache.js';
import type { SubjectLookup } from './quota-lookup.js';
import type { QuotaSyncOptions } from './quota-sync.js';

/** The answer about one subject: its record (protobuf binary of quota.v1.Quota) or none. */
export interface RelayAnswer {
  subject: string;
  record: Uint8Array | undefined;
  /** The table version the main thread held when it decided this answer. */
  readVersion: number;
  /**
   * The main thread holds this very record now: the worker may install it. False for an answer
   * that only serves the requests waiting for it (no record, or a lookup a full snapshot voided
   * on the main thread, QuotaCache.finishLookup): the worker serves it and installs nothing, since
   * deltas for a record the main thread does not hold are never relayed as changes to it.
   */
  keep: boolean;
}

/** Main thread → a worker thread, on its quota channel. */
export type ToReplica =
  /** A snapshot the main thread applied (protobuf binary of quota.v1.Snapshot); a full one replaces the copy. */
  | { op: 'apply'; seq: number; snapshot: Uint8Array }
  /**
   * One part of the working set as of `seq` (quota.v1.Snapshot, full, its version; the first part
   * holds the plans): the parts together replace the copy once `last` arrives.
   */
  | { op: 'state'; seq: number; part: Uint8Array; last: boolean }
  | { op: 'found'; answers: RelayAnswer[] };

/** A worker thread → the main thread. */
export type FromReplica =
  /** Everything relayed up to `seq` is applied. */
  | { op: 'applied'; seq: number }
  /** Subjects first seen, each with the client addresses that presented it (API keys only; at most 8). */
  | { op: 'lookup'; items: { subject: string; addresses: string[] }[] }
  /** A delta did not chain onto the copy: the worker asks for the whole current state. */
  | { op: 'resync' };

/** What a worker thread starts with (in its `workerData`; `port` in the transfer list). */
export interface ReplicaInit {
  port: MessagePort;
  /**
   * The working set follows on `port` (`state` parts) before anything else; false before the first
   * snapshot (the thread starts empty and not ready).
   */
  state: boolean;
  /** The last `seq` relayed before the state was taken. */
  seq: number;
  /** The time of the last successful sync, epoch ms (one BigInt64, written by the main thread). */
  syncedAt: SharedArrayBuffer;
  /** LIMITER_QUOTA_MAX_AGE, ms; 0 never stale. */
  maxAgeMs: number;
}

export interface QuotaRelayOptions {
  /** The process's working set (the authority). */
  cache: QuotaCache;
  log: Logger;
  /** Key records a new thread starts with at most (its own cache's bound). */
  recordsPerReplica: number;
  maxAgeMs: number;
}

interface Replica {
  /** The last `seq` this worker has applied (or started past). */
  seq: number;
  /** Answers decided this turn, posted together. */
  outbox: RelayAnswer[];
  /** While the state is being sent: the snapshots relayed meanwhile, posted after its last part. */
  deferred: ToReplica[] | undefined;
}

/** Key records encoded per turn of the main thread's event loop when a worker is sent the state. */
export const STATE_PART = 2_000;

/** Client addresses kept per subject asked, for the unknown-key budget (as QuotaLookup keeps). */
export const ADDRESSES_PER_SUBJECT = 8;

export class QuotaRelay {
  private seq = 0;
  private readonly replicas = new Map<MessagePort, Replica>();
  private waiters: { seq: number; resolve: () => void }[] = [];
  private readonly syncedAtBuffer = new SharedArrayBuffer(8);
  private readonly syncedAt = new BigInt64Array(this.syncedAtBuffer);
  private lookup: SubjectLookup | undefined;

  constructor(private readonly o: QuotaRelayOptions) {}

  /** QuotaSync's hooks: relay what is applied, ack once the workers have it, share the sync time. */
  hooks(): Pick<QuotaSyncOptions, 'onApplied' | 'beforeAck' | 'onSyncedAt'> {
    return {
      onApplied: (s) => this.publish(s),
      beforeAck: () => this.settled(),
      onSyncedAt: (ms) => Atomics.store(this.syncedAt, 0, BigInt(Math.round(ms))),
    };
  }

  /** The process's lookups, which answer the workers' first-seen subjects. */
  serve(lookup: SubjectLookup): void {
    this.lookup = lookup;
  }

  /** Live worker channels. */
  get size(): number {
    return this.replicas.size;
  }

  /**
   * A new worker thread's channel and starting state. `detach` when the thread has exited: acks no
   * longer wait for it.
   */
  attach(): { init: ReplicaInit; detach: () => void } {
    const { port1, port2 } = new MessageChannel();
    const r: Replica = { seq: this.seq, outbox: [], deferred: undefined };
    this.replicas.set(port1, r);
    port1.on('message', (m: FromReplica) => this.onMessage(port1, r, m));
    // The channel never keeps the process alive by itself.
    port1.unref();
    const state = this.o.cache.appliedAt !== 0;
    const init: ReplicaInit = {
      port: port2,
      state,
      seq: this.seq,
      syncedAt: this.syncedAtBuffer,
      maxAgeMs: this.o.maxAgeMs,
    };
    // Posted on port1 now and later: they wait in port2 until the thread listens to it.
    if (state) this.sendState(port1, r);
    return {
      init,
      detach: () => {
        if (!this.replicas.delete(port1)) return;
        port1.close();
        this.check();
      },
    };
  }

  /**
   * Resolves once every live worker has applied everything relayed so far (at once when none is
   * behind). A worker that exits stops being waited for: its replacement starts from the state.
   */
  settled(): Promise<void> {
    const seq = this.seq;
    if (this.allAt(seq)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ seq, resolve }));
  }

  /** Closes every channel (the workers have gone). */
  close(): void {
    for (const port of this.replicas.keys()) port.close();
    this.replicas.clear();
    this.check();
  }

  // ── internals ──────────────────────────────────────────────────────────────

  private publish(s: Snapshot): void {
    const seq = ++this.seq;
    if (this.replicas.size === 0) return;
    const snapshot = toBinary(SnapshotSchema, s);
    const m: ToReplica = { op: 'apply', seq, snapshot };
    for (const [port, r] of this.replicas) {
      if (r.deferred) r.deferred.push(m);
      else port.postMessage(m);
    }
  }

  /**
   * Sends a worker the working set as it is now (plans, the most recently used records up to its
   * bound), {@link STATE_PART} records a turn; snapshots relayed meanwhile follow the last part.
   * The records are taken now (a record is never changed in place: a delta installs a new one), so
   * the parts are the state at this `seq` however long they take.
   */
  private sendState(port: MessagePort, r: Replica): void {
    const all = this.o.cache.snapshot(0, this.o.recordsPerReplica);
    const seq = this.seq;
    r.deferred = [];
    let at = 0;
    const next = (): void => {
      if (!this.replicas.has(port)) return;
      const quotas = all.quotas.slice(at, at + STATE_PART);
      at += STATE_PART;
      const last = at >= all.quotas.length;
      const part = toBinary(SnapshotSchema, create(SnapshotSchema, { version: all.version, quotas }));
      port.postMessage({ op: 'state', seq, part, last } satisfies ToReplica, [part.buffer]);
      if (!last) {
        setImmediate(next);
        return;
      }
      const deferred = r.deferred ?? [];
      r.deferred = undefined;
      for (const m of deferred) port.postMessage(m);
    };
    next();
  }

  private onMessage(port: MessagePort, r: Replica, m: FromReplica): void {
    if (m.op === 'applied') {
      if (m.seq > r.seq) r.seq = m.seq;
      this.check();
    } else if (m.op === 'lookup') this.answer(port, r, m.items);
    else if (m.op === 'resync') {
      // Already on its way: what it is sent ends with everything relayed since.
      if (r.deferred) return;
      this.o.log.warn({ version: this.o.cache.version }, 'a worker thread asked for the whole quota working set again');
      if (this.o.cache.appliedAt !== 0) this.sendState(port, r);
    }
  }

  private answer(port: MessagePort, r: Replica, items: { subject: string; addresses: string[] }[]): void {
    for (const { subject, addresses } of items) {
      const held = this.o.cache.record(subject);
      if (held !== undefined || this.lookup === undefined) {
        this.post(port, r, subject, held);
        continue;
      }
      // Each address is offered to the lookup (the budget charges every address that presented an
      // unknown key); the request waits for a call if any address leads to one.
      let found: CompiledQuota | undefined | Promise<CompiledQuota | undefined> = undefined;
      let first = true;
      for (const address of addresses.length > 0 ? addresses : [undefined]) {
        const f = this.lookup.find(subject, address);
        if (first || (f instanceof Promise && !(found instanceof Promise))) found = f;
        first = false;
      }
      if (found instanceof Promise) void found.then((q) => this.post(port, r, subject, q));
      else this.post(port, r, subject, found);
    }
  }

  /**
   * Queues one answer, decided now (its version is the one held now); posted with the others of
   * this turn. When the main thread holds a record at least as new as `q`, that is the answer, and
   * the worker keeps it; otherwise `q` only serves the requests waiting for it.
   */
  private post(port: MessagePort, r: Replica, subject: string, q: CompiledQuota | undefined): void {
    if (!this.replicas.has(port)) return;
    const held = this.o.cache.peek(subject);
    const keep = held !== undefined && (q === undefined || held.version >= q.version);
    const answer = keep ? held : q;
    const record = answer === undefined ? undefined : toBinary(QuotaSchema, answer.source);
    r.outbox.push({ subject, record, readVersion: this.o.cache.version, keep });
    if (r.outbox.length > 1) return;
    queueMicrotask(() => {
      const answers = r.outbox;
      r.outbox = [];
      if (this.replicas.has(port)) port.postMessage({ op: 'found', answers } satisfies ToReplica);
    });
  }

  private allAt(seq: number): boolean {
    for (const r of this.replicas.values()) if (r.seq < seq) return false;
    return true;
  }

  private check(): void {
    if (this.waiters.length === 0) return;
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) {
      if (this.allAt(w.seq)) w.resolve();
      else this.waiters.push(w);
    }
  }
}

/** Decodes a relayed snapshot or record (the worker's side, quota-replica.ts). */
export const decodeSnapshot = (bytes: Uint8Array): Snapshot => fromBinary(SnapshotSchema, bytes);
export const decodeQuota = (bytes: Uint8Array) => fromBinary(QuotaSchema, bytes);
