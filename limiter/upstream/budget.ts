/**
 * One upstream's connection budget (UPSTREAM_CONNECTIONS), shared by the two clients that may
 * connect to it: the h1 pool and undici's pool for streamed request bodies (proxy.ts `Upstreams`).
 * Without it each would open up to the limit and the upstream could see twice as many.
 *
 * A slot is taken before a connection is opened and given back when it closes. When none is free a
 * taker waits, first come first served; an undici connection that waits has the h1 pool close one
 * of its idle connections for it (`reclaim`). undici's pool in front of a budget keeps no idle
 * connection (proxy.ts: `pipelining: 0`), so the h1 pool never waits on an idle one it cannot close.
 */
import { buildConnector } from 'undici';

export class ConnectionBudget {
  private used = 0;
  private readonly waiting: (() => void)[] = [];
  /** Closes one idle connection of the h1 pool (its close gives the slot back); false when it has none. */
  reclaim: (() => boolean) | null = null;

  constructor(readonly limit: number) {}

  /** Connections open (or opening) against the budget. */
  get inUse(): number {
    return this.used;
  }

  /** Takes a slot if one is free and nobody waits for one. */
  tryTake(): boolean {
    if (this.used >= this.limit || this.waiting.length > 0) return false;
    this.used++;
    return true;
  }

  /** Calls `granted` once a slot is taken for it: now, once an idle h1 connection is closed for it, or at a later give(). */
  take(granted: () => void): void {
    if (this.tryTake()) {
      granted();
      return;
    }
    this.waiting.push(granted);
    // An idle h1 connection is a slot nobody uses: its close gives it to the first waiter.
    this.reclaim?.();
  }

  /** Takers waiting for a slot. */
  get waiters(): number {
    return this.waiting.length;
  }

  /** Gives a slot back: to the first waiter, else to the budget. */
  give(): void {
    const next = this.waiting.shift();
    if (next === undefined) this.used--;
    else next();
  }
}

/**
 * undici's connector for a pool under `budget`: each socket takes a slot before it connects and
 * gives it back when it closes (or fails to connect).
 */
export function budgetedConnector(budget: ConnectionBudget, opts: buildConnector.BuildOptions): buildConnector.connector {
  const connect = buildConnector(opts);
  return (options, callback) => {
    budget.take(() => {
      connect(options, (err, socket) => {
        if (err !== null || socket === null) {
          budget.give();
          callback(err ?? new Error('connect failed'), null);
          return;
        }
        socket.once('close', () => budget.give());
        callback(null, socket);
      });
    });
  };
}
