// @tier: pure
/**
 * HEAD on the wire (RFC 9110 §9.3.2): every answer the sidecar makes itself to a HEAD carries the
 * status and headers a GET gets, its Content-Length included (as nginx answers), and not one body
 * byte; a proxied HEAD relays the upstream's head and no body, whatever framing the upstream used.
 *
 * Each case is raw bytes on one connection: the HEAD, then, once its answer has arrived, a GET on
 * the same connection. Everything the client receives must split into exactly the HEAD's head
 * followed by the GET's complete response: a body after the HEAD's head would be read as the start
 * of the next response (issue 23, item 2: `HEAD /nothere` got 183 bytes of problem+json after its
 * head). Refusals that close the connection are checked for the head alone, then the close.
 */
import t, { type Test } from 'tap';
import { Buffer } from 'node:buffer';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { freePort } from '../harness/ports.js';
import { accessClaims, sign } from '../harness/tokens.js';
import { waitFor } from '../harness/wait.js';
import { startRawUpstream } from './fixtures/raw-upstream.js';
import { openSocket, readUntilClose } from './fixtures/raw.js';
import { fixedQuota, keySubject, newApiKey, startTestSidecar } from './fixtures/sidecar.js';

const up = await startRawUpstream(t);

/**
 * An upstream that answers by the end of the path, so the proxied HEAD cases control the
 * upstream's framing: `…/cl` a Content-Length of 1234 (the body only to GET), `…/chunked` chunked
 * encoding (a chunk only to GET), `…/liar` a HEAD answered WITH a 5-byte body (an upstream that
 * breaks the rule); under `/slow` it never answers. Requests are split on the blank line (these
 * cases send no bodies).
 */
async function startFramingUpstream(t: Test): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
    let buf = '';
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      let end: number;
      while ((end = buf.indexOf('\r\n\r\n')) >= 0) {
        const head = buf.slice(0, end);
        buf = buf.slice(end + 4);
        const [method, target] = head.split(' ');
        seen.push(`${method} ${target}`);
        const isHead = method === 'HEAD';
        if (target!.startsWith('/slow')) continue;
        if (target!.endsWith('/cl')) {
          s.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1234\r\n\r\n${isHead ? '' : 'x'.repeat(1234)}`);
        } else if (target!.endsWith('/chunked')) {
          s.write(
            `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n${isHead ? '' : '5\r\nhello\r\n0\r\n\r\n'}`,
          );
        } else if (target!.endsWith('/liar')) {
          s.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello');
        } else {
          s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const framing = await startFramingUpstream(t);
const deadPort = await freePort();
const KEY = newApiKey('head');
const SPENT = newApiKey('spent');
const sc = await startTestSidecar(t, {
  upstream: up.url,
  quotas: [fixedQuota(keySubject(KEY), 1_000_000), fixedQuota(keySubject(SPENT), 1)],
  env: {
    LIMITER_ROUTES: [
      `/v1=${up.url}`,
      `/api/v1=${up.url}`,
      `/f=${framing.url}`,
      `/dead=http://127.0.0.1:${deadPort}`,
      `/slow=${framing.url}`,
    ].join(','),
    LIMITER_MAX_BODY: '16kb',
    LIMITER_MAX_URL: '1kb',
    UPSTREAM_TIMEOUT: '500ms',
    UPSTREAM_CONNECT_TIMEOUT: '1s',
  },
});
const PORT = sc.sidecar.port;
const ALICE = sign(accessClaims({ nowMs: sc.clock.now() }, { sub: 'alice', user_id: 'alice' }), { key: sc.key });

const request = (method: string, target: string, headers: string[]): string =>
  [`${method} ${target} HTTP/1.1`, 'Host: head.test', ...headers].join('\r\n') + '\r\n\r\n';

interface Head {
  status: number;
  /** Lower-cased names with their values, in order, Date left out (it may tick between the two). */
  fields: Array<[string, string]>;
  text: string;
}

function parseHead(text: string): Head {
  const lines = text.split('\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(lines[0] ?? '')?.[1] ?? 0);
  const fields: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    const c = line.indexOf(':');
    const name = line.slice(0, c).toLowerCase();
    if (name !== 'date') fields.push([name, line.slice(c + 1).trim()]);
  }
  return { status, fields, text };
}

