/**
 * Proxies an admitted request to its upstream, streaming both ways, over the `h1` client
 * (upstream/h1-pool.ts) or undici's dispatch API (UPSTREAM_CLIENT; streamed request bodies always
 * go over undici): both drive the same handler.
 *
 * One `Exchange` object per request implements undici's dispatch handler and writes the upstream
 * response to the uWS response as it arrives: no promise, no closure per chunk. Backpressure both
 * ways: a uWS write that does not drain pauses undici (return false from onData) until uWS says
 * the socket is writable; a request body larger than `bufferBodyBytes` is streamed through a
 * Readable that pauses the client connection when undici's socket is full.
 *
 * Framing: uWS owns Content-Length and chunked encoding on the client side, so the upstream's
 * framing headers and the hop-by-hop headers (RFC 9110 §7.6.1) are never copied through; the
 * upstream's transfer codings other than its final chunked (`gzip, chunked`) are written ahead of
 * uWS's chunked, untouched (`relayedCodings`).
 */
import { Buffer } from 'node:buffer';
import { Readable } from 'node:stream';
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import { ConnectionBudget, budgetedConnector } from './upstream/budget.js';
import { H1Pool, UpstreamError, type UpstreamDispatcher } from './upstream/h1-pool.js';
import { problemFor, PROBLEM_CONTENT_TYPE, type ErrorCode } from '../shared/errors.js';
import type { HttpResponse } from '../shared/uws.js';
import { statusLine } from '../shared/http.js';

export interface UpstreamOptions {
  /**
   * Connections open to each upstream at most, by both clients together (upstream/budget.ts): with
   * `h1`, its pool and undici's pool for streamed bodies share this one budget.
   */
  connections: number;
  /** Time to wait for the upstream's response headers (→ 504). */
  headersTimeoutMs: number;
  /** Longest pause between body chunks from the upstream (→ 504 before headers, else abort). */
  bodyTimeoutMs: number;
  connectTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** Pipelining depth per connection; 1 is the safe default for arbitrary backends. */
  pipelining: number;
  /**
   * UPSTREAM_CLIENT: `h1` (default) sends buffered requests over the purpose-built HTTP/1.1 pool
   * (upstream/h1-pool.ts) and streamed bodies over undici; `undici` sends everything over undici.
   * Pipelining > 1 is undici's alone.
   */
  client?: 'h1' | 'undici';
  /** Largest upstream response head for the h1 client (502 above it). */
  maxResponseHeadBytes?: number;
}

