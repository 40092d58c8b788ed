// @tier: pure
/**
 * The sidecar as a proxy, end to end: a real sidecar on port 0 in front of a real node:http
 * upstream. Methods, paths and queries pass through; hop-by-hop headers stop at the sidecar in
 * both directions; X-Forwarded-* and the X-Subject* headers are the sidecar's own; bodies stream
 * both ways intact (checksums); upstream failures map to 502/504 problem+json; oversized bodies
 * get 413; aborted clients do not hurt the sidecar; every relayed response and upstream failure is
 * counted in ratelimit_upstream_responses.
 */
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { freePort } from '../harness/ports.js';
import { startUpstream, type Echo } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import {
  client,
  fixedQuota,
  keySubject,
  metricSum,
  newApiKey,
  parseMetrics,
  RATE_LIMIT_HEADERS,
  SERVICE_SECRET,
  startTestSidecar,
  type Reply,
} from './fixtures/sidecar.js';
import { openSocket, rawBody, rawRequest, rawSequence } from './fixtures/raw.js';

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

const up = await startUpstream();
t.teardown(() => up.close());
const deadPort = await freePort();
const KEY = newApiKey('proxy');
const MAX_BODY = 8 * 1024 * 1024;
const sc = await startTestSidecar(t, {
  upstream: up.url,
  quotas: [fixedQuota(keySubject(KEY), 100_000)],
  env: {
    LIMITER_ROUTES: `/v1=${up.url},/dead=http://127.0.0.1:${deadPort}`,
    UPSTREAM_TIMEOUT: '300ms',
    UPSTREAM_CONNECT_TIMEOUT: '1s',
    LIMITER_MAX_BODY: String(MAX_BODY),
    LIMITER_BUFFER_BODY: '64kb',
  },
});
const call = client(t);
const auth = { 'x-api-key': KEY };

function isProblem(t: Test, r: Reply, status: number, code: string): void {
  t.equal(r.status, status, `status ${status}`);
  t.match(r.headers['content-type'], /^application\/problem\+json/, 'problem+json');
  const p = r.json<{ type: string; title: string; status: number; code: string }>();
  t.equal(p.code, code, `code ${code}`);
  t.equal(p.status, status, 'status in the body');
  t.type(p.title, 'string');
  t.type(p.type, 'string');
}

/** Sends a request with node:http, which lets a test set headers undici refuses (Connection tokens). */
function nodeRequest(
  path: string,
  opts: { method?: string; headers?: Record<string, string | string[]> } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port: sc.sidecar.port, path, method: opts.method ?? 'GET', headers: opts.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

t.test('every method reaches the upstream with its path and query string', async (t) => {
  const query = 'a=1&b=two%20words&a=3&empty=&utf=%C3%A9';
  for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const) {
    const withBody = method === 'POST' || method === 'PUT' || method === 'PATCH';
    const r = await call(`${sc.base}/v1/items/7/sub?${query}`, {
      method,
      headers: { ...auth, 'content-type': 'text/plain' },
      body: withBody ? 'hello' : undefined,
    });
    t.equal(r.status, 200, `${method}: 200`);
    const echo = r.json<Echo>();
    t.equal(echo.method, method, `${method}: method`);
    t.equal(echo.path, '/v1/items/7/sub', `${method}: path`);
    t.equal(echo.query, query, `${method}: query string byte for byte`);
    if (withBody) t.equal(echo.bodyBytes, 5, `${method}: body`);
  }
  const bare = await call(`${sc.base}/v1`, { headers: auth });
  t.equal(bare.json<Echo>().path, '/v1', 'the route prefix itself');
  t.equal(bare.json<Echo>().query, '', 'no query');
});

