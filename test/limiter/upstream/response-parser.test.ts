// @tier: pure
/**
 * limiter/upstream/response-parser.ts on exact bytes: every framing (Content-Length, chunked with
 * extensions and trailers, none for HEAD/204/304, 1xx interim heads, close-delimited), each fed
 * whole, split at every byte boundary and one byte at a time; and every response it must refuse
 * (smuggling vectors, limits, malformed lines).
 */
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { Buffer } from 'node:buffer';
import { Framing, ParseError, ResponseParser, type ResponseSink } from '../../../limiter/upstream/response-parser.js';

interface Seen {
  heads: Array<{ status: number; reason: string; headers: string[]; keepAlive: boolean; framing: Framing }>;
  body: Buffer;
  ended: number;
  /** Bytes left after the response ended (the next response's, or junk). */
  rest: Buffer;
}

/** Feeds `parts` in order (the sink never pauses); EOF after them when `eof`. */
function run(parts: Buffer[], opts: { head?: boolean; eof?: boolean; max?: number } = {}): Seen {
  const seen: Seen = { heads: [], body: Buffer.alloc(0), ended: 0, rest: Buffer.alloc(0) };
  const bodies: Buffer[] = [];
  const sink: ResponseSink = {
    head(status, reason, headers, keepAlive, framing) {
      seen.heads.push({ status, reason, headers: headers.map((h) => h.toString('latin1')), keepAlive, framing });
    },
    body(chunk) {
      bodies.push(Buffer.from(chunk));
      return true;
    },
    end() {
      seen.ended++;
    },
  };
  const p = new ResponseParser(sink, opts.max ?? 16 * 1024);
  p.reset(opts.head ?? false);
  const rest: Buffer[] = [];
  for (const part of parts) {
    if (seen.ended > 0) {
      rest.push(part);
      continue;
    }
    const used = p.execute(part);
    if (used < part.length) rest.push(part.subarray(used));
  }
  if (opts.eof) p.finish();
  seen.body = Buffer.concat(bodies);
  seen.rest = Buffer.concat(rest);
  return seen;
}

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

/** Every way to cut `bytes` in two, and one byte at a time. */
function splits(bytes: Buffer): Buffer[][] {
  const out: Buffer[][] = [[bytes]];
  for (let i = 1; i < bytes.length; i++) out.push([bytes.subarray(0, i), bytes.subarray(i)]);
  out.push(Array.from(bytes, (x) => Buffer.from([x])));
  return out;
}

/** Asserts `check` for the response fed whole, split at every boundary, and byte by byte. */
function everySplit(t: Test, bytes: Buffer, check: (s: Seen) => void, opts: { head?: boolean; eof?: boolean } = {}): void {
  let failed = 0;
  for (const parts of splits(bytes)) {
    const s = run(parts, opts);
    try {
      check(s);
    } catch (err) {
      if (failed++ === 0) t.fail(`split ${parts.map((p) => p.length).join('+')}: ${(err as Error).message}`);
    }
  }
  t.equal(failed, 0, `the same reading at all ${bytes.length + 1} ways of feeding it`);
}

function expectEq(actual: unknown, expected: unknown, what: string): void {
  if (JSON.stringify(actual) !== JSON.stringify(expected))
    throw new Error(`${what}: ${JSON.stringify(actual)} ≠ ${JSON.stringify(expected)}`);
}

function refused(t: Test, bytes: Buffer, pattern: RegExp, opts: { head?: boolean; eof?: boolean; max?: number } = {}): void {
  for (const parts of [[bytes], Array.from(bytes, (x) => Buffer.from([x]))]) {
    t.throws(() => run(parts, opts), pattern, `refused (${parts.length === 1 ? 'whole' : 'byte by byte'})`);
    try {
      run(parts, opts);
    } catch (err) {
      t.type(err, ParseError, 'as a ParseError');
    }
  }
}