/** One keep-alive pool per upstream origin. */
export class Upstreams {
  private readonly pools: Pool[];
  private readonly h1: (H1Pool | null)[] | null;
  constructor(
    origins: readonly string[],
    readonly opts: UpstreamOptions,
  ) {
    const h1 = (opts.client ?? 'h1') === 'h1' && opts.pipelining === 1;
    // https: origins stay on undici (the h1 client speaks plain TCP only).
    const budgets = origins.map((o) => (h1 && o.startsWith('http:') ? new ConnectionBudget(opts.connections) : null));
    this.pools = origins.map((o, i) => {
      const budget = budgets[i]!;
      return new Pool(o, {
        connections: opts.connections,
        headersTimeout: opts.headersTimeoutMs,
        bodyTimeout: opts.bodyTimeoutMs,
        keepAliveTimeout: opts.keepAliveTimeoutMs,
        ...(budget === null
          ? { pipelining: opts.pipelining, connectTimeout: opts.connectTimeoutMs }
          : {
              // Beside the h1 pool, undici carries only streamed request bodies: a connection per
              // request, closed after it (pipelining 0), so no idle one of undici's ever holds a
              // slot of the budget the h1 pool waits on; each takes its slot as it connects.
              pipelining: 0,
              connect: budgetedConnector(budget, { timeout: opts.connectTimeoutMs, keepAlive: true, keepAliveInitialDelay: 60_000 }),
            }),
      });
    });
    this.h1 = h1
      ? origins.map((o, i) =>
          budgets[i] === null
            ? null
            : new H1Pool(
                o,
                {
                  connections: opts.connections,
                  headersTimeoutMs: opts.headersTimeoutMs,
                  bodyTimeoutMs: opts.bodyTimeoutMs,
                  connectTimeoutMs: opts.connectTimeoutMs,
                  keepAliveTimeoutMs: opts.keepAliveTimeoutMs,
                  // undici's default limit (maxHeaderSize), so switching clients changes no answer.
                  maxHeadBytes: opts.maxResponseHeadBytes ?? 16 * 1024,
                },
                this.pools[i]!,
                budgets[i],
              ),
        )
      : null;
  }
  /** Upstream `i`'s connection budget, shared by its two clients; null when undici's pool is its only client. */
  connectionBudget(i: number): ConnectionBudget | null {
    return this.h1?.[i]?.budget ?? null;
  }
  /** The client for upstream `i`: the h1 pool (which hands streamed bodies to undici), or undici's pool. */
  pool(i: number): UpstreamDispatcher {
    return this.h1?.[i] ?? this.pools[i]!;
  }
  /** Lets requests in flight finish for up to `graceMs`, then cuts the rest. */
  async close(graceMs = 0): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const h1 = (this.h1 ?? []).filter((p) => p !== null);
    const closed = Promise.all([...this.pools.map((p) => p.close()), ...h1.map((p) => p.close())]).then(() => true);
    const timedOut = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), graceMs)));
    const clean = await Promise.race([closed, timedOut]);
    clearTimeout(timer);
    if (!clean) {
      for (const p of h1) p.destroy();
      await Promise.all(this.pools.map((p) => p.destroy()));
    }
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
  return (
    HOP_BY_HOP.has(lowerName) ||
    // Every X-Subject* name is ours (X-Subject, -Role, -Address, -Secret, and any future one):
    // a client's copy never reaches an upstream, whatever its case or suffix.
    lowerName.startsWith('x-subject') ||
    lowerName === 'x-api-key' ||
    lowerName === 'x-forwarded-for' ||
    lowerName === 'x-forwarded-host' ||
    lowerName === 'x-forwarded-proto' ||
    lowerName === 'x-forwarded-port' ||
    lowerName === 'forwarded' ||
    // `Expect: 100-continue` is between the client and us (uWS answers it); undici refuses to send it.
    lowerName === 'expect'
  );
}

export interface ProxyHooks {
  /** Called once when the exchange ends for any reason (metrics, in-flight accounting). */
  onDone(status: number): void;
  /**
   * Called right before a write that may finish the uWS response, or before the connection is
   * closed: the last moment the response may be touched for the request's sake (a paused request
   * body is resumed here; after the response ends, uWS throws on any access).
   */
  onFinishing(): void;
  /** Called once with the upstream's final (non-1xx) status, as its head arrives. */
  onUpstreamResponse(status: number): void;
  /** Called with the upstream's error before it is answered as 502/504, with the code answered. */
  onUpstreamError(err: Error, code: ErrorCode): void;
}

const EMPTY: readonly string[] = [];

// Problem bodies by code and detail: most refusals (429s above all) repeat the same few texts.
interface ProblemEntry {
  status: string;
  body: string;
  code: number;
  /** The body's length in bytes as text, made the first time a HEAD needs it. */
  length: string | undefined;
}
const problemBodies = new Map<string, ProblemEntry>();
let problemRes: HttpResponse;
let problemEntry: ProblemEntry;
let problemHeaders: readonly string[];
let problemClose = false;
let problemHead = false;
function corkedProblem(): void {
  const res = problemRes;
  const entry = problemEntry;
  res.writeStatus(entry.status);
  res.writeHeader('content-type', PROBLEM_CONTENT_TYPE);
  const h = problemHeaders;
  for (let i = 0; i < h.length; i += 2) res.writeHeader(h[i]!, h[i + 1]!);
  if (!problemHead) {
    // uWS writes `Connection: close` and closes after the body when asked to.
    res.end(entry.body, problemClose);
    return;
  }
  // A HEAD gets the GET's status and headers, its Content-Length included, and no body (RFC 9110
  // §9.3.2, as nginx answers). This uWS build writes the body of end(body) even for HEAD;
  // endWithoutBody(n) leaves the response unfinished and endWithoutBody(undefined, true) announces
  // a Content-Length of 2^63 (README, "Which uWS build"). So: our own Content-Length and the bare
  // endWithoutBody(); when closing, tryEnd('', n) writes the head with uWS's Content-Length and the
  // caller closes the socket (writeProblem).
  const length = (entry.length ??= String(Buffer.byteLength(entry.body)));
  if (problemClose) {
    res.writeHeader('connection', 'close');
    res.tryEnd('', Number(length));
  } else {
    res.writeHeader('content-length', length);
    res.endWithoutBody();
  }
}

