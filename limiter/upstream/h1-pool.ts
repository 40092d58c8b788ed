/**
 * The hot path's upstream client: keep-alive HTTP/1.1 connections to one origin, one request at a
 * time on each, written as one string (and the buffered body) and read by ResponseParser straight
 * into the proxy's Exchange: no request object, no header validation pass of a general client, no
 * stream between the socket and the uWS response.
 *
 * What it does not do, and hands to undici instead (`fallback`): request bodies that stream (larger
 * than LIMITER_BUFFER_BODY, or chunked), and pipelining (UPSTREAM_PIPELINING > 1). Those need
 * body plumbing and ordering this client leaves out on purpose (README, "Upstream client").
 *
 * The request bytes are what undici writes for the same request (host, connection, headers in
 * order, content-length last), so the upstream sees no difference. A HEAD, and a body on a method
 * that does not expect one, are sent with `connection: close` and the connection is not reused,
 * as undici does, for upstreams that send a body anyway.
 *
 * A request that fails on a reused keep-alive connection before any byte of its response arrives
 * (the upstream closed the idle connection as we wrote) is sent once more on a new connection when
 * its method is idempotent (RFC 9110 §9.2.2): the upstream saw nothing it acted on, or the method
 * makes acting twice harmless.
 *
 * Timeouts (headers, body gap, connect, idle keep-alive) are checked by one sweep timer per pool
 * against per-connection timestamps: no timer per request.
 *
 * Each connection holds a slot of the upstream's ConnectionBudget (budget.ts), shared with the
 * fallback's connections, so UPSTREAM_CONNECTIONS caps both clients together; requests wait in
 * order when the budget is spent, and an idle connection is closed when the fallback waits for a slot.
 */
import { Buffer } from 'node:buffer';
import { connect, type Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import type { ErrorCode } from '../../shared/errors.js';
import { ConnectionBudget } from './budget.js';
import { Framing, ParseError, ResponseParser, type ResponseSink } from './response-parser.js';

/** A typed upstream failure; `code` is what the client is answered (502/504). */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(
    readonly code: Extract<ErrorCode, 'upstream_timeout' | 'upstream_bad_response' | 'upstream_unreachable'>,
    message: string,
  ) {
    super(message);
  }
}

/** The part of undici's legacy dispatch handler the proxy's Exchange implements. */
export type UpstreamHandler = Pick<Dispatcher.DispatchHandler, 'onConnect' | 'onHeaders' | 'onData' | 'onComplete' | 'onError'>;

/** What both clients offer the proxy: undici's Pool, or H1Pool. */
export interface UpstreamDispatcher {
  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean;
}

export interface H1PoolOptions {
  /** Connections to the upstream, when no shared budget is given (the `budget` argument's limit otherwise). */
  connections: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  connectTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** Largest response head (and trailer section), 502 above it. */
  maxHeadBytes: number;
}

interface Job {
  method: string;
  path: string;
  headers: readonly string[];
  body: Buffer | null;
  handler: UpstreamHandler;
  /** Set when the exchange aborted while queued. */
  cancelled: boolean;
  /** Sent once already on a reused connection that failed before answering. */
  retried: boolean;
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const EXPECTS_PAYLOAD = new Set(['PUT', 'POST', 'PATCH', 'QUERY', 'PROPFIND', 'PROPPATCH']);
// The bytes a header value may hold (undici's rule): no CR, LF, NUL or other control but HTAB.
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
// A request target must be bytes 0x21-0xFF (undici's rule): no space, CR, LF or other control.
const BAD_PATH = /[^\u0021-\u00ff]/;
// A header name or method must be a token (RFC 9110 §5.6.2; undici's rule): no CR, LF, colon,
// space, control or non-ASCII character (a name is written as latin1, so U+010D U+010A would be CR LF).
const NOT_TOKEN = /[^!#$%&'*+\-.^_`|~0-9A-Za-z]/;
// Names this client writes itself (host, connection, content-length) or that change the message's
// framing or protocol: a caller's copy would make a second, conflicting one (undici refuses most of
// them too). The sidecar never passes them (proxy.ts, dropRequestHeader); this holds for any caller.
const OURS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'expect']);
const OURS_LENGTH = new Uint8Array(32);
for (const n of OURS) OURS_LENGTH[n.length] = 1;
const EMPTY_BUF = Buffer.alloc(0);
// undici's keepAliveTimeoutThreshold default: margin taken off an upstream's Keep-Alive timeout.
const KEEP_ALIVE_THRESHOLD_MS = 2000;

