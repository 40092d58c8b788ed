/**
 * Requests that arrive in pieces, through the real sidecar (issue 23, item 1): a request written
 * as two TCP writes, the first one flushed and read by the sidecar before the second is written,
 * at EVERY cut point of its request line, its header lines and its chunked body (size lines, data,
 * the last chunk). Each cut must be answered 200 by the upstream and reach it with exactly the
 * bytes the same request sent in one write produces. Also: a split request on a kept-alive
 * connection, the most headers uWS reads, and a request line split byte by byte.
 *
 * "Flushed and read" without a timer: the sidecar runs in this process, on this event loop, so
 * once the first write's callback has run and the loop has turned twice (two setImmediate hops,
 * a poll phase between them), uWS has read what arrived. With @rjweb/uws 1.5.0 (the build before
 * issue 23) every cut from the 4th byte of the request line was answered 505 by uWS itself, so this file fails
 * on that build: run it with `NODE_OPTIONS=--require=$PWD/bench/lib/uws-redirect.cjs
 * UWS_BUILD_DIR=<an installed @rjweb/uws>` to see it.
 */
import t from 'tap';
import { Buffer } from 'node:buffer';
import { startRawUpstream, type RawSeen } from './fixtures/raw-upstream.js';
import { openSocket, readResponses, type ParsedResponse } from './fixtures/raw.js';
import { flushed } from './fixtures/uws-conformance.js';
import { fixedQuota, keySubject, newApiKey, startTestSidecar } from './fixtures/sidecar.js';

const up = await startRawUpstream(t);
const KEY = newApiKey('split');
const sc = await startTestSidecar(t, {
  upstream: up.url,
  quotas: [fixedQuota(keySubject(KEY), 1_000_000)],
  env: { LIMITER_ROUTES: `/v1=${up.url}`, LIMITER_IP_BURST: '1000000' },
});
const PORT = sc.sidecar.port;

/** The request every cut splits; `NNNN` is the cut's number (fixed width, so every cut splits the same bytes). */
function request(n: number): Buffer {
  const id = String(n).padStart(4, '0');
  return Buffer.from(
    `POST /v1/split-${id}/some/longer/path?x=1&y=%2F HTTP/1.1\r\nHost: edge.test\r\nX-API-Key: ${KEY}\r\nX-Trace: abc\r\n` +
      'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n',
    'latin1',
  );
}
const target = (n: number): string => `/v1/split-${String(n).padStart(4, '0')}/some/longer/path?x=1&y=%2F`;
const SAMPLE = request(0);
const LINE_END = SAMPLE.indexOf('\r\n') + 2;
const HEAD_END = SAMPLE.indexOf('\r\n\r\n') + 4;

/** Writes `parts` on a new connection, each after the previous one was flushed and read; one response. */
async function send(parts: Buffer[]): Promise<ParsedResponse | undefined> {
  const s = await openSocket(PORT);
  const reading = readResponses(s, 1, 10_000);
  for (let i = 0; i < parts.length; i++) {
    await new Promise<void>((resolve) => s.write(parts[i]!, () => resolve()));
    if (i < parts.length - 1) await flushed();
  }
  return (await reading).responses[0];
}

/**
 * What the upstream recorded for request `n`, with the number taken out and its one framing line
 * (`content-length: 15` or `transfer-encoding: chunked`) written as `<framing>`: a body that is
 * all there when the request is forwarded goes with its length, one still arriving goes chunked
 * (undici streams it); either is the same request.
 */
function normalised(seen: RawSeen, n: number): string {
  const head = seen.rawHead.toString('latin1').replace(target(n), target(0));
  const framing = head.match(/\r\n(content-length: 15|transfer-encoding: chunked)\r\n/g) ?? [];
  return framing.length === 1
    ? head.replace(/\r\n(content-length: 15|transfer-encoding: chunked)\r\n/, '\r\n<framing>\r\n')
    : `${head} (framing: ${framing.length} lines)`;
}

// The reference: the same request in one write.
const refAnswer = send([SAMPLE]);
const reference = await up.waitForTarget(target(0));
const refStatus = (await refAnswer)?.status;

