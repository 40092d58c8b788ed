/**
 * How an Envoy rate limit descriptor names one of our subjects and routes (limiter/rls/README.md,
 * "Descriptors"): pure, no I/O.
 *
 * Per descriptor, these entry keys mean something (any other key is ignored, as Envoy configs often
 * carry entries meant for other services, such as `destination_cluster`):
 *
 * | key | meaning | HTTP equivalent |
 * |---|---|---|
 * | `api_key` | the raw API key, hashed at once (`key:<sha256>`); an unknown key gets the decoy denial | `X-API-Key` |
 * | `subject` | a quota subject id as is: `user:<id>`, `tenant:<id>` or `key:<sha256 hex>`, vouched for by Envoy | the bearer token's subject |
 * | `generic_key` | the same as `subject` (Envoy's `generic_key` action: one constant bucket for a route) | |
 * | `remote_address` | the client address, under the per-IP cap (a route's own `ip=` cap when `path` names such a route) | the peer address |
 * | `plan` | the plan of a `subject`/`generic_key` caller that has no record of its own | the token's `plan` claim |
 * | `path` | the request path (query dropped, canonicalised): the route (class → default fail mode, metrics label) and the quota's route rules | the path |
 * | `method` | the request method, for route rules restricted to methods | the method |
 *
 * When a descriptor has more than one subject entry, the first of `api_key`, `subject`,
 * `generic_key`, `remote_address` counts, the order in which the HTTP side picks a caller. A
 * descriptor with none limits nothing (OK, nothing counted), as envoyproxy/ratelimit answers a
 * descriptor its configuration does not name.
 *
 * Malformed or oversized input is an `invalid_field` PlatformError naming the field
 * (`descriptors[1].entries[0].value`), which the gRPC edge answers INVALID_ARGUMENT.
 */
import { isIP } from 'node:net';
import { invalidField, type PlatformError } from '../../shared/errors.js';
import type { RateLimitRequest } from '../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { canonicalPath } from '../request-target.js';
import { apiKeySubject, ipCaller, type Caller } from '../subject.js';

export interface DescriptorLimits {
  /** LIMITER_RLS_MAX_DESCRIPTORS */
  maxDescriptors: number;
  /** LIMITER_RLS_MAX_ENTRIES */
  maxEntries: number;
  /** LIMITER_RLS_MAX_VALUE: bytes of a key, a value or the domain. */
  maxValueBytes: number;
}

/** One descriptor, read. */
export interface DescriptorQuery {
  /** Undefined: the descriptor names no subject and limits nothing. */
  caller: Caller | undefined;
  /** The canonical path, or undefined when the descriptor has no `path` entry. */
  path: string | undefined;
  /** Upper-case; '' when there is no `method` entry (then only rules for every method match). */
  method: string;
  /** What the request adds to the counter: the descriptor's hits_addend, else the request's, else 1. */
  hits: number;
}

/** The entry keys that mean something (README, "Descriptors"); the rest are ignored. */
export const ENTRY_KEYS = ['api_key', 'subject', 'generic_key', 'remote_address', 'plan', 'path', 'method'] as const;
type EntryKey = (typeof ENTRY_KEYS)[number];
const KNOWN = new Set<string>(ENTRY_KEYS);

/** The largest hits a descriptor may add: the counter stores' largest cost. */
export const MAX_HITS = 2 ** 31;

const SUBJECT_RE = /^(?:key:[0-9a-f]{64}|(?:user|tenant):[\x21-\x7e]{1,123})$/;
const PLAN_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const METHOD_RE = /^[A-Za-z]{1,32}$/;
const API_KEY_RE = /^[\x21-\x7e]{1,256}$/;

/**
 * Reads every descriptor of a request.
 *
 * @throws PlatformError `invalid_field` for a malformed or oversized request.
 */
