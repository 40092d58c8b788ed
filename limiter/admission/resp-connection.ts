/**
 * One RESP2 connection to a standalone Redis, made for the counter store's admission script: the
 * store's hot path (counter-store.redis.ts). ioredis spent about 7–8 µs of CPU per EVALSHA here;
 * this spends a fraction of that (README, "Redis": the figure and what this does and does not do).
 *
 * - Connect: `redis://` (node:net) or `rediss://` (node:tls); AUTH (user and password from the URL)
 *   and SELECT (the URL's path) pipelined on connect; `ready` once both answered. No HELLO (RESP2).
 * - Writes: each call is encoded straight into a slab (resp-codec.ts) and everything written in
 *   one turn of the event loop goes out in one socket write (setImmediate).
 * - Replies are matched to calls first in, first out.
 * - No offline queue: a call while not ready rejects at once (`unavailable`).
 * - A per-call deadline (`deadlineMs`) from when the command was written, judged only after the
 *   loop has read the socket (reply-deadline.ts: a timer that runs late must not call a reply
 *   waiting unread in the socket missing). A late call rejects (`timeout`) but keeps its place, so
 *   its late reply is read and dropped and the order stays aligned. One timer serves every call.
 *   Late replies are reported to `onLateReply`, split into event-loop delay and Redis time.
 * - A dropped connection rejects every call in flight (`unavailable`); none is ever re-sent (a
 *   re-sent decision could charge twice). Reconnects with backoff (50 ms × attempts, at most 2 s).
 * - Scripts: EVALSHA; on NOSCRIPT (the script did not run) `SCRIPT LOAD` is sent and that one call
 *   re-sent, once.
 * - Bytes that are not RESP2: the connection is dropped (every call in flight rejected).
 * Events: `ready`, `close` (a connection ended), `reconnecting`, `end` (closed for good), `error`.
 */
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { RespError, RespParser, RespProtocolError, RespWriter, encodeCommand, type RespValue } from './resp-codec.js';
import { lateParts, LoopAwareTimer, type LateReplyListener } from './reply-deadline.js';

export type RespStatus = 'connecting' | 'ready' | 'reconnecting' | 'end';

/** Why a call failed without an answer from Redis: `timeout` (past its deadline) or `unavailable`. */
export class RespCallError extends Error {
  constructor(
    readonly kind: 'timeout' | 'unavailable',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RespCallError';
  }
}

/** A Lua script known by its SHA-1. */
export interface RespScript {
  readonly source: string;
  readonly sha: string;
  /** `$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n`: the bytes every call of it starts with (after the array header). */
  readonly head: Buffer;
  readonly load: Buffer;
}

export function respScript(source: string): RespScript {
  const sha = createHash('sha1').update(source).digest('hex');
  return {
    source,
    sha,
    head: Buffer.from(`$7\r\nEVALSHA\r\n$40\r\n${sha}\r\n`, 'latin1'),
    load: encodeCommand(['SCRIPT', 'LOAD', source]),
  };
}

export interface RespConnectionOptions {
  /** `redis://[user:password@]host[:port][/db]` or `rediss://…`. */
  url: string;
  /** Per-call deadline, ms. */
  deadlineMs: number;
  /** Connect (and handshake) timeout, ms. */
  connectTimeoutMs: number;
  /** TLS options for `rediss://` (ca, cert, …). */
  tls?: ConnectionOptions;
  /** Overrides of the URL's credentials and database. */
  username?: string;
  password?: string;
  db?: number;
  /**
   * Turns a failure into what callers receive (the counter store maps to its own typed errors),
   * so a call's promise needs no second handler.
   */
  mapError?: (err: RespCallError | RespError) => Error;
  /** Each reply read after its call's deadline: how late, split into event-loop delay and Redis time (ms). */
  onLateReply?: LateReplyListener;
}

