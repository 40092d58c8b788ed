/**
 * The sidecars a replica knows: which are connected, the version each has acked, and the writes
 * waiting for those acks ("the next request sees the new limit").
 *
 * Connected means holding an open Watch stream, here (local) or on another replica of the same
 * database (remote, learned through presence.ts and kept while its replica keeps announcing it).
 * A write waits for the sidecars connected at the moment it committed, each to ack that version or
 * a later one, up to its timeout. A sidecar that connects later is not waited for (its first
 * snapshot already includes the write); one that disconnects while waited for is reported as
 * lagging at once, since it can no longer ack what it was sent.
 *
 * Local events (a stream opened or closed, an ack received here) are reported to the `observer`,
 * which broadcasts them to the other replicas.
 *
 * Acks also feed the propagation latency (commit on this replica to each sidecar's ack) and the
 * per-sidecar applied-version gauge (sidecars connected or acking here). A sidecar that only polls
 * (no stream) may ack too; it is remembered for `idleForgetMs` after its last ack, and never
 * waited for.
 */
import type { Clock } from '../../shared/clock.js';
import type { ControlPlaneMetrics } from './metrics.js';

export interface AckOutcome {
  /** Sidecars that acked the version (or a later one), in the order they did. */
  acked: string[];
  /** Connected sidecars that had not when the wait ended (timeout or disconnect), sorted. */
  lagging: string[];
}

/** Told about local events, to share them with the other replicas. */
export interface SidecarObserver {
  connected(id: string): void;
  disconnected(id: string): void;
  acked(id: string, version: number): void;
}

interface SidecarState {
  id: string;
  /** Open Watch streams from this sidecar on this replica (a reconnect may overlap the old one). */
  streams: number;
  /** Another replica that reports a stream from it, and until when (clock ms) that report holds. */
  remote: { replica: string; untilMs: number } | undefined;
  acked: number;
  lastSeenMs: number;
  /** Shown in the applied-version gauge (it streams or acks here). */
  gauged: boolean;
}

interface Wait {
  version: number;
  pending: Set<string>;
  acked: string[];
  lagging: string[];
  timer: NodeJS.Timeout | undefined;
  resolve: (outcome: AckOutcome) => void;
}

/** How many recent local commits keep their commit time for the latency histogram. */
const COMMIT_TIMES_KEPT = 1024;

