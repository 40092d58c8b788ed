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
import pg from 'pg';
import type { Logger } from '../../shared/log.js';

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

/** A dedicated connection that LISTENs on EVENTS_CHANNEL, reconnecting with capped backoff. */
export class EventsListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private closed = false;

  constructor(private readonly opts: ListenerOptions) {}

  get connected(): boolean {
    return this.client !== undefined;
  }

  /** Resolves once listening, or after the first failure (which schedules retries). */
  start(): Promise<void> {
    return this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const c = this.client;
    this.client = undefined;
    if (c) await c.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.opts.url, application_name: 'identity:listen', connectionTimeoutMillis: 5_000 });
    let dropped = false;
    const drop = (err?: Error): void => {
      if (dropped) return;
      dropped = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => {});
      if (this.closed) return;
      this.opts.log.warn({ err, attempt: this.attempt }, 'LISTEN connection lost; reconnecting (projectors keep polling)');
      this.schedule();
    };
    client.on('error', drop);
    client.on('end', () => drop());
    client.on('notification', () => this.opts.onNotify());
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (err) {
      drop(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (this.closed || dropped) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.attempt = 0;
    // Whatever was appended while we were not listening.
    this.opts.onNotify();
  }

  private schedule(): void {
    if (this.closed || this.timer) return;
    const delay = Math.min(10_000, (this.opts.baseDelayMs ?? 250) * 2 ** Math.min(this.attempt, 6));
    this.attempt++;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, delay);
    this.timer.unref();
  }
}
