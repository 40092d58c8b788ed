// @tier: pure
/**
 * Transfer codings besides chunked through the sidecar, by raw bytes both ways: a raw upstream
 * writes exact responses, a raw client reads exactly what the sidecar sends, with each upstream
 * client (UPSTREAM_CLIENT=h1 and undici).
 *
 * `Transfer-Encoding: gzip, chunked` is relayed with the gzip bytes untouched and the field as it
 * came (`gzip` written ahead of the `chunked` uWS applies when it re-frames the body); `chunked,
 * gzip` (the body runs to the upstream's close, RFC 9112 §6.3) is a 502, since uWS can only frame
 * it for the client by chunking it twice (RFC 9112 §6.1); Transfer-Encoding with Content-Length is
 * a 502 (limiter/README.md, "Upstream client", has what nginx does with each).
 */
import t, { type Test } from 'tap';
import { Buffer } from 'node:buffer';
import type { Socket } from 'node:net';
import { startCannedUpstream } from '../fixtures/raw-upstream.js';
import { fixedQuota, keySubject, newApiKey, startTestSidecar } from '../fixtures/sidecar.js';
import { openSocket } from '../fixtures/raw.js';

// gzip's magic and bytes that look like chunk framing, to show nothing decodes or re-reads them.
const GZ = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x0d, 0x0a, 0x30, 0x0d, 0x0a, 0x00, 0xff]);
const hex = (n: number): string => n.toString(16);

const ANSWERS: Record<string, Buffer> = {
  '/v1/gzip-chunked': Buffer.concat([
    Buffer.from(`HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nX-Up: 1\r\n\r\n${hex(GZ.length)}\r\n`, 'latin1'),
    GZ,
    Buffer.from('\r\n0\r\n\r\n', 'latin1'),
  ]),
  '/v1/two-lines': Buffer.concat([
    Buffer.from(`HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n${hex(GZ.length)}\r\n`, 'latin1'),
    GZ,
    Buffer.from('\r\n0\r\n\r\n', 'latin1'),
  ]),
  '/v1/gzip-chunked-empty': Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n', 'latin1'),
  '/v1/chunked': Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', 'latin1'),
  '/v1/gzip-chunked-cl': Buffer.from(
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 7\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    'latin1',
  ),
  '/v1/cl-chunked': Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', 'latin1'),
};
/** Answered, then the upstream closes: the body is framed by the close. */
const CLOSE_DELIMITED: Record<string, Buffer> = {
  '/v1/chunked-gzip': Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n', 'latin1'), GZ]),
  '/v1/gzip-only': Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n', 'latin1'), GZ]),
};

function rawUpstream(t: Test): Promise<string> {
  return startCannedUpstream(t, (target, s) => {
    const closing = CLOSE_DELIMITED[target];
    if (closing) s.end(closing);
    else s.write(ANSWERS[target] ?? Buffer.from('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n'));
  });
}

interface Raw {
  head: string;
  /** The head's field lines, `name: value`, in order. */
  lines: string[];
  status: number;
  /** The body as it came on the wire (chunk framing included). */
  wire: Buffer;
  /** The body with the sidecar's chunked framing taken off (the wire body when not chunked). */
  body: Buffer;
}

/** Reads one response from `s`, exactly as sent: complete at its Content-Length or last chunk. */
function readOne(s: Socket): Promise<Raw> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => reject(new Error(`no complete response: ${JSON.stringify(buf.toString('latin1'))}`)), 5000);
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      const wire = buf.subarray(end + 4);
      const lines = head.split('\r\n').slice(1);
      const status = Number(head.slice(9, 12));
      const cl = lines.find((l) => /^content-length:/i.test(l));
      let body: Buffer | null = null;
      if (cl !== undefined) {
        const n = Number(cl.split(':')[1]);
        if (wire.length >= n) body = wire.subarray(0, n);
      } else if (lines.some((l) => /^transfer-encoding:.*chunked/i.test(l))) body = dechunk(wire);
      else if (status === 204 || status === 304) body = Buffer.alloc(0);
      if (body === null) return;
      clearTimeout(timer);
      s.off('data', onData);
      resolve({ head, lines, status, wire, body });
    };
    s.on('data', onData);
  });
}