const enum Phase {
  Connecting,
  Idle,
  /** Request written, waiting for the response head. */
  Waiting,
  /** Reading the response body. */
  Body,
  Closed,
}

class H1Connection implements ResponseSink {
  phase = Phase.Connecting;
  /** ms timestamp of the last event the current phase's timeout counts from. */
  since = Date.now();
  /** Requests answered on this connection (a failure on a reused one may be retried). */
  served = 0;
  /** How long this connection may stay idle: keepAliveTimeoutMs, or less when the upstream says so. */
  private idleLimit: number;
  private job: Job | null = null;
  private readonly parser: ResponseParser;
  private readonly socket: Socket;
  /** Read bytes not yet parsed because the Exchange paused. */
  private rest: Buffer | null = null;
  private paused = false;
  private reuse = true;
  private responseDone = false;
  private readonly resume = (): void => this.onResume();
  private readonly abort = (err?: Error): void => this.onAbort(err);

  constructor(
    private readonly pool: H1Pool,
    job: Job,
  ) {
    this.job = job;
    this.idleLimit = pool.opts.keepAliveTimeoutMs;
    this.parser = new ResponseParser(this, pool.opts.maxHeadBytes);
    this.socket = connect({ host: pool.host, port: pool.port, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 });
    this.socket.on('connect', () => {
      if (this.phase !== Phase.Connecting) return;
      const j = this.job;
      this.job = null;
      if (j === null || j.cancelled) this.release();
      else this.send(j);
    });
    this.socket.on('data', (b: Buffer) => this.onData(b));
    this.socket.on('end', () => this.onEnd());
    this.socket.on('error', (err) => this.fail(new UpstreamError('upstream_unreachable', err.message)));
    this.socket.on('close', () => this.fail(new UpstreamError('upstream_unreachable', 'the upstream closed the connection')));
  }

  /** Writes `job`'s request: the head as one latin1 string, the buffered body with it. */
  send(job: Job): void {
    this.job = job;
    this.responseDone = false;
    const method = job.method;
    const body = job.body;
    const head = method === 'HEAD';
    // As undici: no reuse after a HEAD or after a body the method does not expect.
    this.reuse = !head && (body === null || body.length === 0 || EXPECTS_PAYLOAD.has(method));
    if (BAD_PATH.test(job.path)) return this.refuse(job, 'invalid request path');
    if (method === '' || NOT_TOKEN.test(method)) return this.refuse(job, 'invalid request method');
    let text = `${method} ${job.path} HTTP/1.1\r\nhost: ${this.pool.hostHeader}\r\nconnection: ${this.reuse ? 'keep-alive' : 'close'}\r\n`;
    const h = job.headers;
    for (let i = 0; i < h.length; i += 2) {
      const n = h[i]!;
      const v = h[i + 1]!;
      if (n === '' || NOT_TOKEN.test(n) || (n.length < 32 && OURS_LENGTH[n.length] === 1 && OURS.has(n.toLowerCase())))
        return this.refuse(job, 'invalid header name');
      if (BAD_VALUE.test(v)) return this.refuse(job, `invalid ${n} header value`);
      text += `${n}: ${v}\r\n`;
    }
    this.parser.reset(head);
    this.phase = Phase.Waiting;
    this.since = Date.now();
    if (body !== null && body.length > 0) {
      const s = this.socket;
      s.cork();
      s.write(`${text}content-length: ${body.length}\r\n\r\n`, 'latin1');
      s.write(body);
      s.uncork();
    } else this.socket.write(EXPECTS_PAYLOAD.has(method) ? `${text}content-length: 0\r\n\r\n` : `${text}\r\n`, 'latin1');
  }

