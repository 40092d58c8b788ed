/**
 * The idle poll of every queue of one process: one statement per poll period, not one pg-boss
 * fetch per queue.
 *
 * Why: a runner (queues/runner.ts) whose queue is empty used to fetch it again every idle period.
 * A fetch is a locking statement that updates what it finds (about 1 ms of CPU, the database's and
 * this process's together), and a notifier runs 23 queue runners: idle, at 100 ms, that was a
 * third of a core (bench/RESULTS.md, "One statement for the idle poll"). Now a runner that finds
 * its queue empty waits to be woken, and this watch asks, once per period, which of the queues
 * polled at that period hold a job that is due (created or retried, its start time passed): a
 * look at pg-boss's partial index of waiting jobs (`job_i5`) per queue, no lock and no write. The
 * runners of those queues are woken and fetch; the fetch stays the truth (another replica may take
 * the job first, and the woken runner finds nothing and waits again).
 *
 * Queues with the same period share one statement (`NOTIFIER_IDLE_POLL` is per tier, so at most
 * four run). A statement that fails is logged and tried again the next period: the runners go on
 * with what they hold and wait, as they would for a fetch that failed.
 */
import type { Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';

/** The queues of `$1` with a job due now (pg-boss 10: `state < 'active'` is created or retry). */
const DUE_QUEUES = `SELECT q.name FROM unnest($1::text[]) AS q (name)
  WHERE EXISTS (SELECT 1 FROM pgboss.job j WHERE j.name = q.name AND j.state < 'active' AND j.start_after < now())`;

export interface WatchOptions {
  pool: Pool;
  /** Each watched queue with its poll period, ms. */
  queues: ReadonlyMap<string, number>;
  /** Called with each queue found to hold due work. */
  wake: (queue: string) => void;
  log: Logger;
}

export class QueueWatch {
  readonly #o: WatchOptions;
  /** Queue names by period. */
  readonly #groups = new Map<number, string[]>();
  #loops: Promise<void>[] = [];
  #stopping = false;
  readonly #timers = new Set<{ timer: NodeJS.Timeout; done: () => void }>();

  constructor(opts: WatchOptions) {
    this.#o = opts;
    for (const [name, ms] of opts.queues) {
      const g = this.#groups.get(ms);
      if (g) g.push(name);
      else this.#groups.set(ms, [name]);
    }
  }

  start(): void {
    if (this.#loops.length > 0 || this.#stopping) return;
    this.#loops = [...this.#groups].map(([ms, names]) => this.#run(ms, names));
  }

  /** Stops polling; resolves when no statement of this watch is running. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const t of this.#timers) {
      clearTimeout(t.timer);
      t.done();
    }
    this.#timers.clear();
    await Promise.all(this.#loops);
  }

  /** One poll of the queues of one period now: wakes those with due work; returns them. */
  async poll(names: readonly string[]): Promise<string[]> {
    const { rows } = await this.#o.pool.query<{ name: string }>(DUE_QUEUES, [names]);
    const due = rows.map((r) => r.name);
    for (const name of due) this.#o.wake(name);
    return due;
  }

  async #run(ms: number, names: readonly string[]): Promise<void> {
    let failing = false;
    while (!this.#stopping) {
      await this.#sleep(ms);
      if (this.#stopping) break;
      try {
        await this.poll(names);
        if (failing) this.#o.log.info({ periodMs: ms }, 'queue watch: polling again');
        failing = false;
      } catch (err) {
        // One line per outage, not one per period (every 50 ms for the transactional tier).
        if (!failing) this.#o.log.warn({ err, periodMs: ms }, 'queue watch: polling for due jobs failed; trying again each period');
        failing = true;
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry = {
        timer: setTimeout(() => {
          this.#timers.delete(entry);
          resolve();
        }, ms),
        done: resolve,
      };
      this.#timers.add(entry);
    });
  }
}
