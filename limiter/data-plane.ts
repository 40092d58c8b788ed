/**
 * The sidecar's data plane: every request on :8080, all methods and paths.
 *
 * route → subject → ownership → admission → 429/503, or proxy upstream. Everything needed from
 * uWS's `req` is read before the first await (it is stack-allocated and dies with the callback);
 * `onAborted` is registered before any async work; writes are corked. With the in-memory counter
 * store and an API key, the whole decision is synchronous.
 *
 * Responses made before a subject's quota is consulted (no route 404, 401, 403, 413) carry no
 * rate-limit headers: there are no numbers of the caller's to report. Every response after
 * admission, admitted or denied, carries them.
 */
import { Buffer } from 'node:buffer';
import type { Dispatcher } from 'undici';
import type { HttpRequest, HttpResponse, TemplatedApp } from '../shared/uws.js';
import { isPlatformError, PlatformError, type ErrorCode } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';
import type { Clock } from '../shared/clock.js';
import type { Verifier } from '../shared/jwt/index.js';
import type { InFlight } from '../shared/http.js';
import type { LimitParams } from './admission/limit.js';
import { connectionTokens, dropRequestHeader, Exchange, RequestBodyStream, writeProblem, type Upstreams } from './proxy.js';
import { rateLimitHeaders } from './headers.js';
import { bearerToken, ipCaller, keyCaller, ownerRefusal, tokenCaller, type Caller } from './subject.js';
import type { Gate, Outcome } from './gate.js';
import type { CompiledQuota, QuotaCache } from './quota-cache.js';
import type { Route, RouteTable } from './routes.js';
import type { LimiterMetrics } from './metrics.js';
import type { HotKeys } from './hot-keys.js';
import type { QuotaSync } from './quota-sync.js';
import { capToFloor } from './quota-sync-max-age.js';

export interface DataPlaneOptions {
  routes: RouteTable;
  upstreams: Upstreams;
  quotas: QuotaCache;
  gate: Gate;
  verifier: Verifier | undefined;
  clock: Clock;
  log: Logger;
  metrics: LimiterMetrics;
  hotKeys: HotKeys;
  inFlight: InFlight;
  defaultPlan: string;
  /** Used when the snapshot has no `plan:<defaultPlan>`. */
  builtinPlan: CompiledQuota;
  /** The per-IP cap on routes that take no credentials. */
  ipQuota: CompiledQuota;
  /** The control-plane sync, when configured: past its max age, quotas are capped (see quota-sync-max-age.ts). */
  sync?: QuotaSync | undefined;
  serviceRoles: readonly string[];
  serviceSecret: string | undefined;
  trustProxy: boolean;
  maxBodyBytes: number;
  bufferBodyBytes: number;
  /** Largest request header block (names + values), 431 above it. */
  maxHeaderBytes: number;
}

// forEachHeader target, set just before each call: avoids a closure per request.
let collecting: string[] = [];
let collectedBytes = 0;
function collectHeader(name: string, value: string): void {
  collectedBytes += name.length + value.length + 4;
  if (!dropRequestHeader(name)) collecting.push(name, value);
}

const RATE_LIMITED = { code: 'rate_limited', detail: 'quota exceeded; retry after the time in Retry-After' } as const;
const FAIL_CLOSED = { code: 'limiter_unavailable', detail: 'admission is unavailable and this route fails closed; retry later' } as const;

const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);

/** Per-request state: created after routing, lives until the response ends. */
class Pending {
  aborted = false;
  responded = false;
  /** The uWS response is finished (or gone): it must not be touched again, not even to pause. */
  completed = false;
  exchange: Exchange | null = null;
  rateLimitHeaders: readonly string[] = [];
  body: Buffer | RequestBodyStream | null = null;
  bodyReady = true;
  private bodyChunks: Buffer[] | null = null;
  private bodySize = 0;
  private onBodyReady: (() => void) | null = null;
  bodyError: ErrorCode | null = null;

  constructor(
    readonly plane: DataPlane,
    readonly res: HttpResponse,
    readonly method: string,
    readonly path: string,
    readonly query: string,
    readonly route: Route,
    readonly headers: string[],
    readonly clientIp: string,
  ) {}

