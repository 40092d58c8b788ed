/**
 * The control-plane working set of one sidecar process (README, "Working set"): the quota cache
 * kept current by quota sync (Watch, poll, acks, the last-known-good file) and the lookups of
 * subjects it does not hold (batched, negative cache, per-address unknown-key budget), with their
 * metrics. Built by `startSidecar` (one thread) and, with `LIMITER_WORKERS` ≥ 2, once by the main
 * thread (workers.ts), whose worker threads reach it through quota-relay.ts.
 */
import type { Clock } from '../shared/clock.js';
import type { Logger } from '../shared/log.js';
import type { Registry } from '../shared/metrics.js';
import type { LimiterConfig } from './config.js';
import type { QuotaCache } from './quota-cache.js';
import { QuotaLookup } from './quota-lookup.js';
import { QuotaSync, defaultSidecarId, type QuotaSyncOptions } from './quota-sync.js';
import { registerQuotaSyncMetrics } from './quota-sync-metrics.js';

export interface WorkingSet {
  sync: QuotaSync;
  lookup: QuotaLookup;
}

export interface WorkingSetOptions {
  controlPlaneUrl: string;
  cache: QuotaCache;
  clock: Clock;
  log: Logger;
  registry: Registry;
  workingSetWriteDelayMs?: number | undefined;
  random?: (() => number) | undefined;
  /** Hooks of the main thread of `LIMITER_WORKERS` (quota-relay.ts). */
  relay?: Pick<QuotaSyncOptions, 'onApplied' | 'beforeAck' | 'onSyncedAt'>;
}

/**
 * Builds the sync and the lookups over `cache`, loads the last-known-good file and opens the
 * stream; on a first boot with no file, waits up to 2 s for the control plane, so the first
 * requests are not all decoyed as unknown keys.
 */
export async function startWorkingSet(config: LimiterConfig, o: WorkingSetOptions): Promise<WorkingSet> {
  const sync = new QuotaSync({
    controlPlaneUrl: o.controlPlaneUrl,
    sidecarId: config.SIDECAR_ID ?? defaultSidecarId(),
    token: config.CONTROL_PLANE_SYNC_TOKEN,
    cache: o.cache,
    clock: o.clock,
    log: o.log,
    snapshotPath: config.LIMITER_SNAPSHOT_FILE,
    pollIntervalMs: config.LIMITER_SYNC_POLL_INTERVAL,
    maxAgeMs: config.LIMITER_QUOTA_MAX_AGE,
    lookupTimeoutMs: config.LIMITER_LOOKUP_TIMEOUT,
    workingSetWriteDelayMs: o.workingSetWriteDelayMs,
    random: o.random,
    ...o.relay,
  });
  const lookup = new QuotaLookup({
    cache: o.cache,
    call: (subjects) => sync.lookup(subjects),
    clock: o.clock,
    log: o.log,
    negativeMax: config.LIMITER_NEGATIVE_CACHE_MAX,
    negativeTtlMs: config.LIMITER_NEGATIVE_CACHE_TTL,
    budget: config.LIMITER_UNKNOWN_KEY_BUDGET,
    budgetWindowMs: config.LIMITER_UNKNOWN_KEY_WINDOW,
    failFastMs: config.LIMITER_LOOKUP_TIMEOUT,
    onInstalled: () => sync.workingSetChanged(),
  });
  registerQuotaSyncMetrics(o.registry, sync, o.clock);
  await sync.start();
  if (!sync.ready()) await sync.whenSynced(2000);
  return { sync, lookup };
}
