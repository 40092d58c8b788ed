// @tier: pure
/**
 * Bad and awkward input against the sidecar running as its own process (dist/limiter/main.js):
 * oversized headers (LIMITER_MAX_HEADERS_SIZE in a fresh process; the pinned uWS build reads no
 * UWS_HTTP_MAX_HEADERS_SIZE, its split-head limit is a fixed 4096 bytes: test/limiter/split-head.test.ts), chunked request bodies within
 * and over LIMITER_MAX_BODY, Expect: 100-continue, a malformed Content-Length, request bodies still
 * arriving when the answer is already known (dead or early-answering upstream), and clients that
 * vanish mid-body. Each case ends by checking the process is alive and serving (a case that kills
 * it fails, and the next case gets a fresh process): the sidecar must answer bad input with
 * problem+json, never by dying.
 */
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { freePort } from '../harness/ports.js';
import { generateTestKey, jwksOf, startJwksServer } from '../harness/tokens.js';
import { startUpstream, type Echo } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { spawnSidecar, staleBuild, type ChildSidecar } from './fixtures/child.js';
import { openSocket, rawBody, rawRequest, readResponse } from './fixtures/raw.js';
import { client, fixedQuota, keySubject, newApiKey, writeQuotaFile } from './fixtures/sidecar.js';

const stale = staleBuild();
if (stale) t.fail(stale);

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const up = await startUpstream();
t.teardown(() => up.close());
const jwks = await startJwksServer(jwksOf(await generateTestKey()));
t.teardown(() => jwks.close());
const deadPort = await freePort();
const KEY = newApiKey('bad');
const quotaFile = await writeQuotaFile(t, [fixedQuota(keySubject(KEY), 100_000)]);
const MAX_BODY = 1024 * 1024;
const call = client(t);

const ENV = {
  LIMITER_ROUTES: `/v1=${up.url},/dead=http://127.0.0.1:${deadPort}`,
  NOTIFIER_URL: up.url,
  IDENTITY_URL: up.url,
  JWKS_URL: jwks.url,
  LIMITER_QUOTA_FILE: quotaFile,
  UPSTREAM_TIMEOUT: '500ms',
  UPSTREAM_CONNECT_TIMEOUT: '1s',
  LIMITER_MAX_BODY: String(MAX_BODY),
  LIMITER_BUFFER_BODY: '16kb',
  LIMITER_MAX_HEADERS_SIZE: '4kb',
  SHUTDOWN_GRACE: '1s',
};

// One process serves the cases until one of them kills it; the next case then gets a new one, so a
// crash fails the case that caused it and no other.
let current: ChildSidecar | undefined;
async function sidecar(): Promise<ChildSidecar> {
  if (!current?.alive()) current = await spawnSidecar(t, ENV);
  return current;
}

/**
 * A plain request through the process is answered, and the process is still alive after it. The
 * answer is the signal that the bytes sent before it have been handled: a crash they cause shows as
 * a failed request or a dead process.
 */
async function survives(t: Test, c: ChildSidecar): Promise<void> {
  const r = await call(`${c.base}/v1/still-there`, { headers: { 'x-api-key': KEY } }).catch((err: unknown) => err as Error);
  if (r instanceof Error) await waitFor(() => !c.alive(), { timeoutMs: 2_000, what: 'the process to exit' }).catch(() => undefined);
  if (!c.alive()) {
    t.fail(`the sidecar process died (${JSON.stringify(c.exit())}); its last output:\n${c.output().slice(-1500)}`);
    return;
  }
  if (r instanceof Error) {
    t.fail(`the follow-up request failed: ${r.message}; the process's last output:\n${c.output().slice(-1500)}`);
    return;
  }
  t.equal(r.status, 200, 'the sidecar is alive and still serving');
}

const head = (lines: string[]): string => lines.join('\n');