  abort(): void {
    this.aborted = true;
    this.exchange?.abort();
    if (this.body instanceof RequestBodyStream) this.body.destroy();
    this.onDone();
  }

  /** The request is over (answered, relayed or abandoned): counted once. */
  onDone(): void {
    if (this.completed) return;
    this.completed = true;
    if (this.body instanceof RequestBodyStream) {
      this.body.release();
      if (!this.body.readableEnded) this.body.destroy();
    }
    this.plane.finish();
  }

  /** Starts reading the body now (uWS delivers it only to a handler registered in the callback). */
  readBody(declared: number, chunked: boolean, buffer: number, max: number): void {
    if (!chunked && declared <= buffer) {
      this.bodyReady = false;
      this.bodyChunks = [];
      this.res.onData((chunk, isLast) => {
        if (this.completed) return;
        this.bodySize += chunk.byteLength;
        if (this.bodySize > max) return this.tooLarge();
        this.bodyChunks!.push(Buffer.from(new Uint8Array(chunk).slice()));
        if (isLast) {
          this.body = this.bodyChunks!.length === 1 ? this.bodyChunks![0]! : Buffer.concat(this.bodyChunks!, this.bodySize);
          this.bodyChunks = null;
          this.bodyReady = true;
          this.onBodyReady?.();
        }
      });
      return;
    }
    const stream = new RequestBodyStream(this.res);
    this.body = stream;
    this.res.onData((chunk, isLast) => {
      if (this.completed) return;
      this.bodySize += chunk.byteLength;
      if (this.bodySize > max) return this.tooLarge();
      stream.feed(chunk, isLast);
    });
  }

  private tooLarge(): void {
    if (this.bodyError) return;
    this.bodyError = 'body_too_large';
    const detail = `the body is larger than ${this.plane.o.maxBodyBytes} bytes`;
    if (this.body instanceof RequestBodyStream) this.body.destroy(new Error('request body too large'));
    if (this.exchange) {
      // Already forwarding: the upstream's request is cut; the client gets the 413 unless part of
      // the upstream's answer has gone out already.
      this.exchange.failRequest('body_too_large', detail);
    } else if (!this.responded && !this.aborted) {
      this.plane.refuse(this, 'body_too_large', detail, []);
    }
  }

  /** Runs `fn` once the buffered body is complete (at once for streamed or absent bodies). */
  whenBodyReady(fn: () => void): void {
    if (this.bodyReady) fn();
    else this.onBodyReady = fn;
  }
}

export class DataPlane {
  /** Admission can be decided inside the uWS callback (in-process counters). */
  private readonly syncAdmission: boolean;
  constructor(readonly o: DataPlaneOptions) {
    this.syncAdmission = o.gate.synchronous;
  }

  register(app: TemplatedApp): void {
    app.any('/*', (res, req) => this.onRequest(res, req));
  }

  finish(): void {
    this.o.inFlight.dec();
  }