t.test('HEAD, 204 and 304 relay no body, a truthful Content-Length, and the rate-limit headers', async (t) => {
  const head = await call(`${sc.base}/v1/head`, { method: 'HEAD', headers: auth });
  t.equal(head.status, 200);
  t.equal(head.body.length, 0, 'HEAD: no body');
  const seen = up.requests.at(-1)!;
  t.equal(seen.method, 'HEAD', 'the upstream saw HEAD');
  t.equal(head.headers['content-length'], String(seen.sentLength), 'HEAD: the upstream’s Content-Length, not an invented one');
  for (const status of [204, 304]) {
    const r = await rawRequest(sc.sidecar.port, `GET /v1/nothing?status=${status} HTTP/1.1\nHost: x\nX-API-Key: ${KEY}`, '', 1_000);
    t.equal(r.status, status, `${status}`);
    const cl = /\r\ncontent-length: *(\d+)/i.exec(r.raw)?.[1];
    t.ok(cl === undefined || cl === '0', `${status}: no Content-Length, or 0 (got ${cl})`);
    t.equal(r.ended, 'close', `${status}: the response is complete (the client is not left waiting for a body)`);
    for (const h of RATE_LIMIT_HEADERS) t.match(r.raw, new RegExp(`\r\n${h}: `, 'i'), `${status}: ${h}`);
  }
  const statuses = await rawSequence(
    sc.sidecar.port,
    [
      { head: `GET /v1/a?status=204 HTTP/1.1\nHost: x\nX-API-Key: ${KEY}` },
      { head: `HEAD /v1/b HTTP/1.1\nHost: x\nX-API-Key: ${KEY}` },
      { head: `GET /v1/c HTTP/1.1\nHost: x\nX-API-Key: ${KEY}` },
    ],
    1_000,
  );
  t.same(statuses, [204, 200, 200], 'one keep-alive connection carries on after 204 and HEAD');
});

t.test('hop-by-hop request headers are dropped, end-to-end ones kept', async (t) => {
  const r = await rawRequest(
    sc.sidecar.port,
    [
      'GET /v1/hop HTTP/1.1',
      'Host: sidecar.example',
      `X-API-Key: ${KEY}`,
      'Connection: keep-alive',
      'Keep-Alive: timeout=5',
      'TE: trailers',
      'Trailer: x-checksum',
      'Proxy-Authorization: Basic Zm9vOmJhcg==',
      'Proxy-Connection: keep-alive',
      'X-End-To-End: kept',
      'Accept: application/json',
    ].join('\n'),
  );
  t.equal(r.status, 200);
  const echo = JSON.parse(rawBody(r)) as Echo;
  for (const h of ['keep-alive', 'te', 'trailer', 'proxy-authorization', 'proxy-connection']) t.notOk(h in echo.headers, `${h} dropped`);
  t.not(echo.headers.connection, 'keep-alive, x-hop', 'the client Connection header is not relayed as is');
  t.equal(echo.headers['x-end-to-end'], 'kept');
  t.equal(echo.headers.accept, 'application/json');
  t.equal(echo.headers.host, `127.0.0.1:${up.port}`, 'Host is the upstream, not the sidecar');
  t.equal(echo.headers['x-forwarded-host'], 'sidecar.example', 'the client’s Host travels as X-Forwarded-Host');
});

t.test('headers named in Connection are hop-by-hop too (RFC 9110 §7.6.1)', async (t) => {
  const r = await nodeRequest('/v1/hop-named', { headers: { ...auth, connection: 'keep-alive, x-hop-req', 'x-hop-req': 'drop me' } });
  t.equal(r.status, 200);
  const echo = JSON.parse(r.body.toString()) as Echo;
  t.notOk('x-hop-req' in echo.headers, 'x-hop-req (named in Connection) is not forwarded');
});

t.test('hop-by-hop response headers are not relayed to the client', async (t) => {
  const r = await call(`${sc.base}/v1/resp-hop?hop=1`, { headers: auth });
  t.equal(r.status, 200);
  for (const h of ['keep-alive', 'proxy-authenticate', 'trailer']) t.notOk(h in r.headers, `${h} not relayed`);
  t.notMatch(r.headers.connection ?? '', /x-upstream-hop/, 'the upstream Connection header is not relayed');
  t.equal(r.headers['x-upstream-end'], 'relayed', 'end-to-end response headers are relayed');
  t.notOk('x-upstream-hop' in r.headers, 'a header the upstream named in Connection is not relayed');
});

t.test('X-Forwarded-For, -Proto and -Host are the sidecar’s own', async (t) => {
  const direct = (await call(`${sc.base}/v1/xff`, { headers: auth })).json<Echo>();
  t.equal(direct.headers['x-forwarded-for'], '127.0.0.1', 'the peer address');
  t.equal(direct.headers['x-forwarded-proto'], 'http');
  t.equal(direct.headers['x-forwarded-host'], `127.0.0.1:${sc.sidecar.port}`, 'the Host the client asked for');
  const chained = (await call(`${sc.base}/v1/xff`, { headers: { ...auth, 'x-forwarded-for': '203.0.113.9' } })).json<Echo>();
  t.equal(chained.headers['x-forwarded-for'], '127.0.0.1', "the client's own chain is replaced (no LIMITER_TRUST_PROXY)");
  t.equal(chained.headerNames.filter((n) => n === 'x-forwarded-for').length, 1, 'one X-Forwarded-For header');
});

