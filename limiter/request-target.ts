/**
 * The one canonical form of a request target. The sidecar reads the path once, here, and that
 * form is what the route match, the ownership rule, admission and the request line sent upstream
 * all use: an upstream never sees a path other than the one that was checked (README, "How the
 * sidecar reads a request").
 *
 * The rules, in order:
 * 1. Every byte of the path and query is visible ASCII (0x21–0x7E). Raw spaces, control bytes and
 *    non-ASCII bytes are refused: RFC 9112 §3.2 has clients percent-encode them, and uWS hands us
 *    the target already decoded as UTF-8, so their original bytes could not be forwarded exactly.
 * 2. The path starts with `/` (origin-form). A raw `\`, `;` or `#` anywhere in the path is
 *    refused: some upstreams read `\` as `/`, `;` as the start of path parameters (`/users;x/bob`
 *    is `/users/bob` to a servlet container) and `#` as the start of a fragment (`/admin#x` is
 *    `/admin` to a WHATWG URL parser), so the path they route would differ from ours.
 * 3. Percent-escapes must be `%` and two hex digits. Escapes of unreserved characters
 *    (`A–Z a–z 0–9 - . _ ~`, RFC 3986 §2.3) are decoded; the rest are kept, with upper-case hex
 *    (§6.2.2.1). Encoded `/` (`%2F`), `\` (`%5C`) and control bytes (`%00`–`%1F`, `%7F`) are
 *    refused: an upstream that decodes them would see other segments or bytes than we checked.
 * 4. Dot segments are removed after that decoding, so `%2e%2e` counts as `..` (RFC 3986 §5.2.4);
 *    a `..` that would climb above the root is refused rather than clamped.
 * 5. Empty segments (`//`) are merged into one `/`, as nginx's `merge_slashes` and our own
 *    services' router do; a trailing `/` is kept.
 *
 * The query is checked by rule 1 only and forwarded byte for byte.
 */

export interface TargetRefusal {
  readonly refused: true;
  readonly detail: string;
}

function refusal(detail: string): TargetRefusal {
  return { refused: true, detail };
}

/** Unreserved characters of RFC 3986 §2.3, by byte. */
const UNRESERVED = new Uint8Array(128);
for (let c = 0x30; c <= 0x39; c++) UNRESERVED[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) UNRESERVED[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) UNRESERVED[c] = 1;
for (const c of '-._~') UNRESERVED[c.charCodeAt(0)] = 1;

const HEX = '0123456789ABCDEF';

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/**
 * The canonical form of a request path (without the query), or why it cannot have one. Most
 * paths are already canonical and are returned as they are, after one pass over their bytes.
 */
export function canonicalPath(raw: string): string | TargetRefusal {
  const n = raw.length;
  if (n === 0 || raw.charCodeAt(0) !== 0x2f) return refusal('the request target must be a path starting with /');
  let plain = true;
  for (let i = 0; i < n; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return refusal('the path holds a space, a control character or a non-ASCII byte; percent-encode it');
    if (c === 0x5c) return refusal('the path holds a raw \\');
    if (c === 0x3b) return refusal('the path holds a ; (path parameters are not accepted)');
    if (c === 0x23) return refusal('the path holds a raw # (a fragment is never sent to a server)');
    if (c === 0x25) plain = false;
    else if (c === 0x2f && i + 1 < n) {
      const next = raw.charCodeAt(i + 1);
      if (next === 0x2f || next === 0x2e) plain = false;
    }
  }
  if (plain) return raw;
  return normalize(raw);
}

function normalize(raw: string): string | TargetRefusal {
  // Step 3: decode unreserved escapes, upper-case the rest, refuse the dangerous ones.
  let decoded = '';
  const n = raw.length;
  for (let i = 0; i < n; i++) {
    const c = raw.charCodeAt(i);
    if (c !== 0x25) {
      decoded += raw[i];
      continue;
    }
    const hi = i + 2 < n ? hexValue(raw.charCodeAt(i + 1)) : -1;
    const lo = hi >= 0 ? hexValue(raw.charCodeAt(i + 2)) : -1;
    if (lo < 0) return refusal('the path holds a % that does not start a valid escape (%XX)');
    const byte = hi * 16 + lo;
    if (byte === 0x2f || byte === 0x5c) return refusal('the path holds an encoded / or \\ (%2F, %5C)');
    if (byte < 0x20 || byte === 0x7f) return refusal('the path holds an encoded control character');
    decoded += byte < 0x80 && UNRESERVED[byte] === 1 ? String.fromCharCode(byte) : '%' + HEX[hi]! + HEX[lo]!;
    i += 2;
  }
  // Steps 4 and 5 over the segments: the leading '' from the initial '/' is skipped.
  const parts = decoded.split('/');
  const out: string[] = [];
  let trailingSlash = false;
  for (let i = 1; i < parts.length; i++) {
    const seg = parts[i]!;
    const last = i === parts.length - 1;
    if (seg === '' || seg === '.') {
      trailingSlash = last;
      continue;
    }
    if (seg === '..') {
      if (out.length === 0) return refusal('the path climbs above the root with ..');
      out.pop();
      trailingSlash = last;
      continue;
    }
    out.push(seg);
    trailingSlash = false;
  }
  if (out.length === 0) return '/';
  return '/' + out.join('/') + (trailingSlash ? '/' : '');
}

/** Why a query string cannot be forwarded byte for byte, or undefined when it can. */
export function queryRefusal(query: string): TargetRefusal | undefined {
  for (let i = 0; i < query.length; i++) {
    const c = query.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return refusal('the query holds a space, a control character or a non-ASCII byte; percent-encode it');
  }
  return undefined;
}

export function isRefusal(v: unknown): v is TargetRefusal {
  return typeof v === 'object' && v !== null && (v as TargetRefusal).refused;
}
