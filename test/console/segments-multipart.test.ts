// @tier: pure
/**
 * The console's streamed multipart reader (console/multipart.ts) under the services' HTTP edge,
 * driven with raw bytes on a socket: the fields before the file become the form the router checks
 * (the CSRF token must come first), the file's bytes pass through unchanged whatever the chunking,
 * fields after the file and second files are not used, a body that is not multipart is a form with
 * no fields, and a body over the route's cap fails the file's stream with the reason.
 */
import t from 'tap';
import { connect } from 'node:net';
import { multipartForm } from '../../console/multipart.js';
import { streamRoute, type EdgeOptions } from '../../shared/http.js';
import { createLogger } from '../../shared/log.js';
import { App, closeListenSocket, listen } from '../../shared/uws.js';

const log = createLogger({ service: 'multipart-test', destination: { write: () => {} } });
const edge: EdgeOptions = { log, maxBodyBytes: 1024 };
const app = App();

streamRoute(
  app,
  'post',
  '/upload',
  multipartForm(async (req, file) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    if (file) {
      try {
        for await (const c of file.data) chunks.push(c);
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
      }
    }
    return {
      body: {
        contentType: req.headers['content-type'],
        form: req.body.toString('utf8'),
        file: file && { field: file.field, filename: file.filename, contentType: file.contentType, bytes: file.bytes() },
        content: Buffer.concat(chunks).toString('utf8'),
        error,
        failure: file?.failure()?.message,
      },
    };
  }),
  { ...edge, maxBodyBytes: 4096 },
);
// A handler that reads the file only after other work (the router's session and token checks).
streamRoute(
  app,
  'post',
  '/later',
  multipartForm(async (_req, file) => {
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    const chunks: Buffer[] = [];
    if (file) for await (const c of file.data) chunks.push(c);
    return { body: { content: Buffer.concat(chunks).toString('utf8'), bytes: file?.bytes() } };
  }),
  { ...edge, maxBodyBytes: 4096 },
);
// A handler that answers without reading the file (a refused CSRF token does that).
streamRoute(
  app,
  'post',
  '/ignore',
  multipartForm(async (req) => ({ body: { form: req.body.toString('utf8') } })),
  { ...edge, maxBodyBytes: 1 << 20 },
);

const { socket, port } = await listen(app, '127.0.0.1', 0);
t.teardown(() => closeListenSocket(socket));

/** Sends a request in the given pieces (each its own write) and reads the answer to the end. */
function raw(pieces: readonly (string | Buffer)[]): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    s.on('data', (c) => got.push(c));
    s.on('error', reject);
    s.on('end', () => {
      const text = Buffer.concat(got).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(head ?? '')?.[1] ?? 0);
      try {
        resolve({ status, body: JSON.parse(rest.join('\r\n\r\n')) as Record<string, unknown> });
      } catch {
        reject(new Error(`not a JSON answer: ${text}`));
      }
    });
    s.on('connect', () => {
      void (async () => {
        for (const p of pieces) await new Promise<void>((r) => s.write(p, () => r()));
      })();
    });
  });
}

