/**
 * Waking the projectors: appenders NOTIFY after their commit, projectors LISTEN. A notification is
 * a hint only; every projector also polls, so a lost one (a dropped LISTEN connection, a NOTIFY
 * while reconnecting) costs at most one poll interval.
 *
 * The NOTIFY is sent by the appending process after its commit, coalesced, rather than by a trigger
 * inside the appending transaction: a transaction that notifies takes a database-wide lock at commit
 * (the notification queue's), which would serialise every append's commit and defeat group commit.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { Logger } from '../../shared/log.js';
import { PgListener } from '../../shared/pg-listener.js';

/** The channel appends are announced on. */
export const EVENTS_CHANNEL = 'identity_events';

/**
 * Sends `NOTIFY identity_events` after appends, one at a time and at most one per `minIntervalMs`:
 * pokes that arrive meanwhile cause exactly one more, so the last append is always followed by a
 * notification sent after its commit, and a burst of appends costs a handful of notifications (each
 * of which wakes every projector of every replica) instead of one each.
 */
export class AppendSignal {
  private sending = false;
  private again = false;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Pick<Logger, 'debug'>,
    private readonly minIntervalMs = 5,
  ) {}

  poke(): void {
    if (this.closed) return;
    if (this.sending) {
      this.again = true;
      return;
    }
    this.sending = true;
    void this.send();
  }

  close(): void {
    this.closed = true;
  }

  private async send(): Promise<void> {
    for (;;) {
      this.again = false;
      const started = Date.now();
      try {
        await this.pool.query(`SELECT pg_notify('${EVENTS_CHANNEL}', '')`);
      } catch (err) {
        // Harmless: the projectors poll.
        this.log.debug({ err }, 'NOTIFY of appended events failed');
      }
      if (!this.again || this.closed) break;
      const wait = this.minIntervalMs - (Date.now() - started);
      if (wait > 0) await sleep(wait);
    }
    this.sending = false;
  }
}

export interface ListenerOptions {
  url: string;
  log: Logger;
  onNotify: () => void;
  /** First reconnect delay, ms (doubles up to 10 s). Default 250. */
  baseDelayMs?: number;
}

/**
 * LISTENs on EVENTS_CHANNEL (shared/pg-listener.ts), and wakes the projectors on every notification
 * and after every (re)connect, for whatever was appended while nobody listened.
 */
export class EventsListener {
  private readonly listener: PgListener;

  constructor(opts: ListenerOptions) {
    this.listener = new PgListener({
      url: opts.url,
      channels: [EVENTS_CHANNEL],
      applicationName: 'identity:listen',
      log: opts.log,
      onNotification: () => opts.onNotify(),
      onConnect: () => opts.onNotify(),
      baseDelayMs: opts.baseDelayMs,
    });
  }

  get connected(): boolean {
    return this.listener.connected;
  }

  /** Resolves once listening, or after the first failure (which schedules retries). */
  start(): Promise<void> {
    return this.listener.start();
  }

  close(): Promise<void> {
    return this.listener.close();
  }
}