const value = (h: Head, name: string): string | undefined => h.fields.find(([k]) => k === name)?.[1];
const CHARGED = new Set(['x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit']);
/**
 * The fields as a sorted list, for comparing two heads whose fields uWS writes in different orders.
 * `charged`: both requests were admitted and each took a token, so the figures that count down
 * are compared by name only.
 */
const sorted = (h: Head, charged = false): string[] =>
  h.fields.map(([k, v]) => (charged && CHARGED.has(k) ? `${k}: …` : `${k}: ${v}`)).sort();

/** Collects bytes on `s` and resolves once `done(bytes)` holds, or rejects after `ms`. */
function collect(s: Socket): { bytes: () => Buffer; until: (done: (b: Buffer) => boolean, what: string, ms?: number) => Promise<Buffer> } {
  const chunks: Buffer[] = [];
  let closed = false;
  s.on('data', (d: Buffer) => chunks.push(d));
  s.on('close', () => (closed = true));
  s.on('error', () => (closed = true));
  const bytes = (): Buffer => Buffer.concat(chunks);
  return {
    bytes,
    until: async (done, what, ms = 5_000) => {
      await waitFor(() => done(bytes()) || closed, { timeoutMs: ms, what });
      return bytes();
    },
  };
}

/** A complete response at the start of `raw` (Content-Length or chunked body, or a bodiless status), or undefined. */
function completeResponse(raw: string): { head: Head; body: string; rest: string } | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = parseHead(raw.slice(0, end));
  const after = raw.slice(end + 4);
  const cl = value(head, 'content-length');
  if (cl !== undefined) {
    if (after.length < Number(cl)) return undefined;
    return { head, body: after.slice(0, Number(cl)), rest: after.slice(Number(cl)) };
  }
  if (value(head, 'transfer-encoding') === 'chunked') {
    const last = after.indexOf('0\r\n\r\n');
    if (last < 0) return undefined;
    return { head, body: after.slice(0, last + 5), rest: after.slice(last + 5) };
  }
  return { head, body: '', rest: after };
}

/**
 * HEAD then, once its head has arrived, GET on the same connection: returns the HEAD's head and
 * the GET's response, and asserts nothing else was received (no body after the HEAD's head).
 */
async function headThenGet(
  t: Test,
  target: string,
  headers: string[],
  extra = '',
  port = PORT,
): Promise<{ head: Head; get: { head: Head; body: string } }> {
  const s = await openSocket(port);
  const c = collect(s);
  try {
    s.write(request('HEAD', target, headers) + extra);
    const first = (await c.until((b) => b.includes('\r\n\r\n'), `the answer to HEAD ${target}`)).toString('latin1');
    const headEnd = first.indexOf('\r\n\r\n');
    t.ok(headEnd > 0, 'the HEAD was answered');
    s.write(request('GET', target, headers) + extra);
    const all = await c.until(
      (b) => completeResponse(b.toString('latin1').slice(headEnd + 4)) !== undefined,
      `the answer to GET ${target} behind the HEAD`,
    );
    const text = all.toString('latin1');
    const head = parseHead(text.slice(0, headEnd));
    const get = completeResponse(text.slice(headEnd + 4));
    t.ok(get, 'the GET behind it parses as a complete response right after the HEAD’s head');
    t.match(
      text.slice(headEnd + 4, headEnd + 13),
      /^HTTP\/1\.1 /,
      'the HEAD’s head is followed directly by the next status line (no body)',
    );
    t.equal(get?.rest, '', 'nothing else on the connection');
    return { head, get: { head: get?.head ?? parseHead(''), body: get?.body ?? '' } };
  } finally {
    s.destroy();
  }
}

/** A HEAD's answer is the GET's, minus the body: same status, same fields, Content-Length = the GET's body length. */
function sameAsGet(t: Test, head: Head, get: { head: Head; body: string }, status: number, code?: string, charged = false): void {
  t.equal(head.status, status, `HEAD: ${status}`);
  t.equal(get.head.status, status, `GET: ${status}`);
  t.equal(
    value(head, 'content-length'),
    String(Buffer.byteLength(get.body, 'latin1')),
    'HEAD’s Content-Length is the length of the GET’s body',
  );
  t.same(sorted(head, charged), sorted(get.head, charged), 'HEAD has the GET’s headers');
  if (code) t.equal((JSON.parse(get.body) as { code: string }).code, code, `GET: problem ${code}`);
}