// A call waiting for its reply.
interface Slot {
  resolve: (v: never) => void;
  reject: (e: unknown) => void;
  /** `performance.now()` of its write + `deadlineMs`; `Infinity` until written (and for internal calls). */
  deadline: number;
  /** When the deadline timer that failed it ran (0: it was not failed late). */
  firedAt: number;
  /** Answered or rejected already: its reply, when it comes, is dropped. */
  done: boolean;
  /** For a NOSCRIPT re-send: the script, and where the command's bytes are. */
  script: RespScript | undefined;
  bytes: Buffer | undefined;
  start: number;
  end: number;
  resent: boolean;
  /** Write sequence number of the command. */
  seq: number;
  /** Internal: resolves with the raw value (handshake, SCRIPT LOAD), errors included. */
  internal: boolean;
}

const noop = (): void => undefined;

/** Most bytes the bulk strings of `args` take (UTF-8: at most 3 bytes per UTF-16 unit). */
function bound(args: readonly (string | number)[]): number {
  let n = 0;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    n += typeof a === 'number' ? 32 : a.length * 3 + 16;
  }
  return n;
}

export class RespConnection extends EventEmitter {
  #status: RespStatus = 'connecting';
  #socket: Socket | undefined;
  readonly #opts: RespConnectionOptions;
  readonly #host: string;
  readonly #port: number;
  readonly #tls: boolean;
  readonly #username: string | undefined;
  readonly #password: string | undefined;
  readonly #db: number;
  readonly #writer = new RespWriter();
  readonly #mapError: (err: RespCallError | RespError) => Error;
  // FIFO of slots: a ring buffer.
  #ring: (Slot | undefined)[] = new Array<Slot | undefined>(256);
  #head = 0;
  #count = 0;
  #flushScheduled = false;
  // Calls at the tail of the ring not written yet (their deadline starts at the write).
  #unwritten = 0;
  readonly #deadlines = new LoopAwareTimer((firedAt) => this.#judge(firedAt));
  // performance.now() of the chunk being parsed: when its replies were read.
  #readAt = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #connectTimer: NodeJS.Timeout | undefined;
  #attempts = 0;
  #seq = 0;
  // Per script: the sequence number of the last SCRIPT LOAD written on this connection.
  readonly #loadedAt = new Map<RespScript, number>();
  #lastError: Error | undefined;
  #closing: Promise<void> | undefined;
  // close() was called: no reconnect.
  #ending = false;

