/**
 * Time as a dependency. Cores take a `Clock` instead of calling `Date.now()`, so tests drive time
 * with a `FakeClock` rather than sleeping.
 */

/** A source of the current time. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** The real wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to; for tests and simulations. */
export class FakeClock implements Clock {
  #now: number;

  /** @param startMs the initial time, epoch ms (default 0). */
  constructor(startMs = 0) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  /** Moves time forward by `ms` (never backward: a negative step is a test bug). Returns the new time. */
  advance(ms: number): number {
    if (!(ms >= 0)) throw new RangeError(`FakeClock.advance: ms must be >= 0, got ${ms}`);
    this.#now += ms;
    return this.#now;
  }

  /** Sets the time to `ms`, forward or backward (to test clock steps). */
  set(ms: number): void {
    this.#now = ms;
  }
}
