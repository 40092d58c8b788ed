/**
 * An incremental HTTP/1.1 response parser for one upstream connection (RFC 9112), strict where
 * leniency lets a response be read two ways (smuggling) and zero-copy for bodies.
 *
 * Fed whatever the socket delivers (`execute(buf)`), it calls its sink with: the final head (1xx
 * interim heads are read and dropped), body pieces as subarrays of the fed buffer, and the end.
 * A sink may pause from `body()` (returns false): `execute` then returns how far it read and the
 * caller feeds the rest again later.
 *
 * Refused as not valid HTTP (`ParseError`, answered 502 upstream_bad_response): a status line other
 * than `HTTP/1.0|1.1 NNN reason`; a head or trailer section over `maxHeadBytes`; a line not ended
 * by CRLF; obs-fold; a header name that is not a token (whitespace before the colon included);
 * control characters in a value; Content-Length that is not digits, or several that differ;
 * Transfer-Encoding together with Content-Length (RFC 9112 §6.3 lets an intermediary drop the
 * Content-Length and go on; it also says the message "ought to be handled as an error", and a
 * response two parsers can frame two ways is the smuggling vector, so an error it is); a
 * Transfer-Encoding with no coding, a coding that is not a token, chunked with parameters or
 * applied twice; a malformed chunk size or chunk end; 101 (the sidecar never asks for an upgrade).
 *
 * Transfer codings other than chunked (`gzip, chunked`) are the content's: never decoded, the body
 * is framed by the last coding (RFC 9112 §6.3): chunked last, it is chunked; chunked not last
 * (`chunked, gzip`) or absent (`gzip`), it runs to the connection's close. Which of them the
 * proxy can relay to its client is proxy.ts's to judge (`relayedCodings`).
 */
import { Buffer } from 'node:buffer';

export class ParseError extends Error {
  override readonly name = 'ParseError';
}

/** What a parser hands on. `headers` is flat [name, value, ...] as subarrays of the head's bytes. */
export interface ResponseSink {
  head(status: number, reason: string, headers: Buffer[], keepAlive: boolean, framing: Framing): void;
  /** A piece of body; false pauses the parser after this piece. */
  body(chunk: Buffer): boolean;
  end(): void;
  /** A 1xx interim head was read (and dropped); the final head is still to come. */
  interim?(): void;
}

/** How the body ends: none, a length, chunked, or at the connection's close. */
export const enum Framing {
  None = 0,
  Length = 1,
  Chunked = 2,
  Close = 3,
}

const enum State {
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  Close,
  Done,
}

const CR = 13;
const LF = 10;

// RFC 9110 §5.6.2 tchar.
const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1;

function lowerIs(b: Buffer, start: number, end: number, lower: string): boolean {
  if (end - start !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) {
    let c = b[start + i]!;
    if (c >= 65 && c <= 90) c |= 32;
    if (c !== lower.charCodeAt(i)) return false;
  }
  return true;
}

/** True when the comma-separated list in b[start, end) holds `token` (lower-case), in any case. */
function listHas(b: Buffer, start: number, end: number, token: string): boolean {
  let i = start;
  while (i < end) {
    let j = i;
    while (j < end && b[j] !== 44) j++;
    let s = i;
    let e = j;
    while (s < e && (b[s] === 32 || b[s] === 9)) s++;
    while (e > s && (b[e - 1] === 32 || b[e - 1] === 9)) e--;
    if (lowerIs(b, s, e, token)) return true;
    i = j + 1;
  }
  return false;
}

export class ResponseParser {
  private state = State.Head;
  private endPending = false;
  /**
   * Head bytes gathered across reads, in held[0, heldLen); null while none are held. It grows by
   * doubling: a head that comes a byte per read costs O(n) copying, not O(n²) (a 16 KiB head one
   * byte at a time took 210 ms of the event loop with a concat per read).
   */
  private held: Buffer | null = null;
  private heldLen = 0;
  private remaining = 0;
  private keepAlive = true;
  /** Bytes of the current chunk-size line or trailer section seen so far (limits). */
  private lineBytes = 0;
  /** The request was a HEAD: the response has no body whatever it declares. */
  private noBody = false;
  /** A byte of this response (a 1xx interim head included) has been read. */
  private sawByte = false;

