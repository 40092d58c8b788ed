/**
 * Runs the projectors: one loop per projector, woken by LISTEN/NOTIFY (a hint) and by a poll timer
 * (the source of truth: a lost notification costs at most one poll interval).
 *
 * Generations. A projector's tables are versioned (`<table>_g<N>`), and readers only ever query the
 * live views (`<table>`), which select from the live generation. Replay and backfill never happen in
 * place: `rebuild` creates generation N+1 with a checkpoint at the start of the log, and the loop
 * feeds it as a separate consumer while the live generation keeps being updated. Once it has caught
 * up, one transaction holding both consumers' locks applies the last events, re-points the views at
 * N+1 and records it as live: readers see the old model or the new one, never a mix. The old
 * generation's tables are dropped after the switch.
 *
 * When the code's `projector.version` differs from the live generation's, the service rebuilds on
 * its own at start; the live generation is then frozen (its code is gone) and serves stale data
 * until the switch.
 *
 * Several replicas may run this: each consumer's batches run under a transaction-scoped advisory
 * lock, so one replica at a time advances a given consumer and the others skip it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import { consumeBatch, type BatchResult } from './consumer.js';
import type { EventStore } from './event-store.js';
import type { EventMetrics } from './metrics.js';
import {
  CREATE_CHECKPOINT,
  GET_PROJECTION,
  INSERT_PROJECTION,
  LAG,
  LOCK,
  LOCK_NS,
  START_BUILDING,
  SUPERSEDE_DEAD_LETTERS,
  SWITCH_LIVE,
  TRY_LOCK,
  lockKey,
  type ConsumerRole,
  type ProjectionRow,
} from './projection-sql.js';
import { consumerName, generationTable, projectionContext, type Projector } from './projector.js';

export interface RunnerOptions {
  pool: pg.Pool;
  store: EventStore;
  projectors: readonly Projector[];
  clock: Clock;
  log: Logger;
  metrics?: EventMetrics;
  /** Events per batch (IDENTITY_PROJECTION_BATCH). */
  batchSize: number;
  /** Attempts per event before it is dead-lettered (IDENTITY_PROJECTION_MAX_ATTEMPTS). */
  maxAttempts: number;
  /** Poll interval, ms (IDENTITY_PROJECTION_POLL_INTERVAL). */
  pollIntervalMs: number;
}

export interface ProjectionStatus {
  projector: string;
  codeVersion: number;
  liveGeneration: number;
  liveCodeVersion: number;
  buildingGeneration: number | null;
  livePosition: number;
  buildingPosition: number | null;
  openDeadLetters: number;
}

export interface StepResult {
  /** A batch was full: run again at once. */
  more: boolean;
  /** A consumer's lock was held elsewhere. */
  busy: boolean;
}

type Outcome = BatchResult | 'busy' | 'none';

/** How soon a projector looks again when committed events are held behind an older open transaction. */
const HELD_BACK_RETRY_MS = 50;

class Wakeable {
  private woken = false;
  private resolve: (() => void) | undefined;
  wake(): void {
    this.woken = true;
    this.resolve?.();
  }
  /** Resolves after `ms`, or at once / as soon as woken. */
  async wait(ms: number): Promise<void> {
    if (!this.woken) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((r) => {
        this.resolve = r;
        timer = setTimeout(r, ms);
      });
      clearTimeout(timer);
      this.resolve = undefined;
    }
    this.woken = false;
  }
}

export class ProjectionRunner {
  private readonly byName: Map<string, Projector>;
  private readonly wakers = new Map<string, Wakeable>();
  private loops: Promise<void>[] = [];
  private closed = false;
  private started = false;

  constructor(private readonly opts: RunnerOptions) {
    this.byName = new Map(opts.projectors.map((p) => [p.name, p]));
    if (this.byName.size !== opts.projectors.length) throw new Error('projector names must be unique');
  }

  get projectors(): readonly Projector[] {
    return this.opts.projectors;
  }

  /** True once every projector has live views (readiness). */
  get ready(): boolean {
    return this.started;
  }

  /** Creates missing generations and views; starts a rebuild where the code version changed. */
  async ensure(): Promise<void> {
    for (const p of this.opts.projectors) await this.ensureOne(p);
    this.started = true;
  }

  /** `ensure`, then one loop per projector. */
  async start(): Promise<void> {
    await this.ensure();
    for (const p of this.opts.projectors) {
      const w = new Wakeable();
      this.wakers.set(p.name, w);
      this.loops.push(this.loop(p, w));
    }
  }

