/**
 * The HTTP edge for the services other than the sidecar's hot path: a small layer over uWS that
 * reads the request up front (uWS's `req` is only valid until the first await), guards against
 * aborts, enforces a body limit, maps thrown errors to problem+json once, and corks every write.
 */
import { Buffer } from 'node:buffer';
import type { Logger } from './log.js';
import { isPlatformError, PlatformError, toProblem, PROBLEM_CONTENT_TYPE } from './errors.js';
import { databaseUnavailable, isDatabaseUnavailable } from './db-errors.js';
import { forEachHeader, type HttpRequest, type HttpResponse, type TemplatedApp } from './uws.js';
import type { Registry } from 'prom-client';
import { BodyStream } from './body-stream.js';

export interface RequestContext {
  /** Lower-case, as uWS reports it. */
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  /** Lower-cased header names. Repeated headers are joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  /** Route parameters in pattern order (uWS `:name` segments), URL-decoded. */
  readonly params: readonly string[];
  readonly remoteAddress: string;
  readonly body: Buffer;
  /** True once the client has gone away. */
  readonly aborted: () => boolean;
}

export interface Reply {
  status?: number;
  /** Objects are sent as JSON; strings and Buffers as they are. */
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

export type Handler = (ctx: RequestContext) => Promise<Reply> | Reply;

/** A request whose body is read as it arrives ({@link streamRoute}). */
export interface StreamContext extends Omit<RequestContext, 'body'> {
  readonly body: BodyStream;
}

export type StreamHandler = (ctx: StreamContext) => Promise<Reply> | Reply;

export interface EdgeOptions {
  log: Logger;
  maxBodyBytes: number;
  /** Counts requests in flight, so shutdown can wait for them. */
  inFlight?: InFlight;
}

/** Requests in flight, and a promise for the moment there are none. */
export class InFlight {
  private n = 0;
  private waiters: (() => void)[] = [];
  get count(): number {
    return this.n;
  }
  inc(): void {
    this.n++;
  }
  dec(): void {
    if (--this.n === 0 && this.waiters.length > 0) {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    }
  }
  /** Resolves when nothing is in flight. */
  idle(): Promise<void> {
    return this.n === 0 ? Promise.resolve() : new Promise((r) => this.waiters.push(r));
  }
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  202: '202 Accepted',
  204: '204 No Content',
  301: '301 Moved Permanently',
  302: '302 Found',
  303: '303 See Other',
  304: '304 Not Modified',
  307: '307 Temporary Redirect',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  408: '408 Request Timeout',
  409: '409 Conflict',
  410: '410 Gone',
  413: '413 Payload Too Large',
  414: '414 URI Too Long',
  415: '415 Unsupported Media Type',
  422: '422 Unprocessable Entity',
  428: '428 Precondition Required',
  429: '429 Too Many Requests',
  431: '431 Request Header Fields Too Large',
  500: '500 Internal Server Error',
  501: '501 Not Implemented',
  502: '502 Bad Gateway',
  503: '503 Service Unavailable',
  504: '504 Gateway Timeout',
};

/** "404 Not Found" for 404; a bare number for statuses without a reason phrase here. */
export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? String(status);
}

const BODYLESS = new Set(['get', 'head', 'delete', 'options']);