  constructor(
    private readonly sink: ResponseSink,
    private readonly maxHeadBytes: number,
  ) {}

  /** Starts reading the response to a new request. */
  reset(head: boolean): void {
    this.state = State.Head;
    this.held = null;
    this.heldLen = 0;
    this.noBody = head;
    this.sawByte = false;
    this.keepAlive = true;
    this.lineBytes = 0;
    this.endPending = false;
    this.digits = 0;
    this.sawCR = false;
    this.inExt = false;
  }

  get done(): boolean {
    return this.state === State.Done;
  }
  /** The body runs to the connection's close: EOF ends it. */
  get closeDelimited(): boolean {
    return this.state === State.Close;
  }

  /**
   * Reads from `buf` from `offset`; returns where it stopped: `buf.length`, or earlier when the
   * sink paused or the response is done (bytes past a response's end are the caller's to judge).
   */
  execute(buf: Buffer, offset = 0): number {
    if (this.endPending) {
      // The last piece of a Content-Length body paused the sink: the end is told once it resumes.
      this.endPending = false;
      this.sink.end();
      return offset;
    }
    let i = offset;
    const len = buf.length;
    while (i < len) {
      switch (this.state) {
        case State.Head: {
          i = this.readHead(buf, i);
          break;
        }
        case State.Length: {
          const n = Math.min(this.remaining, len - i);
          this.remaining -= n;
          const piece = buf.subarray(i, i + n);
          i += n;
          if (this.remaining === 0) this.state = State.Done;
          const more = this.sink.body(piece);
          if (this.state === State.Done) {
            if (more) this.sink.end();
            else this.endPending = true;
            return i;
          }
          if (!more) return i;
          break;
        }
        case State.ChunkSize: {
          i = this.readChunkSize(buf, i);
          break;
        }
        case State.ChunkData: {
          const n = Math.min(this.remaining, len - i);
          this.remaining -= n;
          const piece = buf.subarray(i, i + n);
          i += n;
          if (this.remaining === 0) {
            this.state = State.ChunkEnd;
            this.lineBytes = 0;
            this.digits = 0;
          }
          if (!this.sink.body(piece)) return i;
          break;
        }
        case State.ChunkEnd: {
          // The CRLF after a chunk's data, possibly split across reads.
          const c = buf[i]!;
          if (this.lineBytes === 0 ? c !== CR : c !== LF) throw new ParseError('a chunk is not followed by CRLF');
          i++;
          if (++this.lineBytes === 2) {
            this.state = State.ChunkSize;
            this.lineBytes = 0;
          }
          break;
        }
        case State.Trailers: {
          i = this.readTrailers(buf, i);
          if ((this.state as State) === State.Done) {
            this.sink.end();
            return i;
          }
          break;
        }
        case State.Close: {
          const piece = buf.subarray(i);
          i = len;
          if (!this.sink.body(piece)) return i;
          break;
        }
        case State.Done:
          return i;
      }
    }
    return i;
  }

  /** The connection ended (EOF): completes a close-delimited body, else the response was cut. */
  finish(): void {
    if (this.state === State.Close) {
      this.state = State.Done;
      this.sink.end();
      return;
    }
    if (this.state !== State.Done) throw new ParseError('the upstream closed the connection before the response was complete');
  }

  /** True once any byte of the response has been read (a dropped 1xx counts: the upstream had the request). */
  get started(): boolean {
    return this.sawByte || this.state !== State.Head;
  }

  // ── head ──