export class SidecarRegistry {
  private readonly sidecars = new Map<string, SidecarState>();
  private readonly waits = new Set<Wait>();
  /** Local commits by version: when they committed (clock ms). Ascending by version. */
  private readonly commitTimes = new Map<number, number>();
  private observer: SidecarObserver | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly metrics: ControlPlaneMetrics,
    private readonly idleForgetMs = 10 * 60_000,
  ) {}

  /** Sets who hears about local events (presence.ts). */
  observe(observer: SidecarObserver): void {
    this.observer = observer;
  }

  /** Ids of the connected sidecars (here or on another replica), sorted. */
  connected(): string[] {
    const now = this.clock.now();
    return [...this.sidecars.values()]
      .filter((s) => isConnected(s, now))
      .map((s) => s.id)
      .sort();
  }

  /** Ids of the sidecars with a stream on this replica, sorted. */
  local(): string[] {
    return [...this.sidecars.values()]
      .filter((s) => s.streams > 0)
      .map((s) => s.id)
      .sort();
  }

  /** The version a sidecar last acked (0 when none, or unknown). */
  ackedVersion(id: string): number {
    return this.sidecars.get(id)?.acked ?? 0;
  }

  /** A Watch stream opened here. */
  connect(id: string): void {
    const s = this.state(id);
    s.streams++;
    s.lastSeenMs = this.clock.now();
    s.gauged = true;
    // Listed from its first stream, at the version it last acked (0 before any): a sidecar that
    // connected to an empty quota table is still a sidecar the console's overview should see.
    this.metrics.appliedVersion.set({ sidecar: id }, s.acked);
    this.updateGauges();
    this.observer?.connected(id);
  }

  /** A Watch stream closed here. Waits for this sidecar end for it (lagging) when it has no stream left. */
  disconnect(id: string): void {
    const s = this.sidecars.get(id);
    if (!s || s.streams === 0) return;
    s.streams--;
    s.lastSeenMs = this.clock.now();
    if (s.streams === 0) {
      s.gauged = false;
      this.metrics.appliedVersion.remove({ sidecar: id });
      this.observer?.disconnected(id);
      if (!isConnected(s, this.clock.now())) this.gone(id);
    }
    this.updateGauges();
  }

  /** Another replica reports streams from these sidecars, valid for `ttlMs`. */
  remoteConnected(replica: string, ids: readonly string[], ttlMs: number): void {
    const untilMs = this.clock.now() + ttlMs;
    for (const id of ids) this.state(id).remote = { replica, untilMs };
  }

  /** Another replica reports a sidecar's stream there closed. */
  remoteDisconnected(replica: string, id: string): void {
    const s = this.sidecars.get(id);
    if (!s || s.remote?.replica !== replica) return;
    s.remote = undefined;
    if (s.streams === 0) this.gone(id);
  }

  /**
   * A sidecar reports the version it has applied (`local`: through this replica's Ack; else as
   * relayed by another replica). Older reports than one already seen change nothing.
   */
  ack(id: string, version: number, local = true): void {
    const s = this.state(id);
    const now = this.clock.now();
    if (local) {
      s.lastSeenMs = now;
      s.gauged = true;
      this.observer?.acked(id, version);
    }
    if (version <= s.acked) return;
    const previous = s.acked;
    s.acked = version;
    for (const [v, at] of this.commitTimes) {
      if (v > previous && v <= version) this.metrics.propagationSeconds.observe(Math.max(0, now - at) / 1000);
    }
    if (s.gauged) this.metrics.appliedVersion.set({ sidecar: id }, version);
    for (const w of this.waits) {
      if (version >= w.version && w.pending.delete(id)) {
        w.acked.push(id);
        this.settleIfDone(w);
      }
    }
  }

  /** Records when a version committed on this replica (for the propagation histogram). */
  committed(version: number): void {
    this.commitTimes.set(version, this.clock.now());
    if (this.commitTimes.size > COMMIT_TIMES_KEPT) {
      const oldest = this.commitTimes.keys().next().value;
      if (oldest !== undefined) this.commitTimes.delete(oldest);
    }
  }

  /**
   * Waits until every sidecar connected now has acked `version` (or later), or `timeoutMs` passed.
   * Resolves immediately when none is connected or all are already there.
   */
  waitForAcks(version: number, timeoutMs: number): Promise<AckOutcome> {
    const acked: string[] = [];
    const pending = new Set<string>();
    for (const id of this.connected()) {
      if (this.ackedVersion(id) >= version) acked.push(id);
      else pending.add(id);
    }
    if (pending.size === 0 || timeoutMs <= 0) return Promise.resolve({ acked, lagging: [...pending].sort() });
    return new Promise((resolve) => {
      const w: Wait = { version, pending, acked, lagging: [], timer: undefined, resolve };
      w.timer = setTimeout(() => this.settle(w), timeoutMs);
      this.waits.add(w);
    });
  }

  /**
   * Expires remote reports that were not renewed, and forgets sidecars with no stream anywhere
   * that have not acked for `idleForgetMs`. Call periodically.
   */
  sweep(): void {
    const now = this.clock.now();
    const cutoff = now - this.idleForgetMs;
    for (const [id, s] of this.sidecars) {
      if (s.remote && s.remote.untilMs <= now) {
        s.remote = undefined;
        if (s.streams === 0) this.gone(id);
      }
      if (s.streams === 0 && !s.remote && s.lastSeenMs < cutoff) {
        this.sidecars.delete(id);
        this.metrics.appliedVersion.remove({ sidecar: id });
      }
    }
  }

  /** Ends every wait now (shutdown): whoever has not acked is lagging. */
  close(): void {
    for (const w of [...this.waits]) this.settle(w);
  }

  private state(id: string): SidecarState {
    let s = this.sidecars.get(id);
    if (!s) {
      s = { id, streams: 0, remote: undefined, acked: 0, lastSeenMs: this.clock.now(), gauged: false };
      this.sidecars.set(id, s);
    }
    return s;
  }

  /** A sidecar is no longer connected anywhere: waits for it end for it. */
  private gone(id: string): void {
    for (const w of this.waits) {
      if (w.pending.delete(id)) {
        w.lagging.push(id);
        this.settleIfDone(w);
      }
    }
  }

  private settleIfDone(w: Wait): void {
    if (w.pending.size === 0) this.settle(w);
  }

  private settle(w: Wait): void {
    if (!this.waits.delete(w)) return;
    clearTimeout(w.timer);
    w.resolve({ acked: w.acked, lagging: [...w.lagging, ...w.pending].sort() });
  }

  private updateGauges(): void {
    this.metrics.connectedSidecars.set(this.local().length);
  }
}

function isConnected(s: SidecarState, nowMs: number): boolean {
  return s.streams > 0 || (s.remote !== undefined && s.remote.untilMs > nowMs);
}