/**
 * Writes a problem+json error with the rate-limit headers already computed for this request;
 * `close` ends the connection after it; `head`: the request is a HEAD, answered without the body.
 * A HEAD answered with `close` must be written outside uWS's request callback (refuseAndClose's
 * deferred turn): the socket is closed right after the head, and inside the callback uWS still
 * holds the head corked, so it would be lost.
 */
export function writeProblem(
  res: HttpResponse,
  code: ErrorCode,
  detail: string,
  extraHeaders: readonly string[],
  close = false,
  head = false,
): number {
  const key = code + '\u0000' + detail;
  let entry = problemBodies.get(key);
  if (!entry) {
    const p = problemFor(code, { detail });
    entry = { status: statusLine(p.status), body: JSON.stringify(p), code: p.status, length: undefined };
    // Details that embed a path would grow the map without bound: cache only the fixed ones.
    if (problemBodies.size < 256) problemBodies.set(key, entry);
  }
  problemRes = res;
  problemEntry = entry;
  problemHeaders = extraHeaders;
  problemClose = close;
  problemHead = head;
  res.cork(corkedProblem);
  // The head is on the wire (uncorked): the response is still open in uWS, so close it here.
  if (head && close) res.close();
  return entry.code;
}

/**
 * Refuses a request whose framing or form could not be trusted, and ends its connection, so that
 * no byte after it is read as another request. `head`: the request is a HEAD (no body in the answer).
 *
 * Why the answer waits a turn of the event loop: uWS parses every request already in its read
 * buffer before it sends anything, and `end(body, true)` does not stop that, so bytes pipelined
 * behind a malformed request would be parsed and forwarded (test/limiter/edge.test.ts). A pending
 * (asynchronous) response makes uWS close the connection instead when another request arrives
 * behind it: then the client gets no answer and nothing is forwarded. A malformed request alone
 * gets its problem+json with `Connection: close` on the next turn.
 */
export function refuseAndClose(
  res: HttpResponse,
  code: ErrorCode,
  detail: string,
  head: boolean,
  extraHeaders: readonly string[] = EMPTY,
): void {
  let gone = false;
  res.onAborted(() => {
    gone = true;
  });
  setImmediate(() => {
    if (!gone) writeProblem(res, code, detail, extraHeaders, true, head);
  });
}

function upstreamErrorCode(err: unknown): ErrorCode {
  if (err instanceof UpstreamError) return err.code;
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return 'upstream_timeout';
  }
  if (
    err instanceof undiciErrors.HTTPParserError ||
    err instanceof undiciErrors.ResponseContentLengthMismatchError ||
    // A response head over the limit is the upstream's fault, as the h1 client answers it too.
    err instanceof undiciErrors.HeadersOverflowError
  ) {
    return 'upstream_bad_response';
  }
  return 'upstream_unreachable';
}

const STATUS_200 = '200 OK';

/**
 * The codings of a response's Transfer-Encoding (all its lines joined) to relay to the client ahead
 * of the chunked uWS applies: those before a final `chunked` (`gzip, chunked` → `gzip`; `chunked` →
 * null, nothing to add), never decoded. undefined when chunked is not last (`chunked, gzip`,
 * `gzip`): the body runs to the upstream's close (RFC 9112 §6.3), and the client could only be given
 * it chunked twice (refused by RFC 9112 §6.1) or delimited by a close uWS cannot send.
 */
export function relayedCodings(value: string): string | null | undefined {
  const codings: string[] = [];
  for (const part of value.split(',')) {
    const c = part.trim();
    if (c !== '') codings.push(c);
  }
  const last = codings.pop();
  if (last === undefined || last.toLowerCase() !== 'chunked') return undefined;
  return codings.length === 0 ? null : codings.join(', ');
}