t.test('Content-Length: the head, the body, the end; bytes after it are left to the caller', async (t) => {
  const wire = b('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-A:  v  \r\n\r\nhelloHTTP/1.1');
  everySplit(t, wire, (s) => {
    expectEq(
      s.heads,
      [
        {
          status: 200,
          reason: 'OK',
          headers: ['Content-Type', 'text/plain', 'Content-Length', '5', 'X-A', 'v'],
          keepAlive: true,
          framing: Framing.Length,
        },
      ],
      'head',
    );
    expectEq(s.body.toString('latin1'), 'hello', 'body');
    expectEq(s.ended, 1, 'ended once');
    expectEq(s.rest.toString('latin1'), 'HTTP/1.1', 'the rest');
  });
});

t.test('chunked, with extensions and trailers, split at every byte boundary', async (t) => {
  const wire = b(
    'HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n' +
      '5;ext=1\r\nhello\r\n' +
      'A\r\n, world!!!\r\n' +
      '1 ; a="b"\r\n.\r\n' +
      '0\r\nX-Checksum: abc\r\nX-Other: d\r\n\r\n',
  );
  everySplit(t, wire, (s) => {
    expectEq(s.heads.length, 1, 'one head');
    expectEq(s.heads[0]!.status, 201, 'status');
    expectEq(s.heads[0]!.framing, Framing.Chunked, 'chunked');
    expectEq(s.body.toString('latin1'), 'hello, world!!!.', 'body');
    expectEq(s.ended, 1, 'ended once, after the trailers');
    expectEq(s.rest.length, 0, 'nothing left');
  });
  everySplit(t, b('HTTP/1.1 200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n0\r\n\r\n'), (s) => {
    expectEq([s.body.length, s.ended], [0, 1], 'an empty chunked body (coding name in any case)');
  });
});

t.test('no body for HEAD, 204 and 304, whatever they declare', async (t) => {
  everySplit(
    t,
    b('HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n'),
    (s) => {
      expectEq([s.heads[0]!.framing, s.ended, s.body.length], [Framing.None, 1, 0], 'HEAD');
    },
    { head: true },
  );
  for (const status of ['204 No Content', '304 Not Modified']) {
    everySplit(t, b(`HTTP/1.1 ${status}\r\nContent-Length: 10\r\n\r\nNEXT`), (s) => {
      expectEq([s.heads[0]!.framing, s.ended, s.body.length, s.rest.toString()], [Framing.None, 1, 0, 'NEXT'], status);
    });
  }
  everySplit(t, b('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'), (s) => {
    expectEq([s.heads[0]!.framing, s.ended], [Framing.None, 1], 'Content-Length: 0');
  });
});

