/**
 * The segment upload route through the sidecar, in raw bytes: the default table gives
 * `/api/v1/admin/segments` its own body limit (limiter/routes.ts SEGMENTS_MAX_BODY), so a 40 MB
 * upload (a million ids) is streamed to the notifier byte for byte (the upstream has most of it
 * before the client has sent the rest), while every other notifier route keeps LIMITER_MAX_BODY;
 * over the route's own limit is 413 with nothing forwarded.
 *
 * The upstream here is a node:net server that hashes a Content-Length body as it arrives instead
 * of keeping it (fixtures/raw-upstream.ts keeps every byte, which is slow at 40 MB).
 */
import t, { type Test } from 'tap';
import { Buffer } from 'node:buffer';
import { createHash, type Hash } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { SEGMENTS_MAX_BODY } from '../../limiter/routes.js';
import type { TestContext } from '../harness/db.js';
import { waitFor } from '../harness/wait.js';
import { openSocket, readResponses, type ParsedResponse } from './fixtures/raw.js';
import { fixedQuota, keySubject, newApiKey, startTestSidecar } from './fixtures/sidecar.js';

interface Seen {
  requestLine: string;
  length: number;
  received: number;
  hash: Hash;
  digest?: string;
}

/** Requests as they arrive: the request line, and the body's length and SHA-256 as it streams in. */
async function startHashingUpstream(t: TestContext): Promise<{ url: string; requests: Seen[] }> {
  const requests: Seen[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
    let head = Buffer.alloc(0);
    let cur: Seen | undefined;
    const onBody = (d: Buffer): Buffer => {
      const take = Math.min(d.length, cur!.length - cur!.received);
      cur!.hash.update(d.subarray(0, take));
      cur!.received += take;
      if (cur!.received === cur!.length) {
        cur!.digest = cur!.hash.digest('hex');
        cur = undefined;
        s.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok');
      }
      return d.subarray(take);
    };
    s.on('data', (d: Buffer) => {
      let rest = d;
      while (rest.length > 0) {
        if (cur) {
          rest = onBody(rest);
          continue;
        }
        head = Buffer.concat([head, rest]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        const text = head.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? 0);
        cur = { requestLine: text.split('\r\n')[0]!, length, received: 0, hash: createHash('sha256') };
        requests.push(cur);
        rest = head.subarray(end + 4);
        head = Buffer.alloc(0);
        if (length === 0) rest = onBody(rest);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  const addr = server.address() as { port: number };
  return { url: `http://127.0.0.1:${addr.port}`, requests };
}

const up = await startHashingUpstream(t);
const KEY = newApiKey('segments');
// NOTIFIER_URL (the default /api/v1 routes) points at the raw upstream; LIMITER_MAX_BODY is the default 10 MB.
const sc = await startTestSidecar(t, { upstream: up.url, quotas: [fixedQuota(keySubject(KEY), 1_000_000)] });
const PORT = sc.sidecar.port;

const head = (requestLine: string, length: number, type = 'application/x-ndjson'): Buffer =>
  Buffer.from(
    [requestLine, 'Host: edge.test', `X-API-Key: ${KEY}`, `Content-Type: ${type}`, `Content-Length: ${length}`].join('\r\n') + '\r\n\r\n',
    'latin1',
  );

/**
 * Sends head + body on a new connection in 1 MiB writes, pausing before the last `holdBack` bytes
 * until `beforeRest` resolves, and reads one response.
 */
async function send(h: Buffer, body: Buffer, holdBack = 0, beforeRest?: () => Promise<unknown>): Promise<ParsedResponse | undefined> {
  const s = await openSocket(PORT);
  const reading = readResponses(s, 1, 60_000);
  s.write(h);
  const cut = body.length - holdBack;
  const write = async (from: number, to: number): Promise<void> => {
    for (let i = from; i < to; i += 1024 * 1024) {
      if (!s.write(body.subarray(i, Math.min(to, i + 1024 * 1024)))) await new Promise((r) => s.once('drain', r));
    }
  };
  await write(0, cut);
  await beforeRest?.();
  await write(cut, body.length);
  return (await reading).responses[0];
}

const codeOf = (r: ParsedResponse | undefined): unknown => (JSON.parse(r?.body || '{}') as { code?: unknown }).code;
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A million-id NDJSON body of about 40 MB. */
function millionIds(): Buffer {
  const parts: string[] = [];
  for (let i = 0; i < 1_000_000; i++) parts.push(`"customer-${String(i).padStart(28, '0')}"\n`);
  return Buffer.from(parts.join(''), 'latin1');
}

t.test('a 40 MB upload on /api/v1/admin/segments reaches the notifier intact', async (t: Test) => {
  const body = millionIds();
  t.ok(body.length > 38 * 1024 * 1024 && body.length < SEGMENTS_MAX_BODY, `${body.length} bytes`);
  const target = '/api/v1/admin/segments/spring-promo/members';
  const before = up.requests.length;
  // The last MiB is held back until the upstream has 30 MB: the sidecar forwards as it reads.
  const res = await send(head(`PUT ${target} HTTP/1.1`, body.length), body, 1024 * 1024, () =>
    waitFor(() => (up.requests[before]?.received ?? 0) >= 30_000_000, { timeoutMs: 30_000, what: 'the upstream to have 30 MB' }),
  );
  t.equal(res?.status, 200, `answered 200 (got ${res?.status} ${res?.body.slice(0, 200)})`);
  const seen = up.requests[before]!;
  t.equal(seen.requestLine, `PUT ${target} HTTP/1.1`);
  t.equal(seen.received, body.length, 'every byte forwarded');
  t.equal(seen.digest, sha(body), 'byte for byte');
});

t.test('every other notifier route keeps LIMITER_MAX_BODY (10 MB): 413, nothing forwarded', async (t: Test) => {
  const body = Buffer.alloc(11 * 1024 * 1024, 0x20);
  for (const target of ['/api/v1/notifications', '/api/v1/admin/dlq', '/api/v1/admin/segmentsx']) {
    const before = up.requests.length;
    const s = await openSocket(PORT);
    const reading = readResponses(s, 1, 10_000);
    // Refused on the declared length, before a body byte is read.
    s.write(head(`POST ${target} HTTP/1.1`, body.length, 'application/json'));
    const res = (await reading).responses[0];
    s.destroy();
    t.equal(res?.status, 413, `${target}: 413`);
    t.equal(codeOf(res), 'body_too_large');
    t.match(res?.body ?? '', /10485760 bytes/, `${target}: the default limit in the detail`);
    t.equal(up.requests.length, before, `${target}: nothing forwarded`);
  }
});

t.test('over the segment route limit: 413 naming it, nothing forwarded', async (t: Test) => {
  const before = up.requests.length;
  const s = await openSocket(PORT);
  const reading = readResponses(s, 1, 10_000);
  s.write(head('PUT /api/v1/admin/segments/too-big/members HTTP/1.1', SEGMENTS_MAX_BODY + 1));
  const res = (await reading).responses[0];
  s.destroy();
  t.equal(res?.status, 413);
  t.equal(codeOf(res), 'body_too_large');
  t.match(res?.body ?? '', new RegExp(`${SEGMENTS_MAX_BODY} bytes`));
  t.equal(up.requests.length, before, 'nothing forwarded');
});
