/**
 * What a projector is: a named consumer of the event log that keeps read-model tables (or performs
 * guarded side effects) from the events of the types it declares.
 *
 * Contract, checked by the runner and the tests:
 * - it receives only events of `eventTypes`, in log order, in batches, inside a transaction that
 *   also advances its checkpoint (so a batch is applied exactly once per generation);
 * - `apply` is idempotent (the same event twice changes nothing more) and tolerant of missing
 *   fields (a stored event of an older shape or a partial payload is projected as far as it goes,
 *   never rejected);
 * - it writes only to the tables of the generation it is given (`ctx.table(base)`), never to the
 *   live views, so a rebuild into a new generation never touches what readers see until the switch;
 * - side effects (notifications, webhooks) are only ever outbox rows guarded by `side_effects_done`
 *   (side-effects.ts), so a replay or a rebuild never repeats them.
 */
import type { Logger } from '../../shared/log.js';
import type { Queryable, RecordedEvent } from './event-store.js';

export interface ProjectionContext {
  /** The generation being written. */
  readonly generation: number;
  /** The quoted name of a table of this generation: `"<base>_g<generation>"`. */
  table(base: string): string;
  /** Clock time, epoch ms. */
  readonly now: number;
  readonly log: Logger;
}

/** A live view: `CREATE VIEW <name> AS <select>` over the live generation's tables. */
export interface ViewDefinition {
  readonly name: string;
  readonly select: string;
}

export interface Projector {
  /** Stable name: the key of its checkpoints, dead letters and views. Lower-case snake_case. */
  readonly name: string;
  /** Version of the projection logic; a change makes the service rebuild into a new generation. */
  readonly version: number;
  readonly eventTypes: ReadonlySet<string>;
  /** Base names of the tables of one generation (dropped with the generation). */
  readonly tables: readonly string[];
  /** Creates the tables of `ctx.generation` (IF NOT EXISTS: safe to repeat). */
  createTables(client: Queryable, ctx: ProjectionContext): Promise<void>;
  /** The live views over `ctx.generation`'s tables. */
  views(ctx: ProjectionContext): readonly ViewDefinition[];
  /** Applies a batch (see the module comment). Throws to refuse; the runner isolates the bad event. */
  apply(client: Queryable, events: readonly RecordedEvent[], ctx: ProjectionContext): Promise<void>;
}

/** The table of generation `g`: `<base>_g<g>`, as a quoted identifier. */
export function generationTable(base: string, generation: number): string {
  if (!/^[a-z][a-z0-9_]*$/.test(base)) throw new Error(`projector table name ${base} must be lower-case snake_case`);
  return `"${base}_g${generation}"`;
}

export function projectionContext(generation: number, now: number, log: Logger): ProjectionContext {
  return { generation, now, log, table: (base) => generationTable(base, generation) };
}

/** The checkpoint key of one generation of a projector. */
export function consumerName(projector: string, generation: number): string {
  return `${projector}:g${generation}`;
}

// ── helpers for tolerant handlers ───────────────────────────────────────────

/** `v` if it is a string, else undefined. */
export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** `v` if it is a finite number, else undefined. */
export function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/**
 * The id of the entity an event is about: from its stream (`<kind>-<id>`, authoritative), else
 * from the payload field `field`, else the stream id itself.
 */
export function entityId(event: Pick<RecordedEvent, 'streamId' | 'data'>, kind: string, field: string): string {
  const prefix = `${kind}-`;
  if (event.streamId.startsWith(prefix)) return event.streamId.slice(prefix.length);
  return str(event.data[field]) ?? event.streamId;
}