t.test('headers over LIMITER_MAX_HEADERS_SIZE are refused with 431; smaller ones pass', async (t) => {
  const c = await sidecar();
  const over = await rawRequest(
    c.port,
    head(['GET /v1/h HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, `X-Big: ${'a'.repeat(8 * 1024)}`]),
    '',
    2_000,
  );
  t.equal(over.status, 431, `8 KiB of headers against LIMITER_MAX_HEADERS_SIZE=4kb: 431 (got ${over.status})`);
  const ok = await rawRequest(
    c.port,
    head(['GET /v1/h HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, `X-Big: ${'a'.repeat(2 * 1024)}`]),
    '',
    2_000,
  );
  t.equal(ok.status, 200, '2 KiB of headers pass');
  const huge = await rawRequest(
    c.port,
    head(['GET /v1/h HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, `X-Big: ${'a'.repeat(200 * 1024)}`]),
    '',
    2_000,
  );
  t.ok(huge.status === 431 || huge.status === 0, `200 KiB of headers: 431 or the connection closed, never forwarded (got ${huge.status})`);
  await survives(t, c);
});

t.test('a chunked request body is forwarded intact', async (t) => {
  const c = await sidecar();
  const pieces = Array.from({ length: 8 }, () => randomBytes(10_000));
  const s = await openSocket(c.port);
  const reading = readResponse(s, 3_000);
  s.write(
    head(['POST /v1/chunked HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, 'Transfer-Encoding: chunked']).replace(/\n/g, '\r\n') + '\r\n\r\n',
  );
  for (const p of pieces) {
    s.write(`${p.length.toString(16)}\r\n`);
    s.write(p);
    s.write('\r\n');
    await new Promise((r) => setTimeout(r, 5));
  }
  s.write('0\r\n\r\n');
  const r = await reading;
  t.equal(r.status, 200, `forwarded (got ${r.status}: ${rawBody(r).slice(0, 200)})`);
  if (r.status === 200) t.equal((JSON.parse(rawBody(r)) as Echo).bodySha256, sha(Buffer.concat(pieces)), 'checksum');
  await survives(t, c);
});

t.test('a chunked request body over LIMITER_MAX_BODY gets 413', async (t) => {
  const c = await sidecar();
  const s = await openSocket(c.port);
  let answered = false;
  const reading = readResponse(s, 5_000).then((r) => {
    answered = true;
    return r;
  });
  s.write(
    head(['POST /v1/chunked HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, 'Transfer-Encoding: chunked']).replace(/\n/g, '\r\n') + '\r\n\r\n',
  );
  const piece = randomBytes(64 * 1024);
  for (let sent = 0; sent <= MAX_BODY + piece.length && !answered && !s.destroyed; sent += piece.length) {
    const ok = s.write(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]));
    if (!ok) await Promise.race([new Promise((r) => s.once('drain', r)), new Promise((r) => s.once('close', r)), reading]);
  }
  if (!answered && !s.destroyed) s.write('0\r\n\r\n');
  const r = await reading;
  t.equal(r.status, 413, `413 (got ${r.status}, ${r.ended}: ${rawBody(r).slice(0, 200)})`);
  await survives(t, c);
});

t.test('Expect: 100-continue is answered by the sidecar and the request forwarded', async (t) => {
  const c = await sidecar();
  const r = await rawRequest(
    c.port,
    head(['POST /v1/expect HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, 'Content-Length: 5', 'Expect: 100-continue']),
    'hello',
    3_000,
  );
  t.equal(r.status, 200, `forwarded (got ${r.status}: ${rawBody(r).slice(0, 200)})`);
  if (r.status === 200) t.equal((JSON.parse(rawBody(r)) as Echo).bodyBytes, 5, 'with its body');
  await survives(t, c);
});

t.test('a malformed Content-Length is refused with a 4xx', async (t) => {
  const c = await sidecar();
  const r = await rawRequest(
    c.port,
    head(['POST /v1/cl HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, 'Content-Length: 12abc']),
    'hello',
    2_000,
  );
  t.ok(r.status === 0 || (r.status >= 400 && r.status < 500), `a 4xx or a closed connection (got ${r.status}, ${r.ended})`);
  await survives(t, c);
});

t.test('a streamed body to an unreachable upstream: 502, and the rest of the body does not kill the sidecar', async (t) => {
  const c = await sidecar();
  const body = randomBytes(600 * 1024);
  const s = await openSocket(c.port);
  const reading = readResponse(s, 5_000);
  s.write(
    head(['POST /dead/upload HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, `Content-Length: ${body.length}`]).replace(/\n/g, '\r\n') +
      '\r\n\r\n',
  );
  for (let off = 0; off < body.length && !s.destroyed; off += 32 * 1024) {
    s.write(body.subarray(off, off + 32 * 1024));
    await new Promise((r) => setTimeout(r, 2));
  }
  const r = await reading;
  t.equal(r.status, 502, `502 (got ${r.status}, ${r.ended})`);
  await survives(t, c);
});

t.test('an upstream that answers before reading the body: the answer is relayed and the sidecar survives', async (t) => {
  const c = await sidecar();
  const body = randomBytes(600 * 1024);
  const s = await openSocket(c.port);
  const reading = readResponse(s, 5_000);
  s.write(
    head(['POST /v1/early?mode=close HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, `Content-Length: ${body.length}`]).replace(/\n/g, '\r\n') +
      '\r\n\r\n',
  );
  for (let off = 0; off < body.length && !s.destroyed; off += 32 * 1024) {
    s.write(body.subarray(off, off + 32 * 1024));
    await new Promise((r) => setTimeout(r, 2));
  }
  const r = await reading;
  t.equal(r.status, 502, `the upstream closed without answering: 502 (got ${r.status}, ${r.ended})`);
  await survives(t, c);
});

t.test('a client that vanishes mid-body: the upstream request is abandoned, the sidecar carries on', async (t) => {
  const c = await sidecar();
  const before = up.requests.length;
  const s = await openSocket(c.port);
  s.write(
    head(['POST /v1/vanish?mode=slow-read&ms=20 HTTP/1.1', 'Host: x', `X-API-Key: ${KEY}`, `Content-Length: ${MAX_BODY}`]).replace(
      /\n/g,
      '\r\n',
    ) + '\r\n\r\n',
  );
  s.write(randomBytes(200 * 1024));
  const seen = await up.waitForRequest(before + 1);
  s.destroy();
  await waitFor(() => seen.aborted || seen.bodyBytes >= 0, { timeoutMs: 3_000, what: 'the upstream request to end' });
  t.not(seen.bodyBytes, MAX_BODY, 'the upstream did not receive a complete body');
  await survives(t, c);
});

t.test('SIGTERM stops the process cleanly', async (t) => {
  // A process of its own: requests left hanging by the cases above would hold its drain.
  const c = await spawnSidecar(t, ENV);
  t.equal((await call(`${c.base}/v1/ok`, { headers: { 'x-api-key': KEY } })).status, 200);
  const r = await c.stop(5_000);
  t.equal(r.code, 0, `exit code 0 (got ${JSON.stringify(r)}; last output: ${c.output().slice(-800)})`);
});
