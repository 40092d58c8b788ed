/**
 * One worker pool for one queue: a fetch loop that keeps up to `concurrency` jobs in flight.
 *
 * Why not pg-boss's `work()`: in 10.x it fetches a batch, waits for the whole batch, then sleeps
 * its polling interval (at least 500 ms) before fetching again, so a transactional message that
 * arrives just after a poll waits up to that interval, and one slow job holds back its batch. This
 * loop fetches as soon as a slot frees, and is woken at once when this process enqueues work on it
 * ({@link QueueRunner.wake}). An empty queue is polled every `idleMs`, or, given `emptyMs`, by the
 * process's queue watch (queues/watch.ts: one statement for every queue of a period, which wakes
 * the runners whose queue has work due: other processes' work, retries, delayed jobs). A wake-up
 * is a hint, the fetch is the truth.
 *
 * The handler owns the job: it completes it (in the same transaction as its own writes) or leaves
 * it to be retried. A handler that throws has its job failed, and pg-boss retries it with backoff.
 */
import type { Logger } from '../../shared/log.js';
import type { Boss, Job } from './boss.js';

export interface RunnerOptions<T> {
  boss: Boss;
  queue: string;
  /** Jobs in flight at most. */
  concurrency: number;
  /** Pause before polling an empty queue again, ms; also the pause of a deferred or full runner. */
  idleMs: number;
  /**
   * Pause after an empty fetch instead of `idleMs`, when something else polls for this runner and
   * wakes it (queues/watch.ts): then this is only a backstop. A failed fetch still waits `idleMs`.
   */
  emptyMs?: number;
  /**
   * Called once per fetched batch before its jobs are handled (e.g. one statement that claims
   * them all); its result goes to each `handle` call. A throw fails the whole batch.
   */
  prepare?: (jobs: Job<T>[]) => Promise<unknown>;
  handle?: (job: Job<T>, prepared: unknown) => Promise<void>;
  /**
   * Handles a fetched batch as one unit instead (it holds as many slots as it has jobs); it owns
   * completing them. A throw fails every job of the batch, and pg-boss retries them.
   */
  handleBatch?: (jobs: Job<T>[]) => Promise<void>;
  /** Asked before each fetch; false defers this queue (backpressure) for one idle period. */
  mayFetch?: () => boolean;
  log: Logger;
}

export class QueueRunner<T = unknown> {
  readonly queue: string;
  readonly #o: RunnerOptions<T>;
  #inFlight = 0;
  #stopping = false;
  #loop: Promise<void> | undefined;
  /** Ends the current pause early (set while pausing). */
  #interrupt: (() => void) | undefined;
  /** A wake-up arrived while not pausing: the next pause returns at once. */
  #woken = false;
  #idleWaiters: (() => void)[] = [];
  readonly #refillAt: number;
  /** Work was enqueued (or the idle period ran out) since the last fetch: fetch even for one free slot. */
  #newWork = true;

  constructor(opts: RunnerOptions<T>) {
    if (!(opts.concurrency >= 1)) throw new RangeError(`QueueRunner ${opts.queue}: concurrency must be at least 1`);
    this.queue = opts.queue;
    this.#o = opts;
    this.#refillAt = Math.max(1, Math.floor(opts.concurrency / 4));
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Cuts the current idle wait short: there is work now. */
  wake(): void {
    this.#newWork = true;
    this.#poke();
  }

  #poke(): void {
    if (this.#interrupt) this.#interrupt();
    else this.#woken = true;
  }

  /** Stops fetching; resolves when the jobs in flight are done or `graceMs` has passed. */
  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    this.wake();
    await this.#loop;
    if (this.#inFlight === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((r) => this.#idleWaiters.push(r)), new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
  }

  /** Waits up to `ms`; true when woken before that. */
  #pause(ms: number): Promise<boolean> {
    if (this.#woken) {
      this.#woken = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#interrupt = undefined;
        resolve(false);
      }, ms);
      this.#interrupt = () => {
        clearTimeout(timer);
        this.#interrupt = undefined;
        resolve(true);
      };
    });
  }

  async #run(): Promise<void> {
    const o = this.#o;
    while (!this.#stopping) {
      const free = o.concurrency - this.#inFlight;
      // Refill in batches (a quarter of the pool at a time) rather than one fetch per finished
      // job: each fetch is a query, and a busy queue would otherwise pay one per job.
      // New work (a wake-up, or an idle period gone by) is fetched for any free slot, so a
      // transactional message never waits for a batch to fill.
      if (free <= 0 || (this.#inFlight > 0 && free < this.#refillAt && !this.#newWork)) {
        // A finishing job or new work wakes us.
        if (!(await this.#pause(o.idleMs))) this.#newWork = true;
        continue;
      }
      if (o.mayFetch && !o.mayFetch()) {
        await this.#pause(o.idleMs);
        continue;
      }
      this.#newWork = false;
      let jobs: Job<T>[] = [];
      let fetched = true;
      try {
        jobs = await o.boss.fetch<T>(o.queue, { batchSize: free });
      } catch (err) {
        fetched = false;
        o.log.warn({ err, queue: o.queue }, 'fetching jobs failed');
      }
      if (this.#stopping && jobs.length > 0) {
        // Fetched while stopping: hand them straight back so another worker takes them now.
        await o.boss
          .fail(
            o.queue,
            jobs.map((j) => j.id),
          )
          .catch(() => {});
        break;
      }
      if (jobs.length === 0) {
        if (!(await this.#pause(fetched ? (o.emptyMs ?? o.idleMs) : o.idleMs))) this.#newWork = true;
        continue;
      }
      if (o.handleBatch) {
        this.#startBatch(jobs, o.handleBatch);
        continue;
      }
      let prepared: unknown;
      try {
        prepared = o.prepare ? await o.prepare(jobs) : undefined;
      } catch (err) {
        o.log.error({ err, queue: o.queue }, 'preparing jobs failed; pg-boss will retry them');
        await o.boss
          .fail(
            o.queue,
            jobs.map((j) => j.id),
          )
          .catch(() => {});
        await this.#pause(o.idleMs);
        continue;
      }
      for (const job of jobs) this.#start(job, prepared);
    }
  }

  #startBatch(jobs: Job<T>[], handleBatch: (jobs: Job<T>[]) => Promise<void>): void {
    const o = this.#o;
    this.#inFlight += jobs.length;
    handleBatch(jobs)
      .catch(async (err: unknown) => {
        o.log.error({ err, queue: o.queue, jobs: jobs.length }, 'batch failed; pg-boss will retry its jobs');
        await o.boss
          .fail(
            o.queue,
            jobs.map((j) => j.id),
          )
          .catch(() => {});
      })
      .finally(() => this.#done(jobs.length));
  }

  #done(n: number): void {
    this.#inFlight -= n;
    this.#poke();
    if (this.#inFlight === 0 && this.#idleWaiters.length > 0) {
      const w = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const f of w) f();
    }
  }

  #start(job: Job<T>, prepared: unknown): void {
    const o = this.#o;
    this.#inFlight++;
    if (!o.handle) throw new Error(`QueueRunner ${o.queue}: no handler`);
    o.handle(job, prepared)
      .catch(async (err: unknown) => {
        o.log.error({ err, queue: o.queue, job: job.id }, 'job failed; pg-boss will retry it');
        await o.boss.fail(o.queue, job.id, { message: err instanceof Error ? err.message : String(err) }).catch(() => {});
      })
      .finally(() => this.#done(1));
  }
}
