/**
 * RESP2 bytes for the counter store's own connection (resp-connection.ts): an encoder that writes
 * commands straight into a slab of bytes, and an incremental reply parser. Pure: no sockets.
 *
 * Parser: replies may be split anywhere across chunks. A reply is parsed from its first byte; when
 * the bytes end inside it, the parser keeps them (from that reply's start) and tries again once at
 * least as many bytes as it knows it needs have arrived, so a large bulk string is not re-parsed
 * per chunk. Values: integers as numbers (exact up to 2^53, which every figure of the admission
 * script is), simple and bulk strings as strings (UTF-8), arrays as arrays, nil (`$-1`, `*-1`) as
 * null, error replies as {@link RespError} values (also inside arrays). Anything else is a
 * {@link RespProtocolError}: the stream cannot be re-synchronised, so the connection must drop.
 */

/** A reply value. */
export type RespValue = number | string | null | RespError | RespValue[];

/** An error reply (`-ERR …`, `-NOSCRIPT …`): a value, thrown to the caller whose reply it is. */
export class RespError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RespError';
  }
  /** The first word: `ERR`, `NOSCRIPT`, `WRONGPASS`, … */
  get prefix(): string {
    const i = this.message.indexOf(' ');
    return i < 0 ? this.message : this.message.slice(0, i);
  }
}

/** Bytes that are not RESP2: the connection carrying them must be dropped. */
export class RespProtocolError extends Error {
  constructor(message: string) {
    super(`redis: protocol error: ${message}`);
    this.name = 'RespProtocolError';
  }
}

const CR = 13;
const LF = 10;
/** Redis's own cap on a bulk string. */
const MAX_BULK = 512 * 1024 * 1024;
const MAX_ARRAY = 2 ** 31 - 1;
// Returned by the parse functions when the buffer ends inside the value.
const INCOMPLETE = Symbol('incomplete');
type Parsed = RespValue | typeof INCOMPLETE;

export class RespParser {
  #buf: Buffer | undefined;
  #chunks: Buffer[] = [];
  #held = 0;
  /** Bytes (from the held reply's start) needed before parsing again is worthwhile. */
  #need = 0;
  #pos = 0;
  readonly #onReply: (v: RespValue) => void;

  constructor(onReply: (v: RespValue) => void) {
    this.#onReply = onReply;
  }

  /** Bytes held of a reply not complete yet. */
  get pending(): number {
    return this.#held;
  }

  /** Drops whatever was held (after the connection is gone). */
  reset(): void {
    this.#chunks = [];
    this.#held = 0;
    this.#need = 0;
  }

  /** Parses every complete reply in `chunk` (and what was held), in order. Throws RespProtocolError. */
  feed(chunk: Buffer): void {
    let buf: Buffer;
    if (this.#held === 0) {
      buf = chunk;
    } else {
      this.#chunks.push(chunk);
      this.#held += chunk.length;
      if (this.#held < this.#need) return;
      buf = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#held);
      this.#chunks = [];
      this.#held = 0;
    }
    this.#buf = buf;
    let start = 0;
    const end = buf.length;
    while (start < end) {
      this.#pos = start;
      this.#need = 0;
      const v = this.#value();
      if (v === INCOMPLETE) {
        const rest = start === 0 ? buf : buf.subarray(start);
        this.#chunks = [rest];
        this.#held = rest.length;
        // #need is an absolute offset in buf; make it relative to the held reply's start.
        this.#need = this.#need > start ? this.#need - start : rest.length + 1;
        this.#buf = undefined;
        return;
      }
      start = this.#pos;
      this.#onReply(v);
    }
    this.#buf = undefined;
  }

  #value(): Parsed {
    const buf = this.#buf!;
    const p = this.#pos;
    if (p >= buf.length) return this.#more(p + 1);
    const type = buf[p]!;
    this.#pos = p + 1;
    switch (type) {
      case 58: // ':'
        return this.#integer();
      case 42: // '*'
        return this.#array();
      case 36: // '$'
        return this.#bulk();
      case 43: {
        // '+'
        const e = this.#lineEnd();
        if (e < 0) return INCOMPLETE;
        const s = buf.toString('utf8', p + 1, e);
        this.#pos = e + 2;
        return s;
      }
      case 45: {
        // '-'
        const e = this.#lineEnd();
        if (e < 0) return INCOMPLETE;
        const s = buf.toString('utf8', p + 1, e);
        this.#pos = e + 2;
        return new RespError(s);
      }
      default:
        throw new RespProtocolError(`unexpected type byte 0x${type.toString(16).padStart(2, '0')}`);
    }
  }

