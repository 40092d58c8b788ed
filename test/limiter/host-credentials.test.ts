// @tier: pure
/**
 * Issue 23, item 8, byte by byte: a request that names its caller twice (two `X-API-Key`, two
 * `Authorization`), a `Host` that is not `host[:port]` (`h/../x` was accepted; nginx answers
 * 400), and `CONNECT` (it got 502; nginx answers 405). Each is refused by the data plane with
 * problem+json and `Connection: close`, the connection is closed, and the raw upstream receives
 * nothing; what is valid still passes.
 *
 * "Nothing reached the upstream" is shown as in edge.test.ts: a follow-up request on a new
 * connection is awaited at the upstream and must be the only request recorded since the case began.
 */
import t, { type Test } from 'tap';
import { Buffer } from 'node:buffer';
import { accessClaims, sign } from '../harness/tokens.js';
import { headerValue, startRawUpstream } from './fixtures/raw-upstream.js';
import { openSocket, rawExchange, readResponses, splitResponses, type ParsedResponse } from './fixtures/raw.js';
import { fixedQuota, keySubject, newApiKey, startTestSidecar } from './fixtures/sidecar.js';

const up = await startRawUpstream(t);
const KEY = newApiKey('hc');
const OTHER = newApiKey('hc2');
const sc = await startTestSidecar(t, {
  upstream: up.url,
  quotas: [fixedQuota(keySubject(KEY), 1_000_000), fixedQuota(keySubject(OTHER), 1_000_000)],
  env: { LIMITER_ROUTES: `/v1=${up.url},/t=${up.url}` },
});
const PORT = sc.sidecar.port;
const HOST = 'hc.test';
const ALICE = sign(accessClaims({ nowMs: sc.clock.now() }, { sub: 'alice', user_id: 'alice' }), { key: sc.key });

// uWS drops an authority-form CONNECT without an answer and closes at its idle timeout (~12 s):
// started now, asserted by its own test at the end.
const authorityConnect = rawExchange(PORT, `CONNECT ${HOST}:443 HTTP/1.1\r\nHost: ${HOST}:443\r\nX-API-Key: ${KEY}\r\n\r\n`, 30_000);

const wire = (lines: string[]): string => lines.join('\r\n') + '\r\n\r\n';

/** Sends `bytes` on a new connection and reads ONE response (the connection may stay open). */
async function one(bytes: string): Promise<ParsedResponse | undefined> {
  const s = await openSocket(PORT);
  const reading = readResponses(s, 1, 5_000);
  s.write(Buffer.from(bytes, 'latin1'));
  return (await reading).responses[0];
}

let sentinels = 0;
async function nothingForwarded(t: Test, before: number): Promise<void> {
  const target = `/v1/sentinel-${++sentinels}`;
  const answered = one(wire([`GET ${target} HTTP/1.1`, `Host: ${HOST}`, `X-API-Key: ${KEY}`]));
  await up.waitForTarget(target);
  t.equal((await answered)?.status, 200, 'the follow-up request on a new connection is answered');
  t.same(
    up.requests.slice(before).map((r) => r.requestLine),
    [`GET ${target} HTTP/1.1`],
    'nothing else reached the upstream',
  );
}

/** Refused with `status`/`code`, `Connection: close`, closed by the sidecar at once, nothing upstream. */
async function refusedAndClosed(t: Test, bytes: string, status: number, code: string): Promise<ParsedResponse | undefined> {
  const before = up.requests.length;
  const r = await rawExchange(PORT, bytes, 8_000);
  const [first, ...rest] = splitResponses(r.bytes);
  t.equal(first?.status, status, `status ${status}`);
  t.match(first?.header('content-type') ?? '', /^application\/problem\+json/, 'problem+json');
  t.equal((JSON.parse(first?.body ?? '{}') as { code?: string }).code, code, `code ${code}`);
  t.equal(first?.header('connection'), 'close', 'Connection: close');
  t.equal(r.ended, 'close', 'the sidecar closed the connection');
  t.ok(r.ms < 5_000, `closed at once, not by an idle timeout (${r.ms} ms)`);
  t.same(
    rest.map((x) => x.status),
    [],
    'nothing else was answered on the connection',
  );
  await nothingForwarded(t, before);
  return first;
}

/** Forwarded exactly once; returns the Host the upstream saw as X-Forwarded-Host. */
async function forwarded(t: Test, bytes: string): Promise<string | undefined> {
  const before = up.requests.length;
  const answered = one(bytes);
  const seen = await up.waitForRequest(before + 1);
  t.equal((await answered)?.status, 200, 'answered 200');
  t.equal(up.requests.length, before + 1, 'forwarded exactly once');
  return headerValue(seen, 'x-forwarded-host');
}