  private onRequest(res: HttpResponse, req: HttpRequest): void {
    const path = req.getUrl();
    const route = this.o.routes.match(path);
    if (route === undefined) {
      writeProblem(res, 'no_route', `no upstream is configured for ${path}`, []);
      return;
    }
    const method = req.getCaseSensitiveMethod().toUpperCase();
    const apiKey = req.getHeader('x-api-key');
    const contentLength = req.getHeader('content-length');
    const declared = contentLength === '' ? 0 : Number(contentLength);

    // Fast path: an API key with the in-process store is decided right here, synchronously; a
    // refusal is written before any header is copied or any per-request state is allocated.
    let early: { caller: Caller; outcome: Outcome } | undefined;
    if (apiKey !== '' && this.syncAdmission && Number.isSafeInteger(declared) && declared >= 0 && declared <= this.o.maxBodyBytes) {
      const caller = keyCaller(apiKey);
      const d = this.decideFor(caller, route, method, path);
      if (d instanceof PlatformError) {
        writeProblem(res, d.code, d.detail ?? d.message, []);
        return;
      }
      if (!(d instanceof Promise)) {
        if (!d.forward) {
          const rl = rateLimitHeaders(d.figures, { name: d.policy, windowSec: d.windowSec }, this.o.clock.now(), true);
          const r = this.refusal(d);
          writeProblem(res, r.code, r.detail, rl);
          return;
        }
        early = { caller, outcome: d };
      }
    }

    const query = req.getQuery() ?? '';
    const authorization = apiKey === '' ? req.getHeader('authorization') : '';
    const transferEncoding = req.getHeader('transfer-encoding');
    const forwardedFor = req.getHeader('x-forwarded-for');
    const host = req.getHeader('host');
    const connection = req.getHeader('connection');
    let headers: string[] = [];
    collecting = headers;
    collectedBytes = 0;
    req.forEachHeader(collectHeader);
    collecting = [];
    if (collectedBytes > this.o.maxHeaderBytes) {
      writeProblem(res, 'headers_too_large', `the request headers are larger than ${this.o.maxHeaderBytes} bytes`, []);
      return;
    }
    if (connection !== '') {
      // Headers the client named in Connection are for this hop only (RFC 9110 §7.6.1).
      const listed = connectionTokens(connection);
      if (listed) headers = headers.filter((_v, i, a) => !listed.has(a[i - (i % 2)]!));
    }

    const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
    const clientIp = this.o.trustProxy && forwardedFor !== '' ? forwardedFor.split(',')[0]!.trim() : peer;
    headers.push('x-forwarded-for', forwardedFor === '' ? peer : `${forwardedFor}, ${peer}`, 'x-forwarded-proto', 'http');
    if (host !== '') headers.push('x-forwarded-host', host);

    this.o.inFlight.inc();
    const p = new Pending(this, res, method, path, query, route, headers, clientIp);
    res.onAborted(() => p.abort());

    const chunked = transferEncoding !== '';
    if (!Number.isSafeInteger(declared) || declared < 0) {
      this.refuse(p, 'bad_request', 'Content-Length is not a valid length', []);
      return;
    }
    if (declared > this.o.maxBodyBytes) {
      this.refuse(p, 'body_too_large', `the body is larger than ${this.o.maxBodyBytes} bytes`, []);
      return;
    }
    if (declared > 0 || chunked || !BODYLESS_METHODS.has(method)) {
      if (declared > 0 || chunked) p.readBody(declared, chunked, this.o.bufferBodyBytes, this.o.maxBodyBytes);
      // A streamed body of known length keeps it; a chunked one is sent chunked by undici itself.
      if (!chunked && declared > this.o.bufferBodyBytes) p.headers.push('content-length', contentLength);
    }

    if (early) {
      this.respond(p, early.caller, early.outcome);
    } else if (apiKey !== '') {
      this.admitCaller(p, keyCaller(apiKey));
    } else if (authorization !== '') {
      let token: string;
      try {
        token = bearerToken(authorization);
      } catch (err) {
        this.refuseError(p, err);
        return;
      }
      if (!this.o.verifier) {
        this.refuse(p, 'invalid_token', 'bearer tokens are not accepted here (no key set configured)', []);
        return;
      }
      this.o.verifier.verifyAccessToken(token).then(
        (claims) => {
          if (!p.aborted) this.admitCaller(p, tokenCaller(claims));
        },
        (err: unknown) => {
          if (!p.aborted) this.refuseError(p, err);
        },
      );
    } else if (route.auth === 'optional') {
      this.admitCaller(p, ipCaller(clientIp));
    } else {
      this.refuse(p, 'credentials_required', 'send an X-API-Key or an Authorization: Bearer access token', ['www-authenticate', 'Bearer']);
    }
  }

