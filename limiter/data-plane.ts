/**
 * The sidecar's data plane: every request on :8080, all methods and paths.
 *
 * canonical target → header framing → route → body limit → subject → ownership → admission →
 * 429/503, or proxy upstream with the canonical path. Everything needed from uWS's `req` is read
 * before the first await (it is stack-allocated and dies with the callback); `onAborted` is
 * registered before any async work; writes are corked. With the in-memory counter store and an
 * API key or an address, the whole decision is synchronous.
 *
 * Responses made before a subject's quota is consulted (400, 401, 403, 404, 413, 414, 431, 501)
 * carry no rate-limit headers and charge nothing: there are no numbers of the caller's to report.
 * Malformed requests (400 other than credentials, 405 for CONNECT, 414, 431, 501) are answered
 * with `Connection: close`. Every response after admission, admitted or denied, carries the headers.
 * A HEAD gets every answer the sidecar makes itself with the GET's status and headers (its
 * Content-Length included) and no body; a proxied HEAD relays no body whatever the upstream sends.
 *
 * DPoP (RFC 9449): `Authorization: DPoP <token>` with one `DPoP` proof is checked on every route:
 * the proof first (synchronously: signature, `htm`, `htu` = a LIMITER_PUBLIC_ORIGIN + the canonical
 * path, `iat`, `ath`), then the token bound to the proof's key (`cnf.jkt`), and last the proof's
 * `jti` is recorded in the replay store (Redis when the sidecar has one, shared by every sidecar;
 * else in process), so only proofs that would be accepted cost a store write. A request without
 * the DPoP scheme does none of this; a DPoP-bound token sent as Bearer is refused by the verifier.
 */
import { Buffer } from 'node:buffer';
import type { Dispatcher } from 'undici';
import { forEachHeader, type HttpRequest, type HttpResponse, type TemplatedApp } from '../shared/uws.js';
import { isPlatformError, PlatformError, type ErrorCode } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';
import type { Clock } from '../shared/clock.js';
import type { AccessClaims, Verifier } from '../shared/jwt/index.js';
import { checkDpopProof, DpopError, expectedHtu, type CheckedProof, type DpopReplayStore } from '../shared/dpop/index.js';
import type { InFlight } from '../shared/http.js';
import type { LimitParams } from './admission/limit.js';
import { connectionTokens, dropRequestHeader, Exchange, refuseAndClose, RequestBodyStream, writeProblem, type Upstreams } from './proxy.js';
import { canonicalPath, queryRefusal } from './request-target.js';
import { rateLimitHeaders } from './headers.js';
import {
  BEARER_CHALLENGE,
  bearerToken,
  dpopSchemeToken,
  isDpopScheme,
  ipCaller,
  isBearer,
  keyCaller,
  ONLY_BEARER,
  ownerRefusal,
  tokenCaller,
  type Caller,
} from './subject.js';
import type { Gate, Outcome } from './gate.js';
import type { CompiledQuota, QuotaCache } from './quota-cache.js';
import type { Route, RouteTable } from './routes.js';
import type { DecisionStore, LimiterMetrics } from './metrics.js';
import type { HotKeys } from './hot-keys.js';
import type { SubjectLookup } from './quota-lookup.js';
import { capToFloor } from './quota-sync-max-age.js';

/** DPoP at the edge (LIMITER_PUBLIC_ORIGIN, DPOP_IAT_WINDOW, the replay store). */
export interface EdgeDpop {
  /** The origins clients call the sidecar at; a proof's `htu` must be one of them + the canonical path. */
  origins: readonly string[];
  iatWindowSec: number;
  replay: DpopReplayStore;
}

