/**
 * A small real upstream for proxy tests: a node:http server on 127.0.0.1, port 0, that records
 * every request and answers in the mode the request asks for with `?mode=<mode>` (echo when none):
 *
 * - `echo`: reads the whole body and answers JSON {@link Echo} (method, path, query, headers, body
 *   size and SHA-256). `status=<n>` sets the status (204 and 304 answer without a body); `hop=1`
 *   adds hop-by-hop response headers that a proxy must not relay.
 * - `delay`: as echo, after `ms=<n>` milliseconds (a slow upstream, for draining on shutdown).
 * - `hang`: never answers (its socket is kept open until the request is aborted or `close()`).
 * - `garbage`: writes bytes that are not HTTP on the socket and closes it.
 * - `close`: destroys the socket as soon as the request arrives, without a response.
 * - `stream`: a body of `bytes=<n>` random bytes with a Content-Length, written with backpressure;
 *   the header `x-body-sha256` carries its checksum.
 * - `chunked`: the same without a Content-Length, in `chunks=<n>` pieces each written on its own
 *   turn of the event loop (Transfer-Encoding: chunked).
 * - `slow-read`: consumes the request body slowly (pauses `ms=<n>` between 64 KiB reads, default
 *   5), then echoes: exercises the proxy's request-body backpressure.
 *
 * Register `close` with `t.teardown` as soon as the server is started.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type UpstreamMode = 'echo' | 'delay' | 'hang' | 'garbage' | 'close' | 'stream' | 'chunked' | 'slow-read';

/** What the echo modes answer, and what `requests` records. */
export interface Echo {
  method: string;
  /** The path without the query. */
  path: string;
  /** The raw query string without `?` ('' when none). */
  query: string;
  /** Lower-cased names; repeated headers joined with ', ' (node's rules). */
  headers: Record<string, string>;
  /** Header names in the order received, lower-cased, with repeats. */
  headerNames: string[];
  bodyBytes: number;
  /** Hex SHA-256 of the body. */
  bodySha256: string;
}

/** A request as the upstream saw it; `bodyBytes` is -1 until the body is read (and stays so in modes that never read it). */
export interface SeenRequest extends Echo {
  mode: UpstreamMode;
  /** True when the client (the proxy) went away before the upstream answered. */
  aborted: boolean;
  /** The Content-Length the upstream answered with (echo modes), else -1. */
  sentLength: number;
}

export interface Upstream {
  readonly url: string;
  readonly port: number;
  /** Every request received, in arrival order. */
  readonly requests: readonly SeenRequest[];
  /** Resolves with the next request (or the `n`th overall, 1-based) once it has arrived; rejects after `timeoutMs` (default 5 s). */
  waitForRequest(n?: number, timeoutMs?: number): Promise<SeenRequest>;
  close(): Promise<void>;
}

const MODES: readonly UpstreamMode[] = ['echo', 'delay', 'hang', 'garbage', 'close', 'stream', 'chunked', 'slow-read'];

function intParam(q: URLSearchParams, name: string, fallback: number): number {
  const v = q.get(name);
  if (v === null) return fallback;
  const n = Number(v);
  return Number.isFinite(n) ? n : fallback;
}

function headersOf(req: IncomingMessage): { headers: Record<string, string>; names: string[] } {
  const headers: Record<string, string> = {};
  const names: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    const value = req.rawHeaders[i + 1]!;
    names.push(name);
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return { headers, names };
}

/** Reads the body, optionally slowly, into a size and checksum. */
function consume(req: IncomingMessage, seen: SeenRequest, slowMs: number): Promise<void> {
  return new Promise((resolve) => {
    const hash = createHash('sha256');
    let size = 0;
    const finish = (): void => {
      seen.bodyBytes = size;
      seen.bodySha256 = hash.digest('hex');
      resolve();
    };
    if (slowMs <= 0) {
      req.on('data', (c: Buffer) => {
        size += c.length;
        hash.update(c);
      });
      req.on('end', finish);
      req.on('error', () => resolve());
      req.on('aborted', () => resolve());
      return;
    }
    // Slow consumer: read at most 64 KiB, then wait, so the sender's buffers fill.
    let ended = false;
    req.on('end', () => {
      ended = true;
      finish();
    });
    req.on('error', () => resolve());
    const pump = (): void => {
      if (ended || req.destroyed) return;
      let c: Buffer | null;
      let taken = 0;
      while (taken < 64 * 1024 && (c = req.read() as Buffer | null) !== null) {
        size += c.length;
        hash.update(c);
        taken += c.length;
      }
      setTimeout(pump, slowMs);
    };
    setTimeout(pump, slowMs);
  });
}