/** Reads the whole body, up to `max` bytes; rejects with `body_too_large` past it. */
export function readBody(res: HttpResponse, max: number, declaredLength: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (declaredLength > max) {
      reject(new PlatformError('body_too_large', { detail: `body is larger than ${max} bytes` }));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    res.onData((chunk, isLast) => {
      if (failed) return;
      size += chunk.byteLength;
      if (size > max) {
        failed = true;
        reject(new PlatformError('body_too_large', { detail: `body is larger than ${max} bytes` }));
        return;
      }
      // uWS neuters the ArrayBuffer after this callback: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
      if (isLast) resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
  });
}

/**
 * Writes a complete response (status, headers, body) in one corked write. `head`: the request is a
 * HEAD, answered with the GET's status and headers, its Content-Length included, and no body
 * (RFC 9110 §9.3.2): uWS writes the body of end(body) even to a HEAD, and endWithoutBody(n) leaves
 * the response unfinished in the build we run, so the length is written as a plain header.
 */
export function writeReply(res: HttpResponse, reply: Reply, head = false): void {
  const status = reply.status ?? 200;
  let body: string | Buffer = '';
  let contentType = reply.contentType;
  if (reply.body !== undefined && reply.body !== null && status !== 204) {
    if (typeof reply.body === 'string' || Buffer.isBuffer(reply.body)) body = reply.body;
    else {
      body = JSON.stringify(reply.body);
      contentType ??= 'application/json';
    }
  }
  res.cork(() => {
    res.writeStatus(statusLine(status));
    if (contentType) res.writeHeader('content-type', contentType);
    if (reply.headers) for (const k in reply.headers) res.writeHeader(k, reply.headers[k]!);
    if (status === 204) res.endWithoutBody(0);
    else if (head) {
      res.writeHeader('content-length', String(Buffer.byteLength(body)));
      res.endWithoutBody();
    } else res.end(body);
  });
}

/** The reply for any thrown value: problem+json, the cause logged, never on the wire. */
export function errorReply(err: unknown, log: Logger, ctx?: { method: string; path: string }): Reply {
  // An unreachable database is a 503 with Retry-After on every endpoint, whoever forgot to map it.
  const { problem, headers } = toProblem(!isPlatformError(err) && isDatabaseUnavailable(err) ? databaseUnavailable(err) : err);
  if (problem.status >= 500) log.error({ err, method: ctx?.method, path: ctx?.path }, 'request failed');
  if (ctx) problem.instance = ctx.path;
  return { status: problem.status, body: problem, contentType: PROBLEM_CONTENT_TYPE, headers };
}

function collect(req: HttpRequest, res: HttpResponse, rawParams: readonly string[]): Omit<RequestContext, 'body' | 'aborted'> {
  const headers: Record<string, string> = {};
  forEachHeader(req, (k, v) => {
    headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
  });
  const params: string[] = [];
  for (const raw of rawParams) {
    try {
      params.push(decodeURIComponent(raw));
    } catch {
      params.push(raw);
    }
  }
  return {
    method: req.getMethod(),
    path: req.getUrl(),
    query: new URLSearchParams(req.getQuery() ?? ''),
    headers,
    params,
    remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
  };
}

type Method = 'get' | 'post' | 'put' | 'patch' | 'del' | 'any' | 'head' | 'options';

interface RouteEntry {
  method: string; // lower-case HTTP method, or 'any'
  /** As registered (`/internal/quotas/:api_key`), for {@link registeredRoutes}. */
  pattern?: string;
  segments: readonly string[]; // ':name' for a parameter, '*' for a trailing wildcard
  serve: (res: HttpResponse, req: HttpRequest, rawParams: string[]) => void;
  opts: EdgeOptions;
}

/**
 * Our own router. The uWS build we used until issue 23 (@rjweb/uws 1.5.0) never matched `:param`
 * patterns (the connection was closed), and routing here keeps behaviour the same whatever build
 * is installed (limiter/README.md "Which uWS build"). So each app gets one `any('/*')` handler and
 * routes are matched here: static segments, `:name` parameters and a trailing `*`; first
 * registered wins. An unmatched path gets 404 `not_found`, a known path with another method 405
 * `method_not_allowed`.
 */
const routers = new WeakMap<TemplatedApp, RouteEntry[]>();

function splitPath(path: string): string[] {
  return path.split('/').filter((s) => s !== '');
}

function matchRoute<E extends Pick<RouteEntry, 'method' | 'segments'>>(
  entries: readonly E[],
  method: string,
  path: string,
): { entry?: E; params: string[]; pathKnown: boolean } {
  const parts = splitPath(path);
  let pathKnown = false;
  for (const e of entries) {
    const params: string[] = [];
    let ok = true;
    const segs = e.segments;
    for (let i = 0; i < segs.length; i++) {
      const seg = segs[i]!;
      if (seg === '*') {
        if (parts.length < i) ok = false;
        break;
      }
      const part = parts[i];
      if (part === undefined) {
        ok = false;
        break;
      }
      if (seg.startsWith(':')) params.push(part);
      else if (seg !== part) {
        ok = false;
        break;
      }
    }
    if (ok && segs[segs.length - 1] !== '*' && parts.length !== segs.length) ok = false;
    if (!ok) continue;
    pathKnown = true;
    if (e.method === 'any' || e.method === method) return { entry: e, params, pathKnown };
  }
  return { params: [], pathKnown };
}

/**
 * How the services' router reads one path against one pattern: the raw path parameters
 * (percent-decoded as handlers receive them), or undefined when it does not match. The sidecar's
 * property test (test/limiter/request-target.test.ts) checks that an upstream resolves the
 * forwarded path to the same user id the edge checked.
 */
export function matchPattern(pattern: string, path: string): string[] | undefined {
  const m = matchRoute([{ method: 'any', segments: splitPath(pattern) }], 'get', path);
  if (!m.entry) return undefined;
  return m.params.map((raw) => {
    try {
      return decodeURIComponent(raw);
    } catch {
      return raw;
    }
  });
}

/** A route as registered with {@link route} or {@link streamRoute}. */
export interface RegisteredRoute {
  /** Upper-case (`GET`, `DELETE`), or `ANY`. */
  readonly method: string;
  /** As registered: static segments, `:name` parameters, a trailing `*`. */
  readonly pattern: string;
}

/**
 * Every route registered on `app`, in registration order (the OpenAPI tests compare a service's
 * document with what it really serves: test/openapi/).
 */
export function registeredRoutes(app: TemplatedApp): RegisteredRoute[] {
  return (routers.get(app) ?? []).map((e) => ({ method: e.method.toUpperCase(), pattern: e.pattern ?? `/${e.segments.join('/')}` }));
}

function dispatcher(app: TemplatedApp): RouteEntry[] {
  let entries = routers.get(app);
  if (entries) return entries;
  const list: RouteEntry[] = [];
  entries = list;
  routers.set(app, list);
  app.any('/*', (res, req) => {
    const method = req.getMethod();
    const lookup = method === 'head' ? 'get' : method;
    const m = matchRoute(list, lookup, req.getUrl());
    const entry = m.entry;
    if (!entry) {
      const opts = list[0]!.opts;
      const err = m.pathKnown
        ? new PlatformError('method_not_allowed', { detail: `${method.toUpperCase()} is not allowed here` })
        : new PlatformError('not_found', { detail: `no resource at ${req.getUrl()}` });
      writeReply(res, errorReply(err, opts.log), method === 'head');
      return;
    }
    entry.serve(res, req, m.params);
  });
  return list;
}

function serve(res: HttpResponse, req: HttpRequest, rawParams: string[], handler: Handler, opts: EdgeOptions): void {
  let aborted = false;
  opts.inFlight?.inc();
  res.onAborted(() => {
    aborted = true;
  });
  const base = collect(req, res, rawParams);
  const declared = Number(base.headers['content-length'] ?? 0) || 0;
  const needsBody = !BODYLESS.has(base.method);
  const bodyP = needsBody ? readBody(res, opts.maxBodyBytes, declared) : Promise.resolve(Buffer.alloc(0));
  bodyP
    .then((body) => handler({ ...base, body, aborted: () => aborted }))
    .catch((err: unknown) => errorReply(err, opts.log, base))
    .then((reply) => {
      if (!aborted) writeReply(res, reply, base.method === 'head');
    })
    .catch((err: unknown) => opts.log.error({ err }, 'failed to write response'))
    .finally(() => opts.inFlight?.dec());
}

/**
 * Registers `handler` for `method pattern` (static segments, `:name` parameters, a trailing `*`).
 * The handler receives a fully read request and returns a reply; anything it throws becomes
 * problem+json.
 */
export function route(app: TemplatedApp, method: Method, pattern: string, handler: Handler, opts: EdgeOptions): void {
  dispatcher(app).push({
    method: method === 'del' ? 'delete' : method,
    pattern,
    segments: splitPath(pattern),
    serve: (res, req, params) => serve(res, req, params, handler, opts),
    opts,
  });
}

function serveStream(res: HttpResponse, req: HttpRequest, rawParams: string[], handler: StreamHandler, opts: StreamRouteOptions): void {
  let aborted = false;
  opts.inFlight?.inc();
  const base = collect(req, res, rawParams);
  const declared = Number(base.headers['content-length'] ?? 0) || 0;
  // uWS delivers the body only to a handler registered in this callback.
  const body = new BodyStream(res, { maxBytes: opts.maxBodyBytes, highWaterMark: opts.highWaterMark });
  res.onAborted(() => {
    aborted = true;
    body.detach();
  });
  opts.onBody?.(body);
  const run = async (): Promise<Reply> => {
    // A declared length over the cap is refused before a byte is stored.
    if (declared > opts.maxBodyBytes)
      throw new PlatformError('body_too_large', { detail: `the body is larger than ${opts.maxBodyBytes} bytes` });
    return handler({ ...base, body, aborted: () => aborted });
  };
  run()
    .catch((err: unknown) => errorReply(err, opts.log, base))
    .then((reply) => {
      if (aborted) return;
      // An answer before the body ended (a malformed line, 413) leaves the rest to uWS, which reads
      // and drops it; a paused socket must be resumed first, while the response still exists.
      body.release();
      writeReply(res, reply, base.method === 'head');
    })
    .catch((err: unknown) => opts.log.error({ err }, 'failed to write response'))
    .finally(() => opts.inFlight?.dec());
}

export interface StreamRouteOptions extends EdgeOptions {
  /** This route's body cap (instead of the service's `MAX_BODY_BYTES`); past it, 413 `body_too_large`. */
  maxBodyBytes: number;
  /** Bytes the reader queues before it pauses the client (shared/body-stream.ts). */
  highWaterMark?: number;
  /** Sees each request's reader as it is made (tests read its high-water mark). */
  onBody?: (body: BodyStream) => void;
}

/**
 * Like {@link route}, but the handler receives the body as a {@link BodyStream} it iterates while
 * the client is still sending: chunks arrive with backpressure (the client's socket is paused while
 * the handler is behind), under the route's own cap. The reply is written when the handler
 * returns, whether or not it read the whole body.
 */
export function streamRoute(app: TemplatedApp, method: Method, pattern: string, handler: StreamHandler, opts: StreamRouteOptions): void {
  dispatcher(app).push({
    method: method === 'del' ? 'delete' : method,
    pattern,
    segments: splitPath(pattern),
    serve: (res, req, params) => serveStream(res, req, params, handler, opts),
    opts,
  });
}

/** Parses a JSON body; `invalid_json` if it is not JSON, `invalid_field` if it is not an object. */
export function jsonBody(ctx: RequestContext): Record<string, unknown> {
  const ct = ctx.headers['content-type'] ?? '';
  if (ctx.body.length > 0 && ct !== '' && !/^application\/([a-z.+-]*\+)?json\b/i.test(ct)) {
    throw new PlatformError('unsupported_media_type', { detail: 'expected application/json' });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(ctx.body.toString('utf8') || 'null');
  } catch {
    throw new PlatformError('invalid_json', { detail: 'the body is not valid JSON' });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new PlatformError('invalid_field', { field: 'body', detail: 'body: must be a JSON object' });
  }
  return parsed as Record<string, unknown>;
}

/** A readiness check that takes longer than this counts as failed. */
const READY_CHECK_TIMEOUT_MS = 2_000;

export interface HealthCheck {
  name: string;
  check: () => Promise<void>;
}

/**
 * /healthz (the process is alive), /readyz (every dependency check passes, else 503 naming the
 * failing ones; `detail`, when given and not empty, names what configuration turned off without
 * failing readiness) and /metrics (Prometheus text) on `app`.
 */
export function operationalRoutes(
  app: TemplatedApp,
  opts: EdgeOptions & { registry: Registry; checks: HealthCheck[]; detail?: Record<string, string>; draining?: () => boolean },
): void {
  const detail = opts.detail !== undefined && Object.keys(opts.detail).length > 0 ? { detail: opts.detail } : {};
  route(app, 'get', '/healthz', () => ({ body: { status: 'ok' } }), opts);
  route(
    app,
    'get',
    '/readyz',
    async () => {
      if (opts.draining?.()) return { status: 503, body: { status: 'draining', checks: {} } };
      const results: Record<string, string> = {};
      let ok = true;
      await Promise.all(
        opts.checks.map(async (c) => {
          let timer: NodeJS.Timeout | undefined;
          try {
            await Promise.race([
              c.check(),
              new Promise<never>((_, reject) => {
                timer = setTimeout(
                  () => reject(new Error(`${c.name} did not answer within ${READY_CHECK_TIMEOUT_MS} ms`)),
                  READY_CHECK_TIMEOUT_MS,
                );
              }),
            ]);
            results[c.name] = 'ok';
          } catch (err) {
            ok = false;
            results[c.name] = err instanceof Error ? err.message : String(err);
          } finally {
            clearTimeout(timer);
          }
        }),
      );
      return { status: ok ? 200 : 503, body: { status: ok ? 'ready' : 'not_ready', checks: results, ...detail } };
    },
    opts,
  );
  route(app, 'get', '/metrics', async () => ({ body: await opts.registry.metrics(), contentType: opts.registry.contentType }), opts);
}