  /** Fails a request that cannot be written as it is (undici throws for the same); nothing was sent. */
  private refuse(job: Job, why: string): void {
    this.job = null;
    this.release();
    job.handler.onError!(new UpstreamError('upstream_unreachable', why));
  }

  /** Hands this exchange the abort function (undici's onConnect). */
  attach(job: Job): void {
    job.handler.onConnect!(this.abort);
  }

  // ── ResponseSink ──

  head(status: number, reason: string, headers: Buffer[], keepAlive: boolean, framing: Framing): void {
    if (!keepAlive) this.reuse = false;
    else {
      // `Keep-Alive: timeout=N`: the upstream closes idle connections after N s (node's http
      // server: 5 s). Idle past N − 2 s we close first, as undici does, so a request is rarely
      // written onto a connection the upstream is closing (a POST there could only get a 502).
      for (let i = 0; i < headers.length; i += 2) {
        const name = headers[i]!;
        if (name.length === 10 && (name[0]! | 32) === 107 /* k */ && name.toString('latin1').toLowerCase() === 'keep-alive') {
          const m = /timeout=(\d+)/i.exec(headers[i + 1]!.toString('latin1'));
          if (m) {
            const idle = Number(m[1]) * 1000 - KEEP_ALIVE_THRESHOLD_MS;
            if (idle <= 0) this.reuse = false;
            else this.idleLimit = Math.min(this.pool.opts.keepAliveTimeoutMs, idle);
          }
        }
      }
    }
    if (framing !== Framing.None) {
      this.phase = Phase.Body;
      this.since = Date.now();
    }
    const job = this.job;
    if (job === null) return;
    if (job.handler.onHeaders!(status, headers, this.resume, reason) === false) this.paused = true;
  }

  body(chunk: Buffer): boolean {
    const job = this.job;
    if (job === null) return true;
    const more = job.handler.onData!(chunk);
    if (!more) this.paused = true;
    return more;
  }

  end(): void {
    this.responseDone = true;
  }

  interim(): void {
    // A 1xx head restarts the headers timeout, as undici's does (a 102 Processing keeps a slow
    // request alive).
    this.since = Date.now();
  }

  // ── socket events ──

  private onData(buf: Buffer): void {
    // Only a body's gap timer restarts with each read: the headers timeout counts from the request
    // (as undici's), so an upstream that sends its head a byte at a time still runs out of time.
    if (this.phase === Phase.Body) this.since = Date.now();
    if (this.job === null || this.phase === Phase.Idle) {
      // Bytes nobody asked for: the connection cannot be trusted for another request.
      this.destroy();
      return;
    }
    this.parse(buf);
  }

  private parse(buf: Buffer): void {
    let used: number;
    try {
      used = this.parser.execute(buf);
    } catch (err) {
      this.fail(err instanceof ParseError ? new UpstreamError('upstream_bad_response', err.message) : (err as Error));
      return;
    }
    // The exchange may have aborted from one of its callbacks (the connection is gone with it).
    if (this.phase === Phase.Closed) return;
    if (this.responseDone) {
      this.complete(used < buf.length);
      return;
    }
    if (this.paused) {
      this.rest = used < buf.length ? buf.subarray(used) : EMPTY_BUF;
      this.socket.pause();
    }
  }

  private onResume(): void {
    if (!this.paused || this.phase === Phase.Closed) return;
    this.paused = false;
    const rest = this.rest ?? EMPTY_BUF;
    this.rest = null;
    this.since = Date.now();
    this.parse(rest);
    // parse() may have ended the response (the connection is idle or closed by now).
    const phase = this.phase as Phase;
    if (!this.paused && phase !== Phase.Closed && phase !== Phase.Idle) this.socket.resume();
  }