  /**
   * The admission decision for a caller on a route: an ownership refusal, or the gate's outcome
   * (synchronous with the in-memory store and API keys or addresses; a promise otherwise).
   */
  private decideFor(caller: Caller, route: Route, method: string, path: string): PlatformError | Outcome | Promise<Outcome> {
    if (route.ownerCheck) {
      const refusal = ownerRefusal(path, caller, this.o.serviceRoles);
      if (refusal) return refusal;
    }
    this.o.hotKeys.record(caller.subject);
    let quota: CompiledQuota | undefined;
    const routeLabel = route.prefix;
    if (caller.kind === 'ip') {
      quota = this.o.ipQuota;
    } else if (caller.kind === 'key') {
      if (!this.o.quotas.has(caller.subject)) {
        const plan = this.o.quotas.plan(this.o.defaultPlan) ?? this.o.builtinPlan;
        return this.o.gate.decoy(plan, plan.limit!, routeLabel);
      }
      quota = this.o.quotas.resolve(caller.subject, this.o.defaultPlan);
    } else {
      quota = this.o.quotas.resolve(caller.subject, caller.plan ?? this.o.defaultPlan);
      if (!quota && caller.plan !== undefined) quota = this.o.quotas.plan(this.o.defaultPlan);
    }
    quota ??= this.o.builtinPlan;
    // Stale table (no sync for LIMITER_QUOTA_MAX_AGE): never serve a cached paid plan as current.
    if (caller.kind !== 'ip' && this.o.sync?.stale()) quota = capToFloor(quota, this.o.builtinPlan);
    const limit: LimitParams = quota.limit ?? this.o.builtinPlan.limit!;
    return this.o.gate.admit(caller.subject, quota, limit, route.class, routeLabel, method, path);
  }

  private admitCaller(p: Pending, caller: Caller): void {
    const d = this.decideFor(caller, p.route, p.method, p.path);
    if (d instanceof PlatformError) {
      this.refuseError(p, d);
    } else if (d instanceof Promise) {
      d.then(
        (o) => {
          if (!p.aborted) this.respond(p, caller, o);
        },
        (err: unknown) => {
          // The gate handles store failures itself; anything else is a bug, not a reason for a 500.
          this.o.log.error({ err }, 'admission failed unexpectedly');
          if (!p.aborted) this.refuse(p, 'limiter_unavailable', 'admission could not be decided', []);
        },
      );
    } else {
      this.respond(p, caller, d);
    }
  }

  /** The refusal for an outcome that is not forwarded: 429, or 503 when failing closed (both carry Retry-After). */
  private refusal(o: Outcome): { code: ErrorCode; detail: string } {
    return o.status === 503 ? FAIL_CLOSED : RATE_LIMITED;
  }

  private respond(p: Pending, caller: Caller, o: Outcome): void {
    // Retry-After only on a refusal: a shadow-mode denial is forwarded and is a 2xx.
    const rl = rateLimitHeaders(o.figures, { name: o.policy, windowSec: o.windowSec }, this.o.clock.now(), !o.forward);
    if (!o.forward) {
      const r = this.refusal(o);
      this.refuse(p, r.code, r.detail, rl);
      return;
    }
    if (p.bodyError) return;
    const headers = p.headers;
    headers.push('x-subject', caller.subject, 'x-subject-role', caller.role);
    if (this.o.serviceSecret !== undefined) headers.push('x-subject-secret', this.o.serviceSecret);
    p.rateLimitHeaders = rl;
    if (p.bodyReady) this.forward(p);
    else p.whenBodyReady(() => this.forward(p));
  }

  private forward(p: Pending): void {
    if (p.aborted || p.responded) return;
    p.responded = true;
    const ex = new Exchange(p.res, p, p.rateLimitHeaders);
    p.exchange = ex;
    const opts: Dispatcher.DispatchOptions = {
      path: p.query === '' ? p.path : `${p.path}?${p.query}`,
      method: p.method as Dispatcher.HttpMethod,
      headers: p.headers,
      body: p.body,
    };
    ex.start(this.o.upstreams.pool(p.route.upstreamIndex), opts);
  }

  refuse(p: Pending, code: ErrorCode, detail: string, headers: readonly string[]): void {
    if (p.responded || p.aborted) return;
    p.responded = true;
    writeProblem(p.res, code, detail, headers);
    p.onDone();
  }

  private refuseError(p: Pending, err: unknown): void {
    if (isPlatformError(err)) {
      const extra: string[] = [];
      if (err.headers) for (const [k, v] of Object.entries(err.headers)) extra.push(k, v);
      this.refuse(p, err.code, err.detail ?? err.message, extra);
      return;
    }
    this.o.log.error({ err }, 'request failed unexpectedly');
    this.refuse(p, 'internal', 'internal error', []);
  }
}
