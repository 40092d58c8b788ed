/**
 * The sidecar's edge, byte by byte: raw requests on node:net sockets against an in-process sidecar
 * whose upstream is a raw node:net server recording exactly the bytes it receives
 * (fixtures/raw-upstream.ts). Every case asserts both sides: what the client got (status,
 * problem+json code, `Connection: close`, how the connection ended) and what reached the upstream
 * (the exact request line and header bytes, or nothing at all).
 *
 * "Nothing reached the upstream" is never an absence observed after a sleep: a follow-up request on
 * a new connection is sent after the refusal and awaited at the upstream, and it must be the only
 * request recorded since the case began.
 *
 * Tests named "known limitation (uWS)" or "known limitation (undici)" pin what happens today where
 * the sidecar's own code never sees the request (or the response): they fail when that changes, so
 * the README's list of limitations can be updated with them.
 */
import t, { type Test } from 'tap';
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { freePort } from '../harness/ports.js';
import { accessClaims, sign } from '../harness/tokens.js';
import { headerValue, headerValues, startRawUpstream, type RawSeen } from './fixtures/raw-upstream.js';
import { openSocket, rawExchange, readResponses, splitResponses, type ParsedResponse, type RawStream } from './fixtures/raw.js';
import {
  fixedQuota,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  SERVICE_SECRET,
  startTestSidecar,
  type TestSidecar,
} from './fixtures/sidecar.js';

const up = await startRawUpstream(t);
const KEY = newApiKey('edge');
/** Keys with a small quota, one per "charged nothing" check. */
const SMALL = { h431: newApiKey('h431'), u414: newApiKey('u414'), b413: newApiKey('b413') };
const SMALL_BURST = 5;
const ROUTES = [`/v1=${up.url}`, `/api/v1=${up.url}`, `/pub=${up.url};auth=optional`, `/t=${up.url}`, `/big=${up.url};body=64kb`];
const sc = await startTestSidecar(t, {
  upstream: up.url,
  quotas: [fixedQuota(keySubject(KEY), 1_000_000), ...Object.values(SMALL).map((k) => fixedQuota(keySubject(k), SMALL_BURST))],
  env: {
    LIMITER_ROUTES: ROUTES.join(','),
    LIMITER_MAX_BODY: '16kb',
    LIMITER_IP_BURST: '1000000',
    UPSTREAM_TIMEOUT: '3s',
  },
});
const PORT = sc.sidecar.port;
const HOST = 'edge.test';
const ALICE = sign(accessClaims({ nowMs: sc.clock.now() }, { sub: 'alice', user_id: 'alice' }), { key: sc.key });

/** A request as wire text (latin1: `\xFF` is the byte 0xFF): lines joined with CRLF, the blank line, the body. */
const wire = (lines: string[], body = ''): string => lines.join('\r\n') + '\r\n\r\n' + body;
/** A request with Host and the test's API key. */
const withKey = (requestLine: string, extra: string[] = [], body = ''): string =>
  wire([requestLine, `Host: ${HOST}`, `X-API-Key: ${KEY}`, ...extra], body);
const asAlice = (requestLine: string): string => wire([requestLine, `Host: ${HOST}`, `Authorization: Bearer ${ALICE}`]);

/**
 * The header block the sidecar sends upstream for an API-key request from 127.0.0.1: `clientHeaders`
 * (lower-cased, in order) after host and connection, then the forwarding and subject headers, then
 * `undiciHeaders` (undici writes content-length last).
 */
function expectedHead(requestLine: string, clientHeaders: string[], undiciHeaders: string[] = []): string {
  return (
    [
      requestLine,
      `host: 127.0.0.1:${up.port}`,
      'connection: keep-alive',
      ...clientHeaders,
      'x-forwarded-for: 127.0.0.1',
      `x-forwarded-host: ${HOST}`,
      'x-forwarded-proto: http',
      `x-forwarded-port: ${PORT}`,
      `forwarded: for=127.0.0.1;host=${HOST};proto=http`,
      `x-subject: ${keySubject(KEY)}`,
      'x-subject-role: service',
      'x-subject-address: 127.0.0.1',
      `x-subject-secret: ${SERVICE_SECRET}`,
      ...undiciHeaders,
    ].join('\r\n') + '\r\n\r\n'
  );
}

function codeOf(r: ParsedResponse | undefined): string | undefined {
  try {
    return (JSON.parse(r?.body ?? '') as { code?: string }).code;
  } catch {
    return undefined;
  }
}

function isProblem(t: Test, r: ParsedResponse | undefined, status: number, code: string): void {
  t.equal(r?.status, status, `status ${status}`);
  t.match(r?.header('content-type') ?? '', /^application\/problem\+json/, 'problem+json');
  t.equal(codeOf(r), code, `code ${code}`);
}

/** Sends `bytes` on a new connection and reads ONE response (the connection may stay open). */
async function one(bytes: string | Buffer, port = PORT, timeoutMs = 5_000): Promise<ParsedResponse | undefined> {
  const s = await openSocket(port);
  const reading = readResponses(s, 1, timeoutMs);
  s.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
  return (await reading).responses[0];
}

let sentinels = 0;
/**
 * Asserts nothing reached the upstream since `before`: a follow-up request on a new connection is
 * awaited at the upstream and must be the only request recorded since.
 */
async function nothingForwarded(t: Test, before: number, what = 'nothing reached the upstream'): Promise<void> {
  const target = `/v1/sentinel-${++sentinels}`;
  const answered = one(withKey(`GET ${target} HTTP/1.1`));
  await up.waitForTarget(target);
  t.equal((await answered)?.status, 200, 'the follow-up request on a new connection is answered');
  t.same(
    up.requests.slice(before).map((r) => r.requestLine),
    [`GET ${target} HTTP/1.1`],
    what,
  );
}