/** The data of a complete chunked body, or null while it is not complete. */
function dechunk(wire: Buffer): Buffer | null {
  const out: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = wire.indexOf('\r\n', i);
    if (eol < 0) return null;
    const n = parseInt(wire.subarray(i, eol).toString('latin1'), 16);
    if (n === 0) return wire.length >= eol + 4 ? Buffer.concat(out) : null;
    if (wire.length < eol + 2 + n + 2) return null;
    out.push(wire.subarray(eol + 2, eol + 2 + n));
    i = eol + 2 + n + 2;
  }
}

const KEY = newApiKey('codings');
const teLines = (r: Raw): string[] => r.lines.filter((l) => /^transfer-encoding:/i.test(l)).map((l) => l.slice(18).trim());

for (const which of ['h1', 'undici'] as const) {
  t.test(`UPSTREAM_CLIENT=${which}`, async (t) => {
    const upstream = await rawUpstream(t);
    const sc = await startTestSidecar(t, {
      upstream,
      quotas: [fixedQuota(keySubject(KEY), 100_000)],
      env: { UPSTREAM_CLIENT: which, UPSTREAM_TIMEOUT: '2s' },
    });
    // One client connection for every request: each answer must leave it usable for the next.
    const s = await openSocket(sc.sidecar.port);
    t.teardown(() => void s.destroy());
    const get = (path: string, method = 'GET'): Promise<Raw> => {
      const r = readOne(s);
      s.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\n`);
      return r;
    };

    for (const path of ['/v1/gzip-chunked', '/v1/two-lines']) {
      const r = await get(path);
      t.equal(r.status, 200, `${path}: relayed`);
      t.same(teLines(r), ['gzip', 'chunked'], `${path}: the client reads Transfer-Encoding: gzip, chunked, in that order`);
      t.notOk(
        r.lines.some((l) => /^content-length:/i.test(l)),
        `${path}: no Content-Length`,
      );
      t.equal(r.body.toString('hex'), GZ.toString('hex'), `${path}: the gzip bytes exactly as the upstream sent them`);
    }

    const empty = await get('/v1/gzip-chunked-empty');
    t.same([empty.status, teLines(empty), empty.body.length], [200, [], 0], 'no content: Content-Length 0 and no coding');
    t.ok(
      empty.lines.some((l) => /^content-length: 0$/i.test(l)),
      'Content-Length: 0',
    );

    const plain = await get('/v1/chunked');
    t.same([teLines(plain), plain.body.toString()], [['chunked'], 'ok'], 'plain chunked: the one Transfer-Encoding uWS writes');

    for (const path of ['/v1/gzip-chunked-cl', '/v1/cl-chunked', '/v1/chunked-gzip', '/v1/gzip-only']) {
      const r = await get(path);
      t.equal(r.status, 502, `${path}: 502`);
      t.match(r.body.toString(), /"code":"upstream_bad_response"/, `${path}: upstream_bad_response`);
      t.same(teLines(r), [], `${path}: no Transfer-Encoding`);
    }

    // HEAD: the GET's head without a body; no coding is announced for a body that is not sent.
    const head = await (async () => {
      const r = new Promise<string>((resolve) => {
        let buf = '';
        const on = (d: Buffer): void => {
          buf += d.toString('latin1');
          if (buf.includes('\r\n\r\n')) {
            s.off('data', on);
            resolve(buf);
          }
        };
        s.on('data', on);
      });
      s.write(`HEAD /v1/gzip-chunked HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\n`);
      return r;
    })();
    t.match(head, /^HTTP\/1\.1 200 /, 'HEAD: 200');
    t.notMatch(head, /transfer-encoding: gzip/i, 'HEAD: no coding announced');

    const after = await get('/v1/chunked');
    t.equal(after.body.toString(), 'ok', 'the client connection still serves');
  });
}