const B = 'XyZboundary42';
function requestOf(path: string, body: string, contentType = `multipart/form-data; boundary=${B}`): string[] {
  return [
    `POST ${path} HTTP/1.1\r\nHost: console.test\r\nConnection: close\r\nContent-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    body,
  ];
}
const part = (name: string, value: string): string => `--${B}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
const filePart = (name: string, filename: string, content: string, type = 'application/x-ndjson'): string =>
  `--${B}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n${content}\r\n`;
const end = `--${B}--\r\n`;

const LIST = '"alice"\n"bob"\r\n{"user_id":"carol"}\n';

t.test('the fields before the file are the form; the file passes through unchanged; fields after it are not read', async (t) => {
  const body =
    part('_csrf', 'tok&en=1') + part('segment_id', 'spring promo') + filePart('file', 'ids.ndjson', LIST) + part('late', 'x') + end;
  const r = await raw(requestOf('/upload', body));
  t.equal(r.status, 200);
  t.same(r.body, {
    contentType: 'application/x-www-form-urlencoded',
    form: new URLSearchParams([
      ['_csrf', 'tok&en=1'],
      ['segment_id', 'spring promo'],
    ]).toString(),
    file: { field: 'file', filename: 'ids.ndjson', contentType: 'application/x-ndjson', bytes: Buffer.byteLength(LIST) },
    content: LIST,
  });
});

t.test('a file read only after other work is still whole (nothing flows before it is read)', async (t) => {
  const r = await raw(requestOf('/later', part('_csrf', 'k') + filePart('file', 'ids.ndjson', LIST) + end));
  t.same(r.body, { content: LIST, bytes: Buffer.byteLength(LIST) });
});

t.test('byte by byte across the boundaries: the same result', async (t) => {
  const body = part('_csrf', 'abc') + filePart('file', 'ids.csv', 'user_id\nalice\n', 'text/csv') + end;
  const [head, rest] = requestOf('/upload', body);
  const r = await raw([head!, ...Buffer.from(rest!).reduce<Buffer[]>((a, b) => (a.push(Buffer.from([b])), a), [])]);
  t.equal(r.status, 200);
  t.match(r.body, { form: '_csrf=abc', file: { filename: 'ids.csv', contentType: 'text/csv' }, content: 'user_id\nalice\n' });
});

t.test('a file before the token: the form has nothing (the router then refuses the missing token)', async (t) => {
  const r = await raw(requestOf('/upload', filePart('file', 'a.ndjson', '"a"\n') + part('_csrf', 'abc') + end));
  t.match(r.body, { form: '', file: { filename: 'a.ndjson' }, content: '"a"\n' });
});

t.test('only the first file is used', async (t) => {
  const r = await raw(
    requestOf('/upload', part('_csrf', 'k') + filePart('file', 'one.ndjson', '"1"\n') + filePart('file', 'two.ndjson', '"2"\n') + end),
  );
  t.match(r.body, { file: { filename: 'one.ndjson' }, content: '"1"\n' });
});

t.test('an urlencoded body is a form without a file; a multipart type without a boundary, a form with nothing', async (t) => {
  const r = await raw(requestOf('/upload', '_csrf=abc&segment_id=x', 'application/x-www-form-urlencoded'));
  t.same(r.body, { contentType: 'application/x-www-form-urlencoded', form: '_csrf=abc&segment_id=x', content: '' });
  const noBoundary = await raw(requestOf('/upload', part('_csrf', 'abc') + end, 'multipart/form-data'));
  t.same(noBoundary.body, { contentType: 'application/x-www-form-urlencoded', form: '', content: '' });
});

t.test(
  'over the route cap: a declared length is refused before the handler; a chunked body fails the file stream with the reason',
  async (t) => {
    const big = '"u"\n'.repeat(2000); // 8000 bytes > 4096
    const body = part('_csrf', 'k') + filePart('file', 'big.ndjson', big) + end;
    const declared = await raw(requestOf('/upload', body));
    t.equal(declared.status, 413);
    t.match(declared.body, { code: 'body_too_large' });
    const hex = (s: string): string => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`;
    const chunked = await raw([
      `POST /upload HTTP/1.1\r\nHost: console.test\r\nConnection: close\r\nContent-Type: multipart/form-data; boundary=${B}\r\nTransfer-Encoding: chunked\r\n\r\n`,
      hex(part('_csrf', 'k')),
      hex(filePart('file', 'big.ndjson', big.slice(0, 3000))),
      hex(big.slice(3000) + '\r\n' + end),
      '0\r\n\r\n',
    ]);
    t.equal(chunked.status, 200);
    t.match(chunked.body, {
      form: '_csrf=k',
      file: { filename: 'big.ndjson' },
      error: /larger than 4096 bytes/,
      failure: /larger than 4096 bytes/,
    });
  },
);

t.test('a handler that does not read the file still answers at once', async (t) => {
  const r = await raw(requestOf('/ignore', part('_csrf', 'nope') + filePart('file', 'f.ndjson', '"x"\n'.repeat(50_000)) + end));
  t.equal(r.status, 200);
  t.same(r.body, { form: '_csrf=nope' });
});