/** The header names a Connection header lists (lower-case), other than keep-alive/close. */
export function connectionTokens(value: string): Set<string> | null {
  // Nearly every client sends exactly one of these two: no split, no set.
  if (value.length === 10 || value.length === 5) {
    const v = value.toLowerCase();
    if (v === 'keep-alive' || v === 'close') return null;
  }
  let out: Set<string> | null = null;
  for (const part of value.split(',')) {
    const t = part.trim().toLowerCase();
    if (t === '' || t === 'close' || t === 'keep-alive') continue;
    (out ??= new Set()).add(t);
  }
  return out;
}

// Header names that may need dropping, by byte length (connection 10, keep-alive 10, proxy-connection
// 16, proxy-authenticate 18, proxy-authorization 19, te 2, trailer 7, transfer-encoding 17,
// upgrade 7, content-length 14, host 4, date 4): other lengths are copied without decoding.
const DROP_BY_LENGTH: string[][] = Array.from({ length: 32 }, () => []);
for (const n of RESPONSE_DROP) DROP_BY_LENGTH[n.length]!.push(n);

/** True when the header name `b` is `lower` (lower-case ASCII) in any case, compared byte by byte: no string per header. */
export function headerNameIs(b: Buffer, lower: string): boolean {
  if (b.length !== lower.length) return false;
  for (let i = 0; i < b.length; i++) {
    let c = b[i]!;
    if (c >= 65 && c <= 90) c |= 32;
    if (c !== lower.charCodeAt(i)) return false;
  }
  return true;
}

/** True when a response header must not be copied to the client (hop-by-hop, framing, date). */
function droppedResponseHeader(name: Buffer): boolean {
  if (name.length >= 32) return false;
  const candidates = DROP_BY_LENGTH[name.length]!;
  for (let i = 0; i < candidates.length; i++) if (headerNameIs(name, candidates[i]!)) return true;
  return false;
}

// uWS cork callbacks read their arguments from here (cork runs its callback synchronously):
// one function per kind of write instead of a closure per response.
let target: Exchange;
let chunkArg: Buffer;
let writeOk = false;
let writeDone = false;
function corkedHeadAndChunk(): void {
  target.writeHead(true);
  target.writeChunk(chunkArg);
}
function corkedChunk(): void {
  target.writeChunk(chunkArg);
}
function corkedFinish(): void {
  target.writeHead(false);
  target.writeEnd();
}

/**
 * One proxied request. Create it after admission, call `start()`; the uWS response must already
 * have an onAborted handler that calls `abort()`.
 *
 * The upstream's status and headers are held until the first body chunk (or the end) arrives, then
 * written together with it in one corked write: one send per small response instead of two, and a
 * failure before any byte has gone out can still be answered with a clean 502/504.
 */
export class Exchange implements Dispatcher.DispatchHandler {
  aborted = false;
  private headWritten = false;
  private finished = false;
  private abortUpstream: ((err?: Error) => void) | null = null;
  private resumeUpstream: (() => void) | null = null;
  /** -1 when the upstream did not send a Content-Length (chunked to the client); -2: no body. */
  private total = -1;
  private declaredLength = -1;
  private isHead = false;
  private status = 0;
  private statusText = '';
  private rawHeaders: Buffer[] | null = null;
  private connectionListed: Set<string> | null = null;
  /** The upstream's transfer codings other than its final chunked (`gzip`), relayed; null: none. */
  private codings: string | null = null;
  private pending: Buffer | null = null;
  private pendingOffset = 0;
  /** Body bytes received from the upstream so far (a response of known length ends with the one that reaches `total`). */
  private received = 0;

  constructor(
    private readonly res: HttpResponse,
    private readonly hooks: ProxyHooks,
    /** Headers to add to the response (rate-limit headers), flat [name, value, ...]. */
    private readonly extraHeaders: readonly string[] = EMPTY,
  ) {}

  start(pool: UpstreamDispatcher, opts: Dispatcher.DispatchOptions): void {
    this.isHead = opts.method === 'HEAD';
    try {
      pool.dispatch(opts, this);
    } catch (err) {
      this.onError(err as Error);
    }
  }

