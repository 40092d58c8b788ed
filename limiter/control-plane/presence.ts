/**
 * Sharing sidecar presence and acks between control-plane replicas, over PostgreSQL NOTIFY on
 * {@link PRESENCE_CHANNEL}, so a write on any replica waits for every connected sidecar, whichever
 * replica its stream (or its Ack call) landed on.
 *
 * Each replica announces the sidecars streaming from it every `announceMs` (and at once when asked
 * with `hello`, which a replica sends when it starts); the others hold each announcement for three
 * periods. A stream closing is sent at once (`down`), as is every Ack received (`ack`) while
 * another replica is alive.
 *
 * Best effort by design: when PostgreSQL cannot carry a message, a remote sidecar is missing from a
 * write's wait (it still gets the write) or is reported lagging after the timeout; nothing stalls.
 *
 * Messages go out in order from one sender, batched as a JSON array per NOTIFY (under its 8000-byte
 * limit): `{"r":replica,"t":"up","s":[ids]}`, `{"r","t":"down","s":id}`,
 * `{"r","t":"ack","s":id,"v":version}`, `{"r","t":"hello"}`.
 */
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import type { SidecarObserver, SidecarRegistry } from './sidecars.js';

export const PRESENCE_CHANNEL = 'quota_sidecars';

/** Sidecar ids per `up` message: 50 × 128 characters stays well under the NOTIFY limit. */
const IDS_PER_MESSAGE = 50;

type Message =
  | { r: string; t: 'up'; s: string[] }
  | { r: string; t: 'down'; s: string }
  | { r: string; t: 'ack'; s: string; v: number }
  | { r: string; t: 'hello' };

export interface PresenceOptions {
  pool: pg.Pool;
  registry: SidecarRegistry;
  /** This replica's id (random per process). */
  replica: string;
  announceMs: number;
  log: Logger;
  clock: Clock;
}

/** Messages waiting to be sent; past this (PostgreSQL stuck) new ones are dropped. */
const MAX_QUEUED = 10_000;
/** One NOTIFY carries messages up to about this many bytes of JSON (the limit is 8000). */
const BATCH_BYTES = 7000;

export class Presence implements SidecarObserver {
  private failing = false;
  private closed = false;
  // Sent by one sender, in order, batched: NOTIFYs from concurrent transactions may arrive in any
  // order, and a `down` overtaking its `up` would leave a phantom sidecar for three periods.
  private queue: string[] = [];
  private sending = false;
  /** Other replicas heard from, and until when (clock ms) they count as alive. */
  private readonly peers = new Map<string, number>();

  constructor(private readonly opts: PresenceOptions) {}

  /** Sent once at start: the other replicas answer with their sidecars. */
  hello(): void {
    this.publish({ r: this.opts.replica, t: 'hello' });
  }

  /**
   * Announces every sidecar streaming from this replica (an empty list still tells the others this
   * replica is alive). Call every `announceMs`.
   */
  announce(): void {
    const ids = this.opts.registry.local();
    for (let i = 0; i === 0 || i < ids.length; i += IDS_PER_MESSAGE) {
      this.publish({ r: this.opts.replica, t: 'up', s: ids.slice(i, i + IDS_PER_MESSAGE) });
    }
  }

  connected(id: string): void {
    this.publish({ r: this.opts.replica, t: 'up', s: [id] });
  }

  disconnected(id: string): void {
    this.publish({ r: this.opts.replica, t: 'down', s: id });
  }

  /**
   * Relayed only while another replica is alive: a lone control plane (the common case) spends no
   * database round trip on acks. A replica that starts says hello before it takes any write.
   */
  acked(id: string, version: number): void {
    if (this.hasPeers()) this.publish({ r: this.opts.replica, t: 'ack', s: id, v: version });
  }

  /** True while another replica has been heard from within three announce periods. */
  hasPeers(): boolean {
    const now = this.opts.clock.now();
    for (const [replica, until] of this.peers) {
      if (until > now) return true;
      this.peers.delete(replica);
    }
    return false;
  }

  /** A NOTIFY payload from {@link PRESENCE_CHANNEL}: a batch of messages (ours and malformed ones are ignored). */
  received(payload: string): void {
    let batch: unknown;
    try {
      batch = JSON.parse(payload);
    } catch {
      return;
    }
    if (!Array.isArray(batch)) return;
    for (const m of batch as Message[]) this.apply(m);
  }

  private apply(m: Message): void {
    if (typeof m !== 'object' || m === null || typeof m.r !== 'string' || m.r === this.opts.replica) return;
    this.peers.set(m.r, this.opts.clock.now() + this.opts.announceMs * 3);
    const registry = this.opts.registry;
    switch (m.t) {
      case 'up':
        if (Array.isArray(m.s))
          registry.remoteConnected(
            m.r,
            m.s.filter((s) => typeof s === 'string'),
            this.opts.announceMs * 3,
          );
        break;
      case 'down':
        if (typeof m.s === 'string') registry.remoteDisconnected(m.r, m.s);
        break;
      case 'ack':
        if (typeof m.s === 'string' && Number.isSafeInteger(m.v)) registry.ack(m.s, m.v, false);
        break;
      case 'hello':
        this.announce();
        break;
    }
  }

  /** Stops sending (what is queued, e.g. the `down`s of a shutdown, still goes out). */
  close(): void {
    this.closed = true;
  }

  private publish(m: Message): void {
    if (this.closed || this.queue.length >= MAX_QUEUED) return;
    this.queue.push(JSON.stringify(m));
    if (!this.sending) void this.flush();
  }

  private async flush(): Promise<void> {
    this.sending = true;
    while (this.queue.length > 0) {
      let size = 2;
      let n = 0;
      while (n < this.queue.length && (n === 0 || size + this.queue[n]!.length + 1 <= BATCH_BYTES)) size += this.queue[n++]!.length + 1;
      const batch = this.queue.splice(0, n);
      try {
        await this.opts.pool.query('SELECT pg_notify($1, $2)', [PRESENCE_CHANNEL, `[${batch.join(',')}]`]);
        if (this.failing) {
          this.failing = false;
          this.opts.log.info('sidecar presence shared with the other replicas again');
        }
      } catch (err) {
        if (!this.failing && !this.closed) {
          this.failing = true;
          this.opts.log.warn(
            { err },
            'cannot share sidecar presence with the other replicas (PostgreSQL); writes wait for local sidecars only',
          );
        }
      }
    }
    this.sending = false;
  }
}