  /** A hint that events were appended (NOTIFY, or an append in this process). */
  wake(): void {
    for (const w of this.wakers.values()) w.wake();
  }

  /** Stops the loops after their current batch. */
  async close(): Promise<void> {
    this.closed = true;
    this.wake();
    await Promise.allSettled(this.loops);
  }

  /**
   * Runs every consumer until none has anything left (for tests, the benchmark and the CLI path).
   * Switches rebuilt generations that catch up. Waits for consumers another process is running.
   */
  async drain(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { more, busy } = await this.stepAll();
      // "Nothing read" is not "caught up": a long transaction anywhere on the server holds the
      // read horizon back (store-sql.ts). Done only when no committed event is left unpassed.
      if (!more && !busy && (await this.caughtUp())) return;
      if (Date.now() > deadline) throw new Error(`projections did not drain within ${timeoutMs} ms`);
      if (!more) await sleep(10);
    }
  }

  /** True when every running consumer (live, unless frozen, and rebuilding) has passed every committed event. */
  async caughtUp(): Promise<boolean> {
    const { rows } = await this.opts.pool.query<{
      projector: string;
      live_generation: number;
      live_code_version: number;
      building_generation: number | null;
    }>('SELECT projector, live_generation, live_code_version, building_generation FROM projections WHERE projector = ANY ($1::text[])', [
      [...this.byName.keys()],
    ]);
    const consumers: string[] = [];
    for (const r of rows) {
      if (r.live_code_version === this.byName.get(r.projector)?.version) consumers.push(consumerName(r.projector, r.live_generation));
      if (r.building_generation !== null) consumers.push(consumerName(r.projector, r.building_generation));
    }
    const { rows: behind } = await this.opts.pool.query(
      `SELECT 1 FROM projection_checkpoints c
        WHERE c.consumer = ANY ($1::text[]) AND EXISTS (SELECT 1 FROM events e WHERE (e.tx, e.position) > (c.tx, c.position))
        LIMIT 1`,
      [consumers],
    );
    return behind.length === 0;
  }

  /**
   * One batch for every consumer (live and rebuilding) of every projector, switching a rebuild that
   * has caught up. `more`: some batch was full; `busy`: some consumer was locked by another process.
   */
  async stepAll(): Promise<StepResult> {
    let more = false;
    let busy = false;
    for (const p of this.opts.projectors) {
      const r = await this.step(p);
      more ||= r.more;
      busy ||= r.busy;
    }
    return { more, busy };
  }

  /**
   * Starts rebuilding `projector` into a new generation from the start of the log (replay and
   * backfill). The switch happens on its own once the new generation has caught up. Returns the new
   * generation; a rebuild already under way is returned as it is.
   */
  async rebuild(projector: string): Promise<number> {
    const p = this.byName.get(projector);
    if (!p) throw new Error(`no projector ${projector}`);
    const gen = await this.inTransaction(async (client) => {
      await client.query({ ...LOCK, values: [LOCK_NS, lockKey(p.name, 'live')] });
      const row = await this.projectionRow(client, p.name);
      if (!row) throw new Error(`projector ${p.name} is not initialised`);
      if (row.building_generation !== null) return row.building_generation;
      return this.startBuilding(client, p, row.live_generation + 1);
    });
    this.wakers.get(p.name)?.wake();
    return gen;
  }

  /** Per projector: generations, positions and open dead letters. */
  async status(): Promise<ProjectionStatus[]> {
    const { rows } = await this.opts.pool.query<{
      projector: string;
      live_generation: number;
      live_code_version: number;
      building_generation: number | null;
      live_position: string | null;
      building_position: string | null;
      open_dead_letters: string;
    }>(
      `SELECT p.projector, p.live_generation, p.live_code_version, p.building_generation,
              l.position AS live_position, b.position AS building_position,
              (SELECT count(*) FROM projection_dead_letters d WHERE d.projector = p.projector AND d.status = 'open') AS open_dead_letters
         FROM projections p
         LEFT JOIN projection_checkpoints l ON l.consumer = p.projector || ':g' || p.live_generation
         LEFT JOIN projection_checkpoints b ON b.consumer = p.projector || ':g' || p.building_generation
        WHERE p.projector = ANY ($1::text[]) ORDER BY p.projector`,
      [[...this.byName.keys()]],
    );
    return rows.map((r) => ({
      projector: r.projector,
      codeVersion: this.byName.get(r.projector)?.version ?? 0,
      liveGeneration: r.live_generation,
      liveCodeVersion: r.live_code_version,
      buildingGeneration: r.building_generation,
      livePosition: Number(r.live_position ?? 0),
      buildingPosition: r.building_position === null ? null : Number(r.building_position),
      openDeadLetters: Number(r.open_dead_letters),
    }));
  }

  /** Each projector's lag in seconds (the metric; see metrics.ts). */
  async lagSeconds(): Promise<Record<string, number>> {
    const { rows: gens } = await this.opts.pool.query<{ projector: string; live_generation: number }>(
      'SELECT projector, live_generation FROM projections WHERE projector = ANY ($1::text[])',
      [[...this.byName.keys()]],
    );
    const consumers = new Map(gens.map((g) => [consumerName(g.projector, g.live_generation), g.projector]));
    const { rows } = await this.opts.pool.query<{ consumer: string; lag: number }>(LAG, [[...consumers.keys()]]);
    const out: Record<string, number> = {};
    for (const r of rows) out[consumers.get(r.consumer)!] = Math.max(0, r.lag);
    return out;
  }

  // ── internals ───────────────────────────────────────────────────────────

  private async loop(p: Projector, w: Wakeable): Promise<void> {
    let failures = 0;
    while (!this.closed) {
      let more = false;
      try {
        more = (await this.step(p)).more;
        failures = 0;
      } catch (err) {
        failures++;
        this.opts.metrics?.tickErrors.inc({ projector: p.name });
        this.opts.log.warn({ err, projector: p.name, failures }, 'projector batch failed; retrying');
        await w.wait(Math.min(30_000, this.opts.pollIntervalMs * 2 ** Math.min(failures, 5)));
        continue;
      }
      if (more || this.closed) continue;
      // Committed events that were not readable yet (an older transaction still running holds the
      // horizon) will not be announced again: look again soon rather than at the next poll.
      const held = await this.heldBack(p).catch(() => false);
      await w.wait(held ? Math.min(HELD_BACK_RETRY_MS, this.opts.pollIntervalMs) : this.opts.pollIntervalMs);
    }
  }

  /** True when committed events wait after the live checkpoint of `p`. */
  private async heldBack(p: Projector): Promise<boolean> {
    const { rows } = await this.opts.pool.query(
      `SELECT 1 FROM projections p JOIN projection_checkpoints c ON c.consumer = p.projector || ':g' || p.live_generation
        WHERE p.projector = $1 AND p.live_code_version = $2
          AND EXISTS (SELECT 1 FROM events e WHERE (e.tx, e.position) > (c.tx, c.position))`,
      [p.name, p.version],
    );
    return rows.length > 0;
  }

  /** One batch for the live consumer and one for a rebuilding one; switches a caught-up rebuild. */
  private async step(p: Projector): Promise<StepResult> {
    const live = await this.batch(p, 'live');
    // A rebuild is rare: look before opening a transaction for it (batch() checks again under its lock).
    const { rows } = await this.opts.pool.query<ProjectionRow>({ ...GET_PROJECTION, values: [p.name] });
    const build: Outcome = rows[0]?.building_generation != null ? await this.batch(p, 'build') : 'none';
    let switched = false;
    if (typeof build === 'object' && !build.full) switched = await this.trySwitch(p);
    const full = (o: Outcome): boolean => typeof o === 'object' && o.full;
    return { more: full(live) || full(build) || switched, busy: live === 'busy' || build === 'busy' };
  }

  private async batch(p: Projector, role: ConsumerRole): Promise<Outcome> {
    return this.inTransaction(async (client) => {
      const { rows } = await client.query<{ ok: boolean }>({ ...TRY_LOCK, values: [LOCK_NS, lockKey(p.name, role)] });
      if (!rows[0]?.ok) return 'busy' as const;
      const row = await this.projectionRow(client, p.name);
      if (!row) return 'none' as const;
      let generation: number;
      if (role === 'live') {
        // A live generation built by other code is frozen until its rebuild switches.
        if (row.live_code_version !== p.version) return 'none' as const;
        generation = row.live_generation;
      } else {
        if (row.building_generation === null) return 'none' as const;
        generation = row.building_generation;
      }
      return consumeBatch(client, p, generation, this.batchOptions(role === 'live'));
    });
  }

  private batchOptions(live: boolean): Parameters<typeof consumeBatch>[3] {
    return {
      store: this.opts.store,
      batchSize: this.opts.batchSize,
      maxAttempts: this.opts.maxAttempts,
      now: this.opts.clock.now(),
      log: this.opts.log,
      metrics: this.opts.metrics,
      live,
    };
  }

  /** The atomic switch (see the module comment). False when there was nothing to switch. */
  private async trySwitch(p: Projector): Promise<boolean> {
    const done = await this.inTransaction(async (client) => {
      await client.query({ ...LOCK, values: [LOCK_NS, lockKey(p.name, 'live')] });
      await client.query({ ...LOCK, values: [LOCK_NS, lockKey(p.name, 'build')] });
      const row = await this.projectionRow(client, p.name);
      if (!row || row.building_generation === null || row.building_code_version !== p.version) return undefined;
      const gen = row.building_generation;
      // The last events, with both consumers held: nothing is applied to the old generation from
      // here on, and the new one is complete up to the horizon when the views move.
      for (let r = await consumeBatch(client, p, gen, this.batchOptions(false)); r.full;) {
        r = await consumeBatch(client, p, gen, this.batchOptions(false));
      }
      const ctx = projectionContext(gen, this.opts.clock.now(), this.opts.log);
      for (const v of p.views(ctx)) {
        await client.query(`DROP VIEW IF EXISTS "${v.name}"`);
        await client.query(`CREATE VIEW "${v.name}" AS ${v.select}`);
      }
      await client.query(SWITCH_LIVE, [p.name, gen]);
      await client.query(SUPERSEDE_DEAD_LETTERS, [p.name, gen]);
      return { old: row.live_generation, gen };
    });
    if (!done) return false;
    this.opts.metrics?.switches.inc({ projector: p.name });
    this.opts.log.info({ projector: p.name, generation: done.gen, previous: done.old }, 'read model switched to the rebuilt generation');
    await this.dropGeneration(p, done.old).catch((err: unknown) =>
      this.opts.log.warn({ err, projector: p.name, generation: done.old }, 'old projection generation not dropped'),
    );
    return true;
  }

  private async dropGeneration(p: Projector, gen: number): Promise<void> {
    for (const t of p.tables) await this.opts.pool.query(`DROP TABLE IF EXISTS ${generationTable(t, gen)}`);
    await this.opts.pool.query('DELETE FROM projection_checkpoints WHERE consumer = $1', [consumerName(p.name, gen)]);
  }

  private async ensureOne(p: Projector): Promise<void> {
    await this.inTransaction(async (client) => {
      await client.query({ ...LOCK, values: [LOCK_NS, lockKey(p.name, 'live')] });
      const row = await this.projectionRow(client, p.name);
      if (!row) {
        const ctx = projectionContext(1, this.opts.clock.now(), this.opts.log);
        await p.createTables(client, ctx);
        for (const v of p.views(ctx)) await client.query(`CREATE OR REPLACE VIEW "${v.name}" AS ${v.select}`);
        await client.query(CREATE_CHECKPOINT, [consumerName(p.name, 1)]);
        await client.query(INSERT_PROJECTION, [p.name, 1, p.version]);
        return;
      }
      if (row.live_code_version === p.version) return;
      if (row.building_generation !== null && row.building_code_version === p.version) return;
      const next = Math.max(row.live_generation, row.building_generation ?? 0) + 1;
      if (row.building_generation !== null) {
        for (const t of p.tables) await client.query(`DROP TABLE IF EXISTS ${generationTable(t, row.building_generation)}`);
      }
      this.opts.log.info(
        { projector: p.name, from: row.live_code_version, to: p.version, generation: next },
        'projector changed; rebuilding',
      );
      await this.startBuilding(client, p, next);
    });
  }

  private async startBuilding(client: pg.PoolClient, p: Projector, gen: number): Promise<number> {
    const ctx = projectionContext(gen, this.opts.clock.now(), this.opts.log);
    for (const t of p.tables) await client.query(`DROP TABLE IF EXISTS ${generationTable(t, gen)}`);
    await p.createTables(client, ctx);
    await client.query('DELETE FROM projection_checkpoints WHERE consumer = $1', [consumerName(p.name, gen)]);
    await client.query(CREATE_CHECKPOINT, [consumerName(p.name, gen)]);
    await client.query(START_BUILDING, [p.name, gen, p.version]);
    return gen;
  }

  private async projectionRow(client: pg.PoolClient, name: string): Promise<ProjectionRow | undefined> {
    const { rows } = await client.query<ProjectionRow>({ ...GET_PROJECTION, values: [name] });
    return rows[0];
  }

  private async inTransaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.opts.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => (broken = true));
      throw err;
    } finally {
      client.release(broken);
    }
  }
}
