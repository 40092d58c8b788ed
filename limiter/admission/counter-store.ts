/**
 * The counter store: where bucket state lives between requests. One narrow interface, one file per
 * backend (`counter-store.memory.ts`, in process and exact for one sidecar; `counter-store.redis.ts`,
 * shared by every sidecar); `createCounterStore` in `index.ts` picks one.
 *
 * A store decides and charges in one step, atomically over the key bucket and the optional global
 * bucket (both or neither; see `decide.ts` for what is reported). The memory store answers
 * synchronously; the Redis store returns a promise. Callers branch once with {@link isPending}
 * rather than awaiting a value that is already there.
 *
 * Errors: a store that cannot answer rejects with a {@link CounterStoreError} (`counter_store_timeout`
 * past its deadline, `counter_store_unavailable` otherwise), which the caller's circuit breaker
 * counts. It never returns a guess.
 */
import { PlatformError } from '../../shared/errors.js';
import type { Binding } from './decide.js';
import type { Decision, LimitParams } from './limit.js';

/** A global bucket every request of a class is also charged to. */
export interface GlobalBucket {
  /** Names the bucket's state (e.g. `global`); a plain token, no braces. */
  readonly name: string;
  readonly limit: LimitParams;
}

/**
 * One admission request. Nothing in it is copied or retained by the stores beyond the call, so a
 * caller may reuse one object per request path (the memory store is synchronous).
 */
export interface AdmitRequest {
  /** The subject bucket's key, e.g. `key:<sha256 hex>` or `user:<id>`; opaque to the store. */
  readonly key: string;
  readonly limit: LimitParams;
  readonly global?: GlobalBucket | undefined;
  /** Tokens this request costs: an integer ≥ 0 (default 1 is the caller's business). */
  readonly cost: number;
  /**
   * The quota's accuracy (default `exact`). `approximate` lets a layer over a shared store admit
   * from a lease of tokens taken in advance (lease.ts, with its documented bound); stores that
   * keep no leases ignore it.
   */
  readonly accuracy?: Accuracy | undefined;
}

/** How exactly a quota is enforced across sidecars (quota.v1.Accuracy). */
export type Accuracy = 'exact' | 'approximate';

/** A store's answer: the decision's figures (the key bucket's, see `decide.ts`) and what bound it. */
export interface AdmitResult extends Decision {
  binding: Binding;
}

export interface CounterStore {
  readonly kind: 'memory' | 'redis';
  /**
   * Decides and, when admitted, charges the request to every bucket it names. Synchronous for the
   * memory store; a promise for remote stores, rejected with a {@link CounterStoreError} when the
   * store cannot answer in time.
   */
  admit(req: AdmitRequest): AdmitResult | Promise<AdmitResult>;
  /** Resolves once the store can answer (at once in process); rejects after `timeoutMs` without a connection. */
  ready(timeoutMs?: number): Promise<void>;
  /** Releases connections and timers. */
  close(): Promise<void>;
}

/** True when `admit` returned a promise (a remote store) rather than the answer itself. */
export function isPending(r: AdmitResult | Promise<AdmitResult>): r is Promise<AdmitResult> {
  return r instanceof Promise;
}

export type CounterStoreErrorCode = 'counter_store_timeout' | 'counter_store_unavailable';

/**
 * The counter store could not answer: past its per-call deadline (`counter_store_timeout`) or
 * unreachable, disconnected or failing (`counter_store_unavailable`). `cause` holds the driver's
 * error for the log. Callers count these in their circuit breaker and apply the quota's fail mode;
 * they never turn them into a 500.
 */
export class CounterStoreError extends PlatformError {
  declare readonly code: CounterStoreErrorCode;
  constructor(code: CounterStoreErrorCode, detail: string, cause?: unknown) {
    super(code, { detail, cause });
    this.name = 'CounterStoreError';
  }
}

export function isCounterStoreError(err: unknown): err is CounterStoreError {
  return err instanceof CounterStoreError;
}