  #more(need: number): typeof INCOMPLETE {
    this.#need = need;
    return INCOMPLETE;
  }

  /** Index of the CR of the line starting at #pos (checking the LF), or -1 when not all there. */
  #lineEnd(): number {
    const buf = this.#buf!;
    const i = buf.indexOf(CR, this.#pos);
    if (i < 0 || i + 1 >= buf.length) {
      this.#more(buf.length + 1);
      return -1;
    }
    if (buf[i + 1] !== LF) throw new RespProtocolError('CR not followed by LF');
    return i;
  }

  /** A signed decimal integer line at #pos; #pos moves past its CRLF. */
  #integer(): Parsed {
    const buf = this.#buf!;
    let i = this.#pos;
    const len = buf.length;
    let neg = false;
    if (i < len && buf[i] === 45) {
      neg = true;
      i++;
    }
    const first = i;
    let n = 0;
    for (; i < len; i++) {
      const c = buf[i]!;
      if (c >= 48 && c <= 57) {
        n = n * 10 + (c - 48);
        continue;
      }
      if (c !== CR) throw new RespProtocolError(`bad integer byte 0x${c.toString(16).padStart(2, '0')}`);
      if (i === first) throw new RespProtocolError('empty integer');
      if (i + 1 >= len) return this.#more(i + 2);
      if (buf[i + 1] !== LF) throw new RespProtocolError('CR not followed by LF');
      this.#pos = i + 2;
      return neg ? -n : n;
    }
    return this.#more(len + 1);
  }

  #bulk(): Parsed {
    const n = this.#integer();
    if (n === INCOMPLETE) return n;
    const len = n as number;
    if (len === -1) return null;
    if (len < 0 || len > MAX_BULK) throw new RespProtocolError(`bad bulk length ${len}`);
    const buf = this.#buf!;
    const s = this.#pos;
    if (s + len + 2 > buf.length) return this.#more(s + len + 2);
    if (buf[s + len] !== CR || buf[s + len + 1] !== LF) throw new RespProtocolError('bulk string not followed by CRLF');
    this.#pos = s + len + 2;
    return buf.toString('utf8', s, s + len);
  }

  #array(): Parsed {
    const n = this.#integer();
    if (n === INCOMPLETE) return n;
    const len = n as number;
    if (len === -1) return null;
    if (len < 0 || len > MAX_ARRAY) throw new RespProtocolError(`bad array length ${len}`);
    const buf = this.#buf!;
    const out: RespValue[] = new Array<RespValue>(len);
    for (let k = 0; k < len; k++) {
      // The admission script's replies are arrays of integers: parse those inline.
      const p = this.#pos;
      if (p < buf.length && buf[p] === 58) {
        this.#pos = p + 1;
        const v = this.#integer();
        if (v === INCOMPLETE) return v;
        out[k] = v;
      } else {
        const v = this.#value();
        if (v === INCOMPLETE) return v;
        out[k] = v;
      }
    }
    return out;
  }
}

/** Default slab size: many commands per allocation. */
const SLAB = 64 * 1024;

/**
 * Encodes commands into a slab of bytes. Commands are appended between {@link take}s; `take()`
 * returns the bytes since the last one (a view of the slab, never overwritten afterwards: the slab
 * only moves forward, and a full one is replaced, not reused), so a caller can keep a command's
 * `[start, end)` range of {@link buf} to send it again.
 */