t.test('HEAD refused without closing: GET’s status and headers, no body, and the next request on the connection reads right', async (t) => {
  const cases: Array<{ what: string; target: string; headers: string[]; status: number; code: string; extra?: string; charged?: boolean }> =
    [
      { what: '401 credentials_required', target: '/v1/x', headers: [], status: 401, code: 'credentials_required' },
      { what: '401 invalid_token', target: '/v1/x', headers: ['Authorization: Bearer not-a-token'], status: 401, code: 'invalid_token' },
      {
        what: '403 forbidden (another user’s path)',
        target: '/api/v1/users/bob/profile',
        headers: [`Authorization: Bearer ${ALICE}`],
        status: 403,
        code: 'forbidden',
      },
      { what: '404 no_route', target: '/nothere', headers: [`X-API-Key: ${KEY}`], status: 404, code: 'no_route' },
      {
        what: '413 body_too_large (the declared body is sent, then the next request)',
        target: '/v1/x',
        headers: [`X-API-Key: ${KEY}`, 'Content-Length: 16385'],
        status: 413,
        code: 'body_too_large',
        extra: 'b'.repeat(16385),
      },
      {
        what: '429 unknown key (the decoy)',
        target: '/v1/x',
        headers: [`X-API-Key: ${newApiKey('nobody')}`],
        status: 429,
        code: 'rate_limited',
      },
      {
        what: '502 upstream_unreachable (admitted: each request takes a token)',
        target: '/dead/x',
        headers: [`X-API-Key: ${KEY}`],
        status: 502,
        code: 'upstream_unreachable',
        charged: true,
      },
      {
        what: '504 upstream_timeout (admitted: each request takes a token)',
        target: '/slow/x',
        headers: [`X-API-Key: ${KEY}`],
        status: 504,
        code: 'upstream_timeout',
        charged: true,
      },
    ];
  for (const c of cases) {
    await t.test(c.what, async (t) => {
      const { head, get } = await headThenGet(t, c.target, c.headers, c.extra);
      sameAsGet(t, head, get, c.status, c.code, c.charged);
    });
  }
});

t.test('HEAD by a key whose quota is spent: the 429 with its rate-limit headers and Retry-After, no body', async (t) => {
  const before = up.requests.length;
  // The one token goes to this GET on its own connection; the HEAD and GET below are both refused.
  const s = await openSocket(PORT);
  const c = collect(s);
  s.write(request('GET', '/v1/spend', [`X-API-Key: ${SPENT}`]));
  await c.until((b) => completeResponse(b.toString('latin1')) !== undefined, 'the GET that spends the quota');
  s.destroy();
  t.equal(up.requests.length, before + 1, 'the first GET was forwarded');
  const { head, get } = await headThenGet(t, '/v1/x', [`X-API-Key: ${SPENT}`]);
  sameAsGet(t, head, get, 429, 'rate_limited');
  t.match(value(head, 'retry-after') ?? '', /^\d+$/, 'Retry-After on the HEAD');
  t.equal(value(head, 'x-ratelimit-remaining'), '0', 'X-RateLimit-Remaining on the HEAD');
  t.equal(up.requests.length, before + 1, 'neither the HEAD nor the GET reached the upstream');
});

t.test('HEAD refused with Connection: close: the head alone, the GET’s Content-Length, then the close', async (t) => {
  const cases: Array<{ what: string; target: string; headers: string[]; status: number; code: string }> = [
    { what: '414 uri_too_long', target: `/v1/${'a'.repeat(1100)}`, headers: [`X-API-Key: ${KEY}`], status: 414, code: 'uri_too_long' },
    { what: '400 bad_request_target', target: '/v1/a;b', headers: [`X-API-Key: ${KEY}`], status: 400, code: 'bad_request_target' },
    {
      what: '400 bad_framing (two Hosts)',
      target: '/v1/x',
      headers: ['Host: other.test', `X-API-Key: ${KEY}`],
      status: 400,
      code: 'bad_framing',
    },
    {
      what: '400 duplicate_credentials',
      target: '/v1/x',
      headers: [`X-API-Key: ${KEY}`, `X-API-Key: ${KEY}`],
      status: 400,
      code: 'duplicate_credentials',
    },
    {
      what: '431 headers_too_large',
      target: '/v1/x',
      headers: [`X-API-Key: ${KEY}`, `X-Big: ${'b'.repeat(20_000)}`],
      status: 431,
      code: 'headers_too_large',
    },
  ];
  for (const c of cases) {
    await t.test(c.what, async (t) => {
      const before = up.requests.length;
      const readOne = async (method: string) => {
        const s = await openSocket(PORT);
        const r = readUntilClose(s, 8_000);
        s.write(request(method, c.target, c.headers));
        return r;
      };
      const get = await readOne('GET');
      const g = completeResponse(get.bytes.toString('latin1'));
      t.equal(g?.head.status, c.status, `GET: ${c.status}`);
      t.equal((JSON.parse(g?.body ?? '{}') as { code?: string }).code, c.code, `GET: ${c.code}`);
      const head = await readOne('HEAD');
      const text = head.bytes.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      t.ok(end > 0, 'HEAD: a head arrived');
      t.equal(text.length, end + 4, `HEAD: not one byte after the head (got ${text.length - end - 4})`);
      const h = parseHead(text.slice(0, end));
      t.equal(h.status, c.status, `HEAD: ${c.status}`);
      t.equal(value(h, 'connection'), 'close', 'HEAD: Connection: close');
      t.equal(value(h, 'content-length'), String(g?.body.length), 'HEAD: the GET’s Content-Length');
      t.same(sorted(h), sorted(g?.head ?? parseHead('')), 'HEAD: the GET’s headers');
      t.equal(head.ended, 'close', 'HEAD: the sidecar closed the connection');
      t.ok(head.ms < 5_000, `HEAD: closed at once, not by an idle timeout (${head.ms} ms)`);
      t.equal(up.requests.length, before, 'nothing reached the upstream');
    });
  }
});

