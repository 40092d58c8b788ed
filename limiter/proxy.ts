/**
 * Proxies an admitted request to its upstream with undici's dispatch API, streaming both ways.
 *
 * One `Exchange` object per request implements undici's dispatch handler and writes the upstream
 * response to the uWS response as it arrives: no promise, no closure per chunk. Backpressure both
 * ways: a uWS write that does not drain pauses undici (return false from onData) until uWS says
 * the socket is writable; a request body larger than `bufferBodyBytes` is streamed through a
 * Readable that pauses the client connection when undici's socket is full.
 *
 * Framing: uWS owns Content-Length and chunked encoding on the client side, so the upstream's
 * framing headers and the hop-by-hop headers (RFC 9110 §7.6.1) are never copied through.
 */
import { Buffer } from 'node:buffer';
import { Readable } from 'node:stream';
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import { problemFor, PROBLEM_CONTENT_TYPE, type ErrorCode } from '../shared/errors.js';
import type { HttpResponse } from '../shared/uws.js';
import { statusLine } from '../shared/http.js';

export interface UpstreamOptions {
  /** Connections kept open to each upstream. */
  connections: number;
  /** Time to wait for the upstream's response headers (→ 504). */
  headersTimeoutMs: number;
  /** Longest pause between body chunks from the upstream (→ 504 before headers, else abort). */
  bodyTimeoutMs: number;
  connectTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** Pipelining depth per connection; 1 is the safe default for arbitrary backends. */
  pipelining: number;
}

/** One keep-alive pool per upstream origin. */
export class Upstreams {
  private readonly pools: Pool[];
  constructor(
    origins: readonly string[],
    readonly opts: UpstreamOptions,
  ) {
    this.pools = origins.map(
      (o) =>
        new Pool(o, {
          connections: opts.connections,
          pipelining: opts.pipelining,
          headersTimeout: opts.headersTimeoutMs,
          bodyTimeout: opts.bodyTimeoutMs,
          connectTimeout: opts.connectTimeoutMs,
          keepAliveTimeout: opts.keepAliveTimeoutMs,
        }),
    );
  }
  pool(i: number): Pool {
    return this.pools[i]!;
  }
  async close(): Promise<void> {
    await Promise.all(this.pools.map((p) => p.close()));
  }
}

// Lower-cased header names never forwarded in either direction. `date` is dropped from responses
// because uWS writes its own.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'host',
]);
const RESPONSE_DROP = new Set([...HOP_BY_HOP, 'date']);

/** True when a request header must not be forwarded as it came (hop-by-hop, or ours to set). */
export function dropRequestHeader(lowerName: string): boolean {
  return HOP_BY_HOP.has(lowerName) || lowerName.startsWith('x-subject') || lowerName === 'x-api-key' || lowerName === 'x-forwarded-for';
}

export interface ProxyHooks {
  /** Called once when the exchange ends for any reason (metrics, in-flight accounting). */
  onDone(status: number): void;
}


/** Writes a problem+json error with the rate-limit headers already computed for this request. */
export function writeProblem(res: HttpResponse, code: ErrorCode, detail: string, extraHeaders: readonly string[]): number {
  const p = problemFor(code, { detail });
  res.cork(() => {
    res.writeStatus(statusLine(p.status));
    res.writeHeader('content-type', PROBLEM_CONTENT_TYPE);
    for (let i = 0; i < extraHeaders.length; i += 2) res.writeHeader(extraHeaders[i]!, extraHeaders[i + 1]!);
    res.end(JSON.stringify(p));
  });
  return p.status;
}

function upstreamErrorCode(err: unknown): ErrorCode {
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return 'upstream_timeout';
  }
  if (err instanceof undiciErrors.HTTPParserError || err instanceof undiciErrors.ResponseContentLengthMismatchError) {
    return 'upstream_bad_response';
  }
  return 'upstream_unreachable';
}

const EMPTY: readonly string[] = [];

/**
 * One proxied request. Create it after admission, call `start()`; the uWS response must already
 * have an onAborted handler that calls `abort()`.
 */
export class Exchange implements Dispatcher.DispatchHandler {
  aborted = false;
  private headersSent = false;
  private finished = false;
  private abortUpstream: ((err?: Error) => void) | null = null;
  private resumeUpstream: (() => void) | null = null;
  /** -1 when the upstream did not send a Content-Length (chunked to the client). */
  private total = -1;
  private isHead = false;
  private status = 0;
  private pending: Buffer | null = null;
  private pendingOffset = 0;

  constructor(
    private readonly res: HttpResponse,
    private readonly hooks: ProxyHooks,
    /** Headers to add to the response (rate-limit headers), flat [name, value, ...]. */
    private readonly extraHeaders: readonly string[] = EMPTY,
  ) {}