function sendJson(
  res: ServerResponse,
  seen: SeenRequest,
  status: number,
  body: unknown,
  extra: Record<string, string | string[]> = {},
): void {
  if (status === 204 || status === 304) {
    res.writeHead(status, extra).end();
    return;
  }
  const text = JSON.stringify(body);
  seen.sentLength = Buffer.byteLength(text);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
  res.end(text);
}

/** Writes `buf` in 64 KiB slices, waiting for 'drain' when the socket is full. */
async function writeWithBackpressure(res: ServerResponse, buf: Buffer, pieces: number | undefined): Promise<void> {
  const size = pieces ? Math.ceil(buf.length / pieces) : 64 * 1024;
  for (let off = 0; off < buf.length; off += size) {
    if (res.destroyed) return;
    const ok = res.write(buf.subarray(off, Math.min(buf.length, off + size)));
    if (!ok) await new Promise<void>((r) => res.once('drain', () => r()));
    else if (pieces) await new Promise<void>((r) => setImmediate(r));
  }
  res.end();
}

/** Starts the upstream on 127.0.0.1, port 0. */
export async function startUpstream(): Promise<Upstream> {
  const requests: SeenRequest[] = [];
  const waiters: Array<{ n: number; resolve: (r: SeenRequest) => void }> = [];
  const sockets = new Set<Socket>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    const q = url.searchParams;
    const asked = q.get('mode') ?? 'echo';
    const mode: UpstreamMode = (MODES as readonly string[]).includes(asked) ? (asked as UpstreamMode) : 'echo';
    const { headers, names } = headersOf(req);
    const seen: SeenRequest = {
      mode,
      method: req.method ?? '',
      path: url.pathname,
      query: (req.url ?? '').includes('?') ? (req.url ?? '').slice((req.url ?? '').indexOf('?') + 1) : '',
      headers,
      headerNames: names,
      bodyBytes: -1,
      bodySha256: '',
      aborted: false,
      sentLength: -1,
    };
    requests.push(seen);
    res.on('close', () => {
      if (!res.writableFinished) seen.aborted = true;
    });
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.n <= requests.length) {
        waiters[i]!.resolve(requests[waiters[i]!.n - 1]!);
        waiters.splice(i, 1);
      }
    }

    switch (mode) {
      case 'hang':
        req.resume();
        return;
      case 'close':
        req.socket.destroy();
        return;
      case 'garbage':
        req.resume();
        req.socket.end('this is not HTTP at all \x00\x01\x02\r\n\r\n');
        return;
      case 'stream':
      case 'chunked': {
        await consume(req, seen, 0);
        const body = randomBytes(intParam(q, 'bytes', 1024 * 1024));
        const sha = createHash('sha256').update(body).digest('hex');
        const head: Record<string, string | number> = { 'content-type': 'application/octet-stream', 'x-body-sha256': sha };
        if (mode === 'stream') head['content-length'] = body.length;
        res.writeHead(200, head);
        await writeWithBackpressure(res, body, mode === 'chunked' ? intParam(q, 'chunks', 16) : undefined);
        return;
      }
      default: {
        await consume(req, seen, mode === 'slow-read' ? intParam(q, 'ms', 5) : 0);
        if (mode === 'delay') await new Promise((r) => setTimeout(r, intParam(q, 'ms', 500)));
        if (res.destroyed) return;
        const echo: Echo = {
          method: seen.method,
          path: seen.path,
          query: seen.query,
          headers: seen.headers,
          headerNames: seen.headerNames,
          bodyBytes: seen.bodyBytes,
          bodySha256: seen.bodySha256,
        };
        const extra: Record<string, string | string[]> = {};
        if (q.get('hop') === '1') {
          extra['connection'] = 'keep-alive, x-upstream-hop';
          extra['keep-alive'] = 'timeout=30';
          extra['x-upstream-hop'] = 'must not be relayed';
          extra['proxy-authenticate'] = 'Basic realm="upstream"';
          extra['x-upstream-end'] = 'relayed';
        }
        sendJson(res, seen, intParam(q, 'status', 200), echo, extra);
      }
    }
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  // A body the upstream never reads must not make node answer 400 on its own.
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    waitForRequest(n = requests.length + 1, timeoutMs = 5_000) {
      if (requests.length >= n) return Promise.resolve(requests[n - 1]!);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`upstream: request #${n} did not arrive within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          n,
          resolve: (r) => {
            clearTimeout(timer);
            resolve(r);
          },
        });
      });
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
    },
  };
}
