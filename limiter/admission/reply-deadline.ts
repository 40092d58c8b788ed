/**
 * Deadlines that measure Redis, not our event loop (README, "Deadlines").
 *
 * A call to Redis is late when its reply is not there `deadlineMs` after the command was written.
 * A timer cannot see that on its own: Node runs due timers *before* it polls the sockets, so a
 * timer that fires late (the loop was busy, or the process was not scheduled) would find every
 * reply that arrived meanwhile still unread in the socket and call it missing. So a deadline is
 * judged in two steps: the timer only notes when it fired, then one `setImmediate` later (the
 * check phase, right after the poll phase has read every socket that was readable) the calls still
 * without a reply are the late ones. A reply that was in the socket by then is on time, however
 * late the loop was; one still absent had not arrived `deadlineMs` after its write. A dead or
 * paused Redis still fails within `deadlineMs` + the loop's own delay + one turn of the loop.
 *
 * Late replies (read after their deadline, whether the call was still waiting or already failed)
 * are split into the two causes by {@link lateParts}.
 */

/** Where a late reply's lateness came from, ms. */
export type LateReplyListener = (eventLoopMs: number, redisMs: number) => void;

/**
 * How a reply read at `readAt`, `late` ms after its deadline, splits into event-loop delay and
 * Redis time. `firedAt` is when the deadline's timer ran (0: it has not run yet).
 * - The timer had not run: the loop had not even reached its timer phase since the deadline, so
 *   all of it is the loop's (to the timer's 1 ms resolution).
 * - The timer ran at `firedAt` and the call was judged after the next poll: the loop's part is how
 *   late the timer ran (`firedAt − deadline`); the rest, the time the reply was still absent after
 *   the loop had looked, is Redis's.
 * - `accepted` (the reply was there when the call was judged): all the loop's.
 */
export function lateParts(deadline: number, readAt: number, firedAt: number, accepted: boolean): [eventLoopMs: number, redisMs: number] {
  const late = readAt - deadline;
  if (firedAt === 0 || accepted) return [late, 0];
  const loop = Math.min(late, Math.max(0, firedAt - deadline));
  return [loop, late - loop];
}

/**
 * One timer for many deadlines, which judges only after the loop has polled the sockets.
 * `judge(firedAt)` fails the calls whose deadline is at or before `firedAt` and still have no
 * reply, and returns the next deadline to wait for (`Infinity`: none).
 */
export class LoopAwareTimer {
  #timer: NodeJS.Timeout | undefined;
  #due = Infinity;
  readonly #judge: (firedAt: number) => number;

  constructor(judge: (firedAt: number) => number) {
    this.#judge = judge;
  }

  /** Makes sure the timer runs no later than `due` (a `performance.now()` time). */
  arm(due: number): void {
    if (due >= this.#due) return;
    clearTimeout(this.#timer);
    this.#due = due;
    this.#timer = setTimeout(this.#fire, Math.max(1, Math.ceil(due - performance.now())));
  }

  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#due = Infinity;
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    this.#due = Infinity;
    const firedAt = performance.now();
    // The timer phase runs before the poll phase: let the loop read what is already in the sockets.
    setImmediate(() => {
      const next = this.#judge(firedAt);
      if (next !== Infinity) this.arm(next);
    });
  };
}

interface Entry {
  /** When the command was written (stamped after the write), ms; `Infinity` until then. */
  written: number;
  deadline: number;
  /** When the timer that judged it late ran (0: never). */
  firedAt: number;
  done: boolean;
  reject: (err: unknown) => void;
}

export interface ReplyDeadlinesOptions {
  deadlineMs: number;
  /** The error a late call rejects with. */
  timeoutError: () => Error;
  onLateReply?: LateReplyListener;
  /**
   * A Redis Cluster, whose client follows redirections (MOVED, ASK, TRYAGAIN) inside one call
   * without saying which: a call written before the last redirection gets `deadlineMs` (plus the
   * client's TRYAGAIN pause) from that redirection, up to `budgetMs` after its write. Each
   * redirection is an answer; the call was re-sent, not lost.
   */
  redirect?: { budgetMs: number; retryDelayMs: number };
}

/**
 * The loop-aware deadline for calls made through a client that writes on its own schedule
 * (ioredis): {@link track} wraps a call's promise. The write is taken to be done by the next check
 * phase (ioredis writes synchronously, or auto-pipelines in a `setImmediate` queued before ours),
 * so a call's deadline starts then.
 */
export class ReplyDeadlines {
  readonly #o: ReplyDeadlinesOptions;
  readonly #live = new Set<Entry>();
  #unstamped: Entry[] = [];
  readonly #timer: LoopAwareTimer;
  /** Last redirection the cluster client followed (performance.now()). */
  redirectedAt = 0;

  constructor(opts: ReplyDeadlinesOptions) {
    this.#o = opts;
    this.#timer = new LoopAwareTimer(this.#judge);
  }

  /** `p` under the deadline: rejects with `timeoutError()` when late; its late reply is still timed. */
  track<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const e: Entry = { written: Infinity, deadline: Infinity, firedAt: 0, done: false, reject };
      this.#live.add(e);
      if (this.#unstamped.push(e) === 1) setImmediate(this.#stamp);
      p.then(
        (v) => {
          this.#settled(e);
          resolve(v);
        },
        (err: unknown) => {
          this.#settled(e);
          // The client's own rejection, passed on as it is.
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          reject(err);
        },
      );
    });
  }

  clear(): void {
    this.#timer.clear();
  }

  #settled(e: Entry): void {
    const accepted = !e.done;
    e.done = true;
    this.#live.delete(e);
    const listener = this.#o.onLateReply;
    if (listener === undefined || e.deadline === Infinity) return;
    const now = performance.now();
    if (now > e.deadline) {
      const [loop, redis] = lateParts(e.deadline, now, e.firedAt, accepted);
      listener(loop, redis);
    }
  }

  readonly #stamp = (): void => {
    const now = performance.now();
    const deadline = now + this.#o.deadlineMs;
    const batch = this.#unstamped;
    this.#unstamped = [];
    for (const e of batch) {
      e.written = now;
      e.deadline = deadline;
    }
    this.#timer.arm(deadline);
  };

  readonly #judge = (firedAt: number): number => {
    const redirect = this.#o.redirect;
    let next = Infinity;
    for (const e of this.#live) {
      if (e.done) continue;
      if (e.deadline <= firedAt && redirect !== undefined && this.redirectedAt > e.written) {
        e.deadline = Math.min(this.redirectedAt + this.#o.deadlineMs + redirect.retryDelayMs, e.written + redirect.budgetMs);
      }
      if (e.deadline <= firedAt) {
        e.done = true;
        e.firedAt = firedAt;
        // Its late reply, if one comes, is still timed: the promise's callbacks hold the entry.
        this.#live.delete(e);
        e.reject(this.#o.timeoutError());
      } else if (e.deadline < next) next = e.deadline;
    }
    return next;
  };
}