t.test('1xx interim responses are read and dropped; the final response follows', async (t) => {
  const wire = b(
    'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  );
  everySplit(t, wire, (s) => {
    expectEq(
      s.heads.map((h) => h.status),
      [200],
      'only the final head',
    );
    expectEq(s.body.toString(), 'ok', 'body');
  });
  refused(t, b('HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n'), /101/);
});

t.test('keep-alive: Connection: close, HTTP/1.0, and a body delimited by the close', async (t) => {
  everySplit(t, b('HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 1\r\n\r\nx'), (s) => {
    expectEq(s.heads[0]!.keepAlive, false, 'Connection: close (in a list, any case)');
  });
  everySplit(t, b('HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx'), (s) => {
    expectEq(s.heads[0]!.keepAlive, false, 'HTTP/1.0 without keep-alive');
  });
  everySplit(t, b('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx'), (s) => {
    expectEq(s.heads[0]!.keepAlive, true, 'HTTP/1.0 with keep-alive');
  });
  everySplit(
    t,
    b('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end'),
    (s) => {
      expectEq(
        [s.heads[0]!.framing, s.heads[0]!.keepAlive, s.body.toString(), s.ended],
        [Framing.Close, false, 'until the end', 1],
        'close-delimited',
      );
    },
    { eof: true },
  );
});

t.test('transfer codings besides chunked: never decoded, the body framed by the last coding (RFC 9112 §6.3)', async (t) => {
  // chunked last: the body is chunked; gzip is the content's, handed on as it came.
  const gz = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x0d, 0x0a, 0x30, 0x0d, 0x0a]);
  const chunkedLast = Buffer.concat([
    b('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n'),
    b(`${gz.length.toString(16)}\r\n`),
    gz,
    b('\r\n0\r\n\r\nNEXT'),
  ]);
  everySplit(t, chunkedLast, (s) => {
    expectEq([s.heads[0]!.framing, s.heads[0]!.keepAlive, s.ended], [Framing.Chunked, true, 1], 'chunked framing, keep-alive');
    expectEq(s.body.toString('hex'), gz.toString('hex'), 'the gzip bytes undecoded (CRLF 0 CRLF inside them included)');
    expectEq(s.heads[0]!.headers, ['Transfer-Encoding', 'gzip, chunked'], 'the field handed on as it came');
    expectEq(s.rest.toString(), 'NEXT', 'bytes after the last chunk are left to the caller');
  });
  // The codings on two lines, in any case, with empty list elements and parameters on the others.
  everySplit(
    t,
    b('HTTP/1.1 200 OK\r\nTransfer-Encoding: x-custom;level=1 , gzip,\r\ntransfer-encoding: ,CHUNKED\r\n\r\n2\r\nab\r\n0\r\n\r\n'),
    (s) => {
      expectEq([s.heads[0]!.framing, s.body.toString(), s.ended], [Framing.Chunked, 'ab', 1], 'chunked last across two lines');
    },
  );
  // chunked not last, or absent: the body runs to the close, chunk-size lines and all.
  for (const te of ['chunked, gzip', 'gzip', 'Chunked , x-custom']) {
    everySplit(
      t,
      b(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${te}\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n`),
      (s) => {
        expectEq(
          [s.heads[0]!.framing, s.heads[0]!.keepAlive, s.body.toString(), s.ended],
          [Framing.Close, false, '5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n', 1],
          `${te}: close-delimited, every byte is body`,
        );
      },
      { eof: true },
    );
  }
  // HTTP/1.0 with Transfer-Encoding: faulty framing, the connection is closed after it (RFC 9112 §6.1).
  everySplit(t, b('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n'), (s) => {
    expectEq([s.heads[0]!.framing, s.heads[0]!.keepAlive, s.body.toString()], [Framing.Chunked, false, 'x'], 'HTTP/1.0: not reused');
  });
  // No body for HEAD, 204, 304 whatever the codings say.
  everySplit(
    t,
    b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n'),
    (s) => expectEq([s.heads[0]!.framing, s.ended], [Framing.None, 1], 'HEAD'),
    { head: true },
  );
});

t.test('a response cut short is an error at EOF', async (t) => {
  for (const wire of [
    'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n',
    'HTTP/1.1 200 OK\r\nContent-Le',
    '',
  ])
    t.throws(() => run([b(wire)], { eof: true }), ParseError, `refused: ${JSON.stringify(wire.slice(0, 40))}…`);
});

t.test('smuggling vectors and malformed heads are refused', async (t) => {
  refused(t, b('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!'), /two different Content-Length/);
  refused(
    t,
    b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n'),
    /both Transfer-Encoding and Content-Length/,
  );
  refused(
    t,
    b('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
    /both Transfer-Encoding and Content-Length/,
  );
  refused(
    t,
    b('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n'),
    /both Transfer-Encoding and Content-Length/,
  );
  refused(
    t,
    b('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked, gzip\r\n\r\nhello'),
    /both Transfer-Encoding and Content-Length/,
  );
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n'), /more than once/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip, chunked\r\n\r\n'), /more than once/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;x=1\r\n\r\n'), /chunked with parameters/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n'), /no coding/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: , ,\r\n\r\n'), /no coding/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip chunked\r\n\r\n'), /not a token/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: "chunked"\r\n\r\n'), /not a token/);
  refused(t, b('HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello'), /not a number/);
  refused(t, b('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'), /not a number/);
  refused(t, b('HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello'), /not a token/);
  refused(t, b('HTTP/1.1 200 OK\r\n Content-Length: 5\r\n\r\nhello'), /obs-fold/);
  refused(t, b('HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n'), /obs-fold/);
  refused(t, b('HTTP/1.1 200 OK\nContent-Length: 0\n\n\r\n\r\n'), /CRLF|control character in the status line/);
  refused(t, b('HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n'), /control character|CRLF/);
  refused(t, b('HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n'), /control character/);
  refused(t, b('HTTP/2.0 200 OK\r\n\r\n'), /HTTP\/1/);
  refused(t, b('HTTP/1.1 20x OK\r\n\r\n'), /three digits/);
  refused(t, b('ICY 200 OK\r\n\r\n'), /HTTP\/1/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'), /hexadecimal/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX'), /CRLF/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n'), /CRLF/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000\r\n'), /too large/);
  refused(t, b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\nb\r\n\r\n'), /control character|CRLF/);
});

t.test('the head and trailer limits', async (t) => {
  const big = 'x'.repeat(2000);
  refused(t, b(`HTTP/1.1 200 OK\r\nX-Big: ${big}\r\n\r\n`), /larger than 1024 bytes/, { max: 1024 });
  // Refused as soon as the limit is passed, not only once the head ends.
  t.throws(() => run([b(`HTTP/1.1 200 OK\r\nX-Big: ${big}`)], { max: 1024 }), /larger than 1024/, 'before its end');
  const ok = run([b(`HTTP/1.1 200 OK\r\nX-Big: ${'y'.repeat(900)}\r\nContent-Length: 0\r\n\r\n`)], { max: 1024 });
  t.equal(ok.ended, 1, 'a head under the limit is read');
  refused(t, b(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: ${big}\r\n\r\n`), /trailer section is larger/, {
    max: 1024,
  });
});