export function readRequest(req: RateLimitRequest, limits: DescriptorLimits): DescriptorQuery[] {
  if (overBytes(req.domain, limits.maxValueBytes)) throw tooLong('domain', limits);
  if (req.descriptors.length === 0) throw invalidField('descriptors', 'at least one descriptor is required');
  if (req.descriptors.length > limits.maxDescriptors) {
    throw invalidField(
      'descriptors',
      `at most ${limits.maxDescriptors} descriptors (LIMITER_RLS_MAX_DESCRIPTORS), got ${req.descriptors.length}`,
    );
  }
  // Envoy: an unset (0) request-level hits_addend means 1. It is a uint32, so it can exceed the
  // stores' largest cost as a descriptor's can: refused the same way, not capped into a denial.
  if (req.hitsAddend > MAX_HITS) throw invalidField('hits_addend', `must be at most ${MAX_HITS}`);
  const requestHits = req.hitsAddend === 0 ? 1 : req.hitsAddend;
  return req.descriptors.map((d, i) => {
    const at = `descriptors[${i}]`;
    if (d.entries.length === 0) throw invalidField(`${at}.entries`, 'a descriptor needs at least one entry');
    if (d.entries.length > limits.maxEntries) {
      throw invalidField(`${at}.entries`, `at most ${limits.maxEntries} entries (LIMITER_RLS_MAX_ENTRIES), got ${d.entries.length}`);
    }
    const seen = new Map<EntryKey, string>();
    for (let j = 0; j < d.entries.length; j++) {
      const e = d.entries[j]!;
      const field = `${at}.entries[${j}]`;
      if (e.key === '') throw invalidField(`${field}.key`, 'must not be empty');
      if (overBytes(e.key, limits.maxValueBytes)) throw tooLong(`${field}.key`, limits);
      if (overBytes(e.value, limits.maxValueBytes)) throw tooLong(`${field}.value`, limits);
      if (!KNOWN.has(e.key)) continue;
      const key = e.key as EntryKey;
      if (seen.has(key)) throw invalidField(`${field}.key`, `${key} is given twice in one descriptor`);
      seen.set(key, checkValue(key, e.value, `${field}.value`));
    }
    // Envoy: a per-descriptor hits_addend, when set, wins, and 0 there only reads the figures.
    let hits = requestHits;
    if (d.hitsAddend !== undefined) {
      if (d.hitsAddend > BigInt(MAX_HITS)) throw invalidField(`${at}.hits_addend`, `must be at most ${MAX_HITS}`);
      hits = Number(d.hitsAddend);
    }
    const rawPath = seen.get('path');
    return {
      caller: callerOf(seen),
      path: rawPath === undefined ? undefined : pathOf(rawPath, `${at}.path`),
      method: seen.get('method')?.toUpperCase() ?? '',
      hits,
    };
  });
}

function callerOf(seen: Map<EntryKey, string>): Caller | undefined {
  const apiKey = seen.get('api_key');
  if (apiKey !== undefined) return { kind: 'key', subject: apiKeySubject(apiKey), role: 'service', userId: undefined, plan: undefined };
  const subject = seen.get('subject') ?? seen.get('generic_key');
  if (subject !== undefined) {
    // A `key:` subject is an API key already hashed by whoever sent it: it is treated as one (an
    // unknown key is decoyed), never as a token subject that would fall back to the default plan.
    if (subject.startsWith('key:')) return { kind: 'key', subject, role: 'service', userId: undefined, plan: undefined };
    return { kind: 'token', subject, role: 'customer', userId: undefined, plan: seen.get('plan') };
  }
  const address = seen.get('remote_address');
  if (address !== undefined) return ipCaller(address);
  return undefined;
}

function checkValue(key: EntryKey, value: string, field: string): string {
  switch (key) {
    case 'api_key':
      if (!API_KEY_RE.test(value)) throw invalidField(field, 'an API key is 1 to 256 visible ASCII characters');
      return value;
    case 'subject':
    case 'generic_key':
      if (!SUBJECT_RE.test(value)) {
        throw invalidField(field, `${key} must be a quota subject: user:<id>, tenant:<id> or key:<sha256 hex> (ids are visible ASCII)`);
      }
      return value;
    case 'remote_address': {
      // Envoy's remote_address action sends the bare address; an IPv6 one may come bracketed.
      const ip = value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
      if (isIP(ip) === 0) throw invalidField(field, 'remote_address must be an IPv4 or IPv6 address');
      return ip;
    }
    case 'plan':
      if (!PLAN_RE.test(value)) throw invalidField(field, 'a plan name is 1 to 64 of A-Z a-z 0-9 _ . -');
      return value;
    case 'method':
      if (!METHOD_RE.test(value)) throw invalidField(field, 'method must be an HTTP method name');
      return value;
    case 'path':
      return value;
  }
}

