/**
 * The Redis counter store, shared by every sidecar: one Lua script per decision covers the
 * subject's bucket and the global bucket, both or neither, atomically ({@link ADMIT_LUA}).
 *
 * Two clients. On a standalone Redis, decisions go through a connection of our own
 * (resp-connection.ts: RESP2, EVALSHA encoded straight into bytes), which costs a fraction of
 * ioredis's CPU per call (README, "Redis"); everything else (leases, heartbeats, the shadow
 * candidate, DPoP replay, Redis Cluster) uses the ioredis client, {@link RedisCounterStore.client}.
 * Both keep the promises below.
 *
 * - Clock: Redis `TIME`, read inside the script, is the only clock. Sidecars' and callers' clocks
 *   never enter a decision, so every sidecar sharing a Redis enforces one quota exactly.
 * - Keys: layout `v1` (`key-layout.ts`), hash-tagged so the keys one call touches share a Cluster
 *   slot, and expiring (PX) when the bucket is back at rest: an idle subject costs nothing.
 * - Fail fast: the offline queue off, so a command issued while disconnected is refused at once;
 *   a per-call deadline (`deadlineMs`, default 50 ms) separate from the connect timeout, from the
 *   command's write and judged only after the loop has read the socket (reply-deadline.ts: a late
 *   event loop is not a late Redis), past which the call rejects while its late reply is still
 *   read, timed (`onLateReply`) and dropped; commands in flight when a connection drops are failed, never
 *   re-sent (a re-sent decision could charge twice). Every failure rejects with a
 *   {@link CounterStoreError} for the caller's circuit breaker. A timed-out call may still have
 *   been applied by Redis: counters may be lossy in the subject's disfavour by that one request.
 * - Scripts go by EVALSHA; after NOSCRIPT (the script did not run) the script is loaded and that
 *   call sent again (ioredis `defineCommand`: by EVAL; our connection: SCRIPT LOAD, then EVALSHA).
 * - Redis Cluster: MOVED, ASK and TRYAGAIN (a reshard) are followed by ioredis, one call at a time
 *   (no auto-pipelining: README, "Deadlines"), each re-send restarting the call's deadline.
 * - Connection events of either client (`ready`, `close`, `reconnecting`, `end`, cluster node
 *   changes) reach {@link RedisCounterStore.onConnectionEvent}: the refusal cache clears on them.
 *
 * Redis Cluster and the global bucket. One script may touch one slot only, so the global bucket is
 * split into S slot-local shards (`shards`, default 16 on a cluster, 1 on a standalone Redis). A
 * subject's bucket lives beside shard `fnv1a(key) mod S`, and each shard holds `1/S` of the global
 * limit (the full limit charged `cost × S`, exact in whole numbers). Accuracy of the global limit:
 * - never over: the shards together admit at most what the unsharded bucket would (over any span
 *   of `t` ms, at most `burst + rate × t / interval` for a token bucket), whatever the traffic;
 * - under when skewed: a shard denies once its own `1/S` share is spent even while others have
 *   room. With traffic from subjects in only m of the S shards, the global bucket admits as little
 *   as `m / S` of its limit (one hot subject alone gets `1/S` of the global limit). Spread evenly
 *   over many subjects, it converges to the full limit. A shard needs `burst ≥ S × cost` to admit
 *   anything ({@link checkShardable}); choose S to fit the global burst.
 * On a standalone Redis, S = 1 and the global bucket is exact.
 *
 * Versioning (limiter/admission/README.md, "Versioning"). A new script is dual-run before it
 * enforces: give it as `candidate` with
 * its own layout version, and it runs beside the enforcing script on every call, writing its own
 * keys (`<prefix>:<candidate version>:…`), never the enforcing keys. Its decisions are compared
 * with the enforced ones and disagreements (a different allow/deny) counted in `shadowStats` and
 * reported to `onShadowDisagreement`; its failures never affect the caller. The two scripts read
 * `TIME` a moment apart, so a few disagreements at refill or window boundaries are expected; a
 * steady stream is a finding. A script change and a key-layout change never ship in one deploy:
 * shipped together, a disagreement could not be told apart from a layout bug, and rolling one back
 * would strand the other's keys. Change the script with the layout fixed (shadowing under a
 * scratch version), then change the layout with the script fixed.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { ADMIT_LUA } from './admit-script.js';
import { RespCallError, RespConnection, respScript, type RespScript } from './resp-connection.js';
import { ReplyDeadlines, type LateReplyListener } from './reply-deadline.js';
import type { RespError } from './resp-codec.js';
import { CounterStoreError, type AdmitRequest, type AdmitResult, type CounterStore } from './counter-store.js';
import { bucketKey, checkKeyPart, globalKey, KEY_LAYOUT_VERSION, shardHead, shardOf } from './key-layout.js';
import { ALGORITHM_CODE, type LimitParams } from './limit.js';

/** A script to dual-run in shadow beside the enforcing one. */
export interface ShadowCandidate {
  /** Lua source with the calling convention of `ADMIT_LUA` (see admit-script.ts). */
  readonly source: string;
  /** The candidate's key layout version: its keys live under `<prefix>:<version>:`. Not `v1`. */
  readonly version: string;
}

