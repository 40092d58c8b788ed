/**
 * A `multipart/form-data` POST read as a stream (busboy), for a file too large to hold: the
 * segment upload passes the file on to the notifier as its bytes arrive from the browser, with
 * backpressure end to end (the notifier reads slowly → the file stream fills → busboy stops
 * reading → the request body's reader pauses the browser's socket).
 *
 * The fields *before* the file are read first and handed over as an ordinary urlencoded form, so
 * the router's usual checks (session, Origin, CSRF token) run on them before a byte of the file is
 * used: a form must put its `_csrf` field before the file input (pages do, with `csrfField()`
 * first). Decided: only the first file of a form is used; fields after it are not read; an
 * urlencoded body is read as the same form without a file; any other body as a form with no fields
 * (so it fails the CSRF check).
 */
import { Readable } from 'node:stream';
import busboy from 'busboy';
import { Buffer } from 'node:buffer';
import type { Reply, RequestContext, StreamContext, StreamHandler } from '../shared/http.js';

/** The file of an upload form. */
export interface UploadedFile {
  /** The form control's name. */
  readonly field: string;
  /** As the browser named it (never a path on this machine). */
  readonly filename: string;
  /** As the browser declared it (often `application/octet-stream`). */
  readonly contentType: string;
  /** The bytes as they arrive: iterate once. Fails if the request body does (too large, client gone, malformed). */
  readonly data: AsyncIterable<Buffer>;
  /** Bytes of the file read so far. */
  bytes(): number;
  /** Why reading the request failed, if it did (for the page to say instead of a downstream error). */
  failure(): Error | undefined;
}

/** Limits on what comes before the file (the file itself is capped by the route's body limit). */
const LIMITS = { fields: 20, fieldSize: 8 * 1024, files: 1, parts: 40, headerPairs: 20 };

interface Head {
  fields: URLSearchParams;
  file: UploadedFile | undefined;
  /** Stops reading (the handler is done; anything left of the body is dropped by the server). */
  discard(): void;
}

/** Reads the fields up to the first file, and hands the file over unread. */
export function readMultipart(contentType: string, body: AsyncIterable<Buffer>): Promise<Head> {
  const fields = new URLSearchParams();
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: { 'content-type': contentType }, limits: LIMITS });
  } catch {
    // Neither multipart/form-data with a boundary nor urlencoded: a form without fields.
    return Promise.resolve({ fields, file: undefined, discard: () => {} });
  }
  const source = Readable.from(body, { objectMode: false });
  let failure: Error | undefined;
  let fileStream: Readable | undefined;
  const discard = (): void => {
    source.unpipe(parser);
    source.destroy();
    parser.removeAllListeners('file');
    fileStream?.destroy();
  };
  return new Promise<Head>((resolve) => {
    let settled = false;
    const settle = (file: UploadedFile | undefined): void => {
      if (settled) return;
      settled = true;
      resolve({ fields, file, discard });
    };
    const fail = (err: Error): void => {
      failure ??= err;
      if (fileStream) fileStream.destroy(err);
      settle(undefined);
    };
    parser.on('field', (name, value) => {
      if (!fileStream) fields.append(name, value);
    });
    parser.on('file', (name, stream, info) => {
      if (fileStream) {
        stream.resume(); // a second file: not used
        return;
      }
      fileStream = stream;
      let n = 0;
      // Counted as the consumer reads: a 'data' listener would set the stream flowing and drop
      // whatever arrives before the handler starts reading.
      async function* counted(): AsyncGenerator<Buffer> {
        for await (const c of stream as AsyncIterable<Buffer>) {
          n += c.length;
          yield c;
        }
      }
      settle({
        field: name,
        filename: info.filename ?? '',
        contentType: info.mimeType,
        data: counted(),
        bytes: () => n,
        failure: () => failure,
      });
    });
    parser.on('close', () => settle(undefined));
    parser.on('error', (err: unknown) => fail(err instanceof Error ? err : new Error(String(err))));
    source.on('error', (err) => fail(err));
    source.pipe(parser);
  });
}

/**
 * A stream handler for an upload form: reads the fields before the file, then calls `next` with
 * a request that carries them as an urlencoded body (for the router's checks and `ctx.request.form`)
 * and the file, still unread.
 */
export function multipartForm(next: (req: RequestContext, file: UploadedFile | undefined) => Promise<Reply>): StreamHandler {
  return async (sctx: StreamContext): Promise<Reply> => {
    const head = await readMultipart(sctx.headers['content-type'] ?? '', sctx.body);
    const req: RequestContext = {
      ...sctx,
      headers: { ...sctx.headers, 'content-type': 'application/x-www-form-urlencoded' },
      body: Buffer.from(head.fields.toString(), 'utf8'),
    };
    try {
      return await next(req, head.file);
    } finally {
      head.discard();
    }
  };
}
