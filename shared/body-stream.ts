/**
 * A request body read as a stream of chunks, for bodies too large to hold (a segment upload of a
 * million ids is about 40 MB). uWS pushes chunks through `onData` whether or not anyone is ready
 * for them, so the reader queues them and pauses the client's socket once `highWaterMark` bytes
 * are waiting, resuming it when the consumer has taken the queue below half of that: what the
 * process holds for one request is bounded by the high-water mark plus one socket read (uWS reads
 * up to 512 KiB at a time), whatever the body's size. `maxQueuedBytes` records the most it ever
 * held, so a test can assert that bound on the reader itself.
 *
 * The uWS response must not be touched once it is finished, and a socket left paused would stall
 * the connection's next request: `release()` resumes it and must be called before the response is
 * written (shared/http.ts `streamRoute` does), `detach()` when the client has gone.
 */
import { Buffer } from 'node:buffer';
import { PlatformError } from './errors.js';
import type { HttpResponse } from './uws.js';

export interface BodyStreamOptions {
  /** Largest body, bytes; past it the iteration fails with 413 `body_too_large`. */
  maxBytes: number;
  /** Bytes queued before the client's socket is paused. Default 256 KiB. */
  highWaterMark?: number;
}

const DEFAULT_HIGH_WATER_MARK = 256 * 1024;

/** Thrown into the iteration when the client went away before the body ended. */
export class BodyAbortedError extends Error {
  constructor() {
    super('the client went away before the request body ended');
    this.name = 'BodyAbortedError';
  }
}

export class BodyStream implements AsyncIterable<Buffer> {
  /** Body bytes received so far (including any past the limit). */
  received = 0;
  /** The most bytes ever queued at once: the reader's own high-water mark. */
  maxQueuedBytes = 0;
  /** Times the client's socket was paused. */
  pauses = 0;

  private readonly queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private failure: Error | undefined;
  /** Whether we paused the socket. Resuming one that was never paused stalls this uWS build. */
  private paused = false;
  /** The uWS response is finished, about to be, or gone: never touch it again. */
  private closed = false;
  private wake: (() => void) | undefined;
  private readonly max: number;
  private readonly high: number;

  /** Registers `onData` on `res`: call it inside the uWS handler, before any await. */
  constructor(
    private readonly res: HttpResponse,
    opts: BodyStreamOptions,
  ) {
    this.max = opts.maxBytes;
    this.high = opts.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
    res.onData((chunk, isLast) => this.feed(chunk, isLast));
  }

  /** True once the whole body has been received. */
  get complete(): boolean {
    return this.ended;
  }

  private feed(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.failure !== undefined || this.closed) return;
    this.received += chunk.byteLength;
    if (this.received > this.max) {
      this.fail(new PlatformError('body_too_large', { detail: `the body is larger than ${this.max} bytes` }));
      return;
    }
    if (chunk.byteLength > 0) {
      // uWS neuters the ArrayBuffer after this callback: copy it.
      this.queue.push(Buffer.from(new Uint8Array(chunk).slice()));
      this.queued += chunk.byteLength;
      if (this.queued > this.maxQueuedBytes) this.maxQueuedBytes = this.queued;
    }
    if (isLast) this.ended = true;
    else if (this.queued >= this.high && !this.paused) {
      this.paused = true;
      this.pauses++;
      this.res.pause();
    }
    this.notify();
  }

  private fail(err: Error): void {
    this.failure ??= err;
    this.queue.length = 0;
    this.queued = 0;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Resumes a paused socket; from then on the response is not touched by the reader. */
  release(): void {
    if (this.paused && !this.closed) {
      this.paused = false;
      this.res.resume();
    }
    this.closed = true;
  }

  /** The client went away: the iteration fails with {@link BodyAbortedError}; `res` is never touched again. */
  detach(): void {
    this.closed = true;
    if (!this.ended) this.fail(new BodyAbortedError());
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      const chunk = this.queue.shift();
      if (chunk !== undefined) {
        this.queued -= chunk.byteLength;
        if (this.paused && !this.closed && this.queued <= this.high / 2) {
          this.paused = false;
          this.res.resume();
        }
        yield chunk;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((r) => (this.wake = r));
    }
  }
}
