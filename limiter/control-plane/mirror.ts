/**
 * Keeps the in-memory {@link QuotaTable} in step with PostgreSQL, and tells the sync service each
 * time it moves forward.
 *
 * Three things wake it: this replica's own commits (applied at once when they follow our version,
 * without a database round trip), a NOTIFY from any replica, and a poll of the version every
 * CONTROL_PLANE_POLL_INTERVAL. The notifications are hints; the poll is the source of truth that
 * makes a missed one harmless (a dropped LISTEN connection, a NOTIFY sent while we reconnected).
 *
 * A refresh reads the changes after our version in one statement. When they continue our version
 * they are applied; when the log no longer reaches back that far (pruned) or the database went
 * backwards (restored from a backup), the whole table is read again.
 *
 * Refreshes are single-flight: a wake-up during a refresh schedules exactly one more.
 */
import type { Logger } from '../../shared/log.js';
import type { QuotaTable } from './quota-table.js';
import type { Change, QuotaStore } from './store.js';

export interface MirrorOptions {
  store: QuotaStore;
  table: QuotaTable;
  log: Logger;
  /** Called after every forward move (from any source), with the new version. */
  onAdvance: (version: number) => void;
}

export class QuotaMirror {
  private inflight: Promise<void> | undefined;
  private again = false;
  private failing = false;
  private loaded = false;

  constructor(private readonly opts: MirrorOptions) {}

  get table(): QuotaTable {
    return this.opts.table;
  }

  /** True once the table has been loaded at least once. */
  get ready(): boolean {
    return this.loaded;
  }

  /** Loads the whole table. Throws when the store cannot be read (startup fails). */
  async start(): Promise<void> {
    const state = await this.opts.store.loadState();
    this.opts.table.replace(state);
    this.loaded = true;
    this.opts.log.info({ version: state.version, plans: state.plans.length, changes: state.changes.length }, 'quota table loaded');
    this.opts.onAdvance(state.version);
  }

  /**
   * A change this replica committed. Applied at once when it is the next version; otherwise (a
   * replica committed in between, and we have not read it yet) a refresh catches up.
   */
  committed(change: Change): void {
    if (!this.loaded) return;
    if (change.version === this.opts.table.version + 1 && this.opts.table.advance([change])) {
      this.opts.onAdvance(change.version);
      return;
    }
    if (change.version > this.opts.table.version) void this.refresh();
  }

  /** A NOTIFY with a version: refresh when it is news to us. */
  notified(version: number): void {
    if (!Number.isFinite(version) || version > this.opts.table.version) void this.refresh();
  }

  /**
   * Catches up with the database. Never rejects: a failure is logged (once per outage) and the
   * table keeps serving the version it has.
   */
  refresh(): Promise<void> {
    if (!this.loaded) return Promise.resolve();
    if (this.inflight) {
      this.again = true;
      return this.inflight;
    }
    this.inflight = (async () => {
      try {
        do {
          this.again = false;
          await this.refreshOnce();
        } while (this.again);
        if (this.failing) {
          this.failing = false;
          this.opts.log.info({ version: this.opts.table.version }, 'quota store reachable again');
        }
      } catch (err) {
        if (!this.failing) {
          this.failing = true;
          this.opts.log.warn({ err, version: this.opts.table.version }, 'cannot read the quota store; serving the version in memory');
        }
      } finally {
        this.inflight = undefined;
      }
    })();
    return this.inflight;
  }

  private async refreshOnce(): Promise<void> {
    const table = this.opts.table;
    const before = table.version;
    const { current, changes } = await this.opts.store.changesSince(before);
    if (current === before) return;
    if (current > before && changes.length > 0 && changes[0]!.version === before + 1 && changes[changes.length - 1]!.version === current) {
      if (table.advance(changes)) {
        this.opts.onAdvance(table.version);
        return;
      }
    }
    const restored = current < before;
    if (restored)
      this.opts.log.error({ ours: before, database: current }, 'the quota table version went backwards (database restored?); reloading');
    const state = await this.opts.store.loadState();
    // Our own commit may have moved the table past this read while it ran: never step back then.
    if (!restored && state.version <= table.version) return;
    table.replace(state);
    this.opts.onAdvance(table.version);
  }
}
