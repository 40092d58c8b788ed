/**
 * Admission: the pure algorithms, atomic multi-bucket decisions, and the counter stores that keep
 * bucket state (in process or in Redis). README.md in this folder documents the semantics, bounds
 * and Redis key layout; each module's TSDoc has the details.
 */
import type { Clock } from '../../shared/clock.js';
import type { CounterStore } from './counter-store.js';
import { MemoryCounterStore, type MemoryCounterStoreOptions } from './counter-store.memory.js';
import { RedisCounterStore, type RedisCounterStoreOptions } from './counter-store.redis.js';

export * from './limit.js';
export { tokenBucket } from './token-bucket.js';
export { leakyBucket } from './leaky-bucket.js';
export { fixedWindow } from './fixed-window.js';
export { slidingWindow } from './sliding-window.js';
export { ALGORITHM_FNS, step, type AlgorithmFn } from './algorithms.js';
export { commit, decide, newAdmission, type Admission, type Binding, type Bucket } from './decide.js';
export {
  CounterStoreError,
  isCounterStoreError,
  isPending,
  type AdmitRequest,
  type AdmitResult,
  type CounterStore,
  type CounterStoreErrorCode,
  type GlobalBucket,
} from './counter-store.js';
export { DEFAULT_MAX_KEYS, MemoryCounterStore, type MemoryCounterStoreOptions } from './counter-store.memory.js';
export { createSharedCounters, DEFAULT_MAX_GLOBALS, type SharedCounters, type SharedCountersOptions } from './shared-counters.js';
export {
  checkShardable,
  DEFAULT_CLUSTER_SHARDS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_DEADLINE_MS,
  RedisCounterStore,
  type RedisCounterStoreOptions,
  type ShadowCandidate,
  type ShadowStats,
} from './counter-store.redis.js';
export { KEY_LAYOUT_VERSION, shardOf } from './key-layout.js';
export { ADMIT_LUA } from './admit-script.js';

/** Which counter store to build: one case per backend. */
export type CounterStoreConfig =
  | ({ kind: 'memory' } & MemoryCounterStoreOptions)
  | ({ kind: 'redis' } & RedisCounterStoreOptions)
  | {
      kind: 'auto';
      clock: Clock;
      url?: string;
      clusterNodes?: readonly string[];
      redis?: RedisCounterStoreOptions;
      memory?: Omit<MemoryCounterStoreOptions, 'clock'>;
    };

/**
 * Builds a counter store; the only place a store is chosen (the sidecar calls it with `auto`).
 * `auto`: a Redis (cluster nodes first, else URL) when one is configured, else the in-process
 * store, which is exact for a single sidecar.
 */
export function createCounterStore(cfg: CounterStoreConfig): CounterStore {
  switch (cfg.kind) {
    case 'memory':
      return new MemoryCounterStore(cfg);
    case 'redis':
      return new RedisCounterStore(cfg);
    case 'auto':
      if ((cfg.clusterNodes?.length ?? 0) > 0 || cfg.url !== undefined) {
        return new RedisCounterStore({ ...cfg.redis, url: cfg.url, clusterNodes: cfg.clusterNodes });
      }
      return new MemoryCounterStore({ ...cfg.memory, clock: cfg.clock });
  }
}