t.test('admitted HEAD: the upstream’s head and no body, whatever the upstream’s framing', async (t) => {
  await t.test('upstream answers with Content-Length: relayed, no body; the GET behind it gets its 1234 bytes', async (t) => {
    const { head, get } = await headThenGet(t, '/f/v1/cl', [`X-API-Key: ${KEY}`]);
    t.equal(head.status, 200);
    t.equal(value(head, 'content-length'), '1234', 'the upstream’s Content-Length');
    t.equal(get.head.status, 200);
    t.equal(get.body, 'x'.repeat(1234), 'the GET’s body, whole');
    t.ok(framing.seen.includes('HEAD /f/v1/cl'), 'the upstream saw the HEAD');
  });
  await t.test('upstream answers with chunked encoding: relayed without a body or a chunk; the GET gets its chunks', async (t) => {
    const { head, get } = await headThenGet(t, '/f/v1/chunked', [`X-API-Key: ${KEY}`]);
    t.equal(head.status, 200);
    t.equal(value(head, 'transfer-encoding'), undefined, 'no Transfer-Encoding on a bodiless HEAD answer');
    t.equal(get.head.status, 200);
    t.match(get.body, /hello/, 'the GET’s chunked body');
    t.ok(framing.seen.includes('HEAD /f/v1/chunked'), 'the upstream saw the HEAD');
  });
  await t.test('an upstream that sends a body to HEAD: the client still gets no body byte', async (t) => {
    const s = await openSocket(PORT);
    const c = collect(s);
    s.write(request('HEAD', '/f/v1/liar', [`X-API-Key: ${KEY}`]));
    const got = (await c.until((b) => b.includes('\r\n\r\n'), 'the answer to HEAD /f/v1/liar')).toString('latin1');
    // A second request on the connection is answered only after the first is complete: its answer
    // arriving directly after the head proves no body byte was sent in between.
    s.write(request('GET', '/f/v1/ok', [`X-API-Key: ${KEY}`]));
    const all = (
      await c.until((b) => completeResponse(b.toString('latin1').slice(got.indexOf('\r\n\r\n') + 4)) !== undefined, 'the GET behind it')
    ).toString('latin1');
    s.destroy();
    const end = all.indexOf('\r\n\r\n');
    // undici may read the stray body as a broken next response and fail the exchange (502): either
    // way the answer has no body.
    const status = parseHead(all.slice(0, end)).status;
    t.ok(status === 200 || status === 502, `HEAD: 200 relayed or 502 (got ${status})`);
    t.match(all.slice(end + 4, end + 13), /^HTTP\/1\.1 /, 'the next status line follows the head directly');
  });
});

t.test('the admin port answers HEAD without a body too (/healthz, and a 404)', async (t) => {
  const admin = sc.sidecar.adminPort;
  const health = await headThenGet(t, '/healthz', [], '', admin);
  sameAsGet(t, health.head, health.get, 200);
  const missing = await headThenGet(t, '/nothere', [], '', admin);
  sameAsGet(t, missing.head, missing.get, 404, 'not_found');
});