  private readHead(buf: Buffer, i: number): number {
    this.sawByte = true;
    let data: Buffer;
    let from: number;
    let searchFrom: number;
    const prev = this.heldLen;
    if (this.held === null) {
      data = buf;
      from = i;
      searchFrom = i;
    } else {
      const need = prev + buf.length - i;
      if (need > this.held.length) {
        const grown = Buffer.allocUnsafe(Math.max(need, this.held.length * 2));
        this.held.copy(grown, 0, 0, prev);
        this.held = grown;
      }
      buf.copy(this.held, prev, i);
      this.heldLen = need;
      data = this.held.subarray(0, need);
      from = 0;
      searchFrom = Math.max(0, prev - 3);
    }
    const end = data.indexOf('\r\n\r\n', searchFrom, 'latin1');
    if ((end < 0 ? data.length : end + 4) - from > this.maxHeadBytes)
      throw new ParseError(`the response head is larger than ${this.maxHeadBytes} bytes`);
    if (end < 0) {
      if (this.held === null) {
        // Kept as a copy: the socket's buffer may be reused once this read is handled.
        const n = data.length - from;
        this.held = Buffer.allocUnsafe(Math.max(n * 2, 1024));
        data.copy(this.held, 0, from);
        this.heldLen = n;
      }
      return buf.length;
    }
    // The head's headers are subarrays of `data`: a held buffer is handed on, never written again.
    const consumedFromBuf = this.held === null ? end + 4 : end + 4 - prev + i;
    this.held = null;
    this.heldLen = 0;
    this.parseHead(data, from, end);
    return consumedFromBuf;
  }