export interface DataPlaneOptions {
  routes: RouteTable;
  upstreams: Upstreams;
  quotas: QuotaCache;
  /** Lookups of subjects the working set does not hold (with a control plane; standalone none). */
  lookup?: SubjectLookup | undefined;
  gate: Gate;
  verifier: Verifier | undefined;
  /** Undefined: LIMITER_PUBLIC_ORIGIN is unset, and DPoP-bound tokens are refused. */
  dpop?: EdgeDpop | undefined;
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
  /** Routes with a per-IP cap of their own (route option `ip`), by prefix: a bucket per address and route. */
  routeIpQuotas?: ReadonlyMap<string, CompiledQuota>;
  /**
   * The control-plane sync (QuotaSync, or a worker thread's QuotaReplica), when configured: past
   * its max age, quotas are capped (see quota-sync-max-age.ts).
   */
  sync?: { stale(): boolean } | undefined;
  serviceRoles: readonly string[];
  serviceSecret: string | undefined;
  trustProxy: boolean;
  maxBodyBytes: number;
  bufferBodyBytes: number;
  /** Largest request header block (names + values), 431 above it. */
  maxHeaderBytes: number;
  /** Longest request target (path and query), 414 above it. */
  maxUrlBytes: number;
}

// The one pass over the request's headers (forEachHeader target, reset before each call: no
// closure per request). It copies what is forwarded and notes what the framing checks, the
// subject and the forwarding headers need.
const scan = {
  headers: [] as string[],
  bytes: 0,
  contentLength: '',
  lengthConflict: false,
  lengths: 0,
  transferEncoding: '',
  codings: 0,
  host: '',
  hosts: 0,
  apiKey: '',
  apiKeys: 0,
  authorization: '',
  authorizations: 0,
  dpop: '',
  dpops: 0,
  connection: '',
  forwardedFor: '',
  forwarded: '',
  forwardedHost: '',
  forwardedProto: '',
  forwardedPort: '',
  badValue: false,
};
type Scan = typeof scan;

function resetScan(): void {
  scan.headers = [];
  scan.bytes = 0;
  scan.contentLength = '';
  scan.lengthConflict = false;
  scan.lengths = 0;
  scan.transferEncoding = '';
  scan.codings = 0;
  scan.host = '';
  scan.hosts = 0;
  scan.apiKey = '';
  scan.apiKeys = 0;
  scan.authorization = '';
  scan.authorizations = 0;
  scan.dpop = '';
  scan.dpops = 0;
  scan.connection = '';
  scan.forwardedFor = '';
  scan.forwarded = '';
  scan.forwardedHost = '';
  scan.forwardedProto = '';
  scan.forwardedPort = '';
  scan.badValue = false;
}

const NON_ASCII = /[\u0080-\uffff]/;
const join = (a: string, b: string): string => (a === '' ? b : `${a}, ${b}`);

function scanHeader(name: string, value: string): void {
  scan.bytes += name.length + value.length + 4;
  let v = value;
  // uWS decodes values as UTF-8; undici writes header strings as latin1. Re-encoding the UTF-8
  // bytes as latin1 characters makes undici write the client's bytes exactly. Bytes that were
  // not UTF-8 came to us as U+FFFD and cannot be restored: refused (README, "Known limitations").
  if (NON_ASCII.test(v)) {
    if (v.includes('\ufffd')) scan.badValue = true;
    v = Buffer.from(v, 'utf8').toString('latin1');
  }
  switch (name) {
    case 'content-length':
      if (scan.lengths++ === 0) scan.contentLength = v;
      else if (v !== scan.contentLength) scan.lengthConflict = true;
      return;
    case 'transfer-encoding':
      scan.codings++;
      scan.transferEncoding = join(scan.transferEncoding, v);
      return;
    case 'host':
      scan.hosts++;
      scan.host = v;
      return;
    case 'x-api-key':
      scan.apiKeys++;
      scan.apiKey = value;
      return;
    case 'authorization':
      scan.authorizations++;
      scan.authorization = value;
      break;
    case 'dpop':
      // Forwarded too: an upstream that verifies tokens itself checks the same proof.
      scan.dpops++;
      scan.dpop = value;
      break;
    case 'connection':
      scan.connection = join(scan.connection, v);
      return;
    case 'x-forwarded-for':
      scan.forwardedFor = join(scan.forwardedFor, v);
      return;
    case 'forwarded':
      scan.forwarded = join(scan.forwarded, v);
      return;
    case 'x-forwarded-host':
      scan.forwardedHost = v;
      return;
    case 'x-forwarded-proto':
      scan.forwardedProto = v;
      return;
    case 'x-forwarded-port':
      scan.forwardedPort = v;
      return;
  }
  if (!dropRequestHeader(name)) scan.headers.push(name, v);
}

