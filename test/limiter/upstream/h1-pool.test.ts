// @tier: pure
/**
 * limiter/upstream/h1-pool.ts against a raw upstream on node:net that records every byte it
 * receives and answers with exact bytes: the request as written, keep-alive reuse, `Connection:
 * close`, truncated and oversized responses, errors mid-body, an idle connection the upstream
 * closed (retried for idempotent methods only), timeouts, limits, smuggling vectors, backpressure,
 * and requests that abort while queued. undici (the fallback) is not involved: no request here
 * has a streamed body.
 */
import t, { type Test } from 'tap';
import { Buffer } from 'node:buffer';
import { createServer, type Socket } from 'node:net';
import { Pool } from 'undici';
import { H1Pool, UpstreamError, type H1PoolOptions } from '../../../limiter/upstream/h1-pool.js';
import { waitFor } from '../../harness/wait.js';

interface Req {
  conn: number;
  head: string;
  body: Buffer;
  socket: Socket;
}

/** A raw upstream: `answer` is called for each complete request (Content-Length bodies only). */
async function rawUpstream(t: Test, answer: (r: Req) => void) {
  const received: Buffer[] = [];
  const sockets: Socket[] = [];
  const requests: Req[] = [];
  const server = createServer((s) => {
    const conn = sockets.push(s);
    received.push(Buffer.alloc(0));
    let buf = Buffer.alloc(0);
    s.on('error', () => {});
    s.on('data', (d: Buffer) => {
      received[conn - 1] = Buffer.concat([received[conn - 1]!, d]);
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end + 4).toString('latin1');
        const m = /\r\ncontent-length: (\d+)\r\n/i.exec(head);
        const len = m ? Number(m[1]) : 0;
        if (buf.length < end + 4 + len) return;
        const r: Req = { conn, head, body: buf.subarray(end + 4, end + 4 + len), socket: s };
        buf = buf.subarray(end + 4 + len);
        requests.push(r);
        answer(r);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const port = (server.address() as { port: number }).port;
  return { port, origin: `http://127.0.0.1:${port}`, received, sockets, requests };
}

interface Outcome {
  status: number;
  reason: string;
  headers: string[];
  body: Buffer;
  error: Error | null;
  completed: boolean;
}

/** A handler that records what the pool tells it; `pauseEvery`: onData returns false for each chunk and resumes after a turn. */
function recorder(opts: { pause?: boolean } = {}) {
  const o: Outcome = { status: 0, reason: '', headers: [], body: Buffer.alloc(0), error: null, completed: false };
  let abort: ((err?: Error) => void) | null = null;
  let resume: (() => void) | null = null;
  let settle!: () => void;
  const settled = new Promise<void>((r) => (settle = r));
  const handler = {
    onConnect(a: (err?: Error) => void) {
      abort = a;
    },
    onHeaders(status: number, raw: Buffer[], res: () => void, reason: string) {
      o.status = status;
      o.reason = reason;
      o.headers = raw.map((b) => b.toString('latin1'));
      resume = res;
      return true;
    },
    onData(chunk: Buffer) {
      o.body = Buffer.concat([o.body, chunk]);
      if (opts.pause) {
        setImmediate(() => resume!());
        return false;
      }
      return true;
    },
    onComplete() {
      o.completed = true;
      settle();
    },
    onError(err: Error) {
      o.error = err;
      settle();
    },
  };
  return { o, handler, settled, abort: (err?: Error) => abort!(err) };
}

const OPTS: H1PoolOptions = {
  connections: 4,
  headersTimeoutMs: 300,
  bodyTimeoutMs: 300,
  connectTimeoutMs: 1000,
  keepAliveTimeoutMs: 30_000,
  maxHeadBytes: 1024,
};

function pool(t: Test, origin: string, opts: Partial<H1PoolOptions> = {}): H1Pool {
  const fallback = new Pool(origin);
  const p = new H1Pool(origin, { ...OPTS, ...opts }, fallback);
  t.teardown(async () => {
    p.destroy();
    await fallback.destroy();
  });
  return p;
}

async function send(
  p: H1Pool,
  method: string,
  path: string,
  headers: string[] = [],
  body: Buffer | null = null,
  opts: { pause?: boolean } = {},
) {
  const r = recorder(opts);
  p.dispatch({ method, path, headers, body }, r.handler);
  await r.settled;
  return r.o;
}

const ok = (body: string, extra = ''): string => `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
const codeOf = (o: Outcome): string | undefined => (o.error instanceof UpstreamError ? o.error.code : o.error?.message);

t.test('the request bytes are what undici writes: host, connection, headers in order, content-length last', async (t) => {
  const up = await rawUpstream(t, (r) => r.socket.write(ok('x')));
  const p = pool(t, up.origin);
  await send(p, 'GET', '/a?b=1', ['accept', '*/*', 'X-Two', 'v']);
  await send(p, 'POST', '/p', ['content-type', 'text/plain'], Buffer.from('hello'));
  await send(p, 'POST', '/empty', []);
  await send(p, 'DELETE', '/d', []);
  t.equal(
    up.received[0]!.toString('latin1'),
    `GET /a?b=1 HTTP/1.1\r\nhost: 127.0.0.1:${up.port}\r\nconnection: keep-alive\r\naccept: */*\r\nX-Two: v\r\n\r\n` +
      `POST /p HTTP/1.1\r\nhost: 127.0.0.1:${up.port}\r\nconnection: keep-alive\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\nhello` +
      `POST /empty HTTP/1.1\r\nhost: 127.0.0.1:${up.port}\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n` +
      `DELETE /d HTTP/1.1\r\nhost: 127.0.0.1:${up.port}\r\nconnection: keep-alive\r\n\r\n`,
    'byte for byte, all four on one keep-alive connection',
  );
  t.equal(up.sockets.length, 1, 'one connection');
});

t.test('HEAD and a body on GET are sent with connection: close, and the connection is not reused', async (t) => {
  const up = await rawUpstream(t, (r) =>
    r.socket.write(r.head.startsWith('HEAD') ? 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n' : ok('x')),
  );
  const p = pool(t, up.origin);
  const head = await send(p, 'HEAD', '/h');
  t.equal(head.status, 200);
  t.equal(head.body.length, 0, 'no body for HEAD');
  t.ok(head.completed);
  await send(p, 'GET', '/g', [], Buffer.from('odd'));
  await send(p, 'GET', '/after');
  t.match(up.received[0]!.toString('latin1'), /^HEAD \/h HTTP\/1\.1\r\nhost: [^\r]+\r\nconnection: close\r\n\r\n$/);
  t.match(up.received[1]!.toString('latin1'), /^GET \/g HTTP\/1\.1\r\nhost: [^\r]+\r\nconnection: close\r\ncontent-length: 3\r\n\r\nodd$/);
  t.equal(up.sockets.length, 3, 'a connection each');
});

t.test('an invalid header value or request target is refused before anything is written', async (t) => {
  const up = await rawUpstream(t, (r) => r.socket.write(ok('x')));
  const p = pool(t, up.origin);
  for (const bad of ['a\r\nx-injected: 1', 'a\nb', 'a\x00b']) {
    const o = await send(p, 'GET', '/', ['x-subject', bad]);
    t.equal(codeOf(o), 'upstream_unreachable', JSON.stringify(bad));
  }
  for (const bad of ['/a b', '/a\r\nX-Injected: 1', '/\u20ac']) {
    const o = await send(p, 'GET', bad);
    t.equal(codeOf(o), 'upstream_unreachable', `target ${JSON.stringify(bad)}`);
  }
  const o = await send(p, 'GET', '/fine', ['x-subject', 'caf\xe9']);
  t.equal(o.status, 200, 'latin1 bytes above 0x7f pass (as undici)');
  t.equal(up.requests.length, 1, 'only the valid one reached the upstream');
});

t.test('chunked responses with trailers, and 1xx interim responses, written byte by byte', async (t) => {
  const wire =
    'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\nX-Trailer: t\r\n\r\n';
  const up = await rawUpstream(t, (r) => {
    for (const byte of Buffer.from(wire, 'latin1')) r.socket.write(Buffer.from([byte]));
  });
  const p = pool(t, up.origin);
  const o = await send(p, 'GET', '/c');
  t.equal(o.status, 200);
  t.same(o.headers, ['Transfer-Encoding', 'chunked', 'X-A', '1'], 'the final head only');
  t.equal(o.body.toString(), 'abcdefg');
  t.ok(o.completed);
  const again = await send(p, 'GET', '/c2');
  t.equal(again.body.toString(), 'abcdefg');
  t.equal(up.sockets.length, 1, 'the connection was reused after the trailers');
});

t.test('204 and 304 have no body; Connection: close and a close-delimited body end the connection', async (t) => {
  let n = 0;
  const up = await rawUpstream(t, (r) => {
    n++;
    if (n === 1) r.socket.write('HTTP/1.1 204 No Content\r\n\r\n');
    else if (n === 2) r.socket.write('HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n');
    else if (n === 3) r.socket.write(ok('bye', 'Connection: close\r\n'));
    else if (n === 4) r.socket.end('HTTP/1.1 200 OK\r\n\r\nuntil the close');
    else r.socket.write(ok('fresh'));
  });
  const p = pool(t, up.origin);
  const a = await send(p, 'GET', '/204');
  const b = await send(p, 'GET', '/304');
  t.same([a.status, a.body.length, a.completed, b.status, b.body.length, b.completed], [204, 0, true, 304, 0, true]);
  t.equal(up.sockets.length, 1, '204 and 304 kept the connection');
  const c = await send(p, 'GET', '/close');
  t.equal(c.body.toString(), 'bye');
  const d = await send(p, 'GET', '/eof');
  t.equal(d.body.toString(), 'until the close', 'the body up to EOF');
  t.ok(d.completed);
  const e = await send(p, 'GET', '/fresh');
  t.equal(e.body.toString(), 'fresh');
  t.equal(up.sockets.length, 3, 'a new connection after each close (204, 304 and the close on the first)');
});

t.test('transfer codings: gzip, chunked is chunked and kept alive; chunked, gzip runs to the close', async (t) => {
  let n = 0;
  const up = await rawUpstream(t, (r) => {
    n++;
    if (n === 1) r.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\n\x1f\x8b\x08\r\n0\r\n\r\n', 'latin1');
    else if (n === 2) r.socket.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n');
    else r.socket.write(ok('fresh'));
  });
  const p = pool(t, up.origin);
  const a = await send(p, 'GET', '/gzip-chunked');
  t.same([a.status, a.body.toString('latin1'), a.completed], [200, '\x1f\x8b\x08', true], 'the gzip bytes, undecoded, chunk framing off');
  t.same(a.headers, ['Transfer-Encoding', 'gzip, chunked'], 'the field handed on as it came');
  const b = await send(p, 'GET', '/chunked-gzip');
  t.same([b.body.toString(), b.completed], ['3\r\nabc\r\n0\r\n\r\n', true], 'chunked not last: every byte to the close is body');
  t.equal(up.sockets.length, 1, 'the first answer kept the connection');
  t.equal((await send(p, 'GET', '/fresh')).body.toString(), 'fresh');
  t.equal(up.sockets.length, 2, 'a new connection after the close-delimited one');
});

t.test('truncated, oversized and broken responses', async (t) => {
  let n = 0;
  const up = await rawUpstream(t, (r) => {
    n++;
    if (n === 1) r.socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort');
    else if (n === 2) r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA');
    else if (n === 3) {
      r.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
      setImmediate(() => r.socket.destroy());
    } else if (n === 4) r.socket.write(`HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(2000)}\r\nContent-Length: 0\r\n\r\n`);
    else if (n === 5) r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd');
    else if (n === 6) r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
    else if (n === 7) r.socket.write('NOT HTTP\r\n\r\n');
    else r.socket.write(ok('fine'));
  });
  const p = pool(t, up.origin);
  const cut = await send(p, 'GET', '/1');
  t.same(
    [cut.status, cut.body.toString(), codeOf(cut)],
    [200, 'short', 'upstream_bad_response'],
    'truncated: head and part of the body, then the error',
  );
  const extra = await send(p, 'GET', '/2');
  t.same([extra.body.toString(), extra.completed], ['ok', true], 'oversized: the declared body only');
  const mid = await send(p, 'GET', '/3');
  t.same([mid.body.toString(), codeOf(mid)], ['hello', 'upstream_bad_response'], 'connection reset mid-body');
  const big = await send(p, 'GET', '/4');
  t.same([big.status, codeOf(big)], [0, 'upstream_bad_response'], 'a head over the limit: no head given');
  const twoCl = await send(p, 'GET', '/5');
  t.same([twoCl.status, codeOf(twoCl)], [0, 'upstream_bad_response'], 'two Content-Length values');
  const teCl = await send(p, 'GET', '/6');
  t.same([teCl.status, codeOf(teCl)], [0, 'upstream_bad_response'], 'Transfer-Encoding with Content-Length');
  const junk = await send(p, 'GET', '/7');
  t.equal(codeOf(junk), 'upstream_bad_response', 'not HTTP');
  const fine = await send(p, 'GET', '/8');
  t.equal(fine.body.toString(), 'fine');
  // 1 closed; 2 extra bytes; 3 reset; 4..7 refused: each leaves its connection.
  t.equal(up.sockets.length, 8, 'no connection that carried a bad response was reused');
});

t.test('an idle keep-alive connection the upstream closed: idempotent requests are sent again, others fail', async (t) => {
  let n = 0;
  const up = await rawUpstream(t, (r) => {
    n++;
    // The first request on each connection is answered; the second finds the connection closing.
    const first = up.requests.filter((x) => x.conn === r.conn).length === 1;
    if (first) r.socket.write(ok(`n${n}`));
    else r.socket.destroy();
  });
  const p = pool(t, up.origin, { connections: 1 });
  t.equal((await send(p, 'GET', '/warm')).body.toString(), 'n1');
  const get = await send(p, 'GET', '/again');
  t.same([get.status, get.body.toString()], [200, 'n3'], 'GET: sent again on a new connection and answered');
  t.equal(up.requests.filter((r) => r.head.startsWith('GET /again')).length, 2, 'the upstream saw it twice (once on the dying connection)');
  const post = await send(p, 'POST', '/once', [], Buffer.from('x'));
  t.equal(codeOf(post), 'upstream_unreachable', 'POST: not sent again');
  t.equal(up.requests.filter((r) => r.head.startsWith('POST /once')).length, 1, 'the POST reached the upstream once');
  // A fresh connection that fails is not retried either, whatever the method.
  const dead = pool(t, up.origin.replace(String(up.port), '1'));
  t.equal(codeOf(await send(dead, 'GET', '/')), 'upstream_unreachable', 'connection refused');
});

t.test('an idle connection closed by the upstream while idle is dropped, not used', async (t) => {
  const up = await rawUpstream(t, (r) => r.socket.end(ok('x', 'Keep-Alive: timeout=0\r\n')));
  const p = pool(t, up.origin, { connections: 1 });
  await send(p, 'GET', '/1');
  await waitFor(() => up.sockets[0]!.destroyed || up.sockets[0]!.writableEnded, { what: 'the upstream to close the connection' });
  const o = await send(p, 'GET', '/2');
  t.equal(o.status, 200);
  t.equal(up.sockets.length, 2);
});

t.test('timeouts: no head, and a gap in the body, give upstream_timeout', async (t) => {
  let n = 0;
  const up = await rawUpstream(t, (r) => {
    n++;
    if (n === 2) r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
  });
  const p = pool(t, up.origin);
  t.equal(codeOf(await send(p, 'GET', '/hang')), 'upstream_timeout', 'headers timeout');
  const gap = await send(p, 'GET', '/gap');
  t.same([gap.status, gap.body.toString(), codeOf(gap)], [200, 'abc', 'upstream_timeout'], 'body timeout');
});

t.test('backpressure: a handler that pauses on every chunk gets every byte, and the connection is reused', async (t) => {
  const body = Buffer.alloc(300_000, 'z');
  const up = await rawUpstream(t, (r) =>
    r.socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`), body])),
  );
  const p = pool(t, up.origin);
  const a = await send(p, 'GET', '/big', [], null, { pause: true });
  t.ok(a.body.equals(body), 'the whole body');
  t.ok(a.completed);
  const b = await send(p, 'GET', '/big2', [], null, { pause: true });
  t.ok(b.body.equals(body));
  t.equal(up.sockets.length, 1, 'one connection');
});

t.test('requests beyond the connection limit wait; one aborted while waiting is never sent', async (t) => {
  const held: Req[] = [];
  const up = await rawUpstream(t, (r) => held.push(r));
  const p = pool(t, up.origin, { connections: 1, headersTimeoutMs: 10_000 });
  const first = recorder();
  const second = recorder();
  const third = recorder();
  p.dispatch({ method: 'GET', path: '/1', headers: [] }, first.handler);
  p.dispatch({ method: 'GET', path: '/2', headers: [] }, second.handler);
  p.dispatch({ method: 'GET', path: '/3', headers: [] }, third.handler);
  await waitFor(() => held.length === 1, { what: 'the first request upstream' });
  second.abort(new Error('client aborted'));
  await second.settled;
  t.equal(second.o.error?.message, 'client aborted');
  held[0]!.socket.write(ok('one'));
  await first.settled;
  await waitFor(() => held.length === 2, { what: 'the third request upstream' });
  held[1]!.socket.write(ok('three'));
  await third.settled;
  t.same([first.o.body.toString(), third.o.body.toString()], ['one', 'three']);
  t.same(
    up.requests.map((r) => r.head.split(' ')[1]),
    ['/1', '/3'],
    'the aborted one never reached the upstream',
  );
});

t.test('an exchange aborted before the pool writes (same turn) sends nothing', async (t) => {
  const up = await rawUpstream(t, (r) => r.socket.write(ok('x')));
  const p = pool(t, up.origin);
  const r = recorder();
  p.dispatch({ method: 'GET', path: '/never', headers: [] }, r.handler);
  r.abort(new Error('client aborted'));
  await r.settled;
  await send(p, 'GET', '/after');
  t.same(
    up.requests.map((x) => x.head.split(' ')[1]),
    ['/after'],
    'only the later request',
  );
});

t.test('an exchange aborted mid-body closes the connection', async (t) => {
  const up = await rawUpstream(t, (r) => r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart'));
  const p = pool(t, up.origin, { bodyTimeoutMs: 10_000 });
  const r = recorder();
  p.dispatch({ method: 'GET', path: '/slow', headers: [] }, r.handler);
  await waitFor(() => r.o.body.length === 4, { what: 'the first body bytes' });
  r.abort(new Error('client aborted'));
  await r.settled;
  await waitFor(() => up.sockets[0]!.destroyed || up.sockets[0]!.readableEnded, { what: 'the upstream connection to close' });
  t.pass('closed');
});

t.test("the upstream's Keep-Alive timeout: under undici's 2 s margin the connection is not reused; above it, it is", async (t) => {
  const up = await rawUpstream(t, (r) =>
    r.socket.write(ok('x', r.head.includes('/short') ? 'Keep-Alive: timeout=2\r\n' : 'Keep-Alive: timeout=60\r\n')),
  );
  const p = pool(t, up.origin, { connections: 1 });
  await send(p, 'GET', '/short');
  await send(p, 'GET', '/long');
  await send(p, 'GET', '/long2');
  t.same(
    up.requests.map((r) => r.conn),
    [1, 2, 2],
    'timeout=2: closed after the answer; timeout=60: kept',
  );
});

t.test('an exchange that aborts from inside onData, with the rest of the response in the same read, ends cleanly', async (t) => {
  const up = await rawUpstream(t, (r) => r.socket.write(r.head.includes('/first') ? ok('0123456789') : ok('next')));
  const p = pool(t, up.origin, { connections: 1 });
  let abort: ((err?: Error) => void) | null = null;
  let error: Error | null = null;
  const seen: string[] = [];
  p.dispatch(
    { method: 'GET', path: '/first', headers: [] },
    {
      onConnect: (a: (err?: Error) => void) => void (abort = a),
      onHeaders: () => true,
      onData: (c: Buffer) => {
        seen.push(c.toString());
        abort!(new Error('client went away'));
        return false;
      },
      onComplete: () => t.fail('not completed'),
      onError: (e: Error) => void (error = e),
    },
  );
  await waitFor(() => error !== null, { what: 'the abort' });
  t.equal(error!.message, 'client went away');
  t.same(seen, ['0123456789'], 'one piece, then nothing');
  const next = await send(p, 'GET', '/next');
  t.equal(next.body.toString(), 'next', 'the pool carries on, on a new connection');
  t.equal(up.sockets.length, 2);
});

t.test('the headers timeout counts from the request, not from the last byte: a head sent a byte at a time times out', async (t) => {
  const head = Buffer.from('HTTP/1.1 200 OK\r\nX-Slow: ' + 'a'.repeat(200) + '\r\nContent-Length: 0\r\n\r\n');
  const timers: NodeJS.Timeout[] = [];
  t.teardown(() => timers.forEach((x) => clearInterval(x)));
  const up = await rawUpstream(t, (r) => {
    // A slowloris upstream: each byte well inside the timeout, the whole head far past it.
    let i = 0;
    const tick = setInterval(() => {
      if (i === head.length || r.socket.destroyed) return clearInterval(tick);
      r.socket.write(head.subarray(i, ++i));
    }, 20);
    timers.push(tick);
  });
  const p = pool(t, up.origin, { headersTimeoutMs: 200 });
  const o = await send(p, 'GET', '/slow');
  t.equal(codeOf(o), 'upstream_timeout', 'headers timeout, not a 200 after ~5 s');
});

t.test('a waiting request behind one aborted in the queue gets the connection a failed one frees', async (t) => {
  const held: Req[] = [];
  const up = await rawUpstream(t, (r) => held.push(r));
  const p = pool(t, up.origin, { connections: 1, headersTimeoutMs: 10_000 });
  const first = recorder();
  const second = recorder();
  const third = recorder();
  p.dispatch({ method: 'POST', path: '/1', headers: [] }, first.handler);
  p.dispatch({ method: 'GET', path: '/2', headers: [] }, second.handler);
  p.dispatch({ method: 'GET', path: '/3', headers: [] }, third.handler);
  await waitFor(() => held.length === 1, { what: 'the first request upstream' });
  second.abort(new Error('client aborted'));
  await second.settled;
  held[0]!.socket.destroy();
  await first.settled;
  t.equal(codeOf(first.o), 'upstream_unreachable');
  await waitFor(() => held.length === 2, { what: 'the third request upstream (not left queued with no connection)' });
  held[1]!.socket.write(ok('three'));
  await third.settled;
  t.equal(third.o.body.toString(), 'three');
  t.same(
    up.requests.map((r) => r.head.split(' ')[1]),
    ['/1', '/3'],
  );
});

t.test('bytes that arrive after a response while its reader is paused are never read as the next response', async (t) => {
  const extra = 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil';
  const up = await rawUpstream(t, (r) => {
    if (r.head.startsWith('GET /a ')) r.socket.write(ok('abc'));
    else r.socket.write(ok('fresh'));
  });
  const p = pool(t, up.origin, { connections: 1 });
  let resume: (() => void) | null = null;
  let done = false;
  p.dispatch(
    { method: 'GET', path: '/a', headers: [] },
    {
      onConnect: () => {},
      onHeaders: (_s: number, _h: Buffer[], res: () => void) => {
        resume = res;
        return true;
      },
      onData: () => {
        // After the response has been read: a misbehaving upstream's late, extra answer.
        up.requests[0]!.socket.write(extra);
        return false; // the client's socket is full: paused on the last piece
      },
      onComplete: () => void (done = true),
      onError: (e: Error) => t.fail(e.message),
    },
  );
  // The extra bytes wait in the paused socket's buffer (nothing of ours reads them yet).
  const conns = (p as unknown as { all: Set<{ socket: Socket }> }).all;
  await waitFor(() => [...conns].some((c) => c.socket.readableLength >= extra.length), { what: 'the extra bytes buffered' });
  const b = recorder();
  p.dispatch({ method: 'GET', path: '/b', headers: [] }, b.handler);
  await waitFor(() => (p as unknown as { queue: unknown[] }).queue.length === 1, { what: '/b queued behind /a' });
  resume!();
  await b.settled;
  t.ok(done, '/a completed');
  t.equal(b.o.body.toString(), 'fresh', '/b gets its own answer, not the bytes sent before it was written');
  t.equal(up.sockets.length, 2, 'the connection with unread bytes was not reused');
});

t.test(
  'a header name that is not a token, a framing or hop-by-hop name, or a method that is not a token is refused before anything is written',
  async (t) => {
    const up = await rawUpstream(t, (r) => r.socket.write(ok('x')));
    const p = pool(t, up.origin);
    const names = [
      'x-a\r\nx-injected',
      'x a',
      'x:a',
      '',
      'x\u010d\u010ay',
      'Transfer-Encoding',
      'content-length',
      'Host',
      'CONNECTION',
      'keep-alive',
      'upgrade',
      'expect',
    ];
    for (const name of names) {
      const o = await send(p, 'POST', '/', [name, 'v'], Buffer.from('body'));
      t.equal(codeOf(o), 'upstream_unreachable', `header name ${JSON.stringify(name)}`);
    }
    for (const method of ['GET / HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET', 'G T', 'G\u0100T', '']) {
      const o = await send(p, method, '/');
      t.equal(codeOf(o), 'upstream_unreachable', `method ${JSON.stringify(method)}`);
    }
    const o = await send(p, 'PROPFIND', '/fine', ['X-Custom_Name.1', 'v']);
    t.equal(o.status, 200, 'token names and methods pass');
    t.equal(up.received.map((b) => b.toString('latin1')).join(''), up.requests.map((r) => r.head).join(''), 'nothing but whole requests');
    t.same(
      up.requests.map((r) => r.head.split('\r\n')[0]),
      ['PROPFIND /fine HTTP/1.1'],
      'only the valid one reached the upstream',
    );
  },
);

t.test('a request whose upstream sent a 1xx before closing is not sent again: the upstream had it', async (t) => {
  const up = await rawUpstream(t, (r) => {
    if (r.head.startsWith('GET /warm')) r.socket.write(ok('w'));
    // 102 Processing: the upstream is acting on the DELETE; then the connection dies.
    else r.socket.end('HTTP/1.1 102 Processing\r\n\r\n', () => r.socket.destroy());
  });
  const p = pool(t, up.origin, { connections: 1 });
  await send(p, 'GET', '/warm');
  const del = await send(p, 'DELETE', '/thing');
  t.equal(codeOf(del), 'upstream_unreachable', 'cut after a byte of its answer: 502, not a retry');
  t.equal(up.requests.filter((r) => r.head.startsWith('DELETE /thing')).length, 1, 'the DELETE reached the upstream once');
});

t.test(
  'closing: a request waiting for a connection is answered, not stranded, when the one in flight fails or the pool is destroyed',
  async (t) => {
    const held: Req[] = [];
    const up = await rawUpstream(t, (r) => held.push(r));
    const p = pool(t, up.origin, { connections: 1, headersTimeoutMs: 10_000 });
    const first = recorder();
    const second = recorder();
    p.dispatch({ method: 'POST', path: '/1', headers: [] }, first.handler);
    p.dispatch({ method: 'GET', path: '/2', headers: [] }, second.handler);
    await waitFor(() => held.length === 1, { what: 'the first request upstream' });
    let closed = false;
    void p.close().then(() => (closed = true));
    held[0]!.socket.destroy();
    await first.settled;
    await waitFor(() => held.length === 2, { what: 'the queued request sent on a new connection' });
    t.notOk(closed, 'close() waits for it');
    held[1]!.socket.write(ok('two'));
    await second.settled;
    t.equal(second.o.body.toString(), 'two');
    await waitFor(() => closed, { what: 'close() to resolve' });

    const p2 = pool(t, up.origin, { connections: 1, headersTimeoutMs: 10_000 });
    const a = recorder();
    const b = recorder();
    // /a on a reused connection: a failure there would be retried, but not when the pool is destroyed.
    held.length = 0;
    const warm = recorder();
    p2.dispatch({ method: 'GET', path: '/warm', headers: [] }, warm.handler);
    await waitFor(() => held.length === 1, { what: '/warm upstream' });
    held[0]!.socket.write(ok('w'));
    await warm.settled;
    p2.dispatch({ method: 'GET', path: '/a', headers: [] }, a.handler);
    p2.dispatch({ method: 'GET', path: '/b', headers: [] }, b.handler);
    await waitFor(() => held.length === 2, { what: '/a upstream' });
    p2.destroy();
    await a.settled;
    await b.settled;
    t.same([codeOf(a.o), codeOf(b.o)], ['upstream_unreachable', 'upstream_unreachable'], 'destroy() answers the queued one too');
    t.same(
      up.requests.map((r) => r.head.split(' ')[1]),
      ['/1', '/2', '/warm', '/a'],
      'nothing sent again after destroy()',
    );
  },
);

t.test('close() in the same turn as a dispatch: the request is still timed out by the pool, and close() waits for it', async (t) => {
  const up = await rawUpstream(t, () => {}); // never answers
  const p = pool(t, up.origin, { headersTimeoutMs: 200 });
  const r = recorder();
  p.dispatch({ method: 'GET', path: '/hang', headers: [] }, r.handler);
  let closed = false;
  void p.close().then(() => (closed = true));
  t.notOk(closed);
  await r.settled;
  t.equal(codeOf(r.o), 'upstream_timeout', 'the headers timeout still runs');
  await waitFor(() => closed, { what: 'close() to resolve' });
});

t.test('an answer that arrives before the request body is all written does not free the connection (as undici)', async (t) => {
  const sockets: Socket[] = [];
  const heads: string[] = [];
  const server = createServer((s) => {
    sockets.push(s);
    s.on('error', () => {});
    let seen = '';
    s.on('data', (d: Buffer) => {
      if (seen.includes('\r\n\r\n')) return;
      seen += d.toString('latin1');
      if (!seen.includes('\r\n\r\n')) return;
      heads.push(seen.slice(0, seen.indexOf('\r\n\r\n')));
      if (seen.startsWith('PUT')) {
        // Answers at once and stops reading: the rest of the body is still on our side.
        s.write('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n');
        s.pause();
      } else s.write(ok('fresh'));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const p = pool(t, origin, { connections: 1, headersTimeoutMs: 2000 });
  const put = await send(p, 'PUT', '/big', [], Buffer.alloc(32 * 1024 * 1024, 'b'));
  t.equal(put.status, 413);
  const get = await send(p, 'GET', '/next');
  t.equal(get.body.toString(), 'fresh', 'the next request is not written behind the unsent body');
  t.equal(sockets.length, 2, 'on a new connection');
});