  /** Parses the head in data[start, end) (end at its final CRLFCRLF) and sets the body's state. */
  private parseHead(data: Buffer, start: number, end: number): void {
    // Status line: HTTP/1.x SP 3DIGIT SP reason
    let eol = data.indexOf(CR, start);
    if (eol < 0 || eol > end) eol = end;
    if (data[eol + 1] !== LF) throw new ParseError('a line of the response head is not ended by CRLF');
    // `HTTP/1.1 200` without the space and reason is taken too (as llhttp does).
    if (
      eol - start < 12 ||
      data.toString('latin1', start, start + 7) !== 'HTTP/1.' ||
      data[start + 8] !== 32 ||
      (eol - start > 12 && data[start + 12] !== 32)
    )
      throw new ParseError('the status line is not HTTP/1.x');
    const minor = data[start + 7]!;
    if (minor !== 48 && minor !== 49) throw new ParseError('the status line is not HTTP/1.0 or HTTP/1.1');
    let status = 0;
    for (let k = start + 9; k < start + 12; k++) {
      const d = data[k]! - 48;
      if (d < 0 || d > 9) throw new ParseError('the status code is not three digits');
      status = status * 10 + d;
    }
    if (status < 100) throw new ParseError('the status code is out of range');
    for (let k = start + 13; k < eol; k++) {
      const c = data[k]!;
      if ((c < 32 && c !== 9) || c === 127) throw new ParseError('a control character in the status line');
    }
    const reason = eol - start > 13 ? data.toString('latin1', start + 13, eol) : '';
    let keepAlive = minor === 49;
    const headers: Buffer[] = [];
    let length = -1;
    let te = false;
    /** Codings read so far; CHUNKED_LAST set when the last one is chunked, CHUNKED_SEEN when any was. */
    let codings = 0;
    let p = eol + 2;
    while (p < end + 2) {
      let e = data.indexOf(CR, p);
      if (e < 0 || e > end) e = end;
      if (data[e + 1] !== LF) throw new ParseError('a line of the response head is not ended by CRLF');
      const first = data[p]!;
      if (first === 32 || first === 9) throw new ParseError('obs-fold in the response head');
      let colon = p;
      while (colon < e && TOKEN[data[colon]!] === 1) colon++;
      if (colon === p || data[colon] !== 58) throw new ParseError('a response header name is not a token');
      let vs = colon + 1;
      let ve = e;
      while (vs < ve && (data[vs] === 32 || data[vs] === 9)) vs++;
      while (ve > vs && (data[ve - 1] === 32 || data[ve - 1] === 9)) ve--;
      for (let k = vs; k < ve; k++) {
        const c = data[k]!;
        if ((c < 32 && c !== 9) || c === 127) throw new ParseError('a control character in a response header value');
      }
      const nameLen = colon - p;
      if (nameLen === 14 && lowerIs(data, p, colon, 'content-length')) {
        if (ve === vs || ve - vs > 15) throw new ParseError('Content-Length is not a number');
        let n = 0;
        for (let k = vs; k < ve; k++) {
          const d = data[k]! - 48;
          if (d < 0 || d > 9) throw new ParseError('Content-Length is not a number');
          n = n * 10 + d;
        }
        if (length !== -1 && length !== n) throw new ParseError('two different Content-Length values');
        length = n;
      } else if (nameLen === 17 && lowerIs(data, p, colon, 'transfer-encoding')) {
        // The codings of every Transfer-Encoding line, in order (RFC 9110 §5.3): chunked last frames
        // the body; the others are the content's, relayed as they are (proxy.ts).
        te = true;
        codings = readCodings(data, vs, ve, codings);
      } else if (nameLen === 10 && lowerIs(data, p, colon, 'connection')) {
        if (listHas(data, vs, ve, 'close')) keepAlive = false;
        else if (minor === 48 && listHas(data, vs, ve, 'keep-alive')) keepAlive = true;
      }
      headers.push(data.subarray(p, colon), data.subarray(vs, ve));
      p = e + 2;
    }
    if (status < 200) {
      // 1xx: interim, dropped; the final response follows on the same connection.
      if (status === 101) throw new ParseError('101 Switching Protocols was not asked for');
      this.state = State.Head;
      this.sink.interim?.();
      return;
    }
    if (te && length !== -1) throw new ParseError('both Transfer-Encoding and Content-Length');
    if (te && (codings & COUNT) === 0) throw new ParseError('a Transfer-Encoding with no coding');
    // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing; the connection
    // is closed after it.
    if (te && minor === 48) keepAlive = false;
    this.keepAlive = keepAlive;
    let framing: Framing;
    if (this.noBody || status === 204 || status === 304) framing = Framing.None;
    else if (te) {
      // RFC 9112 §6.3 (4): chunked last, the body is chunked; otherwise it runs to the close.
      if (codings & CHUNKED_LAST) framing = Framing.Chunked;
      else {
        framing = Framing.Close;
        this.keepAlive = false;
      }
    } else if (length >= 0) framing = length === 0 ? Framing.None : Framing.Length;
    else {
      framing = Framing.Close;
      this.keepAlive = false;
    }
    this.sink.head(status, reason, headers, this.keepAlive, framing);
    switch (framing) {
      case Framing.None:
        this.state = State.Done;
        this.sink.end();
        return;
      case Framing.Length:
        this.remaining = length;
        this.state = State.Length;
        return;
      case Framing.Chunked:
        this.state = State.ChunkSize;
        this.lineBytes = 0;
        this.remaining = 0;
        this.digits = 0;
        this.inExt = false;
        this.sawCR = false;
        return;
      case Framing.Close:
        this.state = State.Close;
        return;
    }
  }

  // ── chunked ──

  /** Reads a chunk-size line `HEX [;ext] CRLF`, possibly across reads (the size accumulates in `remaining`). */
  private readChunkSize(buf: Buffer, i: number): number {
    const len = buf.length;
    while (i < len) {
      const c = buf[i]!;
      this.lineBytes++;
      if (this.lineBytes > 4096) throw new ParseError('a chunk-size line is too long');
      i++;
      if (this.digits >= 0) {
        const d = hexValue(c);
        if (d >= 0) {
          if (++this.digits > 12) throw new ParseError('a chunk size is too large');
          this.remaining = this.remaining * 16 + d;
          continue;
        }
        if (this.digits === 0) throw new ParseError('a chunk size is not hexadecimal');
        // End of the digits: an extension (ignored), optional whitespace, or CR.
        this.digits = -1;
      }
      if (this.sawCR) {
        if (c !== LF) throw new ParseError('a chunk-size line is not ended by CRLF');
        this.sawCR = false;
        this.digits = 0;
        this.inExt = false;
        this.lineBytes = 0;
        if (this.remaining === 0) {
          this.state = State.Trailers;
          this.lineBytes = 0;
          this.trailerLineStart = true;
          this.trailerCR = false;
        } else this.state = State.ChunkData;
        return i;
      }
      if (c === CR) this.sawCR = true;
      else if (c === LF) throw new ParseError('a chunk-size line is not ended by CRLF');
      else if (c !== 59 /* ; */ && c !== 32 && c !== 9 && !this.inExt) throw new ParseError('a chunk size is not hexadecimal');
      else if (c === 59) this.inExt = true;
      else if (this.inExt && (c < 32 || c === 127) && c !== 9) throw new ParseError('a control character in a chunk extension');
    }
    return i;
  }
  private digits = 0;
  private sawCR = false;
  private inExt = false;

