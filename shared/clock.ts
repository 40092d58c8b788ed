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

/**
 * A {@link FakeClock} whose time lives in a `SharedArrayBuffer`, so one test drives the time of
 * every worker thread it hands the buffer to (`new SharedClock(buffer)` in the worker): threads
 * see the same instant, and tests move time instead of sleeping.
 */
export class SharedClock implements Clock {
  readonly buffer: SharedArrayBuffer;
  readonly #t: BigInt64Array;

  /** A fresh clock at `startMs`, or (given a buffer) the clock another thread created. */
  constructor(startOrBuffer: number | SharedArrayBuffer = 0) {
    if (typeof startOrBuffer === 'number') {
      this.buffer = new SharedArrayBuffer(8);
      this.#t = new BigInt64Array(this.buffer);
      this.set(startOrBuffer);
    } else {
      this.buffer = startOrBuffer;
      this.#t = new BigInt64Array(this.buffer);
    }
  }

  now(): number {
    return Number(Atomics.load(this.#t, 0));
  }

  /** Moves time forward by `ms` (an integer ≥ 0) for every thread. Returns the new time. */
  advance(ms: number): number {
    if (!(ms >= 0) || !Number.isSafeInteger(ms)) throw new RangeError(`SharedClock.advance: ms must be an integer >= 0, got ${ms}`);
    return Number(Atomics.add(this.#t, 0, BigInt(ms))) + ms;
  }

  /** Sets the time to `ms` (an integer), forward or backward, for every thread. */
  set(ms: number): void {
    if (!Number.isSafeInteger(ms)) throw new RangeError(`SharedClock.set: ms must be an integer, got ${ms}`);
    Atomics.store(this.#t, 0, BigInt(ms));
  }
}