  constructor(opts: RespConnectionOptions) {
    super();
    const u = new URL(opts.url);
    if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new RangeError(`RespConnection: not a redis:// URL: ${u.protocol}`);
    this.#opts = opts;
    this.#tls = u.protocol === 'rediss:';
    this.#host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname || '127.0.0.1';
    this.#port = u.port === '' ? 6379 : Number(u.port);
    this.#username = opts.username ?? (u.username === '' ? undefined : decodeURIComponent(u.username));
    this.#password = opts.password ?? (u.password === '' ? undefined : decodeURIComponent(u.password));
    const path = u.pathname.replace(/^\//, '');
    const db = opts.db ?? (path === '' ? 0 : Number(path));
    if (!Number.isInteger(db) || db < 0) throw new RangeError(`RespConnection: bad database in the URL: ${path}`);
    this.#db = db;
    this.#mapError = opts.mapError ?? ((e) => e);
    // Without a listener an `error` event would throw; the owner listens to report them.
    this.on('error', noop);
    this.#connect();
  }

  get status(): RespStatus {
    return this.#status;
  }

  /** Calls waiting for a reply (timed-out ones included until their reply is read). */
  get inFlight(): number {
    return this.#count;
  }

  /** The last connection-level error (AUTH refused, connection refused, …), for messages. */
  get lastError(): Error | undefined {
    return this.#lastError;
  }

  /** Any command; resolves with its reply, rejects with a RespError reply or a RespCallError. */
  call(args: readonly (string | number)[]): Promise<RespValue> {
    if (this.#status !== 'ready') return Promise.reject(this.#mapError(this.#notReady()));
    const w = this.#writer;
    w.reserve(16 + bound(args));
    const start = w.pos;
    w.arrayHeader(args.length);
    for (const a of args) {
      if (typeof a === 'number') w.bulkNumber(a);
      else w.bulk(a);
    }
    return this.#push(undefined, w.buf, start, w.pos);
  }

  /**
   * EVALSHA of `script` with `keys` and numeric-or-string `args`, encoded straight into the
   * output; NOSCRIPT is recovered from once (SCRIPT LOAD, then this call again).
   */
  evalsha(script: RespScript, keys: readonly string[], args: readonly (string | number)[]): Promise<RespValue> {
    if (this.#status !== 'ready') return Promise.reject(this.#mapError(this.#notReady()));
    const w = this.#writer;
    // Room for the whole command first, so the slab cannot move while it is written.
    w.reserve(40 + script.head.length + bound(keys) + bound(args));
    const start = w.pos;
    w.arrayHeader(3 + keys.length + args.length);
    w.raw(script.head);
    w.bulkNumber(keys.length);
    for (let i = 0; i < keys.length; i++) w.bulk(keys[i]!);
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      if (typeof a === 'number') w.bulkNumber(a);
      else w.bulk(a);
    }
    return this.#push(script, w.buf, start, w.pos);
  }

  #push(script: RespScript | undefined, bytes: Buffer, start: number, end: number): Promise<RespValue> {
    return new Promise<RespValue>((resolve, reject) => {
      const slot: Slot = {
        resolve: resolve,
        reject,
        deadline: Infinity,
        firedAt: 0,
        done: false,
        script,
        bytes,
        start,
        end,
        resent: false,
        seq: ++this.#seq,
        internal: false,
      };
      this.#enqueue(slot);
      this.#scheduleFlush();
    });
  }

  #enqueue(slot: Slot): void {
    let ring = this.#ring;
    if (this.#count === ring.length) {
      const bigger = new Array<Slot | undefined>(ring.length * 2);
      for (let i = 0; i < this.#count; i++) bigger[i] = ring[(this.#head + i) % ring.length];
      this.#ring = ring = bigger;
      this.#head = 0;
    }
    ring[(this.#head + this.#count) % ring.length] = slot;
    this.#count++;
    this.#unwritten++;
  }

  #shift(): Slot | undefined {
    if (this.#count === 0) return undefined;
    const ring = this.#ring;
    const slot = ring[this.#head];
    ring[this.#head] = undefined;
    this.#head = (this.#head + 1) % ring.length;
    this.#count--;
    return slot;
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false;
    const out = this.#writer.take();
    if (out === undefined) return;
    const s = this.#socket;
    // Dropped meanwhile: its calls were rejected with the connection.
    if (s === undefined || this.#status !== 'ready') return;
    s.write(out);
    this.#written();
  };

  /** The calls at the tail not written yet are now: their deadlines start. */
  #written(): void {
    const n = this.#unwritten;
    if (n === 0) return;
    this.#unwritten = 0;
    const deadline = performance.now() + this.#opts.deadlineMs;
    const ring = this.#ring;
    let armed = false;
    for (let i = Math.max(0, this.#count - n); i < this.#count; i++) {
      const slot = ring[(this.#head + i) % ring.length]!;
      if (slot.internal) continue;
      slot.deadline = deadline;
      armed = true;
    }
    if (armed) this.#deadlines.arm(deadline);
  }

  #notReady(): RespCallError {
    const why = this.#lastError ? `: ${this.#lastError.message}` : '';
    return new RespCallError('unavailable', `redis: not connected (${this.#status}; no offline queue)${why}`, { cause: this.#lastError });
  }

  #onReply(v: RespValue): void {
    const slot = this.#shift();
    if (slot === undefined) throw new RespProtocolError('a reply with no command waiting for it');
    if (slot.internal) {
      slot.resolve(v as never);
      return;
    }
    if (this.#readAt > slot.deadline) {
      const listener = this.#opts.onLateReply;
      if (listener !== undefined) {
        const [loop, redis] = lateParts(slot.deadline, this.#readAt, slot.firedAt, !slot.done);
        listener(loop, redis);
      }
    }
    if (slot.done) return;
    if (v instanceof RespError) {
      if (slot.script !== undefined && !slot.resent && v.message.startsWith('NOSCRIPT')) {
        this.#resend(slot);
        return;
      }
      slot.done = true;
      slot.reject(this.#mapError(v));
      return;
    }
    slot.done = true;
    slot.resolve(v as never);
  }

  /** NOSCRIPT: the script did not run. Load it (unless a load was written after this call) and send the call again. */
  #resend(slot: Slot): void {
    const script = slot.script!;
    const w = this.#writer;
    if ((this.#loadedAt.get(script) ?? 0) < slot.seq) {
      w.reserve(script.load.length);
      w.raw(script.load);
      this.#loadedAt.set(script, ++this.#seq);
      // Its reply (the SHA, or an error that the re-sent call will show as NOSCRIPT again) is dropped.
      this.#enqueue(this.#internalSlot(noop, noop));
    }
    const len = slot.end - slot.start;
    w.reserve(len);
    const at = w.pos;
    slot.bytes!.copy(w.buf, at, slot.start, slot.end);
    w.pos += len;
    slot.bytes = w.buf;
    slot.start = at;
    slot.end = w.pos;
    slot.resent = true;
    // A new write: Redis answered the first one (NOSCRIPT), so the deadline starts again.
    slot.deadline = Infinity;
    slot.seq = ++this.#seq;
    this.#enqueue(slot);
    this.#scheduleFlush();
  }

  #internalSlot(resolve: (v: RespValue) => void, reject: (e: unknown) => void): Slot {
    return {
      resolve: resolve,
      reject,
      deadline: Infinity,
      firedAt: 0,
      done: false,
      script: undefined,
      bytes: undefined,
      start: 0,
      end: 0,
      resent: false,
      seq: ++this.#seq,
      internal: true,
    };
  }

  /**
   * Run one turn after the deadline timer ran at `firedAt` (the socket has been read since): the
   * calls due by then still without a reply are late. Returns the next deadline to wait for.
   */
  #judge(firedAt: number): number {
    let next = Infinity;
    const ring = this.#ring;
    for (let i = 0; i < this.#count; i++) {
      const slot = ring[(this.#head + i) % ring.length]!;
      if (slot.done || slot.internal) continue;
      if (slot.deadline <= firedAt) {
        slot.done = true;
        slot.firedAt = firedAt;
        slot.reject(this.#mapError(new RespCallError('timeout', `redis: no answer within ${this.#opts.deadlineMs} ms of its write`)));
      } else if (slot.deadline < next) next = slot.deadline;
    }
    return next;
  }

  #connect(): void {
    this.#reconnectTimer = undefined;
    const opts = this.#opts;
    const socket = this.#tls
      ? tlsConnect({ host: this.#host, port: this.#port, servername: this.#host, ...opts.tls })
      : netConnect({ host: this.#host, port: this.#port });
    this.#socket = socket;
    // A parser per connection: replies left in a chunk after the connection failed go nowhere.
    const parser = new RespParser((v) => {
      if (this.#socket === socket) this.#onReply(v);
    });
    socket.setNoDelay(true);
    socket.setKeepAlive(true);
    this.#connectTimer = setTimeout(() => {
      this.#fail(socket, new Error(`redis: not connected within ${opts.connectTimeoutMs} ms`));
    }, opts.connectTimeoutMs);
    socket.once(this.#tls ? 'secureConnect' : 'connect', () => this.#handshake(socket));
    socket.on('data', (chunk: Buffer) => {
      if (this.#socket !== socket) return;
      this.#readAt = performance.now();
      try {
        parser.feed(chunk);
      } catch (err) {
        this.#fail(socket, err as Error);
      }
    });
    socket.on('error', (err) => this.#fail(socket, err));
    socket.on('close', () => this.#fail(socket, new Error('redis: connection closed')));
  }

  #handshake(socket: Socket): void {
    if (this.#socket !== socket) return;
    const cmds: (string | number)[][] = [];
    if (this.#password !== undefined) {
      cmds.push(this.#username !== undefined ? ['AUTH', this.#username, this.#password] : ['AUTH', this.#password]);
    }
    if (this.#db !== 0) cmds.push(['SELECT', this.#db]);
    cmds.push(['PING']);
    let left = cmds.length;
    let failed = false;
    for (const c of cmds) {
      const slot = this.#internalSlot((v) => {
        if (failed || this.#socket !== socket) return;
        if (v instanceof RespError) {
          failed = true;
          const what = c[0] === 'AUTH' ? 'AUTH refused' : `${c[0]} failed`;
          this.#fail(socket, new Error(`redis: ${what}: ${v.message}`));
          return;
        }
        if (--left === 0) this.#onReady();
      }, noop);
      this.#enqueue(slot);
      socket.write(encodeCommand(c));
    }
    // Written at once, and internal: no deadline.
    this.#unwritten = 0;
  }

  #onReady(): void {
    clearTimeout(this.#connectTimer);
    this.#connectTimer = undefined;
    this.#attempts = 0;
    this.#lastError = undefined;
    this.#status = 'ready';
    this.emit('ready');
  }

  /** The connection `socket` is gone (or must go): reject everything in flight, reconnect later. */
  #fail(socket: Socket, err: Error): void {
    if (this.#socket !== socket) return;
    this.#socket = undefined;
    clearTimeout(this.#connectTimer);
    this.#connectTimer = undefined;
    socket.destroy();
    const wasReady = this.#status === 'ready';
    const ending = this.#ending;
    if (!ending && err.message !== 'redis: connection closed') {
      this.#lastError = err;
      this.emit('error', err);
    } else if (!ending && !wasReady && this.#lastError === undefined) {
      this.#lastError = err;
    }
    // Bytes encoded but not flushed belong to calls rejected below.
    this.#writer.take();
    this.#unwritten = 0;
    this.#loadedAt.clear();
    const lost = new RespCallError('unavailable', `redis: connection lost with the call in flight (${err.message}); not re-sent`, {
      cause: err,
    });
    for (let slot = this.#shift(); slot !== undefined; slot = this.#shift()) {
      if (slot.done) continue;
      slot.done = true;
      if (slot.internal) continue;
      slot.reject(this.#mapError(lost));
    }
    this.#status = ending ? 'end' : 'reconnecting';
    this.emit('close');
    if (ending) {
      this.emit('end');
      return;
    }
    this.emit('reconnecting');
    this.#attempts++;
    this.#reconnectTimer = setTimeout(() => this.#connect(), Math.min(this.#attempts * 50, 2000));
  }

  /** Resolves once ready; rejects after `timeoutMs` with the last connection error in the message. */
  ready(timeoutMs: number): Promise<void> {
    if (this.#status === 'ready') return Promise.resolve();
    if (this.#status === 'end') return Promise.reject(new RespCallError('unavailable', 'redis: connection closed'));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off('ready', onReady);
        const why = this.#lastError ? ` (${this.#lastError.message})` : '';
        reject(new RespCallError('unavailable', `redis: not ready within ${timeoutMs} ms${why}`, { cause: this.#lastError }));
      }, timeoutMs);
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      this.once('ready', onReady);
    });
  }

  /**
   * Closes for good: new calls are refused, calls in flight get their replies (QUIT is answered
   * after them), then the socket closes. Resolves once it has.
   */
  close(): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#ending = true;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    const socket = this.#socket;
    const wasReady = this.#status === 'ready';
    this.#closing = new Promise<void>((resolve) => {
      if (socket === undefined) {
        this.#status = 'end';
        this.emit('end');
        resolve();
        return;
      }
      this.once('end', () => resolve());
      if (wasReady) {
        this.#flush();
        this.#unwritten = 0;
        this.#status = 'end';
        this.#enqueue(this.#internalSlot(noop, noop));
        socket.end(encodeCommand(['QUIT']));
        // A Redis that never answers the QUIT: dropped after the connect timeout.
        setTimeout(() => this.#fail(socket, new Error('redis: closed')), this.#opts.connectTimeoutMs).unref();
      } else {
        this.#fail(socket, new Error('redis: closed'));
      }
    }).finally(() => {
      this.#deadlines.clear();
    });
    return this.#closing;
  }

  /** Drops the connection now (tests; the owner's last resort). Calls in flight are rejected. */
  disconnect(): void {
    const s = this.#socket;
    if (s !== undefined) this.#fail(s, new Error('redis: disconnected'));
  }
}