export class RespWriter {
  buf: Buffer;
  pos = 0;
  #start = 0;

  constructor(slab = SLAB) {
    this.buf = Buffer.allocUnsafe(slab);
  }

  /** Bytes written since the last take. */
  get pending(): number {
    return this.pos - this.#start;
  }

  /** Makes room for `n` more bytes, moving the bytes not taken yet to a new slab when needed. */
  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const keep = this.pos - this.#start;
    const next = Buffer.allocUnsafe(Math.max(SLAB, keep + n));
    this.buf.copy(next, 0, this.#start, this.pos);
    this.buf = next;
    this.#start = 0;
    this.pos = keep;
  }

  /** The bytes written since the last take (undefined when none). */
  take(): Buffer | undefined {
    if (this.pos === this.#start) return undefined;
    const out = this.buf.subarray(this.#start, this.pos);
    this.#start = this.pos;
    return out;
  }

  /** Appends raw bytes (already reserved). */
  raw(b: Buffer): void {
    b.copy(this.buf, this.pos);
    this.pos += b.length;
  }

  /** `*<n>\r\n` (reserved by the caller). */
  arrayHeader(n: number): void {
    this.buf[this.pos++] = 42;
    this.#digits(n);
  }

  /** A bulk string of a string (reserves). */
  bulk(s: string): void {
    // ASCII is the common case: write with the header guessed from the length, check the count.
    const max = s.length * 3 + 16;
    this.reserve(max);
    const buf = this.buf;
    const at = this.pos;
    buf[at] = 36;
    this.pos = at + 1;
    this.#digits(s.length);
    const written = buf.write(s, this.pos, 'utf8');
    if (written === s.length) {
      this.pos += written;
    } else {
      this.pos = at + 1;
      this.#digits(Buffer.byteLength(s, 'utf8'));
      this.pos += buf.write(s, this.pos, 'utf8');
    }
    buf[this.pos++] = CR;
    buf[this.pos++] = LF;
  }

  /** A bulk string of a number as Redis reads it (integers in decimal; others as `String(n)`). */
  bulkNumber(n: number): void {
    if (!Number.isSafeInteger(n)) {
      this.bulk(String(n));
      return;
    }
    this.reserve(24);
    const buf = this.buf;
    let p = this.pos;
    buf[p++] = 36;
    let v = n;
    let neg = 0;
    if (v < 0) {
      neg = 1;
      v = -v;
    }
    // Digits count of v.
    let d = 1;
    for (let x = v; x >= 10; x = Math.floor(x / 10)) d++;
    const len = d + neg;
    if (len >= 10) {
      buf[p++] = 48 + Math.floor(len / 10);
      buf[p++] = 48 + (len % 10);
    } else buf[p++] = 48 + len;
    buf[p++] = CR;
    buf[p++] = LF;
    if (neg) buf[p++] = 45;
    for (let k = p + d - 1; k >= p; k--) {
      buf[k] = 48 + (v % 10);
      v = Math.floor(v / 10);
    }
    p += d;
    buf[p++] = CR;
    buf[p++] = LF;
    this.pos = p;
  }

  /** Decimal digits of a non-negative integer, then CRLF (space reserved by the caller). */
  #digits(n: number): void {
    const buf = this.buf;
    let p = this.pos;
    let d = 1;
    for (let x = n; x >= 10; x = Math.floor(x / 10)) d++;
    let v = n;
    for (let k = p + d - 1; k >= p; k--) {
      buf[k] = 48 + (v % 10);
      v = Math.floor(v / 10);
    }
    p += d;
    buf[p++] = CR;
    buf[p++] = LF;
    this.pos = p;
  }
}

/** One whole command, encoded (for handshakes and tests). */
export function encodeCommand(args: readonly (string | number)[]): Buffer {
  const w = new RespWriter(256);
  w.reserve(16);
  w.arrayHeader(args.length);
  for (const a of args) {
    if (typeof a === 'number') w.bulkNumber(a);
    else w.bulk(a);
  }
  return Buffer.from(w.take()!);
}