  start(pool: Pool, opts: Dispatcher.DispatchOptions): void {
    this.isHead = opts.method === 'HEAD';
    try {
      pool.dispatch(opts, this);
    } catch (err) {
      this.onError(err as Error);
    }
  }

  /** The client went away: stop the upstream request. */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortUpstream?.(new Error('client aborted'));
    this.done(499);
  }

  // ── undici dispatch handler (legacy form: raw headers, no per-request parsing) ──

  onConnect(abort: (err?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.aborted) abort(new Error('client aborted'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    if (this.aborted) return false;
    if (statusCode < 200) return true; // 1xx informational: nothing to forward
    this.status = statusCode;
    this.resumeUpstream = resume;
    const res = this.res;
    res.cork(() => {
      res.writeStatus(statusText ? `${statusCode} ${statusText}` : statusLine(statusCode));
      for (let i = 0; i < rawHeaders.length; i += 2) {
        const name = rawHeaders[i]!;
        const lower = name.toString('latin1').toLowerCase();
        if (RESPONSE_DROP.has(lower)) {
          if (lower === 'content-length') this.total = Number(rawHeaders[i + 1]!.toString('latin1'));
          continue;
        }
        res.writeHeader(name, rawHeaders[i + 1]!);
      }
      const extra = this.extraHeaders;
      for (let i = 0; i < extra.length; i += 2) res.writeHeader(extra[i]!, extra[i + 1]!);
    });
    this.headersSent = true;
    if (this.isHead || statusCode === 204 || statusCode === 304) this.total = -2;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.aborted || this.total === -2) return !this.aborted;
    const res = this.res;
    if (this.total >= 0) {
      const offset = res.getWriteOffset();
      let ok = false;
      let done = false;
      res.cork(() => {
        [ok, done] = res.tryEnd(chunk, this.total);
      });
      if (done) {
        this.done(this.status);
        return true;
      }
      if (!ok) {
        // uWS took part of it: keep the rest and resume undici when the socket drains.
        this.pending = chunk;
        this.pendingOffset = offset;
        res.onWritable((off) => this.drainPending(off));
        return false;
      }
      return true;
    }
    let ok = true;
    res.cork(() => {
      ok = res.write(chunk);
    });
    if (!ok) {
      res.onWritable(() => {
        this.resumeUpstream?.();
        return true;
      });
      return false;
    }
    return true;
  }

  private drainPending(offset: number): boolean {
    const chunk = this.pending;
    if (!chunk || this.aborted) return true;
    const [ok, done] = this.res.tryEnd(chunk.subarray(offset - this.pendingOffset), this.total);
    if (done) {
      this.pending = null;
      this.done(this.status);
      return true;
    }
    if (ok) {
      this.pending = null;
      this.resumeUpstream?.();
    }
    return ok;
  }

  onComplete(): void {
    if (this.aborted || this.finished) return;
    const res = this.res;
    if (this.total === -2) {
      res.cork(() => res.endWithoutBody(undefined, false));
    } else if (this.total === -1) {
      res.cork(() => res.end());
    } else {
      // Content-Length promised more than the upstream sent: the response cannot be completed.
      res.close();
    }
    this.done(this.status);
  }

  onError(err: Error): void {
    if (this.aborted || this.finished) return;
    if (this.headersSent) {
      this.res.close();
      this.done(this.status || 502);
      return;
    }
    const code = upstreamErrorCode(err);
    const detail =
      code === 'upstream_timeout'
        ? 'the upstream did not answer in time'
        : code === 'upstream_bad_response'
          ? 'the upstream sent a response that is not valid HTTP'
          : 'the upstream could not be reached';
    this.done(writeProblem(this.res, code, detail, this.extraHeaders));
  }

  private done(status: number): void {
    if (this.finished) return;
    this.finished = true;
    this.hooks.onDone(status);
  }
}

/**
 * A Readable fed by uWS `onData` for request bodies too large to buffer. Pauses the client socket
 * when undici has enough queued, resumes it when undici reads.
 */
export class RequestBodyStream extends Readable {
  constructor(private readonly res: HttpResponse) {
    super({ highWaterMark: 64 * 1024 });
  }
  override _read(): void {
    this.res.resume();
  }
  /** Pushes a copy of a uWS chunk (uWS reuses its buffer after the callback returns). */
  feed(chunk: ArrayBuffer, isLast: boolean): void {
    const copy = Buffer.from(new Uint8Array(chunk).slice());
    if (!this.push(copy)) this.res.pause();
    if (isLast) this.push(null);
  }
}