const DIGITS = /^\d{1,15}$/;

/**
 * A Host value: uri-host [":" port] (RFC 9112 §3.2, RFC 3986 §3.2.2): an IP literal in brackets or
 * a reg-name (unreserved, sub-delims, percent-escapes), never empty. Anything else (`/`, `\`, `@`,
 * spaces, controls, non-ASCII) is not a host, and `..` is refused as nginx refuses it: a Host is
 * forwarded as X-Forwarded-Host and Forwarded, and upstreams build URLs and paths from it.
 */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+)(?::[0-9]*)?$/;
function validHost(host: string): boolean {
  return HOST.test(host) && !host.includes('..');
}

/** The methods a 405 names (RFC 9110 §15.5.6): the sidecar forwards every method but CONNECT. */
const ALLOW = ['allow', 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS'] as const;

// The peer address of the request in the current uWS callback, decoded once however often asked.
let peerRes: HttpResponse | undefined;
let peerText = '';
function peerOf(res: HttpResponse): string {
  if (res !== peerRes) {
    peerRes = res;
    peerText = Buffer.from(res.getRemoteAddressAsText()).toString();
  }
  return peerText;
}

/** A `Forwarded` node or host value: a token as it is, anything else as a quoted-string (RFC 7239 §4). */
function forwardedValue(v: string): string {
  return /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(v) ? v : `"${v.replace(/["\\]/g, '\\$&')}"`;
}

/** The client's address as a `Forwarded: for=` node: IPv6 in brackets, quoted (RFC 7239 §6). */
function forwardedFor(ip: string): string {
  return ip.includes(':') ? `"[${ip}]"` : ip;
}

const RATE_LIMITED = { code: 'rate_limited', detail: 'quota exceeded; retry after the time in Retry-After' } as const;
const FAIL_CLOSED = { code: 'limiter_unavailable', detail: 'admission is unavailable and this route fails closed; retry later' } as const;

const EMPTY: readonly string[] = [];

/** Per-request state: created after routing, lives until the response ends. */
class Pending {
  aborted = false;
  responded = false;
  /** The uWS response is finished (or gone): it must not be touched again, not even to pause. */
  completed = false;
  /** `performance.now()` when the request reached the uWS callback (decision latency). */
  arrived = 0;
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
    /** This route's body limit. */
    readonly maxBody: number,
    /** The client address the sidecar decided on (X-Subject-Address). */
    readonly address: string,
  ) {}

  abort(): void {
    this.aborted = true;
    if (this.body instanceof RequestBodyStream) this.body.detach();
    this.exchange?.abort();
    if (this.body instanceof RequestBodyStream) this.body.destroy();
    this.onDone();
  }

  /** The response is about to end: resume a paused request body while the response still exists. */
  onFinishing(): void {
    if (this.body instanceof RequestBodyStream) this.body.release();
  }

  onUpstreamResponse(status: number): void {
    this.plane.o.metrics.upstreamResponse(this.route.prefix, status);
  }

  onUpstreamError(err: Error, code: ErrorCode): void {
    this.plane.o.log.debug({ err, route: this.route.prefix }, 'upstream request failed');
    this.plane.o.metrics.upstreamFailed(this.route.prefix, code);
  }

  /** The request is over (answered, relayed or abandoned): counted once. */
  onDone(): void {
    if (this.completed) return;
    this.completed = true;
    if (this.body instanceof RequestBodyStream) {
      // Released (resumed) already, before the response ended, where it was still allowed.
      this.body.detach();
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
    const detail = `the body is larger than ${this.maxBody} bytes`;
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
  /** The port this plane listens on, for X-Forwarded-Port; set once listening. */
  set listenPort(port: number) {
    this.portText = String(port);
  }
  private portText = '0';
  private lastHost: string | undefined;
  private lastValidHost: string | undefined;
  private lastHostPart = '';
  constructor(readonly o: DataPlaneOptions) {
    this.syncAdmission = o.gate.synchronous;
  }

  register(app: TemplatedApp): void {
    app.any('/*', (res, req) => this.onRequest(res, req));
  }

  finish(): void {
    this.o.inFlight.dec();
  }

  /** Requests taken since start (`ratelimit_worker_requests` when the sidecar runs worker threads). */
  requests = 0;

  private onRequest(res: HttpResponse, req: HttpRequest): void {
    this.requests++;
    const arrived = performance.now();
    // Everything that does not depend on the quota is decided first, and nothing is charged for a
    // request refused here (README, "How the sidecar reads a request"): target length and form,
    // header size and framing, route, body limit, credentials' form, ownership.
    const method = req.getCaseSensitiveMethod().toUpperCase();
    // Every answer the sidecar writes itself to a HEAD has the GET's status and headers and no body.
    const head = method === 'HEAD';
    if (method === 'CONNECT') {
      // Not a forward proxy (nginx answers 405 too); whatever follows a CONNECT may be tunnel bytes.
      refuseAndClose(res, 'method_not_allowed', 'CONNECT is not supported: the sidecar is not a forward proxy', false, ALLOW);
      return;
    }
    const rawPath = req.getUrl();
    const query = req.getQuery() ?? '';
    if (rawPath.length + query.length > this.o.maxUrlBytes) {
      refuseAndClose(res, 'uri_too_long', `the request target is longer than ${this.o.maxUrlBytes} bytes`, head);
      return;
    }
    const path = canonicalPath(rawPath);
    if (typeof path !== 'string') {
      refuseAndClose(res, 'bad_request_target', path.detail, head);
      return;
    }
    if (query !== '') {
      const bad = queryRefusal(query);
      if (bad) {
        refuseAndClose(res, 'bad_request_target', bad.detail, head);
        return;
      }
    }
    resetScan();
    forEachHeader(req, scanHeader);
    const h: Scan = scan;
    const framing = this.framingRefusal(h);
    if (framing) {
      refuseAndClose(res, framing.code, framing.detail, head);
      return;
    }
    const route = this.o.routes.match(path);
    if (route === undefined) {
      writeProblem(res, 'no_route', `no upstream is configured for ${path}`, EMPTY, false, head);
      return;
    }
    const declared = h.lengths === 0 ? 0 : Number(h.contentLength);
    const chunked = h.codings > 0;
    const maxBody = route.maxBody ?? this.o.maxBodyBytes;
    if (declared > maxBody) {
      writeProblem(res, 'body_too_large', `the body is larger than ${maxBody} bytes`, EMPTY, false, head);
      return;
    }

    // The caller, as far as it can be known without waiting: an API key, an address, or a bearer
    // token still to verify. A malformed or unaccepted credential is refused here.
    let caller: Caller | undefined;
    let token: string | undefined;
    let proof: CheckedProof | undefined;
    // The client address (X-Subject-Address upstream), when an address caller needs it first.
    let address: string | undefined;
    if (h.apiKey !== '') caller = keyCaller(h.apiKey);
    else if (h.authorization !== '' && isBearer(h.authorization)) {
      try {
        token = bearerToken(h.authorization);
      } catch (err) {
        this.writeError(res, err, head);
        return;
      }
    } else if (h.authorization !== '' && isDpopScheme(h.authorization)) {
      try {
        token = dpopSchemeToken(h.authorization);
        proof = this.checkProof(h, method, path, token);
      } catch (err) {
        this.writeError(res, err, head);
        return;
      }
    } else if (route.auth === 'optional') {
      address = this.clientIp(peerOf(res), h);
      caller = ipCaller(address);
    } else if (h.authorization !== '') {
      writeProblem(res, 'invalid_token', ONLY_BEARER, BEARER_CHALLENGE, false, head);
      return;
    } else {
      writeProblem(
        res,
        'credentials_required',
        'send an X-API-Key or an Authorization: Bearer access token',
        BEARER_CHALLENGE,
        false,
        head,
      );
      return;
    }
    if (token !== undefined && !this.o.verifier) {
      writeProblem(res, 'invalid_token', 'bearer tokens are not accepted here (no key set configured)', EMPTY, false, head);
      return;
    }
    const owners = this.o.routes.ownersOf(path);

    // Fast path: a key or an address is decided right here; an answer known at once (in-process
    // counters, or a refusal or leased token answered locally over Redis) is written before any
    // per-request state is allocated. A pending one is awaited once the request is set up.
    let early: Outcome | undefined;
    let pending: Promise<Outcome> | undefined;
    if (caller !== undefined) {
      // A key not held may be looked up: the address it came from is charged if it is unknown.
      if (caller.kind === 'key' && this.o.lookup && address === undefined && !this.o.quotas.has(caller.subject))
        address = this.clientIp(peerOf(res), h);
      const d = this.decideFor(caller, route, method, path, owners, 1, address);
      if (d instanceof PlatformError) {
        this.writeError(res, d, head);
        return;
      }
      if (!(d instanceof Promise)) {
        this.o.metrics.decided(this.answeredBy(d, true), performance.now() - arrived);
        if (!d.forward) {
          const rl = rateLimitHeaders(d.figures, { name: d.policy, windowSec: d.windowSec }, this.o.clock.now(), true);
          const r = this.refusal(d);
          writeProblem(res, r.code, r.detail, rl, false, head);
          return;
        }
        early = d;
      } else pending = d;
    }

    let headers = h.headers;
    if (h.connection !== '') {
      // Headers the client named in Connection are for this hop only (RFC 9110 §7.6.1).
      const listed = connectionTokens(h.connection);
      if (listed) headers = headers.filter((_v, i, a) => !listed.has(a[i - (i % 2)]!));
    }
    const peer = peerOf(res);
    // Without LIMITER_TRUST_PROXY this is the peer string itself: nothing new is allocated.
    address ??= this.clientIp(peer, h);
    this.forwardingHeaders(peer, h, headers);

    this.o.inFlight.inc();
    const p = new Pending(this, res, method, path, query, route, headers, maxBody, address);
    p.arrived = arrived;
    res.onAborted(() => p.abort());

    if (declared > 0 || chunked) {
      p.readBody(declared, chunked, this.o.bufferBodyBytes, maxBody);
      // A streamed body of known length keeps it; a chunked one is sent chunked by undici itself.
      if (!chunked && declared > this.o.bufferBodyBytes) p.headers.push('content-length', h.contentLength);
    }

    if (early) {
      this.respond(p, caller!, early);
    } else if (pending) {
      this.awaitDecision(p, caller!, pending);
    } else if (caller !== undefined) {
      this.admitCaller(p, caller, owners);
    } else if (proof === undefined) {
      this.o.verifier!.verifyAccessToken(token!).then(
        (claims) => {
          if (!p.aborted) this.admitCaller(p, tokenCaller(claims), owners);
        },
        (err: unknown) => {
          if (!p.aborted) this.refuseError(p, err);
        },
      );
    } else {
      this.verifyBound(token!, proof).then(
        (claims) => {
          if (!p.aborted) this.admitCaller(p, tokenCaller(claims), owners);
        },
        (err: unknown) => {
          if (!p.aborted) this.refuseError(p, err);
        },
      );
    }
  }

  /** The DPoP proof of a request under the DPoP scheme, checked for this request (no replay check yet). Throws. */
  private checkProof(h: Scan, method: string, path: string, token: string): CheckedProof {
    const d = this.o.dpop;
    if (d === undefined) {
      throw new DpopError('missing', 'DPoP-bound tokens are not accepted here (LIMITER_PUBLIC_ORIGIN is not configured)');
    }
    if (h.dpops === 0 || h.dpop.trim() === '') throw new DpopError('missing', 'a DPoP proof is required (the DPoP header)');
    if (h.dpops > 1 || h.dpop.includes(',')) throw new DpopError('multiple', 'send exactly one DPoP header');
    const htu = d.origins.length === 1 ? expectedHtu(d.origins[0]!, path) : d.origins.map((o) => expectedHtu(o, path));
    return checkDpopProof(h.dpop.trim(), { method, htu, accessToken: token }, this.o.clock.now(), { iatWindowSec: d.iatWindowSec });
  }

  /** The token bound to the proof's key, then the proof recorded as used (refused when it was). */
  private async verifyBound(token: string, proof: CheckedProof): Promise<AccessClaims> {
    const claims = await this.o.verifier!.verifyAccessToken(token, { jkt: proof.jkt });
    let fresh: boolean;
    try {
      fresh = await this.o.dpop!.replay.claim(proof.replayKey, proof.replayTtlMs);
    } catch (err) {
      this.o.log.warn({ err: { message: err instanceof Error ? err.message : String(err) } }, 'dpop replay store unavailable');
      throw new DpopError('replay_store_unavailable', 'DPoP replay protection is unavailable; try again shortly');
    }
    if (!fresh) throw new DpopError('replayed', 'the DPoP proof was already used (jti)');
    return claims;
  }

  /**
   * RFC 9112 §6.3 framing, and the one Host: what another parser in front of or behind us could
   * read differently is refused, and the connection closed (README, "How the sidecar reads a
   * request", says which layer enforces which rule).
   */
  private framingRefusal(h: Scan): { code: ErrorCode; detail: string } | undefined {
    if (h.bytes > this.o.maxHeaderBytes)
      return { code: 'headers_too_large', detail: `the request headers are larger than ${this.o.maxHeaderBytes} bytes` };
    if (h.lengthConflict) return { code: 'bad_framing', detail: 'the request has Content-Length headers with different values' };
    if (h.lengths > 0 && !DIGITS.test(h.contentLength)) return { code: 'bad_framing', detail: 'Content-Length is not a valid length' };
    if (h.codings > 0) {
      if (h.lengths > 0) return { code: 'bad_framing', detail: 'the request has both Transfer-Encoding and Content-Length' };
      if (h.codings > 1 || h.transferEncoding.trim().toLowerCase() !== 'chunked')
        return { code: 'transfer_coding_not_implemented', detail: 'Transfer-Encoding must be exactly "chunked"' };
    }
    if (h.hosts !== 1) return { code: 'bad_framing', detail: 'the request must have exactly one Host header' };
    // Checked once per distinct Host in a row, not per request: nearly every request repeats the last.
    if (h.host !== this.lastValidHost) {
      if (!validHost(h.host)) return { code: 'bad_framing', detail: 'the Host header is not a host[:port]' };
      this.lastValidHost = h.host;
    }
    // Which of two credentials is the caller's is exactly what a proxy in front may read otherwise.
    if (h.apiKeys > 1) return { code: 'duplicate_credentials', detail: 'send exactly one X-API-Key header' };
    if (h.authorizations > 1) return { code: 'duplicate_credentials', detail: 'send exactly one Authorization header' };
    if (h.badValue) return { code: 'bad_header', detail: 'a header value holds bytes that are not UTF-8' };
    return undefined;
  }

  /**
   * The client address: the peer, or with LIMITER_TRUST_PROXY the address the trusted proxy
   * appended. The per-IP cap counts by it and upstreams get it as X-Subject-Address.
   */
  private clientIp(peer: string, h: Scan): string {
    if (!this.o.trustProxy || h.forwardedFor === '') return peer;
    // One trusted hop: the last entry is the one it added; the ones before it are the client's word.
    const last = h.forwardedFor.slice(h.forwardedFor.lastIndexOf(',') + 1).trim();
    return last === '' ? peer : last;
  }

  /**
   * X-Forwarded-For/-Host/-Proto/-Port and Forwarded: the sidecar's own. The client's are dropped,
   * unless LIMITER_TRUST_PROXY says a proxy in front wrote them; then ours are appended to them.
   */
  private forwardingHeaders(peer: string, h: Scan, headers: string[]): void {
    const port = this.portText;
    // The host part is the same on almost every request: built once per distinct Host.
    if (h.host !== this.lastHost) {
      this.lastHost = h.host;
      this.lastHostPart = `;host=${forwardedValue(h.host)};proto=http`;
    }
    const node = `for=${forwardedFor(peer)}${this.lastHostPart}`;
    if (this.o.trustProxy) {
      headers.push(
        'x-forwarded-for',
        join(h.forwardedFor, peer),
        'x-forwarded-host',
        h.forwardedHost !== '' ? h.forwardedHost : h.host,
        'x-forwarded-proto',
        h.forwardedProto !== '' ? h.forwardedProto : 'http',
        'x-forwarded-port',
        h.forwardedPort !== '' ? h.forwardedPort : port,
        'forwarded',
        join(h.forwarded, node),
      );
    } else {
      headers.push(
        'x-forwarded-for',
        peer,
        'x-forwarded-host',
        h.host,
        'x-forwarded-proto',
        'http',
        'x-forwarded-port',
        port,
        'forwarded',
        node,
      );
    }
  }

  private writeError(res: HttpResponse, err: unknown, head: boolean): void {
    if (isPlatformError(err)) {
      const extra: string[] = [];
      if (err.headers) for (const [k, v] of Object.entries(err.headers)) extra.push(k, v);
      writeProblem(res, err.code, err.detail ?? err.message, extra, false, head);
      return;
    }
    this.o.log.error({ err }, 'request failed unexpectedly');
    writeProblem(res, 'internal', 'internal error', EMPTY, false, head);
  }

  /**
   * The admission decision for a caller on a route: an ownership refusal, or the gate's outcome
   * (synchronous with the in-memory store and API keys or addresses; a promise otherwise). Also
   * the RLS port's decision (limiter/rls/), with `hits` for Envoy's hits_addend: one logic for both.
   */
  decideFor(
    caller: Caller,
    route: Route,
    method: string,
    path: string,
    owners: readonly string[],
    hits = 1,
    address?: string,
  ): PlatformError | Outcome | Promise<Outcome> {
    for (let i = 0; i < owners.length; i++) {
      const refusal = ownerRefusal(owners[i]!, caller, this.o.serviceRoles);
      if (refusal) return refusal;
    }
    this.o.hotKeys.record(caller.subject);
    if (caller.kind === 'ip') {
      const own = route.ipLimit ? this.o.routeIpQuotas?.get(route.prefix) : undefined;
      // The route's own cap counts in a bucket of its own, apart from the shared per-IP one.
      return this.admitWith(
        caller,
        own ?? this.o.ipQuota,
        own ? `${caller.subject}@${route.prefix}` : caller.subject,
        route,
        method,
        path,
        hits,
      );
    }
    // One lookup: the record both says the key is known and gives its quota.
    let own = this.o.quotas.record(caller.subject);
    if (own === undefined && this.o.lookup !== undefined) {
      // Not in the working set: looked up (batched, shared by concurrent requests). A failed lookup
      // answers undefined, so an unreachable control plane never makes a key exist.
      const found = this.o.lookup.find(caller.subject, caller.kind === 'key' ? address : undefined);
      if (found instanceof Promise) return found.then((q) => this.decideKnown(caller, q, route, method, path, hits));
      own = found;
    }
    return this.decideKnown(caller, own, route, method, path, hits);
  }

  /** The decision once a subject's own record is known (undefined: it has none). */
  private decideKnown(
    caller: Caller,
    own: CompiledQuota | undefined,
    route: Route,
    method: string,
    path: string,
    hits: number,
  ): Outcome | Promise<Outcome> {
    let quota: CompiledQuota | undefined;
    if (caller.kind === 'key') {
      if (own === undefined) {
        const plan = this.o.quotas.plan(this.o.defaultPlan) ?? this.o.builtinPlan;
        return this.o.gate.decoy(plan, plan.limit!, route.prefix);
      }
      quota = this.o.quotas.resolveRecord(own, this.o.defaultPlan);
    } else {
      const fallback = caller.plan ?? this.o.defaultPlan;
      quota = own ? this.o.quotas.resolveRecord(own, fallback) : this.o.quotas.plan(fallback);
      if (!quota && caller.plan !== undefined) quota = this.o.quotas.plan(this.o.defaultPlan);
    }
    return this.admitWith(caller, quota, caller.subject, route, method, path, hits);
  }

  private admitWith(
    caller: Caller,
    found: CompiledQuota | undefined,
    key: string,
    route: Route,
    method: string,
    path: string,
    hits: number,
  ): Outcome | Promise<Outcome> {
    let quota = found ?? this.o.builtinPlan;
    // Stale table (no sync for LIMITER_QUOTA_MAX_AGE): never serve a cached paid plan as current.
    if (caller.kind !== 'ip' && this.o.sync?.stale()) quota = capToFloor(quota, this.o.builtinPlan);
    const limit: LimitParams = quota.limit ?? this.o.builtinPlan.limit!;
    return this.o.gate.admit(key, quota, limit, route.class, route.prefix, method, path, hits);
  }

  private admitCaller(p: Pending, caller: Caller, owners: readonly string[]): void {
    const d = this.decideFor(caller, p.route, p.method, p.path, owners);
    if (d instanceof PlatformError) {
      this.refuseError(p, d);
    } else if (d instanceof Promise) {
      this.awaitDecision(p, caller, d);
    } else {
      this.o.metrics.decided(this.answeredBy(d, true), performance.now() - p.arrived);
      this.respond(p, caller, d);
    }
  }

  private awaitDecision(p: Pending, caller: Caller, d: Promise<Outcome>): void {
    d.then(
      (o) => {
        this.o.metrics.decided(this.answeredBy(o, false), performance.now() - p.arrived);
        if (!p.aborted) this.respond(p, caller, o);
      },
      (err: unknown) => {
        // The gate handles store failures itself; anything else is a bug, not a reason for a 500.
        this.o.log.error({ err }, 'admission failed unexpectedly');
        if (!p.aborted) this.refuse(p, 'limiter_unavailable', 'admission could not be decided', []);
      },
    );
  }

  /**
   * Who answered a decision, for the decision-latency histogram: read from the outcome and whether
   * it came at once. An emergency-cap refusal while failing open (its result is `deny`) reads as
   * its store's; every other fail-mode answer is `fallback`, every decoy `none`.
   */
  private answeredBy(o: Outcome, synchronous: boolean): DecisionStore {
    const r = o.result;
    if (r === 'fail_open' || r === 'fail_closed') return 'fallback';
    if (r === 'decoy') return 'none';
    if (!synchronous) return 'redis';
    return this.syncAdmission ? 'memory' : 'local';
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
    // X-Subject-Address: the one client address upstreams limit and log by (README, "Trust of the
    // client address"); like X-Subject, believed only with X-Subject-Secret.
    headers.push('x-subject', caller.subject, 'x-subject-role', caller.role, 'x-subject-address', p.address);
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
      method: p.method,
      headers: p.headers,
      body: p.body,
    };
    ex.start(this.o.upstreams.pool(p.route.upstreamIndex), opts);
  }

  refuse(p: Pending, code: ErrorCode, detail: string, headers: readonly string[]): void {
    if (p.responded || p.aborted) return;
    p.responded = true;
    p.onFinishing();
    writeProblem(p.res, code, detail, headers, false, p.method === 'HEAD');
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