  /** The response is complete: tell the exchange, then reuse or close the connection. */
  private complete(extraBytes: boolean): void {
    const job = this.job;
    if (job === null) return;
    this.job = null;
    this.served++;
    // Bytes past the response, in this read or waiting in the socket's buffer (they arrived while
    // the exchange had us paused): they were sent before the next request could be, so they are
    // no answer to it, and a reused connection would hand them to that request as its response.
    // And a request not yet all written (the upstream answered before reading its body, as undici
    // checks too): the next request would be written behind the rest of this body.
    if (extraBytes || this.socket.readableLength > 0 || this.socket.writableLength > 0) this.reuse = false;
    if (this.reuse) this.release();
    else this.destroy();
    job.handler.onComplete!(null);
  }

  private release(): void {
    this.phase = Phase.Idle;
    this.since = Date.now();
    this.paused = false;
    if (this.socket.isPaused()) this.socket.resume();
    this.pool.idle(this);
  }

  private onEnd(): void {
    if (this.phase === Phase.Body && this.parser.closeDelimited) {
      try {
        this.parser.finish();
      } catch (err) {
        this.fail(err as Error);
        return;
      }
      if (this.responseDone) {
        this.reuse = false;
        this.complete(false);
        return;
      }
    }
    this.fail(
      this.phase === Phase.Body
        ? new UpstreamError('upstream_bad_response', 'the upstream closed the connection before the response was complete')
        : new UpstreamError('upstream_unreachable', 'the upstream closed the connection'),
    );
  }

  private onAbort(err?: Error): void {
    const job = this.job;
    if (job === null) return;
    this.job = null;
    this.destroy();
    job.handler.onError!(err ?? new Error('aborted'));
  }

  /** Ends the connection because of `err`, failing (or retrying) the request on it. */
  fail(err: Error): void {
    if (this.phase === Phase.Closed) return;
    const job = this.job;
    const phase = this.phase;
    this.job = null;
    this.destroy();
    if (job === null || job.cancelled) return;
    if (
      phase === Phase.Waiting &&
      this.served > 0 &&
      !this.parser.started &&
      !job.retried &&
      IDEMPOTENT.has(job.method) &&
      !(err instanceof UpstreamError && err.code !== 'upstream_unreachable')
    ) {
      job.retried = true;
      this.pool.retry(job);
      return;
    }
    job.handler.onError!(err);
  }

  destroy(): void {
    if (this.phase === Phase.Closed) return;
    this.phase = Phase.Closed;
    // The socket first: its slot of the budget may open another connection at once.
    this.socket.destroy();
    this.pool.closed(this);
  }

  /** Called by the pool's sweep: fails the connection whose current phase ran out of time. */
  expire(now: number): void {
    const o = this.pool.opts;
    switch (this.phase) {
      case Phase.Connecting:
        if (now - this.since >= o.connectTimeoutMs) this.fail(new UpstreamError('upstream_timeout', 'connect timeout'));
        return;
      case Phase.Waiting:
        if (now - this.since >= o.headersTimeoutMs) this.fail(new UpstreamError('upstream_timeout', 'headers timeout'));
        return;
      case Phase.Body:
        // A body paused by the client's backpressure is not the upstream's delay.
        if (!this.paused && now - this.since >= o.bodyTimeoutMs) this.fail(new UpstreamError('upstream_timeout', 'body timeout'));
        return;
      case Phase.Idle:
        if (now - this.since >= this.idleLimit) this.destroy();
        return;
      case Phase.Closed:
        return;
    }
  }
}

export class H1Pool implements UpstreamDispatcher {
  readonly host: string;
  readonly port: number;
  readonly hostHeader: string;
  private readonly idleConns: H1Connection[] = [];
  private readonly all = new Set<H1Connection>();
  private queue: (Job | undefined)[] = [];
  private queueHead = 0;
  private readonly sweep: NodeJS.Timeout;
  /** This pool's connections take their slots here; shared with undici's pool for the same upstream (budget.ts). */
  readonly budget: ConnectionBudget;
  /** A waiter for a slot is registered with the budget (jobs are queued with no connection to take them). */
  private waitingForSlot = false;
  private closing = false;
  private destroyed = false;
  private drained: (() => void) | null = null;

