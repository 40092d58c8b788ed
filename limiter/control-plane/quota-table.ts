/**
 * The control plane's in-memory part of the quota table: the plans and the recent changes, from
 * which every snapshot sent to a sidecar is cut. Key records are not held here (at 20 million keys
 * that is gigabytes): sidecars look them up from PostgreSQL's primary key (QuotaStore.lookup), so
 * this stays the size of the plan list plus CONTROL_PLANE_CHANGELOG_KEEP changes whatever the
 * number of keys. Pure: no I/O, no clock (the caller stamps `issued_at`).
 *
 * The copy only ever moves forward by whole, contiguous versions (`advance`), or is replaced
 * wholesale from a consistent read of the database (`replace`). Because it lives in memory, the
 * sync service keeps serving the last version it knows while PostgreSQL is down.
 *
 * What a receiver at `since` gets (proto quota.v1 QuotaSyncService):
 * - `since` 0, ahead of us, or further behind than the kept changes: a full snapshot, which holds
 *   the plans only (a sidecar drops the key records it held and looks them up again);
 * - `since` equal to our version: an empty delta at our version (a heartbeat);
 * - otherwise a delta from `since`, coalesced per subject (the last change of each wins).
 */
import { create } from '@bufbuild/protobuf';
import { SnapshotSchema, type Quota, type Snapshot } from '../../proto/gen/quota/v1/quota_pb.js';
import type { Change, TableState } from './store.js';

export type SnapshotKind = 'full' | 'delta' | 'heartbeat';

export class QuotaTable {
  private readonly plans = new Map<string, Quota>();
  /** Ascending, contiguous, ending at `version`; at most `keep` entries. */
  private changes: Change[] = [];
  private current = 0;
  private fullMemo: Snapshot | undefined;
  private readonly deltaMemo = new Map<number, Snapshot>();

  /** @param keep how many recent changes to keep for deltas (CONTROL_PLANE_CHANGELOG_KEEP). */
  constructor(private readonly keep: number) {}

  get version(): number {
    return this.current;
  }

  /** Plans held. */
  get size(): number {
    return this.plans.size;
  }

  /** The oldest `since` that still gets a delta (our version when no change is kept). */
  get oldestDeltaBase(): number {
    return this.changes.length > 0 ? this.changes[0]!.version - 1 : this.current;
  }

  /** Replaces everything with a consistent state read from the store. */
  replace(state: TableState): void {
    this.plans.clear();
    for (const q of state.plans) this.plans.set(q.subjectId, q);
    this.current = state.version;
    this.changes = contiguousTail(state.changes, state.version).slice(-this.keep);
    this.invalidate();
  }

  /**
   * Applies changes that continue our version. Changes at or below our version are skipped.
   *
   * @returns false (and changes nothing) when they do not start right after our version: the
   *   caller must `replace` from a full read.
   */
  advance(changes: readonly Change[]): boolean {
    const fresh = changes.filter((c) => c.version > this.current);
    if (fresh.length === 0) return true;
    for (let i = 0; i < fresh.length; i++) if (fresh[i]!.version !== this.current + 1 + i) return false;
    for (const c of fresh) {
      if (isPlan(c.subjectId)) {
        if (c.record) this.plans.set(c.subjectId, c.record);
        else this.plans.delete(c.subjectId);
      }
      this.changes.push(c);
    }
    if (this.changes.length > this.keep) this.changes = this.changes.slice(-this.keep);
    this.current = fresh[fresh.length - 1]!.version;
    this.invalidate();
    return true;
  }

  /** What a receiver at `since` is sent, and which kind it is. The snapshot's `issued_at` is 0. */
  snapshotSince(since: number): { snapshot: Snapshot; kind: SnapshotKind } {
    if (since > 0 && since === this.current) {
      return { snapshot: create(SnapshotSchema, { version: BigInt(since), delta: true, baseVersion: BigInt(since) }), kind: 'heartbeat' };
    }
    if (since > 0 && since < this.current && since >= this.oldestDeltaBase) return { snapshot: this.delta(since), kind: 'delta' };
    return { snapshot: this.full(), kind: 'full' };
  }

  /** A plan's record at our version (`plan:<name>`). */
  plan(subjectId: string): Quota | undefined {
    return this.plans.get(subjectId);
  }

  private full(): Snapshot {
    this.fullMemo ??= create(SnapshotSchema, { version: BigInt(this.current), delta: false, quotas: [...this.plans.values()] });
    return this.fullMemo;
  }

  private delta(since: number): Snapshot {
    let memo = this.deltaMemo.get(since);
    if (memo) return memo;
    // The last change per subject within (since, current] decides: upserted records are sent as
    // they stand now, subjects whose last change was a delete are listed as deleted.
    const last = new Map<string, Change>();
    for (let i = this.changes.length - 1; i >= 0; i--) {
      const c = this.changes[i]!;
      if (c.version <= since) break;
      if (!last.has(c.subjectId)) last.set(c.subjectId, c);
    }
    const quotas: Quota[] = [];
    const deleted: string[] = [];
    for (const c of [...last.values()].reverse()) {
      if (c.record) quotas.push(c.record);
      else deleted.push(c.subjectId);
    }
    memo = create(SnapshotSchema, {
      version: BigInt(this.current),
      delta: true,
      baseVersion: BigInt(since),
      quotas,
      deletedSubjectIds: deleted,
    });
    this.deltaMemo.set(since, memo);
    return memo;
  }

  private invalidate(): void {
    this.fullMemo = undefined;
    this.deltaMemo.clear();
  }
}

function isPlan(subjectId: string): boolean {
  return subjectId.startsWith('plan:');
}

/** The longest run of `changes` (ascending) that ends at `version` without a gap. */
function contiguousTail(changes: readonly Change[], version: number): Change[] {
  const sorted = changes.filter((c) => c.version <= version);
  let start = sorted.length;
  let expect = version;
  while (start > 0 && sorted[start - 1]!.version === expect) {
    start--;
    expect--;
  }
  return sorted.slice(start);
}
