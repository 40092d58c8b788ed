/**
 * The body of a segment upload, line by line (pure). Two formats:
 *
 * - `application/x-ndjson`: one user id per line, as a JSON string (`"alice"`) or as an object
 *   with a string `user_id` (`{"user_id": "alice"}`; its other members are ignored, so an export
 *   with more columns can be sent as it is);
 * - `text/csv`: one column per line, the id bare (`alice`) or quoted (`"alice"`, `""` for a
 *   quote inside), with an optional header line `user_id` first.
 *
 * Either way: lines end with LF or CRLF, a UTF-8 byte-order mark at the start is skipped, blank
 * lines are ignored, a line is at most {@link MAX_LINE_BYTES}, and every id must pass
 * profiles/user-id.ts (1–256 visible ASCII characters). Lines are numbered from 1, counting blank
 * lines and the header; a bad one is 400 `invalid_field` with `field` `line <n>`.
 */
import { Buffer } from 'node:buffer';
import { invalidField, type PlatformError } from '../../shared/errors.js';
import { parseUserId, USER_ID_MAX_LENGTH } from '../profiles/user-id.js';

export type UploadFormat = 'ndjson' | 'csv';

/** Longest line accepted: room for the longest id with JSON escapes and a few other members. */
export const MAX_LINE_BYTES = 4096;

const BLANK_RE = /^[ \t]*$/;

/** The upload format of a Content-Type, or undefined when it is neither. */
export function uploadFormat(contentType: string | undefined): UploadFormat | undefined {
  const mime = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (mime === 'application/x-ndjson') return 'ndjson';
  if (mime === 'text/csv') return 'csv';
  return undefined;
}

function bad(line: number, detail: string): PlatformError {
  return invalidField(`line ${line}`, detail);
}

function checkId(id: string, line: number): string {
  try {
    return parseUserId(id);
  } catch {
    throw bad(line, `a user id must be 1 to ${USER_ID_MAX_LENGTH} visible ASCII characters`);
  }
}

function ndjsonId(text: string, line: number): string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw bad(line, 'is not JSON: send a JSON string ("alice") or an object with user_id ({"user_id": "alice"})');
  }
  if (typeof v === 'string') return checkId(v, line);
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const id = (v as Record<string, unknown>)['user_id'];
    if (typeof id === 'string') return checkId(id, line);
  }
  throw bad(line, 'must be a JSON string or an object with a string user_id');
}

function csvId(text: string, line: number): string | undefined {
  if (!text.startsWith('"')) {
    if (text.includes(',')) throw bad(line, 'has more than one column; a segment upload has one (user_id)');
    if (text.includes('"')) throw bad(line, 'has a quote inside an unquoted value');
    if (line === 1 && text === 'user_id') return undefined;
    return checkId(text, line);
  }
  let out = '';
  let i = 1;
  for (;;) {
    const q = text.indexOf('"', i);
    if (q < 0) throw bad(line, 'has a quoted value that does not end on its line');
    out += text.slice(i, q);
    if (text[q + 1] === '"') {
      out += '"';
      i = q + 2;
      continue;
    }
    const rest = text.slice(q + 1);
    if (rest.startsWith(',')) throw bad(line, 'has more than one column; a segment upload has one (user_id)');
    if (rest !== '') throw bad(line, 'has text after a quoted value');
    break;
  }
  if (line === 1 && out === 'user_id') return undefined;
  return checkId(out, line);
}

/** The user id on one line (without its line ending), or undefined for a blank line or the CSV header. */
export function parseLine(format: UploadFormat, text: string, line: number): string | undefined {
  if (BLANK_RE.test(text)) return undefined;
  return format === 'ndjson' ? ndjsonId(text, line) : csvId(text, line);
}

/**
 * Splits a byte stream into lines and parses each: feed chunks as they come, then `end()`. Holds at
 * most one partial line ({@link MAX_LINE_BYTES}) between chunks.
 */
export class LineReader {
  /** The number of the last line read. */
  line = 0;
  private partial: Buffer | undefined;

  constructor(private readonly format: UploadFormat) {}

  /** The ids on the complete lines of `chunk` (with what was left of the previous one). */
  feed(chunk: Buffer): string[] {
    const ids: string[] = [];
    const buf = chunk;
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(0x0a, start);
      if (nl < 0) break;
      let piece = buf.subarray(start, nl);
      if (this.partial !== undefined) {
        piece = Buffer.concat([this.partial, piece]);
        this.partial = undefined;
      }
      this.take(piece, ids);
      start = nl + 1;
    }
    if (start < buf.length) {
      const rest = buf.subarray(start);
      const len = (this.partial?.length ?? 0) + rest.length;
      if (len > MAX_LINE_BYTES + 1) throw bad(this.line + 1, `is longer than ${MAX_LINE_BYTES} bytes`);
      // A copy: `rest` may be a view of a larger buffer that would otherwise stay alive.
      this.partial = this.partial === undefined ? Buffer.from(rest) : Buffer.concat([this.partial, rest]);
    }
    return ids;
  }

  /** The id on the last line when the body does not end with a line break. */
  end(): string[] {
    const ids: string[] = [];
    if (this.partial !== undefined) {
      const p = this.partial;
      this.partial = undefined;
      this.take(p, ids);
    }
    return ids;
  }

  private take(line: Buffer, ids: string[]): void {
    let piece = line;
    this.line++;
    // A byte-order mark (spreadsheet exports write one) is looked for on the whole first line, so
    // it is found even when split across chunks.
    if (this.line === 1 && piece[0] === 0xef && piece[1] === 0xbb && piece[2] === 0xbf) piece = piece.subarray(3);
    let end = piece.length;
    if (end > 0 && piece[end - 1] === 0x0d) end--;
    if (end > MAX_LINE_BYTES) throw bad(this.line, `is longer than ${MAX_LINE_BYTES} bytes`);
    const id = parseLine(this.format, piece.toString('utf8', 0, end), this.line);
    if (id !== undefined) ids.push(id);
  }
}