  constructor(
    origin: string,
    readonly opts: H1PoolOptions,
    /** undici's pool for the requests this client does not take (streamed bodies). */
    private readonly fallback: UpstreamDispatcher,
    /** The upstream's connection budget, shared with `fallback`; a budget of `opts.connections` of its own when omitted. */
    budget?: ConnectionBudget,
  ) {
    this.budget = budget ?? new ConnectionBudget(opts.connections);
    this.budget.reclaim = () => this.shedIdle();
    const u = new URL(origin);
    if (u.protocol !== 'http:') throw new Error(`H1Pool takes http: origins only, not ${origin}`);
    this.host = u.hostname.replace(/^\[|\]$/g, '');
    this.port = u.port === '' ? 80 : Number(u.port);
    this.hostHeader = u.host;
    const every = Math.max(10, Math.min(1000, Math.floor(Math.min(opts.headersTimeoutMs, opts.bodyTimeoutMs, opts.connectTimeoutMs) / 4)));
    this.sweep = setInterval(() => {
      const now = Date.now();
      for (const c of this.all) c.expire(now);
    }, every);
    this.sweep.unref();
  }

  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const body = opts.body;
    if (body != null && !Buffer.isBuffer(body)) return this.fallback.dispatch(opts, handler);
    const job: Job = {
      method: opts.method,
      path: opts.path,
      headers: (opts.headers ?? []) as readonly string[],
      body: body ?? null,
      handler,
      cancelled: false,
      retried: false,
    };
    if (this.closing) {
      handler.onError!(new UpstreamError('upstream_unreachable', 'the upstream pool is closing'));
      return false;
    }
    // Written after uWS has read the rest of its buffer (one flush per turn of the loop, not a
    // timer per request): a request pipelined behind this one makes uWS close the client's
    // connection and abort this exchange, and then nothing must have reached the upstream, since
    // the client will never see the answer (test/limiter/edge.test.ts, "pipelined GETs").
    handler.onConnect!((err?: Error) => {
      if (job.cancelled) return;
      job.cancelled = true;
      handler.onError!(err ?? new Error('aborted'));
    });
    this.toSend.push(job);
    if (!this.flushing) {
      this.flushing = true;
      setImmediate(this.flush);
    }
    return true;
  }

  private readonly toSend: Job[] = [];
  private flushing = false;
  private readonly flush = (): void => {
    this.flushing = false;
    const jobs = this.toSend;
    // start() may dispatch synchronously into onError, which may dispatch again: take the batch first.
    const n = jobs.length;
    for (let i = 0; i < n; i++) {
      const job = jobs[i]!;
      if (!job.cancelled) this.start(job);
    }
    jobs.splice(0, n);
    // close() waits for requests dispatched before it in this turn; if none took a connection, it is done.
    if (this.closing && this.all.size === 0 && !this.waitingForSlot) this.drained?.();
  };

  /** Sends `job` on an idle connection, a new one, or queues it; the exchange's abort follows it (onConnect). */
  private start(job: Job): void {
    const c = this.idleConns.pop();
    if (c !== undefined) {
      c.attach(job);
      if (!job.cancelled) c.send(job);
      return;
    }
    if (this.budget.tryTake()) {
      this.open(job);
      return;
    }
    // Every connection is busy, or the budget is spent: the exchange may abort while it waits.
    job.handler.onConnect!((err?: Error) => {
      if (job.cancelled) return;
      job.cancelled = true;
      job.handler.onError!(err ?? new Error('aborted'));
    });
    this.queue.push(job);
    this.awaitSlot();
  }

  /** Opens a connection for `job` on a slot already taken. */
  private open(job: Job): void {
    const n = new H1Connection(this, job);
    this.all.add(n);
    n.attach(job);
  }

  /** Asks the budget for a slot for the queued jobs (once: the grant asks again while jobs remain). */
  private awaitSlot(): void {
    if (this.waitingForSlot) return;
    this.waitingForSlot = true;
    this.budget.take(this.granted);
  }

  /** A slot for the first live queued job; given back when none is left (a freed connection took them). */
  private readonly granted = (): void => {
    this.waitingForSlot = false;
    const job = this.nextQueued();
    if (job === undefined) {
      this.budget.give();
      if (this.closing && this.all.size === 0) this.drained?.();
      return;
    }
    this.open(job);
    if (this.queueHead < this.queue.length) this.awaitSlot();
  };

  /** Takes the first queued job not aborted, or undefined. */
  private nextQueued(): Job | undefined {
    while (this.queueHead < this.queue.length) {
      const job = this.queue[this.queueHead]!;
      this.queue[this.queueHead++] = undefined;
      if (this.queueHead === this.queue.length) {
        this.queue = [];
        this.queueHead = 0;
      }
      if (!job.cancelled) return job;
    }
    return undefined;
  }

  /** The budget's reclaim: closes one idle connection so that its slot goes to a waiter of undici's. */
  private shedIdle(): boolean {
    const c = this.idleConns.pop();
    if (c === undefined) return false;
    c.destroy();
    return true;
  }

  retry(job: Job): void {
    // Not after destroy(): its connections fail on purpose, and nothing may be sent any more.
    if (this.destroyed) job.handler.onError!(new UpstreamError('upstream_unreachable', 'the upstream pool was destroyed'));
    else this.start(job);
  }

  /** A connection is free: the next queued request takes it, else it waits idle. */
  idle(c: H1Connection): void {
    for (let job = this.nextQueued(); job !== undefined; job = this.nextQueued()) {
      // Re-attached so an abort now cuts this connection, not the queue entry.
      c.attach(job);
      if (!job.cancelled) {
        c.send(job);
        return;
      }
    }
    // Closed rather than kept idle while another client of the budget waits for a slot.
    if (this.closing || this.budget.waiters > (this.waitingForSlot ? 1 : 0)) {
      c.destroy();
      return;
    }
    this.idleConns.push(c);
  }

  closed(c: H1Connection): void {
    this.all.delete(c);
    const i = this.idleConns.indexOf(c);
    if (i >= 0) this.idleConns.splice(i, 1);
    // The slot goes to the first waiter: a queued request of ours (`granted` opens a connection for
    // the first live one, also while closing: it is in flight for its client, and close() waits for
    // it) or an undici connection.
    this.budget.give();
    if (this.closing && this.all.size === 0 && !this.waitingForSlot) this.drained?.();
  }

  /** Stops taking requests; resolves once those in flight are answered (idle connections close now). */
  close(): Promise<void> {
    this.closing = true;
    for (const c of [...this.idleConns]) c.destroy();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearInterval(this.sweep);
        resolve();
      };
      // Requests dispatched earlier in this turn are still to be written (flush): wait for them too.
      if (this.all.size === 0 && this.toSend.length === 0 && !this.waitingForSlot) done();
      else this.drained = done;
    });
  }

  /** Cuts every connection, in flight or not. */
  destroy(): void {
    this.closing = true;
    this.destroyed = true;
    clearInterval(this.sweep);
    const err = new UpstreamError('upstream_unreachable', 'the upstream pool was destroyed');
    // Requests still waiting for a connection are answered too (no connection will come).
    const waiting = [...this.toSend, ...this.queue.slice(this.queueHead)];
    this.toSend.length = 0;
    this.queue = [];
    this.queueHead = 0;
    for (const c of [...this.all]) c.fail(err);
    for (const job of waiting) {
      if (job === undefined || job.cancelled) continue;
      job.cancelled = true;
      job.handler.onError!(err);
    }
  }
}
