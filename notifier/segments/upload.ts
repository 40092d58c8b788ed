/**
 * One upload of a list segment, streamed: a new `uploading` version, the body parsed line by line
 * (lines.ts) and stored in batches of {@link UPLOAD_BATCH} ids as it arrives, then switched in
 * (store.ts `switchVersion`). Only one batch is being parsed and one stored at a time, so memory
 * stays bounded whatever the body's size; the body reader pauses the client meanwhile.
 *
 * Anything that stops it before the switch (a malformed line, the body cap, the client going
 * away, a database error) marks the version `abandoned`: the live version is unchanged and the
 * clean-up deletes what was stored.
 *
 * An empty body (0 bytes) is refused (400 `invalid_field`, field `body`) rather than stored as an
 * empty version: it is what `curl --data-binary @ids.ndjson` sends when the file is missing (curl
 * only warns), and replacing a live list by nothing is never what that meant. A list emptied on
 * purpose is an upload of the CSV header alone (`user_id`).
 */
import type { Buffer } from 'node:buffer';
import type { Pool } from '../../shared/db.js';
import { BodyAbortedError } from '../../shared/body-stream.js';
import { invalidField } from '../../shared/errors.js';
import { LineReader, type UploadFormat } from './lines.js';
import { abandonUpload, beginUpload, storeBatch, switchVersion, type SegmentView } from './store.js';

/** Ids per INSERT. */
export const UPLOAD_BATCH = 10_000;

/**
 * An `uploading` version untouched this long is abandoned (its writer died). Every stored batch
 * touches it, and a live client that sends nothing for 10 s is cut by uWS's idle timeout, so only
 * a dead writer stays silent this long.
 */
export const UPLOAD_STALE_MS = 5 * 60_000;

export interface UploadOptions {
  pool: Pool;
  id: string;
  by: string;
  format: UploadFormat;
  body: AsyncIterable<Buffer>;
  /** True once the client has gone away: checked again just before the switch. */
  aborted: () => boolean;
  /** An `uploading` version untouched this long is taken over. */
  staleMs: number;
  batchSize?: number;
}

export async function uploadList(o: UploadOptions): Promise<{ created: boolean; view: SegmentView }> {
  const version = await beginUpload(o.pool, o.id, o.by, o.staleMs);
  const size = o.batchSize ?? UPLOAD_BATCH;
  // One batch in the database while the next is parsed; its failure surfaces at the next await.
  let storing: Promise<void> = Promise.resolve();
  const store = async (ids: string[]): Promise<void> => {
    await storing;
    storing = storeBatch(o.pool, o.id, version, ids);
    storing.catch(() => {});
  };
  try {
    const lines = new LineReader(o.format);
    let batch: string[] = [];
    let bytes = 0;
    for await (const chunk of o.body) {
      bytes += chunk.length;
      for (const id of lines.feed(chunk)) {
        batch.push(id);
        if (batch.length >= size) {
          await store(batch);
          batch = [];
        }
      }
    }
    if (bytes === 0)
      throw invalidField(
        'body',
        'is empty: send the members as the body (curl -T ids.ndjson fails if the file is missing; --data-binary @file sends nothing)',
      );
    batch.push(...lines.end());
    if (batch.length > 0) await store(batch);
    await storing;
    if (o.aborted()) throw new BodyAbortedError();
    return await switchVersion(o.pool, o.id, version, o.by);
  } catch (err) {
    // A batch still being written must land before the version is abandoned, or the clean-up
    // could miss its rows.
    await storing.catch(() => {});
    await abandonUpload(o.pool, o.id, version).catch(() => {});
    throw err;
  }
}
