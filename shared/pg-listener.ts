/**
 * A dedicated PostgreSQL connection that LISTENs on some channels, reconnecting with capped backoff
 * when it drops. Used by the quota control plane (quota changes, sidecar presence) and identity
 * (appended events). Notifications are wake-up hints only: every user also polls, so a drop loses
 * nothing but latency; `onConnect` runs after every (re)connect so the caller can catch up on
 * whatever was sent while it was away.
 */
import pg from 'pg';
import type { Logger } from './log.js';

export interface ListenerOptions {
  url: string;
  channels: readonly string[];
  /** Shown in pg_stat_activity, e.g. `control-plane:listen`. */
  applicationName: string;
  log: Logger;
  onNotification: (channel: string, payload: string) => void;
  onConnect?: () => void;
  /** First reconnect delay, ms (doubles up to `maxDelayMs`). Default 250. */
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export class PgListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private closed = false;
  private connectedOnce = false;

  constructor(private readonly opts: ListenerOptions) {}

  /** True while the LISTEN connection is up. */
  get connected(): boolean {
    return this.client !== undefined;
  }

  /** Connects (resolves once listening, or after the first failure, which schedules retries). */
  async start(): Promise<void> {
    await this.connect();
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
    const client = new pg.Client({
      connectionString: this.opts.url,
      application_name: this.opts.applicationName,
      connectionTimeoutMillis: 5_000,
    });
    let dropped = false;
    const drop = (err?: Error): void => {
      if (dropped) return;
      dropped = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => {});
      if (this.closed) return;
      this.opts.log.warn({ err, attempt: this.attempt }, 'LISTEN connection lost; reconnecting (polling continues meanwhile)');
      this.schedule();
    };
    client.on('error', drop);
    client.on('end', () => drop());
    client.on('notification', (n) => this.opts.onNotification(n.channel, n.payload ?? ''));
    try {
      await client.connect();
      for (const ch of this.opts.channels) await client.query(`LISTEN ${client.escapeIdentifier(ch)}`);
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
    if (this.connectedOnce) this.opts.log.info({ channels: this.opts.channels }, 'LISTEN connection restored');
    this.connectedOnce = true;
    this.opts.onConnect?.();
  }

  private schedule(): void {
    if (this.closed || this.timer) return;
    const base = this.opts.baseDelayMs ?? 250;
    const delay = Math.min(this.opts.maxDelayMs ?? 10_000, base * 2 ** Math.min(this.attempt, 16));
    this.attempt++;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, delay);
    this.timer.unref();
  }
}
