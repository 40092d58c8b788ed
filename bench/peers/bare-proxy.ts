/**
 * The floor of this runtime for the sidecar's admitted path (issue 17, item 3; issue 26): uWS in
 * front, and behind it the upstream client the sidecar uses, exactly as it uses it: `h1` (the
 * default, as UPSTREAM_CLIENT's), the sidecar's own H1Pool (limiter/upstream/h1-pool.ts, 128
 * connections, its timeouts' defaults); or `undici`, one keep-alive Pool of 128 connections,
 * pipelining 1; either driven through the legacy raw-header dispatch handler of limiter/proxy.ts.
 * The same header set on the wire, but no decision, no route table, no hashing, no canonical path:
 *
 * - upstream request: every client header but the hop-by-hop ones, `host`, `x-api-key` and the
 *   client's own forwarding headers, plus `x-subject`, `x-subject-role` (constants),
 *   `x-subject-address` and `x-forwarded-for` (the peer address), `-host`, `-proto`, `-port` and
 *   `forwarded`;
 * - client response: the upstream's headers but the hop-by-hop ones and `date`, plus the six
 *   rate-limit header lines as one constant block (the sidecar sends its six in one call too).
 *
 * Bodies: a request body is not read (the bench sends GETs); the response body is streamed back
 * with the upstream's Content-Length. `node dist/bench/peers/bare-proxy.js <port> <upstream origin> [h1|undici]`.
 */
import { Buffer } from 'node:buffer';
import { Pool, type Dispatcher } from 'undici';
import { App, forEachHeader, listen, type HttpRequest, type HttpResponse } from '../../shared/uws.js';
import { H1Pool, type UpstreamDispatcher } from '../../limiter/upstream/h1-pool.js';

const port = Number(process.argv[2]);
const origin = process.argv[3];
const client = process.argv[4] ?? 'h1';
if (!Number.isInteger(port) || !origin || (client !== 'h1' && client !== 'undici')) {
  console.error('usage: bare-proxy.js <port> <upstream origin> [h1|undici]');
  process.exit(2);
}

const undici = new Pool(origin, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });
// The sidecar's settings (limiter/sidecar.ts with the defaults of UPSTREAM_TIMEOUT, UPSTREAM_CONNECT_TIMEOUT).
const pool: UpstreamDispatcher =
  client === 'h1'
    ? new H1Pool(
        origin,
        {
          connections: 128,
          headersTimeoutMs: 30_000,
          bodyTimeoutMs: 30_000,
          connectTimeoutMs: 5_000,
          keepAliveTimeoutMs: 30_000,
          maxHeadBytes: 16 * 1024,
        },
        undici,
      )
    : undici;

const DROP = new Set([
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
  'x-api-key',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-port',
  'forwarded',
  'expect',
]);
const RESPONSE_DROP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'trailer', 'upgrade']);
// The rate-limit headers as the sidecar writes them (limiter/headers.ts): one value carrying the
// other lines.
const RATE_LIMIT_BLOCK =
  '1000000000\r\nx-ratelimit-remaining: 999999999\r\nx-ratelimit-reset: 1800000000' +
  '\r\nratelimit-policy: "bench_admit";q=1000000000;w=1\r\nratelimit: "bench_admit";r=999999999;t=0';
const PORT_TEXT = String(port);

let headers: string[] = [];
let host = '';
function copyHeader(name: string, value: string): void {
  if (name === 'host') host = value;
  if (!DROP.has(name)) headers.push(name, value);
}

class Relay implements Dispatcher.DispatchHandler {
  aborted = false;
  private status = 0;
  private raw: Buffer[] | null = null;
  private total = -1;
  private headWritten = false;
  /** The uWS response is complete: touching it again throws. */
  private finished = false;
  private abortUpstream: ((err?: Error) => void) | null = null;
  constructor(private readonly res: HttpResponse) {}

  onConnect(abort: (err?: Error) => void): void {
    this.abortUpstream = abort;
  }
  onHeaders(status: number, raw: Buffer[]): boolean {
    this.status = status;
    this.raw = raw;
    for (let i = 0; i < raw.length; i += 2) {
      if (raw[i]!.length === 14 && raw[i]!.toString('latin1').toLowerCase() === 'content-length')
        this.total = Number(raw[i + 1]!.toString('latin1'));
    }
    return true;
  }
  private writeHead(): void {
    if (this.headWritten) return;
    this.headWritten = true;
    const res = this.res;
    res.writeStatus(this.status === 200 ? '200 OK' : String(this.status));
    const raw = this.raw!;
    for (let i = 0; i < raw.length; i += 2) {
      if (!RESPONSE_DROP.has(raw[i]!.toString('latin1').toLowerCase())) res.writeHeader(raw[i]!, raw[i + 1]!);
    }
    res.writeHeader('x-ratelimit-limit', RATE_LIMIT_BLOCK);
  }
  onData(chunk: Buffer): boolean {
    if (this.aborted || this.finished) return false;
    this.res.cork(() => {
      this.writeHead();
      if (this.total >= 0) this.finished = this.res.tryEnd(chunk, this.total)[1];
      else this.res.write(chunk);
    });
    return true;
  }
  onComplete(): void {
    if (this.aborted || this.finished) return;
    this.finished = true;
    this.res.cork(() => {
      this.writeHead();
      this.res.end();
    });
  }
  onError(): void {
    if (this.aborted || this.finished) return;
    this.aborted = true;
    if (this.headWritten) this.res.close();
    else this.res.cork(() => this.res.writeStatus('502 Bad Gateway').end());
  }
  abort(): void {
    this.aborted = true;
    this.abortUpstream?.(new Error('client aborted'));
  }
}

const app = App();
app.any('/*', (res: HttpResponse, req: HttpRequest) => {
  headers = [];
  host = '';
  forEachHeader(req, copyHeader);
  const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
  const h = headers;
  h.push(
    'x-subject',
    'key:bare-proxy',
    'x-subject-role',
    'service',
    'x-subject-address',
    peer,
    'x-forwarded-for',
    peer,
    'x-forwarded-host',
    host,
    'x-forwarded-proto',
    'http',
    'x-forwarded-port',
    PORT_TEXT,
    'forwarded',
    `for=${peer};host=${host};proto=http`,
  );
  const query = req.getQuery();
  const relay = new Relay(res);
  res.onAborted(() => relay.abort());
  pool.dispatch(
    { path: query ? `${req.getUrl()}?${query}` : req.getUrl(), method: req.getCaseSensitiveMethod().toUpperCase(), headers: h },
    relay,
  );
});
await listen(app, '127.0.0.1', port);
console.log(`bare proxy (${client}) on ${port} → ${origin}`);
process.once('SIGTERM', () => process.exit(0));