t.test('two X-API-Key headers: 400 duplicate_credentials, closed, nothing upstream', async (t) => {
  await t.test('two different keys', async (t) => {
    await refusedAndClosed(
      t,
      wire(['GET /v1/x HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, `X-API-Key: ${OTHER}`]),
      400,
      'duplicate_credentials',
    );
  });
  await t.test('the same key twice', async (t) => {
    await refusedAndClosed(
      t,
      wire(['GET /v1/x HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, `X-API-Key: ${KEY}`]),
      400,
      'duplicate_credentials',
    );
  });
  await t.test('an unknown key and a known one (the known one last, which used to win)', async (t) => {
    await refusedAndClosed(
      t,
      wire(['GET /v1/x HTTP/1.1', `Host: ${HOST}`, 'X-API-Key: never-issued', `X-API-Key: ${KEY}`]),
      400,
      'duplicate_credentials',
    );
  });
  await t.test('with a request pipelined behind it in the same write: no answer, closed, nothing upstream', async (t) => {
    const before = up.requests.length;
    const bytes =
      wire(['GET /v1/x HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, `X-API-Key: ${OTHER}`]) +
      wire(['GET /v1/smuggled HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`]);
    const r = await rawExchange(PORT, bytes, 8_000);
    t.same(
      splitResponses(r.bytes).map((x) => x.status),
      [],
      'no answer',
    );
    t.equal(r.ended, 'close', 'closed');
    await nothingForwarded(t, before);
  });
});

t.test('two Authorization headers: 400 duplicate_credentials, closed, nothing upstream', async (t) => {
  await refusedAndClosed(
    t,
    wire(['GET /v1/x HTTP/1.1', `Host: ${HOST}`, `Authorization: Bearer ${ALICE}`, 'Authorization: Basic dXNlcjpwYXNz']),
    400,
    'duplicate_credentials',
  );
});

t.test('one X-API-Key and one Authorization: the key is the caller, as before', async (t) => {
  const before = up.requests.length;
  await forwarded(t, wire(['GET /v1/both HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`, `Authorization: Bearer ${ALICE}`]));
  t.equal(headerValue(up.requests[before]!, 'x-subject'), keySubject(KEY), 'X-Subject is the key');
});

for (const [what, host] of [
  ['h/../x (a path in the host)', 'h/../x'],
  ['h\\x (a backslash)', 'h\\x'],
  ['user@h (userinfo)', 'user@h'],
  ['h..x (an empty label, as nginx refuses it)', 'h..x'],
  ['h:80x (a port that is not digits)', 'h:80x'],
  ['a b (a space)', 'a b'],
  ['an empty Host', ''],
  ['ü (non-ASCII, UTF-8 C3 BC)', '\xc3\xbc'],
  ['h?x (a query in the host)', 'h?x'],
  ['::1 (IPv6 without brackets)', '::1'],
] as const) {
  t.test(`Host: ${what}: 400 bad_framing, closed, nothing upstream`, async (t) => {
    const r = await refusedAndClosed(t, wire(['GET /v1/x HTTP/1.1', `Host: ${host}`, `X-API-Key: ${KEY}`]), 400, 'bad_framing');
    t.match((JSON.parse(r?.body ?? '{}') as { detail?: string }).detail ?? '', /Host/, 'the detail names the Host');
  });
}

t.test('valid Hosts are forwarded, each as X-Forwarded-Host exactly', async (t) => {
  for (const host of [
    'hc.test',
    'hc.test:8080',
    '127.0.0.1',
    '127.0.0.1:80',
    '[::1]:8080',
    '[::1]',
    'xn--mller-kva.example',
    'h.',
    'h%41',
  ]) {
    t.equal(await forwarded(t, wire(['GET /v1/host HTTP/1.1', `Host: ${host}`, `X-API-Key: ${KEY}`])), host, `Host: ${host}`);
  }
});

t.test('CONNECT /t/x (origin form): 405 method_not_allowed with Allow, closed, nothing upstream', async (t) => {
  const r = await refusedAndClosed(t, wire(['CONNECT /t/x HTTP/1.1', `Host: ${HOST}`, `X-API-Key: ${KEY}`]), 405, 'method_not_allowed');
  t.match(r?.header('allow') ?? '', /^GET, HEAD, /, 'Allow names the methods');
  t.notMatch(r?.header('allow') ?? '', /CONNECT/, 'but not CONNECT');
});

t.test('CONNECT without credentials or to a path with no route: 405 all the same (the method is checked first)', async (t) => {
  await refusedAndClosed(t, wire(['CONNECT /nothere HTTP/1.1', `Host: ${HOST}`]), 405, 'method_not_allowed');
});

t.test('known limitation (uWS): CONNECT host:443 (authority form) is dropped by uWS without an answer, nothing upstream', async (t) => {
  const r = await authorityConnect;
  t.equal(r.bytes.length, 0, `no answer (got ${JSON.stringify(r.bytes.toString('latin1').slice(0, 120))})`);
  t.equal(r.ended, 'close', 'uWS closes the connection at its idle timeout');
  t.same(
    up.requests.filter((x) => x.method === 'CONNECT' || x.target.includes('443')).map((x) => x.requestLine),
    [],
    'nothing of it reached the upstream',
  );
});