export interface ShadowStats {
  /** Calls where both scripts answered and were compared. */
  compared: number;
  /** Of those, the ones where allow/deny differed. */
  disagreed: number;
  /** Candidate calls that failed (never seen by callers). */
  errors: number;
}

export interface RedisCounterStoreOptions {
  /** A standalone Redis, `redis://` or `rediss://` (credentials in the URL). */
  url?: string;
  /** Seed nodes of a Redis Cluster, `host:port`; takes precedence over `url`. */
  clusterNodes?: readonly string[];
  /** Deadline of one decision, ms (default 50). Separate from the connect timeout. */
  deadlineMs?: number;
  /** Connect timeout, ms (default 2000). */
  connectTimeoutMs?: number;
  /** Shards of each global bucket: 1..1024; default 16 on a cluster, 1 on a standalone Redis. */
  shards?: number;
  /** First part of every key (default `rl`); no braces or whitespace. Tests use a unique one. */
  prefix?: string;
  /** A script to dual-run in shadow (see the module comment). */
  candidate?: ShadowCandidate;
  /** Called on each shadow disagreement. Keep it cheap. */
  onShadowDisagreement?: (key: string, enforced: AdmitResult, candidate: AdmitResult) => void;
  /** Each reply read after its deadline: how late, split into event-loop delay and Redis time (ms). */
  onLateReply?: LateReplyListener;
  /** Connection-level errors (the client's `error` events); the store keeps reconnecting. */
  onConnectionError?: (err: Error) => void;
  /**
   * Extra ioredis options (password, tls, …); the store's fail-fast settings take precedence. Of
   * these the decisions' own connection takes `username`, `password`, `db` and `tls`.
   */
  redisOptions?: RedisOptions;
  /**
   * Decisions through ioredis too on a standalone Redis, instead of the store's own connection
   * (resp-connection.ts). For comparisons (bench/redis-admit.ts); default false.
   */
  ioredisDecisions?: boolean;
}

export const DEFAULT_DEADLINE_MS = 50;
export const DEFAULT_CONNECT_TIMEOUT_MS = 2000;
export const DEFAULT_CLUSTER_SHARDS = 16;
/**
 * How long a call the cluster redirected (MOVED, ASK, TRYAGAIN during a reshard) may take from its
 * first write: this many deadlines, at least 1 s. Each redirection is an answer, and the re-sent
 * call gets a deadline of its own from the last one, within this bound.
 */
export const REDIRECT_BUDGET_DEADLINES = 20;
/** Replies that say the call did not run on that node and should go elsewhere (or a moment later). */
const REDIRECTION = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /;
/** Redirections one call may follow (ioredis `maxRedirections`; its default, 16, is spent by five TRYAGAIN rounds). */
export const MAX_REDIRECTIONS = 64;