t.test('inbound X-Subject* headers are replaced by the sidecar’s; the raw API key is not forwarded', async (t) => {
  const r = await nodeRequest('/v1/subject', {
    headers: {
      ...auth,
      'x-subject': 'user:admin',
      'X-Subject-Role': 'admin',
      'x-subject-secret': 'forged',
      'x-subject-tenant': 'tenant:evil',
      'X-Subject-Address': '198.51.100.66',
    },
  });
  t.equal(r.status, 200);
  const echo = JSON.parse(r.body.toString()) as Echo;
  t.equal(echo.headers['x-subject'], keySubject(KEY), 'X-Subject is the hashed key');
  t.equal(echo.headers['x-subject-role'], 'service', 'API keys act as the service role');
  t.equal(echo.headers['x-subject-secret'], SERVICE_SECRET, 'the shared secret');
  t.equal(echo.headers['x-subject-address'], '127.0.0.1', "X-Subject-Address is the sidecar's: the peer, not the client's forgery");
  t.notOk('x-subject-tenant' in echo.headers, 'other X-Subject* headers are stripped');
  for (const h of ['x-subject', 'x-subject-role', 'x-subject-address', 'x-subject-secret']) {
    t.equal(echo.headerNames.filter((n) => n === h).length, 1, `${h} appears once`);
  }
  t.notOk('x-api-key' in echo.headers, 'X-API-Key is not forwarded');
  t.notMatch(JSON.stringify(echo.headers), KEY, 'the raw key appears nowhere upstream');
});

t.test('request bodies arrive intact: buffered, streamed (5 MB), and to a slow reader', async (t) => {
  const small = randomBytes(1000);
  const rs = await call(`${sc.base}/v1/upload`, { method: 'POST', headers: auth, body: small });
  t.equal(rs.json<Echo>().bodyBytes, 1000, 'buffered body: size');
  t.equal(rs.json<Echo>().bodySha256, sha(small), 'buffered body: checksum');

  // Streamed uploads each on a fresh connection: connection reuse after one has its own test below.
  const big = randomBytes(5 * 1024 * 1024);
  const rb = await client(t)(`${sc.base}/v1/upload`, { method: 'PUT', headers: auth, body: big });
  t.equal(rb.status, 200);
  t.equal(rb.json<Echo>().bodyBytes, big.length, 'streamed body: size');
  t.equal(rb.json<Echo>().bodySha256, sha(big), 'streamed body: checksum');
  t.equal(rb.json<Echo>().headers['content-length'], String(big.length), 'streamed with its Content-Length');

  const mid = randomBytes(2 * 1024 * 1024);
  const slow = await client(t)(`${sc.base}/v1/upload?mode=slow-read&ms=1`, { method: 'POST', headers: auth, body: mid });
  t.equal(slow.status, 200);
  t.equal(slow.json<Echo>().bodySha256, sha(mid), 'a slow-reading upstream still gets the whole body (backpressure)');
});

t.test('a keep-alive connection keeps working after a streamed request body', async (t) => {
  // 100 KB is over LIMITER_BUFFER_BODY (64 KB), so it streams; its last chunk fills the stream.
  const body = randomBytes(100 * 1024);
  const statuses = await rawSequence(
    sc.sidecar.port,
    [
      { head: `POST /v1/upload HTTP/1.1\nHost: x\nX-API-Key: ${KEY}\nContent-Length: ${body.length}`, body },
      { head: `GET /v1/next HTTP/1.1\nHost: x\nX-API-Key: ${KEY}` },
      { head: `GET /v1/next HTTP/1.1\nHost: x\nX-API-Key: ${KEY}` },
      { head: `GET /v1/next HTTP/1.1\nHost: x\nX-API-Key: ${KEY}` },
    ],
    1_500,
  );
  t.same(statuses, [200, 200, 200, 200], 'every request on the connection is answered (the socket is not left paused)');
});

t.test('response bodies arrive intact: 5 MB with Content-Length, and chunked', async (t) => {
  const big = await call(`${sc.base}/v1/download?mode=stream&bytes=${5 * 1024 * 1024}`, { headers: auth });
  t.equal(big.status, 200);
  t.equal(big.body.length, 5 * 1024 * 1024, 'size');
  t.equal(sha(big.body), big.headers['x-body-sha256'], 'checksum');
  t.equal(big.headers['content-length'], String(5 * 1024 * 1024), 'Content-Length kept');
  for (const h of RATE_LIMIT_HEADERS) t.ok(big.headers[h], `${h} on a streamed response`);

  const chunked = await call(`${sc.base}/v1/download?mode=chunked&bytes=300000&chunks=25`, { headers: auth });
  t.equal(chunked.status, 200);
  t.equal(chunked.body.length, 300000, 'size');
  t.equal(sha(chunked.body), chunked.headers['x-body-sha256'], 'checksum');
  t.notOk('content-length' in chunked.headers, 'no Content-Length was invented');
});