  /** Reads the trailer section up to its empty line; trailers are checked for form and dropped. */
  private readTrailers(buf: Buffer, i: number): number {
    const len = buf.length;
    while (i < len) {
      const c = buf[i++]!;
      if (++this.lineBytes > this.maxHeadBytes) throw new ParseError(`the trailer section is larger than ${this.maxHeadBytes} bytes`);
      if (this.trailerCR) {
        if (c !== LF) throw new ParseError('a trailer line is not ended by CRLF');
        this.trailerCR = false;
        if (this.trailerLineStart) {
          this.state = State.Done;
          return i;
        }
        this.trailerLineStart = true;
        continue;
      }
      if (c === CR) {
        this.trailerCR = true;
        continue;
      }
      if (c === LF || (c < 32 && c !== 9) || c === 127) throw new ParseError('a control character in a trailer');
      if (this.trailerLineStart && (c === 32 || c === 9)) throw new ParseError('obs-fold in the trailers');
      this.trailerLineStart = false;
    }
    return i;
  }
  private trailerLineStart = true;
  private trailerCR = false;
}

// readCodings' state, one number: bit 0, the last coding is chunked; bit 1, chunked was seen;
// the count of codings above them.
const CHUNKED_LAST = 1;
const CHUNKED_SEEN = 2;
const COUNT = ~3;
const ONE = 4;

/**
 * Reads one Transfer-Encoding field value in b[start, end) (`#transfer-coding`, RFC 9112 §7:
 * `token *( OWS ";" OWS transfer-parameter )`, empty list elements skipped) on top of the state
 * `acc` of the lines before it. Refused: a coding name that is not a token, chunked with
 * parameters, chunked applied twice (RFC 9112 §6.1).
 */
function readCodings(b: Buffer, start: number, end: number, acc: number): number {
  let i = start;
  while (i <= end) {
    let j = i;
    while (j < end && b[j] !== 44) j++;
    // One list element in b[i, j): OWS coding [OWS ";" parameters] OWS
    let s = i;
    while (s < j && (b[s] === 32 || b[s] === 9)) s++;
    let e = j;
    while (e > s && (b[e - 1] === 32 || b[e - 1] === 9)) e--;
    if (s < e) {
      let n = s;
      while (n < e && TOKEN[b[n]!] === 1) n++;
      if (n === s) throw new ParseError('a Transfer-Encoding coding is not a token');
      let k = n;
      while (k < e && (b[k] === 32 || b[k] === 9)) k++;
      if (k < e && b[k] !== 59) throw new ParseError('a Transfer-Encoding coding is not a token');
      const isChunked = lowerIs(b, s, n, 'chunked');
      if (isChunked) {
        if (k < e) throw new ParseError('chunked with parameters');
        if (acc & CHUNKED_SEEN) throw new ParseError('chunked applied more than once');
        acc |= CHUNKED_SEEN | CHUNKED_LAST;
      } else acc &= ~CHUNKED_LAST;
      acc += ONE;
    }
    i = j + 1;
  }
  return acc;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 32;
  if (l >= 97 && l <= 102) return l - 87;
  return -1;
}
