/**
 * Loading and saving event-sourced aggregates: state = the latest snapshot (if any) folded with the
 * events after it; saving appends the decided events at the loaded version and takes a snapshot when
 * the stream crosses a multiple of `snapshotEvery`.
 *
 * `execute` is the command loop every handler uses: load, decide, append; when another writer got
 * there first it loads and decides again (a bounded number of times), unless the caller pinned the
 * version it decided on (`expectedVersion`, e.g. from If-Match), in which case the conflict is the
 * answer.
 */
import type { Logger } from '../../shared/log.js';
import type { JsonRecord } from '../../shared/proto-json.js';
import { ConcurrencyError, isConcurrencyError } from './errors.js';
import type { DomainEvent } from './event-data.js';
import type { AppendResult, EventStore, Queryable } from './event-store.js';
import { getSnapshot, putSnapshot, snapshotDue } from './snapshots.js';

/** How an aggregate is folded and snapshotted. `evolve` must be pure and ignore unknown event types. */
export interface AggregateDefinition<S> {
  /** Stored with snapshots, e.g. `user`. */
  readonly kind: string;
  /** The stream of the aggregate with this id. */
  streamId(id: string): string;
  initial(): S;
  evolve(state: S, event: DomainEvent): S;
  /** Version of the snapshot layout; bump it when the state's shape changes. */
  readonly snapshotFormat: number;
  toSnapshot(state: S): JsonRecord;
  fromSnapshot(json: JsonRecord): S;
}

export interface Loaded<S> {
  readonly state: S;
  /** The stream version the state includes (0: no events). */
  readonly version: number;
  /** The version of the snapshot it started from (0: none). */
  readonly snapshotVersion: number;
}

export interface Saved<S> extends Loaded<S> {
  /** The events appended (empty when the command decided nothing). */
  readonly events: readonly DomainEvent[];
  readonly append: AppendResult | undefined;
}

export interface ExecuteOptions {
  /** Decide only against this version; a different one is a ConcurrencyError, never retried. */
  expectedVersion?: number;
  /** Run inside the caller's transaction (no retries: a failed statement aborts it). */
  client?: Queryable;
  metadata?: JsonRecord;
  /** Reloads and re-decides after a conflict this many times. Default 3. */
  retries?: number;
}

/** Folds recorded events into a state (the pure part of loading). */
export function fold<S>(def: AggregateDefinition<S>, state: S, events: readonly { readonly type: string; readonly data: unknown }[]): S {
  let s = state;
  for (const e of events) s = def.evolve(s, { type: e.type, data: e.data } as unknown as DomainEvent);
  return s;
}

export class AggregateRepository<S> {
  constructor(
    private readonly store: EventStore,
    readonly def: AggregateDefinition<S>,
    private readonly opts: { snapshotEvery: number; log?: Pick<Logger, 'warn'> },
  ) {}

  /** The aggregate's current state; `snapshots: false` replays the whole stream. */
  async load(id: string, opts: { client?: Queryable; snapshots?: boolean } = {}): Promise<Loaded<S>> {
    const streamId = this.def.streamId(id);
    const db = opts.client ?? this.store.pool;
    let state = this.def.initial();
    let from = 0;
    if (opts.snapshots !== false) {
      const snap = await getSnapshot(db, streamId);
      if (snap && snap.format === this.def.snapshotFormat && snap.aggregate === this.def.kind) {
        state = this.def.fromSnapshot(snap.state);
        from = snap.version;
      }
    }
    const events = await this.store.readStream(streamId, { afterVersion: from, client: opts.client });
    const last = events[events.length - 1];
    return { state: fold(this.def, state, events), version: last ? last.streamVersion : from, snapshotVersion: from };
  }

  /** Appends `events` decided against `loaded`; snapshots when due. */
  async save(id: string, loaded: Loaded<S>, events: readonly DomainEvent[], opts: Omit<ExecuteOptions, 'retries'> = {}): Promise<Saved<S>> {
    if (events.length === 0) return { ...loaded, events, append: undefined };
    const streamId = this.def.streamId(id);
    const append = await this.store.appendEvents(streamId, loaded.version, events, { client: opts.client, metadata: opts.metadata });
    let state = loaded.state;
    for (const e of events) state = this.def.evolve(state, e);
    if (snapshotDue(loaded.version, append.version, this.opts.snapshotEvery)) {
      const snap = {
        streamId,
        aggregate: this.def.kind,
        version: append.version,
        format: this.def.snapshotFormat,
        state: this.def.toSnapshot(state),
      };
      if (opts.client) {
        // Same transaction: a snapshot must never describe events that were rolled back.
        await putSnapshot(opts.client, snap);
      } else {
        await putSnapshot(this.store.pool, snap).catch((err: unknown) => this.opts.log?.warn({ err, streamId }, 'snapshot not written'));
      }
    }
    return { state, version: append.version, snapshotVersion: loaded.snapshotVersion, events, append };
  }

  /** Load, decide, append, retrying after a conflict (see the module comment). */
  async execute(id: string, decide: (loaded: Loaded<S>) => readonly DomainEvent[], opts: ExecuteOptions = {}): Promise<Saved<S>> {
    const retries = opts.client || opts.expectedVersion !== undefined ? 0 : (opts.retries ?? 3);
    for (let attempt = 0; ; attempt++) {
      const loaded = await this.load(id, { client: opts.client });
      if (opts.expectedVersion !== undefined && loaded.version !== opts.expectedVersion) {
        throw new ConcurrencyError(this.def.streamId(id), opts.expectedVersion, loaded.version);
      }
      const events = decide(loaded);
      try {
        return await this.save(id, loaded, events, opts);
      } catch (err) {
        if (!isConcurrencyError(err) || attempt >= retries) throw err;
      }
    }
  }
}