t.test('an upstream that hangs gets 504 problem+json within UPSTREAM_TIMEOUT', async (t) => {
  // The upstream never answers: a 504 at all is the timeout firing.
  const started = Date.now();
  const r = await call(`${sc.base}/v1/slow?mode=hang`, { headers: auth });
  isProblem(t, r, 504, 'upstream_timeout');
  t.comment(`answered after ${Date.now() - started} ms`);
  for (const h of RATE_LIMIT_HEADERS) t.ok(r.headers[h], `${h} on the 504`);
});

t.test('an unreachable upstream gets 502 problem+json', async (t) => {
  const r = await call(`${sc.base}/dead/x`, { headers: auth });
  isProblem(t, r, 502, 'upstream_unreachable');
});

t.test('an upstream that sends garbage, or closes at once, gets 502', async (t) => {
  const g = await call(`${sc.base}/v1/bad?mode=garbage`, { headers: auth });
  isProblem(t, g, 502, 'upstream_bad_response');
  const c = await call(`${sc.base}/v1/bad?mode=close`, { headers: auth });
  t.equal(c.status, 502, 'closed without a response: 502');
  t.match(c.headers['content-type'], /problem\+json/);
});

t.test('ratelimit_upstream_responses counts relayed responses by route and status class, and upstream failures by code', async (t) => {
  const scrape = async (): Promise<Map<string, number>> => parseMetrics((await call(`${sc.admin}/metrics`)).text);
  const count = (m: Map<string, number>, route: string, status: string): number =>
    metricSum(m, 'ratelimit_upstream_responses', { route, status });
  const before = await scrape();
  for (const status of [200, 200, 201, 404, 503]) {
    t.equal((await call(`${sc.base}/v1/m?status=${status}`, { headers: auth })).status, status);
  }
  t.equal((await call(`${sc.base}/dead/m`, { headers: auth })).status, 502);
  const after = await scrape();
  const delta = (route: string, status: string): number => count(after, route, status) - count(before, route, status);
  t.equal(delta('/v1', '2xx'), 3, 'three 2xx relayed on /v1');
  t.equal(delta('/v1', '4xx'), 1, 'one 4xx');
  t.equal(delta('/v1', '5xx'), 1, "one 5xx (the upstream's own 503)");
  t.equal(delta('/dead', 'upstream_unreachable'), 1, 'an unreachable upstream by its error code');
  t.equal(delta('/dead', '5xx'), 0, "the sidecar's own 502 is not an upstream response");
});

t.test('a declared body over LIMITER_MAX_BODY gets 413 before it is read', async (t) => {
  const declared = await rawRequest(
    sc.sidecar.port,
    `POST /v1/upload HTTP/1.1\nHost: x\nX-API-Key: ${KEY}\nContent-Length: ${MAX_BODY + 1}\nContent-Type: application/octet-stream`,
    randomBytes(1024),
  );
  t.equal(declared.status, 413, 'declared too large: 413 before reading it');
  t.match(declared.raw, /application\/problem\+json/);
  t.match(rawBody(declared), /"code":"body_too_large"/);

  const after = await call(`${sc.base}/v1/after-413`, { headers: auth });
  t.equal(after.status, 200, 'the sidecar keeps serving');
});

t.test('a client that goes away while the upstream works: the upstream request is cancelled, the sidecar carries on', async (t) => {
  // While the upstream is working on it: the upstream request is aborted too.
  const before = up.requests.length;
  const s2 = await openSocket(sc.sidecar.port);
  s2.write(`GET /v1/wait?mode=hang&tag=abort HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\n`);
  const seen = await up.waitForRequest(before + 1);
  s2.destroy();
  await waitFor(() => seen.aborted, { timeoutMs: 3_000, what: 'the upstream request to be aborted' });
  t.ok(seen.aborted, 'the upstream request was cancelled with the client');

  const r = await call(`${sc.base}/v1/after-abort`, { headers: auth });
  t.equal(r.status, 200, 'still serving');
});

t.test('a path no route matches gets 404 no_route before any admission', async (t) => {
  for (const path of ['/nowhere', '/v1x', '/']) {
    const r = await call(`${sc.base}${path}`, { headers: auth });
    isProblem(t, r, 404, 'no_route');
    t.notOk('x-ratelimit-limit' in r.headers, `${path}: no rate-limit numbers`);
  }
});
