// @tier: pure
/**
 * The sidecar end to end with each upstream client (UPSTREAM_CLIENT=h1, the default, and undici)
 * in front of a raw upstream that answers each path with exact bytes, written one byte per write:
 * chunked with trailers, 204, 1xx before the final response, truncated bodies, oversized heads and
 * the response smuggling vectors. Where the clients agree the test says so; where they differ
 * (undici's 502 on an upstream `100 Continue`) it says which and why.
 */
import t from 'tap';
import { startCannedUpstream } from '../fixtures/raw-upstream.js';
import { client, fixedQuota, keySubject, newApiKey, startTestSidecar } from '../fixtures/sidecar.js';
import { rawRequest } from '../fixtures/raw.js';

const ANSWERS: Record<string, string> = {
  '/v1/chunked':
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Up: 1\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n',
  '/v1/204': 'HTTP/1.1 204 No Content\r\nX-Up: 1\r\n\r\n',
  '/v1/103': 'HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  '/v1/100': 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  '/v1/te-cl': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  '/v1/two-cl': 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd',
  '/v1/big-head': `HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(20 * 1024)}\r\nContent-Length: 0\r\n\r\n`,
  '/v1/not-http': 'SPDY/3 200 OK\r\n\r\n',
};

const upstream = await startCannedUpstream(t, (target, s) => {
  if (target === '/v1/truncated') {
    s.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort');
    return;
  }
  const answer = ANSWERS[target] ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n';
  for (const byte of Buffer.from(answer, 'latin1')) s.write(Buffer.from([byte]));
});
const KEY = newApiKey('clients');

for (const which of ['h1', 'undici'] as const) {
  t.test(`UPSTREAM_CLIENT=${which}`, async (t) => {
    const sc = await startTestSidecar(t, {
      upstream,
      quotas: [fixedQuota(keySubject(KEY), 100_000)],
      env: { UPSTREAM_CLIENT: which, UPSTREAM_TIMEOUT: '2s' },
    });
    const call = client(t);
    const get = (path: string) => call(`${sc.base}${path}`, { headers: { 'x-api-key': KEY } });

    const chunked = await get('/v1/chunked');
    t.equal(chunked.status, 200);
    t.equal(chunked.text, 'hello world', 'chunked body decoded and relayed');
    t.equal(chunked.headers['x-up'], '1');
    t.notOk('x-trailer' in chunked.headers, 'trailers are not relayed');
    t.ok(chunked.headers['x-ratelimit-limit'], 'with the rate-limit headers');

    const noContent = await get('/v1/204');
    t.same([noContent.status, noContent.body.length, noContent.headers['x-up']], [204, 0, '1'], '204, no body');

    const hints = await get('/v1/103');
    t.same([hints.status, hints.text], [200, 'ok'], '103 dropped, the final response relayed');

    const cont = await get('/v1/100');
    if (which === 'h1') t.same([cont.status, cont.text], [200, 'ok'], 'an unsolicited 100 is dropped like any 1xx');
    else t.equal(cont.status, 502, 'undici destroys the connection on an unsolicited 100 (README, known limitations)');

    for (const path of ['/v1/te-cl', '/v1/two-cl', '/v1/big-head', '/v1/not-http']) {
      const r = await get(path);
      t.equal(r.status, 502, `${path}: 502`);
      t.equal(r.json<{ code: string }>().code, 'upstream_bad_response', `${path}: upstream_bad_response`);
    }

    // Cut after its head: the head has gone to the client, so its connection is closed short.
    const cut = await rawRequest(sc.sidecar.port, `GET /v1/truncated HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}`);
    t.equal(cut.status, 200, 'the head was relayed');
    t.match(cut.raw, /\r\n\r\nshort$/, 'then the bytes that came');
    t.equal(cut.ended, 'close', 'and the client connection closed short of Content-Length');

    const after = await get('/v1/chunked');
    t.equal(after.text, 'hello world', 'the sidecar keeps serving');
  });
}