/** Events of the ioredis client that mean Redis may have lost its data (or be about to). */
const IOREDIS_CONNECTION_EVENTS = ['ready', 'close', 'reconnecting', 'end', '+node', '-node', 'node error'];
const RESP_CONNECTION_EVENTS = ['ready', 'close', 'reconnecting', 'end'];

/** The enforcing script, for the store's own connection. */
const ADMIT_SCRIPT: RespScript = respScript(ADMIT_LUA);

/**
 * The reply of the admission script: allowed, binding, limit, remaining, resetAtMs, retryAfterMs,
 * nowMs (Redis TIME), then each bucket's state after the call (admit-script.ts).
 */
type Reply = [number, number, number, number, number, number, number, ...number[]];

/** The admission script's whole reply (see admit-script.ts for its fields), for {@link RedisCounterStore.admitReply}. */
export type AdmitReply = Reply;

/**
 * ioredis commands added by `defineCommand`, one per key count (the same script and SHA): with a
 * fixed key count ioredis knows the keys, and so the cluster slot, of each call.
 */
interface AdmitCommands {
  rlAdmit1(key: string, ...argv: number[]): Promise<Reply>;
  rlAdmit2(key: string, global: string, ...argv: number[]): Promise<Reply>;
  rlCandidate1(key: string, ...argv: number[]): Promise<Reply>;
  rlCandidate2(key: string, global: string, ...argv: number[]): Promise<Reply>;
}

/**
 * Why a global limit cannot be sharded `shards` ways for requests up to `maxCost`, or `undefined`
 * when it can. A shard holds `burst / shards` tokens; below `maxCost` it would deny every request.
 * Call it where quotas and the global limit are validated.
 */
export function checkShardable(limit: LimitParams, shards: number, maxCost = 1): string | undefined {
  const capacity = limit.algorithm === 'token_bucket' || limit.algorithm === 'leaky_bucket' ? limit.burst : limit.rate;
  if (capacity < shards * maxCost) {
    return `a global ${limit.algorithm} of capacity ${capacity} split into ${shards} shards cannot admit a request of cost ${maxCost}: raise the capacity to at least ${shards * maxCost} or use fewer shards`;
  }
  return undefined;
}

export class RedisCounterStore implements CounterStore {
  readonly kind = 'redis' as const;
  /**
   * The ioredis client: leases, heartbeats, the shadow candidate, DPoP replay, health checks and
   * tests; decisions too on a Redis Cluster. Do not send decisions through it directly.
   */
  readonly client: Redis | Cluster;
  /** The decisions' own connection on a standalone Redis (undefined on a cluster). */
  readonly decisions: RespConnection | undefined;
  /** Shards of each global bucket. */
  readonly shards: number;
  /** Shadow comparison counts (all 0 without a candidate). */
  readonly shadowStats: ShadowStats = { compared: 0, disagreed: 0, errors: 0 };

  readonly #cmd: AdmitCommands;
  readonly #prefix: string;
  // Per shard: `<prefix>:<version>:{s<n>}:` and the same followed by `k:`.
  readonly #heads: string[];
  readonly #keyHeads: string[];
  readonly #candidateHeads: string[] | undefined;
  readonly #candidateKeyHeads: string[] | undefined;
  readonly #candidateVersion: string | undefined;
  readonly #globals = new Map<string, string[]>();
  readonly #candidateGlobals = new Map<string, string[]>();
  readonly #onDisagree: RedisCounterStoreOptions['onShadowDisagreement'];
  readonly #connectTimeoutMs: number;
  // The loop-aware deadline of decisions (and leases) made through ioredis.
  readonly #deadlines: ReplyDeadlines;