t.test('property: any body, chunked any way and fed in any pieces, comes out whole', async () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 300 }),
      fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 10 }),
      fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 20 }),
      fc.boolean(),
      (bodyBytes, chunkSizes, feedSizes, chunked) => {
        const body = Buffer.from(bodyBytes);
        let wire: Buffer;
        if (chunked) {
          const parts: Buffer[] = [b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n')];
          let off = 0;
          let k = 0;
          while (off < body.length) {
            const n = Math.min(chunkSizes[k++ % chunkSizes.length]!, body.length - off);
            parts.push(b(`${n.toString(16)}\r\n`), body.subarray(off, off + n), b('\r\n'));
            off += n;
          }
          parts.push(b('0\r\n\r\n'));
          wire = Buffer.concat(parts);
        } else wire = Buffer.concat([b(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
        const feeds: Buffer[] = [];
        let off = 0;
        let k = 0;
        while (off < wire.length) {
          const n = Math.min(feedSizes[k++ % feedSizes.length]!, wire.length - off);
          feeds.push(wire.subarray(off, off + n));
          off += n;
        }
        const s = run(feeds);
        return s.ended === 1 && s.body.equals(body) && s.rest.length === 0;
      },
    ),
    { numRuns: 300 },
  );
});

t.test('a sink that pauses gets the rest when the caller feeds it again; the end waits for it', async (t) => {
  const wire = b('HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabcdef');
  const got: string[] = [];
  let ended = 0;
  const p = new ResponseParser(
    {
      head() {},
      body(c) {
        got.push(c.toString());
        return false;
      },
      end() {
        ended++;
      },
    },
    1024,
  );
  p.reset(false);
  const cut = wire.indexOf('\r\n\r\n') + 4 + 3;
  const used = p.execute(wire.subarray(0, cut));
  t.same(got, ['abc'], 'the first piece');
  t.equal(used, cut, 'read to the end of what it was given');
  p.execute(wire, cut);
  t.same(got, ['abc', 'def'], 'the last piece');
  t.equal(ended, 0, 'the end waits: the sink paused on the last piece');
  p.execute(Buffer.alloc(0));
  t.equal(ended, 1, 'told on the next feed');
  t.ok(p.done);
});