t.test('the reference request, in one write: 200, the decoded body upstream', async (t) => {
  t.equal(refStatus, 200);
  t.equal(reference.body.toString('latin1'), 'hello0123456789', 'decoded body');
  t.equal(reference.requestLine, `POST ${target(0)} HTTP/1.1`, 'the request line as sent');
  t.match(normalised(reference, 0), /\r\n<framing>\r\n/, 'one framing line');
});

for (const [region, from, to] of [
  ['request line', 1, LINE_END],
  ['header lines', LINE_END, HEAD_END],
  ['chunked body (size lines, data, last chunk)', HEAD_END, SAMPLE.length],
] as const) {
  t.test(`cut at every byte of the ${region} (${to - from} cuts): each answered 200, the upstream gets the same bytes`, async (t) => {
    const failures: string[] = [];
    for (let cut = from; cut < to; cut++) {
      const n = cut;
      const bytes = request(n);
      const answered = send([bytes.subarray(0, cut), bytes.subarray(cut)]);
      const res = await answered;
      if (res?.status !== 200) {
        failures.push(`cut ${cut}: ${res?.status ?? 'no answer'} ${res?.body.slice(0, 80) ?? ''}`);
        continue;
      }
      const seen = await up.waitForTarget(target(n));
      if (res.body !== `ok ${seen.seq}`)
        failures.push(`cut ${cut}: answered ${JSON.stringify(res.body)}, not the upstream's ok ${seen.seq}`);
      if (normalised(seen, n) !== normalised(reference, 0))
        failures.push(`cut ${cut}: head differs: ${JSON.stringify(normalised(seen, n))}`);
      if (seen.body.toString('latin1') !== 'hello0123456789')
        failures.push(`cut ${cut}: body ${JSON.stringify(seen.body.toString('latin1'))}`);
    }
    t.same(failures, [], `all ${to - from} cuts answered 200 with the reference bytes upstream`);
    const split = up.requests.filter((r) => r.target.startsWith('/v1/split-')).map((r) => r.target);
    t.equal(split.length, new Set(split).size, 'no request reached the upstream twice');
  });
}

t.test('a request line written byte by byte (one write per byte, each flushed): 200', async (t) => {
  const n = 9001;
  const bytes = request(n);
  const parts = [...Array.from({ length: LINE_END }, (_v, i) => bytes.subarray(i, i + 1)), bytes.subarray(LINE_END)];
  const res = await send(parts);
  t.equal(res?.status, 200);
  const seen = await up.waitForTarget(target(n));
  t.equal(normalised(seen, n), normalised(reference, 0), 'the reference head upstream');
});

t.test('on a kept-alive connection, a second request split inside its request line: both answered 200', async (t) => {
  const [a, b] = [9002, 9003];
  const s = await openSocket(PORT);
  const reading = readResponses(s, 2, 10_000);
  await new Promise<void>((resolve) => s.write(request(a), () => resolve()));
  await up.waitForTarget(target(a));
  const second = request(b);
  await new Promise<void>((resolve) => s.write(second.subarray(0, 12), () => resolve()));
  await flushed();
  s.write(second.subarray(12));
  const r = await reading;
  t.same(
    r.responses.map((x) => x.status),
    [200, 200],
    'both answered on one connection',
  );
  const seen = await up.waitForTarget(target(b));
  t.equal(normalised(seen, b), normalised(reference, 0), 'the second reached the upstream as sent');
});

t.test('48 header fields (the most uWS reads; Host and X-API-Key included) reach the upstream, each value byte for byte', async (t) => {
  const extra = Array.from({ length: 46 }, (_v, i) => `X-H${i}: v${i}`);
  const head = ['GET /v1/many-48 HTTP/1.1', 'Host: edge.test', `X-API-Key: ${KEY}`, ...extra].join('\r\n') + '\r\n\r\n';
  const res = await send([Buffer.from(head, 'latin1')]);
  t.equal(res?.status, 200);
  const seen = await up.waitForTarget('/v1/many-48');
  for (let i = 0; i < 46; i++) {
    const v = seen.headers.find(([k]) => k.toLowerCase() === `x-h${i}`)?.[1].toString('latin1');
    if (v !== `v${i}`) t.fail(`x-h${i}: ${v}`);
  }
  t.equal(seen.headers.filter(([k]) => /^x-h\d+$/i.test(k)).length, 46, 'all 46 extra headers forwarded');
});