/** A request the sidecar refuses and closes the connection after: one problem, `Connection: close`, a prompt close, nothing upstream. */
async function refusedAndClosed(
  t: Test,
  bytes: string,
  status: number,
  code: string,
  opts: { splitHeadMayDrop?: boolean } = {},
): Promise<RawStream> {
  const before = up.requests.length;
  const r = await rawExchange(PORT, bytes, 5_000);
  if (opts.splitHeadMayDrop && r.bytes.length === 0 && r.ended !== 'timeout') {
    // uWS closed the connection without a byte: the head reached it in more than one read, and a
    // head over 4 KiB that does is dropped before any sidecar code runs (limiter/README.md,
    // "Request heads over 4 KiB that arrive in more than one read get no answer"). Still nothing
    // may be forwarded (and the caller checks nothing was charged).
    t.comment(`the head arrived in more than one read: closed without an answer (${r.ended}), the known uWS limitation`);
    await nothingForwarded(t, before);
    return r;
  }
  const [first, ...rest] = splitResponses(r.bytes);
  isProblem(t, first, status, code);
  t.equal(first?.header('connection'), 'close', 'Connection: close');
  t.equal(r.ended, 'close', 'the sidecar closed the connection');
  t.ok(r.ms < 8_000, `closed by the sidecar, not by the idle timeout (${r.ms} ms)`);
  t.same(
    rest.map((x) => x.status),
    [],
    'nothing else was answered on the connection',
  );
  await nothingForwarded(t, before);
  return r;
}

/**
 * A malformed request with more bytes behind it in the same write: the sidecar's refusal waits a
 * turn (limiter/proxy.ts `refuseAndClose`), uWS closes the connection when it parses the next
 * request behind a pending response, so the client gets no answer at all, the connection closes
 * at once, and nothing (the hidden request above all) reaches the upstream.
 */
async function closedWithoutAnswer(t: Test, bytes: string): Promise<void> {
  const before = up.requests.length;
  const r = await rawExchange(PORT, bytes, 5_000);
  const responses = splitResponses(r.bytes);
  t.same(
    responses.map((x) => x.status),
    [],
    `no answer at all (got ${r.bytes.toString('latin1').slice(0, 200)})`,
  );
  t.equal(r.ended, 'close', 'the connection was closed');
  t.ok(r.ms < 8_000, `closed by the sidecar, not by the idle timeout (${r.ms} ms)`);
  await nothingForwarded(t, before);
}

/** A request the sidecar refuses on a connection it keeps open; nothing upstream. */
async function refusedOpen(t: Test, bytes: string, status: number, code: string): Promise<ParsedResponse | undefined> {
  const before = up.requests.length;
  const r = await one(bytes);
  isProblem(t, r, status, code);
  t.not(r?.header('connection'), 'close', 'the connection is kept');
  await nothingForwarded(t, before);
  return r;
}

/** A request that must reach the upstream exactly once; returns both sides. */
async function forwarded(t: Test, bytes: string | Buffer, port = PORT): Promise<{ res: ParsedResponse | undefined; seen: RawSeen }> {
  const before = up.requests.length;
  const answered = one(bytes, port);
  const seen = await up.waitForRequest(before + 1);
  const res = await answered;
  t.equal(res?.status, 200, `answered 200 (got ${res?.status}: ${res?.body.slice(0, 200)})`);
  t.equal(res?.body, `ok ${seen.seq}`, "the upstream's own answer is relayed");
  t.equal(up.requests.length, before + 1, 'forwarded exactly once');
  return { res, seen };
}

/** Uncaught by the sidecar's code: uWS answers or drops these itself. */
function uwsCase(id: number, lines: string[]): string {
  return wire([`GET /v1/uws-${id} HTTP/1.1`, ...lines]);
}

// The cases uWS drops without an answer wait for its idle timeout (~10 s); they start now and run
// alongside the rest of the file, each asserted by its own test at the end.
// 49 fields in all: one more than uWS reads (test/limiter/split-reads.test.ts forwards 48).
const MANY_HEADERS = Array.from({ length: 47 }, (_v, i) => `X-H${i}: v`);
const DROPPED = [
  { name: 'a control character (0x01) in a header value', bytes: uwsCase(1, [`Host: ${HOST}`, `X-API-Key: ${KEY}`, 'X-Bad: a\x01b']) },
  { name: 'a header line without a colon', bytes: uwsCase(2, [`Host: ${HOST}`, `X-API-Key: ${KEY}`, 'NoColonHere']) },
  { name: 'more than 48 header fields (49)', bytes: uwsCase(3, [`Host: ${HOST}`, `X-API-Key: ${KEY}`, ...MANY_HEADERS]) },
  { name: 'a header name with an underscore', bytes: uwsCase(4, [`Host: ${HOST}`, `X-API-Key: ${KEY}`, 'X_Under: v']) },
  // HTTP/1.0 and absolute-form: @rjweb/uws 1.5.0 answered 505 at once; the build pinned now reads
  // neither and says nothing (limiter/README.md "Which uWS build").
  { name: 'an HTTP/1.0 request line', bytes: wire([`GET /v1/uws-5 HTTP/1.0`, `Host: ${HOST}`, `X-API-Key: ${KEY}`]) },
  { name: 'an absolute-form target', bytes: wire([`GET http://${HOST}/v1/uws-6 HTTP/1.1`, `Host: ${HOST}`, `X-API-Key: ${KEY}`]) },
  { name: 'a header line folded onto the next (obs-fold)', bytes: uwsCase(7, [`Host: ${HOST}`, `X-API-Key: ${KEY}`, 'X-Fold: a', ' b']) },
].map((c) => ({ ...c, result: rawExchange(PORT, c.bytes, 20_000) }));

// ── Content-Length ──────────────────────────────────────────────────────────────────────────────

const SMUGGLED = withKey('GET /v1/smuggled HTTP/1.1');