  constructor(opts: RedisCounterStoreOptions) {
    const deadline = opts.deadlineMs ?? DEFAULT_DEADLINE_MS;
    const connectTimeout = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const cluster = opts.clusterNodes !== undefined && opts.clusterNodes.length > 0;
    const shards = opts.shards ?? (cluster ? DEFAULT_CLUSTER_SHARDS : 1);
    const prefix = opts.prefix ?? 'rl';
    if (!(deadline > 0)) throw new RangeError(`RedisCounterStore: deadlineMs must be > 0, got ${deadline}`);
    if (!(connectTimeout > 0)) throw new RangeError(`RedisCounterStore: connectTimeoutMs must be > 0, got ${connectTimeout}`);
    if (!Number.isInteger(shards) || shards < 1 || shards > 1024)
      throw new RangeError(`RedisCounterStore: shards must be 1..1024, got ${shards}`);
    const prefixProblem = checkKeyPart(prefix);
    if (prefixProblem) throw new RangeError(`RedisCounterStore: prefix ${prefixProblem}`);
    if (!cluster && opts.url === undefined) throw new RangeError('RedisCounterStore: give url or clusterNodes');
    const cand = opts.candidate;
    if (cand !== undefined) {
      const p = checkKeyPart(cand.version);
      if (p) throw new RangeError(`RedisCounterStore: candidate version ${p}`);
      if (cand.version === KEY_LAYOUT_VERSION)
        throw new RangeError(`RedisCounterStore: the candidate must write its own keys, not ${KEY_LAYOUT_VERSION}'s`);
    }

    const redirectBudget = Math.max(1000, REDIRECT_BUDGET_DEADLINES * deadline);
    const tryAgainDelay = Math.max(1, Math.round(deadline / 5));
    const failFast: RedisOptions = {
      ...opts.redisOptions,
      connectTimeout: connectTimeout,
      // Only a backstop: ioredis's own timer runs before the loop reads the socket, so it would
      // fail replies waiting unread behind a late loop. Decisions and leases are held to `deadline`
      // by #deadlines (reply-deadline.ts) instead; this bounds whatever else is sent.
      commandTimeout: redirectBudget + deadline,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      // Auto-pipelining off on a standalone Redis: ioredis builds a Pipeline per event-loop turn,
      // and a sidecar admitting over Redis used about 9% more CPU per request with it than with
      // one write per command (8 alternating runs, 2026-11-24: median 40.5 vs 36.7 µs, and more
      // requests served in 7 of 8). Off on a cluster too (below).
      enableAutoPipelining: false,
      lazyConnect: false,
      // ioredis's disconnect() (close() after a QUIT that could not be sent: Redis down or not
      // answering) ends the socket and waits up to this long for the peer's close before it
      // destroys it; its 2 s default held a draining sidecar, and every test process that closed
      // one with Redis gone, that much longer. Read by ioredis, though not in its RedisOptions type.
      ...({ disconnectTimeout: 100 } as RedisOptions),
    };
    if (cluster) {
      const nodes = opts.clusterNodes!.map(parseNode);
      const copts: ClusterOptions = {
        redisOptions: failFast,
        enableOfflineQueue: false,
        // No auto-pipelining on a cluster either, for correctness during a reshard (README,
        // "Deadlines"): an auto-pipeline follows a redirection only when every command in it got
        // the same one, so during a reshard MOVED and ASK reached callers as failures; a pipeline
        // whose slots changed owner before it was sent is refused whole ("All keys in the
        // pipeline should belong to the same slots allocation group"); and ioredis runs one
        // pipeline per node at a time, so one waiting out TRYAGAIN held up every call to that
        // node. Sent one by one, each call is redirected on its own.
        enableAutoPipelining: false,
        maxRedirections: MAX_REDIRECTIONS,
        // TRYAGAIN (a two-key call while its slot is half migrated) is retried well within a
        // deadline, not after ioredis's default 100 ms.
        retryDelayOnTryAgain: tryAgainDelay,
        scaleReads: 'master',
        lazyConnect: false,
      };
      this.client = new Cluster(nodes, copts);
    } else {
      this.client = new Redis(opts.url!, failFast);
    }
    this.decisions =
      cluster || opts.ioredisDecisions === true
        ? undefined
        : new RespConnection({
            url: opts.url!,
            deadlineMs: deadline,
            connectTimeoutMs: connectTimeout,
            tls: opts.redisOptions?.tls,
            username: opts.redisOptions?.username,
            password: opts.redisOptions?.password,
            db: opts.redisOptions?.db,
            mapError: respToStoreError,
            onLateReply: opts.onLateReply,
          });
    // Without a listener an `error` event would crash the process; reconnection is automatic.
    const onErr = opts.onConnectionError;
    this.client.on('error', (err: Error) => onErr?.(err));
    this.decisions?.on('error', (err: Error) => onErr?.(err));
    this.client.defineCommand('rlAdmit1', { lua: ADMIT_LUA, numberOfKeys: 1 });
    this.client.defineCommand('rlAdmit2', { lua: ADMIT_LUA, numberOfKeys: 2 });
    this.#deadlines = new ReplyDeadlines({
      deadlineMs: deadline,
      timeoutError: () => new CounterStoreError('counter_store_timeout', `redis: no answer within ${deadline} ms of its write`),
      onLateReply: opts.onLateReply,
      redirect: cluster ? { budgetMs: redirectBudget, retryDelayMs: tryAgainDelay } : undefined,
    });
    if (cluster) this.#watchRedirections(this.client as Cluster);
    if (cand !== undefined) {
      this.client.defineCommand('rlCandidate1', { lua: cand.source, numberOfKeys: 1 });
      this.client.defineCommand('rlCandidate2', { lua: cand.source, numberOfKeys: 2 });
    }
    this.#cmd = this.client as unknown as AdmitCommands;

    this.shards = shards;
    this.#prefix = prefix;
    this.#connectTimeoutMs = connectTimeout;
    this.#heads = Array.from({ length: shards }, (_, s) => shardHead(prefix, KEY_LAYOUT_VERSION, s));
    this.#candidateVersion = cand?.version;
    this.#keyHeads = this.#heads.map((h) => h + 'k:');
    this.#candidateHeads = cand && Array.from({ length: shards }, (_, s) => shardHead(prefix, cand.version, s));
    this.#candidateKeyHeads = this.#candidateHeads?.map((h) => h + 'k:');
    this.#onDisagree = opts.onShadowDisagreement;
  }

  /** The Redis key of a subject's bucket (layout v1). */
  bucketKey(key: string): string {
    return bucketKey(this.#prefix, KEY_LAYOUT_VERSION, this.shards === 1 ? 0 : shardOf(key, this.shards), key);
  }

  /** The Redis key of one shard of a global bucket (layout v1). */
  globalShardKey(name: string, shard: number): string {
    return globalKey(this.#prefix, KEY_LAYOUT_VERSION, shard, name);
  }

  /**
   * `ready` when every connection of the store is (the decisions' own and ioredis's), else the
   * status of one that is not (ioredis's names: `connecting`, `reconnecting`, `end`, …).
   */
  get status(): string {
    const d = this.decisions;
    if (d !== undefined && d.status !== 'ready') return d.status;
    return this.client.status;
  }

  /** Calls `fn` on every connection event of either client (refusal-cache.ts clears on them). */
  onConnectionEvent(fn: () => void): void {
    for (const ev of IOREDIS_CONNECTION_EVENTS) this.client.on(ev, fn);
    const d = this.decisions;
    if (d !== undefined) for (const ev of RESP_CONNECTION_EVENTS) d.on(ev, fn);
  }

  /** Resolves once connected (for /readyz and start-up); rejects with a `CounterStoreError` after `timeoutMs`. */
  ready(timeoutMs = this.#connectTimeoutMs): Promise<void> {
    const d = this.decisions;
    if (d === undefined) return this.#ioredisReady(timeoutMs);
    return Promise.all([
      this.#ioredisReady(timeoutMs),
      d.ready(timeoutMs).catch((err: unknown) => {
        throw respToStoreError(err as RespCallError);
      }),
    ]).then(() => undefined);
  }

  #ioredisReady(timeoutMs: number): Promise<void> {
    const c = this.client;
    if (c.status === 'ready') return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        c.off('ready', onReady);
        reject(new CounterStoreError('counter_store_unavailable', `redis: not ready within ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      c.once('ready', onReady);
    });
  }

  admit(req: AdmitRequest): Promise<AdmitResult> {
    return this.#admit(req, true) as Promise<AdmitResult>;
  }

  /**
   * The same decision as {@link admit}, resolved with the script's whole reply (Redis TIME and the
   * buckets' states included) for layers that answer later requests locally (refusal-cache.ts).
   */
  admitReply(req: AdmitRequest): Promise<AdmitReply> {
    return this.#admit(req, false) as Promise<AdmitReply>;
  }

  #admit(req: AdmitRequest, figures: boolean): Promise<AdmitResult | AdmitReply> {
    const n = this.shards;
    const shard = n === 1 ? 0 : shardOf(req.key, n);
    const L = req.limit;
    const g = req.global;
    let p: Promise<Reply>;
    const d = this.decisions;
    if (d !== undefined) {
      // Rejections are CounterStoreErrors already (respToStoreError).
      const key = this.#keyHeads[shard] + req.key;
      if (g === undefined) {
        p = d.evalsha(ADMIT_SCRIPT, [key], [ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, req.cost]) as Promise<Reply>;
      } else {
        const G = g.limit;
        p = d.evalsha(
          ADMIT_SCRIPT,
          [key, globalKeys(this.#globals, this.#heads, g.name)[shard]!],
          [
            ALGORITHM_CODE[L.algorithm],
            L.rate,
            L.burst,
            L.intervalMs,
            req.cost,
            ALGORITHM_CODE[G.algorithm],
            G.rate,
            G.burst,
            G.intervalMs,
            req.cost * n,
          ],
        ) as Promise<Reply>;
      }
      if (this.#candidateHeads === undefined) return figures ? p.then(toResult) : p;
    } else if (g === undefined) {
      p = this.guard(
        this.#cmd.rlAdmit1(this.#keyHeads[shard] + req.key, ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, req.cost),
      );
    } else {
      const G = g.limit;
      p = this.guard(
        this.#cmd.rlAdmit2(
          this.#keyHeads[shard] + req.key,
          globalKeys(this.#globals, this.#heads, g.name)[shard]!,
          ALGORITHM_CODE[L.algorithm],
          L.rate,
          L.burst,
          L.intervalMs,
          req.cost,
          ALGORITHM_CODE[G.algorithm],
          G.rate,
          G.burst,
          G.intervalMs,
          req.cost * n,
        ),
      );
    }
    if (!figures) {
      const reply = d !== undefined ? p : p.then(undefined, toStoreError);
      if (this.#candidateHeads !== undefined) {
        const enforced = reply.then(toResult);
        enforced.catch(() => undefined); // the caller handles the reply's rejection
        this.#shadow(req, shard, enforced);
      }
      return reply;
    }
    const result = d !== undefined ? p.then(toResult) : p.then(toResult, toStoreError);
    if (this.#candidateHeads !== undefined) this.#shadow(req, shard, result);
    return result;
  }

  /** Runs the candidate script on the same request and compares; never affects the caller. */
  #shadow(req: AdmitRequest, shard: number, enforced: Promise<AdmitResult>): void {
    const heads = this.#candidateHeads!;
    const keyHeads = this.#candidateKeyHeads!;
    const L = req.limit;
    const g = req.global;
    let c: Promise<Reply>;
    if (g === undefined) {
      c = this.#cmd.rlCandidate1(keyHeads[shard] + req.key, ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, req.cost);
    } else {
      const G = g.limit;
      c = this.#cmd.rlCandidate2(
        keyHeads[shard] + req.key,
        globalKeys(this.#candidateGlobals, heads, g.name)[shard]!,
        ALGORITHM_CODE[L.algorithm],
        L.rate,
        L.burst,
        L.intervalMs,
        req.cost,
        ALGORITHM_CODE[G.algorithm],
        G.rate,
        G.burst,
        G.intervalMs,
        req.cost * this.shards,
      );
    }
    const stats = this.shadowStats;
    c.then(
      (reply) => {
        const cand = toResult(reply);
        enforced.then(
          (enf) => {
            stats.compared++;
            if (enf.allowed !== cand.allowed) {
              stats.disagreed++;
              this.#onDisagree?.(req.key, enf, cand);
            }
          },
          () => undefined,
        );
      },
      () => {
        stats.errors++;
      },
    );
  }

  /**
   * An ioredis call (just made) under the store's loop-aware deadline (reply-deadline.ts): rejects
   * with a `counter_store_timeout` only when no reply had arrived `deadlineMs` after the write,
   * event-loop delay excluded, or, on a cluster, after the last redirection ioredis followed.
   */
  guard<T>(call: Promise<T>): Promise<T> {
    return this.#deadlines.track(call);
  }

  /**
   * Notes every redirection the cluster client handles (its `handleError`, where MOVED, ASK,
   * TRYAGAIN and CLUSTERDOWN go), and when it re-sends (its handlers, run at once or after the
   * TRYAGAIN pause): calls written before get their deadline from then (ReplyDeadlines
   * `redirect`), since ioredis re-sends them inside one promise without telling which. Wraps an
   * internal method of ioredis 5 (pinned in package.json); test/limiter/cluster-reshard.test.ts
   * fails if it stops being called.
   */
  #watchRedirections(cluster: Cluster): void {
    type Handlers = Record<string, unknown>;
    const c = cluster as unknown as { handleError?: (error: Error, ttl: unknown, handlers: Handlers) => unknown };
    const handle = c.handleError;
    if (typeof handle !== 'function') return;
    const deadlines = this.#deadlines;
    const noted =
      (f: (...args: unknown[]) => unknown) =>
      (...args: unknown[]): unknown => {
        deadlines.redirectedAt = performance.now();
        return f(...args);
      };
    c.handleError = function (this: unknown, error: Error, ttl: unknown, handlers: Handlers) {
      if (!(error instanceof Error) || !REDIRECTION.test(error.message)) return handle.call(this, error, ttl, handlers);
      deadlines.redirectedAt = performance.now();
      const wrapped: Handlers = {};
      for (const [name, f] of Object.entries(handlers)) {
        wrapped[name] = typeof f === 'function' ? noted(f as (...args: unknown[]) => unknown) : f;
      }
      return handle.call(this, error, ttl, wrapped);
    };
  }

  /** The candidate's layout version, when one runs in shadow. */
  get candidateVersion(): string | undefined {
    return this.#candidateVersion;
  }

  async close(): Promise<void> {
    this.#deadlines.clear();
    await this.decisions?.close();
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }
}

function globalKeys(cache: Map<string, string[]>, heads: readonly string[], name: string): string[] {
  let keys = cache.get(name);
  if (keys === undefined) {
    keys = heads.map((h) => h + 'g:' + name);
    cache.set(name, keys);
  }
  return keys;
}

/** The decision's figures out of a script reply. */
export function toResult(r: AdmitReply): AdmitResult {
  return { allowed: r[0] === 1, binding: r[1] === 1 ? 'global' : 'key', limit: r[2], remaining: r[3], resetAtMs: r[4], retryAfterMs: r[5] };
}

function toStoreError(err: unknown): never {
  if (err instanceof CounterStoreError) throw err;
  if (err instanceof Error && err.message === 'Command timed out') {
    throw new CounterStoreError('counter_store_timeout', 'redis: no answer within the deadline', err);
  }
  throw new CounterStoreError('counter_store_unavailable', 'redis: the counter store cannot answer', err);
}

/** The decisions' connection's failures as the store's typed errors (no second handler per call). */
function respToStoreError(err: RespCallError | RespError): CounterStoreError {
  if (err instanceof RespCallError && err.kind === 'timeout') {
    return new CounterStoreError('counter_store_timeout', 'redis: no answer within the deadline', err);
  }
  return new CounterStoreError('counter_store_unavailable', 'redis: the counter store cannot answer', err);
}

function parseNode(s: string): { host: string; port: number } {
  const i = s.lastIndexOf(':');
  const port = Number(s.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port < 1 || port > 65535)
    throw new RangeError(`RedisCounterStore: cluster node must be host:port, got ${s}`);
  return { host: s.slice(0, i), port };
}