function pathOf(raw: string, field: string): string {
  const q = raw.indexOf('?');
  const path = canonicalPath(q === -1 ? raw : raw.slice(0, q));
  if (typeof path !== 'string') throw invalidField(field, path.detail);
  return path;
}

function tooLong(field: string, limits: DescriptorLimits): PlatformError {
  return invalidField(field, `must be at most ${limits.maxValueBytes} bytes (LIMITER_RLS_MAX_VALUE)`);
}

/** True when `s` is longer than `max` UTF-8 bytes. */
function overBytes(s: string, max: number): boolean {
  // A UTF-16 unit is 1 to 3 UTF-8 bytes: only strings between max/3 and max units are measured.
  if (s.length * 3 <= max) return false;
  if (s.length > max) return true;
  return Buffer.byteLength(s, 'utf8') > max;
}

/**
 * Counts descriptors and each one's entries in a RateLimitRequest's raw bytes, before they are
 * decoded: a 4 MB message of empty descriptors (2 bytes each) would otherwise allocate two million
 * objects and hold the event loop for seconds before {@link readRequest} refuses the count. A walk
 * of the wire format, allocating nothing. Returns the refusal (field and reason) when a count is
 * over its limit, else undefined; malformed bytes are left to the decoder, except groups, which no
 * RateLimitRequest has.
 */
export function overCounts(b: Uint8Array, limits: DescriptorLimits): { field: string; reason: string } | undefined {
  let descriptors = 0;
  let at = 0;
  const end = b.length;
  while (at < end) {
    const [tag, p] = varint(b, at);
    if (p < 0) return undefined;
    const wt = tag % 8;
    const field = Math.floor(tag / 8);
    if (wt === 2) {
      const [len, q] = varint(b, p);
      if (q < 0 || q + len > end) return undefined;
      if (field === 2) {
        descriptors++;
        if (descriptors > limits.maxDescriptors) {
          return { field: 'descriptors', reason: `more than ${limits.maxDescriptors} descriptors (LIMITER_RLS_MAX_DESCRIPTORS)` };
        }
        const entries = countField1(b, q, q + len, limits.maxEntries);
        if (entries > limits.maxEntries) {
          return {
            field: `descriptors[${descriptors - 1}].entries`,
            reason: `more than ${limits.maxEntries} entries (LIMITER_RLS_MAX_ENTRIES)`,
          };
        }
      }
      at = q + len;
    } else {
      const next = skip(b, p, wt);
      if (next < 0) return wt === 3 || wt === 4 ? { field: 'request', reason: 'unexpected group in a RateLimitRequest' } : undefined;
      at = next;
    }
  }
  return undefined;
}

/** Length-delimited field-1 occurrences in b[from, to), counting stops past `max`. */
function countField1(b: Uint8Array, from: number, to: number, max: number): number {
  let n = 0;
  let at = from;
  while (at < to && n <= max) {
    const [tag, p] = varint(b, at);
    if (p < 0 || p > to) return n;
    const wt = tag % 8;
    if (wt === 2) {
      const [len, q] = varint(b, p);
      if (q < 0 || q + len > to) return n;
      if (Math.floor(tag / 8) === 1) n++;
      at = q + len;
    } else {
      const next = skip(b, p, wt);
      if (next < 0 || next > to) return n;
      at = next;
    }
  }
  return n;
}

/** Skips a non-length-delimited value of wire type `wt` at `at`: the next offset, or -1. */
function skip(b: Uint8Array, at: number, wt: number): number {
  if (wt === 0) return varint(b, at)[1];
  if (wt === 1) return at + 8 <= b.length ? at + 8 : -1;
  if (wt === 5) return at + 4 <= b.length ? at + 4 : -1;
  return -1;
}

/** A varint at `at` (up to 2^53): [value, next offset], next -1 when truncated or too long. */
function varint(b: Uint8Array, at: number): [number, number] {
  let v = 0;
  let mul = 1;
  for (let i = at; i < b.length && i < at + 10; i++) {
    const byte = b[i]!;
    v += (byte & 0x7f) * mul;
    if (byte < 0x80) return [v, i + 1];
    mul *= 128;
  }
  return [0, -1];
}