  /**
   * Stops the exchange because of the client's request (e.g. its body grew too large): the client
   * gets the problem when nothing of the upstream's response has gone out yet, else the connection
   * is closed.
   */
  failRequest(code: ErrorCode, detail: string): void {
    if (this.aborted || this.finished) return;
    this.hooks.onFinishing();
    if (this.headWritten) {
      this.res.close();
      this.done(this.status || 400);
    } else {
      this.done(writeProblem(this.res, code, detail, EMPTY, false, this.isHead));
    }
    // After answering: undici calls onError synchronously from abort, which must find us finished.
    this.abortUpstream?.(new Error(detail));
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
    this.hooks.onUpstreamResponse(statusCode);
    this.statusText = statusText;
    this.rawHeaders = rawHeaders;
    this.resumeUpstream = resume;
    let transferEncoding: string | null = null;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!;
      if (headerNameIs(name, 'content-length')) {
        this.declaredLength = Number(rawHeaders[i + 1]!.toString('latin1'));
        this.total = this.declaredLength;
      } else if (headerNameIs(name, 'connection')) {
        // Headers named in Connection are hop-by-hop too (RFC 9110 §7.6.1).
        this.connectionListed = connectionTokens(rawHeaders[i + 1]!.toString('latin1'));
      } else if (headerNameIs(name, 'transfer-encoding')) {
        const v = rawHeaders[i + 1]!.toString('latin1');
        transferEncoding = transferEncoding === null ? v : `${transferEncoding}, ${v}`;
      }
    }
    if (this.isHead || statusCode === 204 || statusCode === 304) this.total = -2;
    else if (transferEncoding !== null) {
      // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3; both clients refuse the pair).
      this.total = -1;
      const codings = relayedCodings(transferEncoding);
      if (codings === undefined) {
        // Close-delimited under a coding: uWS frames every body of unknown length as chunked, and
        // chunked applied over a coding that already follows chunked is refused by RFC 9112 §6.1.
        this.refuseResponse('the upstream sent a body framed by its close under a transfer coding, which cannot be relayed');
        return false;
      }
      this.codings = codings;
    }
    return true;
  }

  /** Answers 502 for an upstream response that cannot be relayed as it came, before any byte of it has gone out. */
  private refuseResponse(why: string): void {
    this.hooks.onFinishing();
    const err = new UpstreamError('upstream_bad_response', why);
    this.hooks.onUpstreamError(err, err.code);
    this.done(
      writeProblem(this.res, err.code, 'the upstream sent a response that is not valid HTTP', this.extraHeaders, false, this.isHead),
    );
    // After answering: the client's onError finds the exchange finished.
    this.abortUpstream?.(err);
  }

  /** Status line and headers, once; called inside a cork. `withBody`: a body chunk follows. */
  writeHead(withBody: boolean): void {
    if (this.headWritten) return;
    this.headWritten = true;
    const res = this.res;
    const status = this.status;
    const text = this.statusText;
    res.writeStatus(status === 200 && text === 'OK' ? STATUS_200 : text ? `${status} ${text}` : statusLine(status));
    const raw = this.rawHeaders!;
    const listed = this.connectionListed;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (droppedResponseHeader(name)) continue;
      if (listed !== null && listed.has(name.toString('latin1').toLowerCase())) continue;
      res.writeHeader(name, raw[i + 1]!);
    }
    // The upstream's codings but its final chunked, ahead of the `Transfer-Encoding: chunked` uWS
    // writes with the first body chunk: the field reads `gzip, chunked` as it came. Not with no
    // body at all: uWS then writes Content-Length: 0, which no Transfer-Encoding may go with.
    if (this.codings !== null && withBody) res.writeHeader('transfer-encoding', this.codings);
    const extra = this.extraHeaders;
    for (let i = 0; i < extra.length; i += 2) res.writeHeader(extra[i]!, extra[i + 1]!);
    this.rawHeaders = null;
  }

  /** One body chunk; called inside a cork. Sets writeOk / writeDone. */
  writeChunk(chunk: Buffer): void {
    if (this.total >= 0) {
      const r = this.res.tryEnd(chunk, this.total);
      writeOk = r[0];
      writeDone = r[1];
    } else {
      writeOk = this.res.write(chunk);
      writeDone = false;
    }
  }

  /** The end of a response whose body is complete; called inside a cork. */
  writeEnd(): void {
    // This uWS build: endWithoutBody(undefined) announces a huge Content-Length and endWithoutBody(n)
    // leaves the response unfinished; so the bare call, with a HEAD's length as a plain header.
    if (this.total === -2) {
      if (this.isHead && this.declaredLength >= 0) this.res.writeHeader('content-length', String(this.declaredLength));
      this.res.endWithoutBody();
    } else if (this.total === -1) this.res.end();
    else if (this.total === 0) this.res.end();
    // total > 0 and not yet done: the upstream sent less than it promised (handled by the caller).
  }

  onData(chunk: Buffer): boolean {
    if (this.aborted) return false;
    if (this.total === -2) return true;
    this.received += chunk.length;
    if (this.total >= 0 && this.received >= this.total) this.hooks.onFinishing();
    const res = this.res;
    const offset = res.getWriteOffset();
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the cork callback's argument
    target = this;
    chunkArg = chunk;
    res.cork(this.headWritten ? corkedChunk : corkedHeadAndChunk);
    if (writeDone) {
      this.done(this.status);
      return true;
    }
    if (writeOk) return true;
    if (this.total >= 0) {
      // uWS took part of it: keep the rest and resume undici when the socket drains.
      this.pending = chunk;
      this.pendingOffset = offset;
      res.onWritable((off) => this.drainPending(off));
    } else {
      res.onWritable(() => {
        this.resumeUpstream?.();
        return true;
      });
    }
    return false;
  }

  private drainPending(offset: number): boolean {
    const chunk = this.pending;
    if (!chunk || this.aborted) return true;
    const [ok, done] = this.res.tryEnd(chunk.subarray(offset - this.pendingOffset), this.total);
    if (done) {
      this.pending = null;
      this.done(this.status);
      // The client has the whole body: let the upstream client finish its response (and reuse
      // its connection), which waits paused since onData returned false.
      this.resumeUpstream?.();
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
    this.hooks.onFinishing();
    if (this.total > 0) {
      // Content-Length promised more than the upstream sent: the response cannot be completed.
      if (this.headWritten) this.res.close();
      else
        this.done(
          writeProblem(this.res, 'upstream_bad_response', 'the upstream sent a truncated response', this.extraHeaders, false, this.isHead),
        );
      this.done(this.status);
      return;
    }
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the cork callback's argument
    target = this;
    this.res.cork(corkedFinish);
    this.done(this.status);
  }

  onError(err: Error): void {
    if (this.aborted || this.finished) return;
    this.hooks.onFinishing();
    if (this.headWritten) {
      this.res.close();
      this.done(this.status || 502);
      return;
    }
    const code = upstreamErrorCode(err);
    this.hooks.onUpstreamError(err, code);
    const detail =
      code === 'upstream_timeout'
        ? 'the upstream did not answer in time'
        : code === 'upstream_bad_response'
          ? 'the upstream sent a response that is not valid HTTP'
          : 'the upstream could not be reached';
    this.done(writeProblem(this.res, code, detail, this.extraHeaders, false, this.isHead));
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
  /** Set when the uWS response is finished: from then on `res` must not be touched. */
  resClosed = false;
  /** Whether we paused the client socket. Resuming one that was never paused stalls this uWS build. */
  private paused = false;
  override _read(): void {
    if (this.paused && !this.resClosed) {
      this.paused = false;
      this.res.resume();
    }
  }
  /**
   * Before the response ends (ProxyHooks.onFinishing): a keep-alive connection must not stay
   * paused for the next request. From then on the uWS response is not touched.
   */
  release(): void {
    if (this.paused && !this.resClosed) {
      this.paused = false;
      this.res.resume();
    }
    this.resClosed = true;
  }

  /** The uWS response is gone (finished or aborted): never touch it again, not even to resume. */
  detach(): void {
    this.resClosed = true;
  }
  /** Pushes a copy of a uWS chunk (uWS reuses its buffer after the callback returns). */
  feed(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.destroyed) return;
    const copy = Buffer.from(new Uint8Array(chunk).slice());
    if (!this.push(copy) && !isLast && !this.resClosed && !this.paused) {
      this.paused = true;
      this.res.pause();
    }
    if (isLast) this.push(null);
  }
}