t.test('duplicate Content-Length 0 and 44 (a second request in the "body"): closed without an answer, nothing upstream', async (t) => {
  const smuggled44 = wire(['GET /v1/s44 HTTP/1.1', 'Host: x', 'X: 123456']);
  t.equal(smuggled44.length, 44, 'the hidden request is 44 bytes');
  await closedWithoutAnswer(
    t,
    wire(['POST /v1/cl HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, 'Content-Length: 0', 'Content-Length: 44'], smuggled44),
  );
});

t.test(
  'duplicate Content-Length 0 and N where the N bytes are a request with credentials: the hidden request never reaches the upstream',
  async (t) => {
    await closedWithoutAnswer(
      t,
      wire(
        ['POST /v1/cl HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, 'Content-Length: 0', `Content-Length: ${SMUGGLED.length}`],
        SMUGGLED,
      ),
    );
  },
);

t.test('duplicate Content-Length 0 and 5 with no bytes behind: 400 bad_framing, Connection: close, closed', async (t) => {
  await refusedAndClosed(t, withKey('POST /v1/cl HTTP/1.1', ['Content-Length: 0', 'Content-Length: 5']), 400, 'bad_framing');
});

t.test('bytes pipelined behind any Connection: close refusal are never parsed or forwarded', async (t) => {
  const refusals = [
    { what: 'two Host headers', head: ['GET /v1/a HTTP/1.1', `Host: ${HOST}`, 'Host: other', `X-API-Key: ${KEY}`] },
    { what: 'a path with ;', head: ['GET /v1/a;b HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`] },
    { what: 'a non-UTF-8 header value', head: ['GET /v1/a HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, 'X-Name: M\xffller'] },
    { what: 'a 20 KB header', head: ['GET /v1/a HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, `X-Big: ${'b'.repeat(20 * 1024)}`] },
  ];
  for (const r of refusals) {
    await t.test(r.what, async (t) => closedWithoutAnswer(t, wire(r.head) + SMUGGLED));
  }
  await t.test('Transfer-Encoding: gzip (uWS answers it with its own 400 when bytes follow)', async (t) => {
    const before = up.requests.length;
    const got = await rawExchange(
      PORT,
      wire(['POST /v1/a HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, 'Transfer-Encoding: gzip']) + SMUGGLED,
      5_000,
    );
    const statuses = splitResponses(got.bytes).map((x) => x.status);
    t.ok(
      statuses.length === 0 || (statuses.length === 1 && statuses[0] === 400),
      `no answer, or one 400 (got ${statuses.join(', ') || 'none'})`,
    );
    t.equal(got.ended, 'close', 'closed');
    await nothingForwarded(t, before);
  });
});

t.test('duplicate Content-Length 44 then 0: refused, closed, nothing upstream', async (t) => {
  const before = up.requests.length;
  const smuggled44 = wire(['GET /v1/s44 HTTP/1.1', 'Host: x', 'X: 123456']);
  const r = await rawExchange(
    PORT,
    wire(['POST /v1/cl HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, 'Content-Length: 44', 'Content-Length: 0'], smuggled44),
    5_000,
  );
  const responses = splitResponses(r.bytes);
  t.equal(responses[0]?.status, 400, `400 (got ${responses.map((x) => x.status).join(', ')}: ${r.bytes.toString('latin1').slice(0, 300)})`);
  t.equal(codeOf(responses[0]), 'bad_framing', 'bad_framing');
  t.equal(r.ended, 'close', 'closed');
  await nothingForwarded(t, before);
});

t.test('equal duplicate Content-Length (5 and 5) is folded: forwarded once with one Content-Length', async (t) => {
  const { seen } = await forwarded(t, withKey('POST /v1/cl-equal HTTP/1.1', ['Content-Length: 5', 'Content-Length: 5'], 'hello'));
  t.same(headerValues(seen, 'content-length'), ['5'], 'one Content-Length: 5');
  t.equal(seen.body.toString('latin1'), 'hello', 'the body');
  t.equal(seen.rawHead.toString('latin1'), expectedHead('POST /v1/cl-equal HTTP/1.1', [], ['content-length: 5']), 'exact head');
});

for (const [what, bytes] of [
  ['Content-Length +5', withKey('POST /v1/cl-bad HTTP/1.1', ['Content-Length: +5'], 'hello')],
  ['Content-Length 5x', withKey('POST /v1/cl-bad HTTP/1.1', ['Content-Length: 5x'], 'hello')],
  ['no Host header', wire(['GET /v1/no-host HTTP/1.1', `X-API-Key: ${KEY}`])],
] as const) {
  t.test(`known limitation (uWS): ${what}: uWS closes the connection at once without an answer, nothing upstream`, async (t) => {
    // @rjweb/uws 1.5.0 answered its own 400 here; the pinned build sends nothing. Either way our
    // own checks never run: uWS refuses the head before the handler.
    const before = up.requests.length;
    const r = await rawExchange(PORT, bytes, 5_000);
    t.equal(r.bytes.length, 0, `no response bytes (got ${JSON.stringify(r.bytes.toString('latin1').slice(0, 120))})`);
    t.equal(r.ended, 'close', 'closed');
    t.ok(r.ms < 2_000, `at once, not at the idle timeout (${r.ms} ms)`);
    await nothingForwarded(t, before);
  });
}

// ── Transfer-Encoding ───────────────────────────────────────────────────────────────────────────

const CHUNKED_HELLO = '5\r\nhello\r\n0\r\n\r\n';
for (const te of [['xchunked'], ['chunked, identity'], ['chunked, chunked'], ['gzip'], ['chunked', 'chunked']]) {
  const name = te.length > 1 ? `two Transfer-Encoding headers (${te.join(' / ')})` : `Transfer-Encoding: ${te[0]}`;
  t.test(`${name}: 501 transfer_coding_not_implemented, closed, nothing upstream`, async (t) => {
    await refusedAndClosed(
      t,
      withKey(
        'POST /v1/te HTTP/1.1',
        te.map((v) => `Transfer-Encoding: ${v}`),
        CHUNKED_HELLO,
      ),
      501,
      'transfer_coding_not_implemented',
    );
  });
}

t.test(
  'known limitation (uWS): Transfer-Encoding chunked with Content-Length: uWS closes at once without an answer, nothing upstream',
  async (t) => {
    // Refusing is right (RFC 9112 §6.3: a server ought to treat it as an error and close); an
    // answer would be better. @rjweb/uws 1.5.0 sent its own 400.
    const before = up.requests.length;
    const r = await rawExchange(
      PORT,
      withKey('POST /v1/te-cl HTTP/1.1', ['Transfer-Encoding: chunked', 'Content-Length: 5'], CHUNKED_HELLO),
    );
    t.equal(r.bytes.length, 0, `no response bytes (got ${JSON.stringify(r.bytes.toString('latin1').slice(0, 120))})`);
    t.equal(r.ended, 'close', 'closed');
    t.ok(r.ms < 2_000, `at once (${r.ms} ms)`);
    await nothingForwarded(t, before);
  },
);

t.test('a chunked body with a trailer field is forwarded: the decoded body, and no trailer upstream', async (t) => {
  // @rjweb/uws 1.5.0 answered 505 to any trailer section; the pinned build reads it.
  const { seen } = await forwarded(
    t,
    withKey('POST /v1/te-trailer HTTP/1.1', ['Transfer-Encoding: chunked'], '5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n'),
  );
  t.equal(seen.body.toString('latin1'), 'hello', 'the decoded body');
  t.notMatch(seen.rawBody.toString('latin1'), /X-Trailer/i, 'the trailer field is not forwarded');
});

t.test('Transfer-Encoding: Chunked (any case) is accepted and the body forwarded', async (t) => {
  const { seen } = await forwarded(t, withKey('POST /v1/te-case HTTP/1.1', ['Transfer-Encoding: Chunked'], CHUNKED_HELLO));
  t.equal(seen.body.toString('latin1'), 'hello', 'the decoded body');
  t.notOk(
    headerValues(seen, 'transfer-encoding').some((v) => !/^chunked$/i.test(v)),
    'no other coding upstream',
  );
});

t.test('known limitation (uWS): a chunk longer than its size line (5\\r\\nhelloXX) is forwarded, cut to the declared size', async (t) => {
  const { res, seen } = await forwarded(
    t,
    withKey('POST /v1/chunk-extra HTTP/1.1', ['Transfer-Encoding: chunked'], '5\r\nhelloXX\r\n0\r\n\r\n'),
  );
  t.equal(res?.status, 200, 'admitted and answered');
  t.equal(seen.body.toString('latin1'), 'hello', 'the upstream got the 5 declared bytes; "XX" was dropped by uWS');
});

// ── Host ────────────────────────────────────────────────────────────────────────────────────────

t.test('two Host headers: 400 bad_framing, closed, nothing upstream', async (t) => {
  await refusedAndClosed(t, wire(['GET /v1/hosts HTTP/1.1', `Host: ${HOST}`, 'Host: other.test', `X-API-Key: ${KEY}`]), 400, 'bad_framing');
});

// ── The request target ──────────────────────────────────────────────────────────────────────────

for (const path of [
  '/api/v1//users/bob/profile',
  '/api/v1/users/alice/../bob/profile',
  '/api/v1/users/alice/%2e%2e/bob/profile',
  '/api/v1/./users/bob/profile',
  '/api/v1/%75sers/bob/profile',
]) {
  t.test(`alice asks for ${path} (bob's after canonicalisation): 403 forbidden, nothing upstream`, async (t) => {
    await refusedOpen(t, asAlice(`GET ${path} HTTP/1.1`), 403, 'forbidden');
  });
}

t.test('alice asks for /api/v1/users;x/bob/profile: 400 bad_request_target, closed, nothing upstream', async (t) => {
  await refusedAndClosed(t, asAlice('GET /api/v1/users;x/bob/profile HTTP/1.1'), 400, 'bad_request_target');
});

t.test('alice asks for /api/v1//users/alice/profile: forwarded as /api/v1/users/alice/profile with X-Subject user:alice', async (t) => {
  const { seen } = await forwarded(t, asAlice('GET /api/v1//users/alice/profile HTTP/1.1'));
  t.equal(seen.requestLine, 'GET /api/v1/users/alice/profile HTTP/1.1', 'the canonical path, byte for byte');
  t.equal(headerValue(seen, 'x-subject'), 'user:alice');
  t.equal(headerValue(seen, 'x-subject-role'), 'customer');
});

t.test('no credentials, /api/v1/track/../users/bob/profile: 401 credentials_required (a credentials route once canonical)', async (t) => {
  const r = await refusedOpen(t, wire(['GET /api/v1/track/../users/bob/profile HTTP/1.1', `Host: ${HOST}`]), 401, 'credentials_required');
  t.equal(r?.header('www-authenticate'), 'Bearer');
});

t.test('no credentials, /pub/../t/secret (/pub optional, /t required): 401 credentials_required', async (t) => {
  await refusedOpen(t, wire(['GET /pub/../t/secret HTTP/1.1', `Host: ${HOST}`]), 401, 'credentials_required');
});

for (const [what, path] of [
  ['%2F', '/v1/a%2Fb'],
  ['%2f', '/v1/a%2fb'],
  ['%5C', '/v1/a%5Cb'],
  ['%00', '/v1/a%00b'],
  ['%zz', '/v1/a%zzb'],
  ['a truncated escape', '/v1/a%2'],
  ['.. above the root', '/v1/../../x'],
  ['/..', '/..'],
  ['a raw \\', '/v1/a\\b'],
  ['raw UTF-8 (0xC3 0xBC)', '/v1/m\xc3\xbcller'],
  ['a raw 0xFF', '/v1/a\xffb'],
  ['a raw DEL', '/v1/a\x7fb'],
] as const) {
  t.test(`a path with ${what}: 400 bad_request_target (never 502), closed, nothing upstream`, async (t) => {
    await refusedAndClosed(t, withKey(`GET ${path} HTTP/1.1`), 400, 'bad_request_target');
  });
}

t.test('the query is forwarded byte for byte (?a=%2F&b=%zz&c=1), exact head upstream', async (t) => {
  const line = 'GET /v1/q?a=%2F&b=%zz&c=1&d=%2e%2E HTTP/1.1';
  const { seen } = await forwarded(t, withKey(line, ['Accept: */*']));
  t.equal(seen.requestLine, line, 'the request line');
  t.equal(seen.rawHead.toString('latin1'), expectedHead(line, ['accept: */*']), 'the whole head');
});

t.test('raw non-ASCII in the query: 400 bad_request_target, closed, nothing upstream', async (t) => {
  await refusedAndClosed(t, withKey('GET /v1/q?a=\xc3\xbc HTTP/1.1'), 400, 'bad_request_target');
});

// ── Ownership held by the route table ───────────────────────────────────────────────────────────

t.test('LIMITER_ROUTES overriding /api/v1 keeps the ownership rule (alice → bob: 403)', async (t) => {
  t.ok(ROUTES.includes(`/api/v1=${up.url}`), 'this sidecar overrides /api/v1');
  await refusedOpen(t, asAlice('GET /api/v1/users/bob/profile HTTP/1.1'), 403, 'forbidden');
});

t.test('owner=off on the /api/v1 override drops the rule (alice → bob: forwarded)', async (t) => {
  const off = await startTestSidecar(t, { upstream: up.url, key: sc.key, env: { LIMITER_ROUTES: `/api/v1=${up.url};owner=off` } });
  const { seen } = await forwarded(t, asAlice('GET /api/v1/users/bob/profile HTTP/1.1'), off.sidecar.port);
  t.equal(seen.requestLine, 'GET /api/v1/users/bob/profile HTTP/1.1');
  t.equal(headerValue(seen, 'x-subject'), 'user:alice');
});

// ── Pipelining ──────────────────────────────────────────────────────────────────────────────────

for (const n of [2, 3]) {
  t.test(
    `known limitation (uWS): ${n} pipelined GETs in one write: the connection is closed at once, nothing answered, nothing upstream`,
    async (t) => {
      // Warm the pool first, so a request that could be written upstream before the close would be.
      await forwarded(t, withKey('GET /v1/warm HTTP/1.1'));
      const before = up.requests.length;
      const r = await rawExchange(PORT, Array.from({ length: n }, (_v, i) => withKey(`GET /v1/pipelined-${i} HTTP/1.1`)).join(''), 5_000);
      t.equal(r.bytes.length, 0, `no response bytes (got ${JSON.stringify(r.bytes.toString('latin1').slice(0, 200))})`);
      t.ok(r.ended === 'close' || r.ended === 'reset', `closed by the sidecar, not left hanging (${r.ended})`);
      t.ok(r.ms < 2_000, `promptly (${r.ms} ms), far from an idle timeout`);
      await nothingForwarded(t, before, 'none of the pipelined requests reached the upstream');
    },
  );
}

t.test('pipelined requests refused synchronously (429 unknown key, 404 no_route) are each answered in order', async (t) => {
  const unknown = wire(['GET /v1/p HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${newApiKey('unknown')}`]);
  const noRoute = wire(['GET /nowhere HTTP/1.1', `Host: ${HOST}`]);
  for (const [first, expected] of [
    [unknown, 429],
    [noRoute, 404],
  ] as const) {
    const before = up.requests.length;
    const s = await openSocket(PORT);
    const reading = readResponses(s, 3, 5_000);
    s.write(first + first + withKey('GET /v1/pipelined-last HTTP/1.1'));
    const seen = await up.waitForRequest(before + 1);
    const r = await reading;
    t.same(
      r.responses.map((x) => x.status),
      [expected, expected, 200],
      `${expected}, ${expected}, then the forwarded one`,
    );
    t.same(
      r.responses.map((x) => codeOf(x) ?? x.body),
      [expected === 429 ? 'rate_limited' : 'no_route', expected === 429 ? 'rate_limited' : 'no_route', `ok ${seen.seq}`],
      'each answer in order',
    );
    t.equal(seen.requestLine, 'GET /v1/pipelined-last HTTP/1.1', 'only the last reached the upstream');
    t.equal(up.requests.length, before + 1, 'once');
  }
});

// ── Header values ───────────────────────────────────────────────────────────────────────────────

t.test('a UTF-8 header value (X-Name: Müller, bytes C3 BC) reaches the upstream byte for byte', async (t) => {
  const { seen } = await forwarded(t, withKey('GET /v1/utf8 HTTP/1.1', ['X-Name: M\xc3\xbcller']));
  const v = seen.headers.find(([k]) => k.toLowerCase() === 'x-name')?.[1];
  t.same(v, Buffer.from('Müller', 'utf8'), 'the value bytes');
  t.equal(v?.toString('hex'), '4dc3bc6c6c6572');
});

t.test('a header value that is not UTF-8 (0xFF): 400 bad_header, closed, nothing upstream', async (t) => {
  await refusedAndClosed(t, withKey('GET /v1/latin1 HTTP/1.1', ['X-Name: M\xffller']), 400, 'bad_header');
});

for (const [what, value, arrives] of [
  ['a lone 0xFF', '\xff', ''],
  ['caf\\xE9 (latin-1 "café")', 'caf\xe9', '636166'],
  ['a truncated UTF-8 sequence (0xC3)', 'M\xc3', '4d'],
] as const) {
  t.test(`known limitation (uWS): a header value ending in a non-UTF-8 byte, ${what}, arrives with that byte dropped`, async (t) => {
    // uWS decodes header values as UTF-8 and drops an invalid sequence at the very end of a value
    // (one in the middle becomes U+FFFD, which the sidecar refuses: the test above). The value
    // the upstream gets is what every check saw, so nothing is smuggled; it is still lossy.
    const { seen } = await forwarded(t, withKey('GET /v1/latin1-end HTTP/1.1', [`X-Name: ${value}`]));
    t.equal(seen.headers.find(([k]) => k === 'x-name')?.[1].toString('hex'), arrives, `x-name arrives as ${arrives || '(empty)'}`);
  });
}

for (const [what, value, arrives] of [
  ['ü€ (UTF-8 at both ends)', 'ü€', ''],
  ['x€ (UTF-8 at the end)', 'x€', '78'],
  ['€x (UTF-8 at the start)', '€x', '78'],
] as const) {
  t.test(
    `known limitation (uWS): a valid UTF-8 character at the edge of a header value is dropped: ${what} arrives as ${arrives || '(empty)'}`,
    async (t) => {
      // Inside uWS, in every build measured (limiter/README.md "Which uWS build", case utf8-edges):
      // a plain uWS app sees the same. The checks and the upstream see the same (shortened) value,
      // so nothing is smuggled; a value that must keep them is sent percent- or base64-encoded.
      const bytes = Buffer.concat([
        Buffer.from(withKey('GET /v1/utf8-edge HTTP/1.1', ['X-U: ']).slice(0, -4), 'latin1'),
        Buffer.from(value, 'utf8'),
        Buffer.from('\r\n\r\n', 'latin1'),
      ]);
      const { seen } = await forwarded(t, bytes);
      t.equal(
        seen.headers.find(([k]) => k.toLowerCase() === 'x-u')?.[1].toString('hex'),
        arrives,
        `x-u arrives as ${arrives || '(empty)'}`,
      );
    },
  );
}

t.test(
  'known limitation (uWS): Expect: 100-continue gets 100 Continue before the sidecar refuses (429 for an unknown key), nothing upstream',
  async (t) => {
    // uWS answers 100 Continue itself, before any handler runs (every build measured, case
    // expect-continue), so a client sends a body the sidecar then discards. RFC 9110 §10.1.1 would
    // have the final status instead. The connection stays usable.
    const before = up.requests.length;
    const s = await openSocket(PORT);
    const reading = readResponses(s, 1, 5_000);
    s.write(
      wire([
        'POST /v1/expect HTTP/1.1',
        `Host: ${HOST}`,
        `X-API-Key: ${newApiKey('unknown')}`,
        'Content-Length: 5',
        'Expect: 100-continue',
      ]),
    );
    const r = await reading;
    const all = splitResponses(r.bytes);
    t.same(
      all.map((x) => x.status),
      [100, 429],
      '100 Continue, then the 429',
    );
    t.equal(codeOf(all[1]), 'rate_limited');
    await nothingForwarded(t, before);
  },
);

// ── Forwarding headers ──────────────────────────────────────────────────────────────────────────

const CLIENT_FORWARDING = [
  'X-Forwarded-For: 203.0.113.7, 10.0.0.1',
  'X-Forwarded-Host: orig.example',
  'X-Forwarded-Proto: https',
  'X-Forwarded-Port: 443',
  'Forwarded: for=203.0.113.7;proto=https',
];

t.test("the client's X-Forwarded-*/Forwarded are replaced by the sidecar's: exactly one of each", async (t) => {
  const { seen } = await forwarded(
    t,
    wire(['GET /v1/xf HTTP/1.1', 'Host: edge.test:8443', `X-API-Key: ${KEY}`, ...CLIENT_FORWARDING, 'X-Forwarded-For: 198.51.100.1']),
  );
  t.same(headerValues(seen, 'x-forwarded-for'), ['127.0.0.1'], 'X-Forwarded-For: the peer');
  t.same(headerValues(seen, 'x-forwarded-host'), ['edge.test:8443'], 'X-Forwarded-Host: the Host');
  t.same(headerValues(seen, 'x-forwarded-proto'), ['http']);
  t.same(headerValues(seen, 'x-forwarded-port'), [String(PORT)], "X-Forwarded-Port: the sidecar's port");
  t.same(headerValues(seen, 'forwarded'), ['for=127.0.0.1;host="edge.test:8443";proto=http'], 'Forwarded, host quoted');
});

t.test("X-Subject-Address: the address the sidecar limits by; a client's own copy, in any case, never reaches the upstream", async (t) => {
  const forged = ['X-Subject-Address: 198.51.100.66', 'x-subject-address: 198.51.100.67', 'X-SUBJECT-ADDRESS: 198.51.100.68'];
  const keyed = await forwarded(t, withKey('GET /v1/addr HTTP/1.1', [...forged, 'X-Forwarded-For: 198.51.100.69']));
  t.same(headerValues(keyed.seen, 'x-subject-address'), ['127.0.0.1'], 'an API-key request: the peer, once');
  const anonymous = await forwarded(t, wire(['GET /token HTTP/1.1', `Host: ${HOST}`, ...forged, 'X-Forwarded-For: 198.51.100.69']));
  t.same(headerValues(anonymous.seen, 'x-subject'), ['ip:127.0.0.1']);
  t.same(headerValues(anonymous.seen, 'x-subject-address'), ['127.0.0.1'], 'an address caller: the same address as its subject');
  const bearer = await forwarded(t, wire(['GET /v1/addr HTTP/1.1', `Host: ${HOST}`, `Authorization: Bearer ${ALICE}`, ...forged]));
  t.same(headerValues(bearer.seen, 'x-subject-address'), ['127.0.0.1'], 'a token caller (answered after an await): the peer');
});

t.test('LIMITER_TRUST_PROXY=true: ours are appended to the proxy’s, and the per-IP cap uses the LAST X-Forwarded-For entry', async (t) => {
  const trust = await startTestSidecar(t, {
    upstream: up.url,
    key: sc.key,
    env: { LIMITER_TRUST_PROXY: 'true', LIMITER_IP_BURST: '2', LIMITER_IP_RATE: '1' },
  });
  const port = trust.sidecar.port;
  const { seen } = await forwarded(t, wire(['GET /token HTTP/1.1', `Host: ${HOST}`, ...CLIENT_FORWARDING]), port);
  t.same(headerValues(seen, 'x-forwarded-for'), ['203.0.113.7, 10.0.0.1, 127.0.0.1'], 'the peer appended');
  t.same(headerValues(seen, 'x-forwarded-host'), ['orig.example'], "the proxy's kept");
  t.same(headerValues(seen, 'x-forwarded-proto'), ['https'], "the proxy's kept");
  t.same(headerValues(seen, 'x-forwarded-port'), ['443'], "the proxy's kept");
  t.same(headerValues(seen, 'forwarded'), [`for=203.0.113.7;proto=https, for=127.0.0.1;host=${HOST};proto=http`], 'our node appended');
  t.same(headerValues(seen, 'x-subject'), ['ip:10.0.0.1'], 'limited by the last entry');
  t.same(headerValues(seen, 'x-subject-address'), ['10.0.0.1'], 'and upstreams are told that address, once');

  // Burst 2 for ip:10.0.0.1, one spent above: the client-written entries before it do not matter.
  const second = await forwarded(t, wire(['GET /token HTTP/1.1', `Host: ${HOST}`, 'X-Forwarded-For: 1.1.1.1, 10.0.0.1']), port);
  t.equal(second.res?.header('x-ratelimit-remaining'), '0', 'the same bucket (first entries differ)');
  const before = up.requests.length;
  const third = await one(wire(['GET /token HTTP/1.1', `Host: ${HOST}`, 'X-Forwarded-For: 2.2.2.2, 10.0.0.1']), port);
  isProblem(t, third, 429, 'rate_limited');
  const other = await forwarded(t, wire(['GET /token HTTP/1.1', `Host: ${HOST}`, 'X-Forwarded-For: 2.2.2.2, 10.0.0.2']), port);
  t.same(headerValues(other.seen, 'x-subject'), ['ip:10.0.0.2'], 'another last entry: another bucket');
  t.equal(up.requests.length, before + 1, 'the 429 was not forwarded');
  const signedIn = await forwarded(
    t,
    wire([
      'GET /v1/addr HTTP/1.1',
      `Host: ${HOST}`,
      `Authorization: Bearer ${ALICE}`,
      'X-Subject-Address: 6.6.6.6',
      'X-Forwarded-For: 6.6.6.6, 10.0.0.3',
    ]),
    port,
  );
  t.same(headerValues(signedIn.seen, 'x-subject-address'), ['10.0.0.3'], 'a signed-in request too: the last entry, not the forgery');
});

// ── Authorization schemes ───────────────────────────────────────────────────────────────────────

const BASIC = 'Basic Y2xpZW50OnNlY3JldA==';
for (const path of ['/token', '/auth/introspect', '/revoke']) {
  t.test(`Authorization: Basic on ${path} (auth=optional): forwarded untouched, limited by address`, async (t) => {
    const { res, seen } = await forwarded(
      t,
      wire([`POST ${path} HTTP/1.1`, `Host: ${HOST}`, `Authorization: ${BASIC}`, 'Content-Length: 0']),
    );
    t.same(
      seen.headers.filter(([k]) => k.toLowerCase() === 'authorization').map(([, v]) => v.toString('latin1')),
      [BASIC],
      'the Authorization header, exact bytes, once',
    );
    t.same(headerValues(seen, 'x-subject'), ['ip:127.0.0.1'], 'the subject is the address');
    t.same(headerValues(seen, 'x-subject-role'), ['anonymous']);
    t.match(res?.header('ratelimit-policy') ?? '', /^"anonymous";/, 'charged to the per-IP cap');
  });
}

t.test('Authorization: Bearer <garbage> on /token is still verified: 401 invalid_token, nothing upstream', async (t) => {
  await refusedOpen(
    t,
    wire(['POST /token HTTP/1.1', `Host: ${HOST}`, 'Authorization: Bearer garbage', 'Content-Length: 0']),
    401,
    'invalid_token',
  );
});

t.test('Authorization: Basic on a required route (/v1/x): 401 invalid_token with WWW-Authenticate: Bearer, nothing upstream', async (t) => {
  const r = await refusedOpen(t, wire(['GET /v1/x HTTP/1.1', `Host: ${HOST}`, `Authorization: ${BASIC}`]), 401, 'invalid_token');
  t.equal(r?.header('www-authenticate'), 'Bearer');
});

// ── Sizes: 431, 414, 413, charged nothing ────────────────────────────────────────────────────────

/** The next admitted request of `key` shows the whole burst but one: nothing was charged before it. */
async function notCharged(t: Test, key: string): Promise<void> {
  const before = up.requests.length;
  const answered = one(wire(['GET /v1/after HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${key}`]));
  await up.waitForRequest(before + 1);
  const r = await answered;
  t.equal(r?.status, 200);
  t.equal(r?.header('x-ratelimit-remaining'), String(SMALL_BURST - 1), 'the refused request charged nothing');
}

t.test('a 20 KB X-API-Key (over LIMITER_MAX_HEADERS_SIZE 16kb): 431 headers_too_large, closed, nothing upstream', async (t) => {
  await refusedAndClosed(
    t,
    wire(['GET /v1/big-key HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${'k'.repeat(20 * 1024)}`]),
    431,
    'headers_too_large',
  );
});

t.test("a valid key with 20 KB of other headers: 431, and the key's quota is not charged", async (t) => {
  await refusedAndClosed(
    t,
    wire(['GET /v1/big-head HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${SMALL.h431}`, `X-Pad: ${'p'.repeat(20 * 1024)}`]),
    431,
    'headers_too_large',
  );
  await notCharged(t, SMALL.h431);
});

// 100 KB when the sidecar shares this event loop: the whole head is in the socket before uWS reads.
// With worker threads (edge-workers.test.ts) uWS may read part of the head before the rest
// arrives, and drops a head over 4 KiB that does (limiter/README.md, "Request heads over 4 KiB that
// arrive in more than one read get no answer"): a 100 KB head was reset without an answer once in
// two runs, a 40 KB one closed without an answer once in about ten whole runs. So with workers the
// head is 40 KB and that drop is accepted (nothing forwarded, nothing charged); any answer must
// still be the 414.
const WORKERS = process.env.TEST_LIMITER_WORKERS !== undefined;
const URL_KB = WORKERS ? 40 : 100;
t.test(`a ${URL_KB} KB URL (over LIMITER_MAX_URL 8kb): 414 uri_too_long, closed, and the key's quota is not charged`, async (t) => {
  await refusedAndClosed(
    t,
    wire([`GET /v1/${'u'.repeat(URL_KB * 1024)} HTTP/1.1`, `Host: ${HOST}`, `X-API-Key: ${SMALL.u414}`]),
    414,
    'uri_too_long',
    { splitHeadMayDrop: WORKERS },
  );
  await notCharged(t, SMALL.u414);
});

t.test("a declared Content-Length over the body limit: 413 body_too_large, nothing upstream, the key's quota not charged", async (t) => {
  const r = await refusedOpen(
    t,
    wire(['POST /v1/upload HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${SMALL.b413}`, `Content-Length: ${16 * 1024 + 1}`]),
    413,
    'body_too_large',
  );
  t.notOk(r?.header('x-ratelimit-limit'), 'no rate-limit numbers');
  await notCharged(t, SMALL.b413);
});

t.test('route option body=64kb raises the limit for that route only', async (t) => {
  const body = randomBytes(20 * 1024);
  const head = Buffer.from(withKey('POST /big/upload HTTP/1.1', [`Content-Length: ${body.length}`]), 'latin1');
  const { seen } = await forwarded(t, Buffer.concat([head, body]));
  t.same(seen.body, body, 'the 20 KB body (over LIMITER_MAX_BODY 16kb) reached /big intact');
  const over = await refusedOpen(t, withKey('POST /big/upload HTTP/1.1', [`Content-Length: ${64 * 1024 + 1}`]), 413, 'body_too_large');
  t.match(over?.body ?? '', /65536 bytes/, "the route's own limit in the detail");
});

// ── Upstream answers ────────────────────────────────────────────────────────────────────────────

t.test(
  'an upstream 100 Continue before its final response is dropped and the final response relayed; the sidecar keeps serving',
  async (t) => {
    // undici (UPSTREAM_CLIENT=undici) answered this with a 502; the h1 client reads 1xx as interim
    // (limiter/upstream/response-parser.ts).
    const before = up.requests.length;
    const answered = one(withKey('GET /v1/__continue HTTP/1.1'));
    const seen = await up.waitForRequest(before + 1);
    t.equal(seen.requestLine, 'GET /v1/__continue HTTP/1.1', 'the request reached the upstream');
    const r = await answered;
    t.equal(r?.status, 200, 'the final response');
    t.equal(r?.body, `ok ${seen.seq}`, "the final response's body");
    t.ok(r?.header('x-ratelimit-limit'), 'with the rate-limit headers (it was admitted)');
    await forwarded(t, withKey('GET /v1/after-continue HTTP/1.1'));
  },
);

// ── Counter store outage ────────────────────────────────────────────────────────────────────────

t.test('counter store down: X-RateLimit-Limit is the rate for sliding_window, the burst for token_bucket', async (t) => {
  const { sidecar, sw, tb } = await outageSidecar(t);
  const port = sidecar.sidecar.port;
  for (let i = 0; i < 3; i++) {
    const a = await one(wire(['GET /v1/out HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${sw}`]), port);
    t.equal(a?.status, 200, 'sliding_window: admitted (fail open)');
    t.equal(a?.header('x-ratelimit-limit'), '10', 'sliding_window rate 10 burst 50: limit 10');
    t.match(a?.header('ratelimit-policy') ?? '', /;q=10;/, 'RateLimit-Policy q=10');
    const b = await one(wire(['GET /v1/out HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${tb}`]), port);
    t.equal(b?.status, 200, 'token_bucket: admitted (fail open)');
    t.equal(b?.header('x-ratelimit-limit'), '7', 'token_bucket burst 7: limit 7');
  }
  // From /metrics, not the breaker object: it also holds when each worker thread has a breaker of its own (edge-workers.test.ts).
  const metrics = parseMetrics(await (await fetch(`${sidecar.admin}/metrics`)).text());
  t.ok(metricSum(metrics, 'ratelimit_failmode_trips') > 0, 'the circuit opened: these were answered under the outage');
});

t.test('counter store down: X-RateLimit-Remaining never exceeds X-RateLimit-Limit', async (t) => {
  const { sidecar, sw, tb } = await outageSidecar(t);
  const port = sidecar.sidecar.port;
  for (const key of [sw, tb]) {
    const r = await one(wire(['GET /v1/out HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${key}`]), port);
    const limit = Number(r?.header('x-ratelimit-limit'));
    const remaining = Number(r?.header('x-ratelimit-remaining'));
    t.ok(remaining <= limit, `remaining ${remaining} ≤ limit ${limit} (${key === sw ? 'sliding_window' : 'token_bucket'})`);
  }
});

async function outageSidecar(t: Test): Promise<{ sidecar: TestSidecar; sw: string; tb: string }> {
  const sw = newApiKey('sw');
  const tb = newApiKey('tb');
  const dead = await freePort();
  const sidecar = await startTestSidecar(t, {
    upstream: up.url,
    quotas: [
      { subject_id: keySubject(sw), algorithm: 'sliding_window', rate: 10, burst: 50, interval_ms: 60_000 },
      fixedQuota(keySubject(tb), 7),
    ],
    env: {
      REDIS_URL: `redis://127.0.0.1:${dead}`,
      LIMITER_BREAKER_MIN_VOLUME: '1',
      LIMITER_BREAKER_THRESHOLD: '0.5',
      LIMITER_BREAKER_COOLDOWN: '60s',
      LIMITER_REDIS_CONNECT_TIMEOUT: '300ms',
    },
  });
  return { sidecar, sw, tb };
}

// ── Dropped by uWS: the idle timeout ends them ──────────────────────────────────────────────────

for (const c of DROPPED) {
  t.test(
    `known limitation (uWS): ${c.name}: no answer; uWS closes the connection at its idle timeout (~10 s), nothing upstream`,
    async (t) => {
      const r = await c.result;
      t.equal(r.bytes.length, 0, `no response bytes (got ${JSON.stringify(r.bytes.toString('latin1').slice(0, 120))})`);
      t.equal(r.ended, 'close', `closed by the sidecar, not left hanging (${r.ended} after ${r.ms} ms)`);
      t.ok(r.ms >= 8_000 && r.ms < 20_000, `by the idle timeout: ${r.ms} ms`);
      const id = DROPPED.indexOf(c) + 1;
      t.notOk(
        up.requests.some((x) => x.target.endsWith(`/v1/uws-${id}`)),
        'it never reached the upstream',
      );
      // A positive signal that the upstream records what it is sent.
      await nothingForwarded(t, up.requests.length);
    },
  );
}
