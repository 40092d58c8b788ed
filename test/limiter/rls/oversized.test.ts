// @tier: pure
/**
 * Descriptor counts are refused before the request is decoded (limiter/rls/descriptors.ts,
 * `overCounts`): a 4 MB message of two-byte empty descriptors would otherwise decode into two
 * million objects (hundreds of MB, seconds of event loop on this machine) before the count check.
 * The walk over the raw bytes, then the same refusal from a real sidecar for bytes sent as given.
 */
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { overCounts } from '../../../limiter/rls/descriptors.js';
import { GRPC_ERROR_FIELD_KEY } from '../../../shared/grpc.js';
import { startUpstream } from '../../harness/upstream.js';
import { rawShouldRateLimit, startRlsSidecar } from './fixtures.js';

const limits = { maxDescriptors: 16, maxEntries: 16, maxValueBytes: 4096 };
const ascii = (s: string): number[] => [...Buffer.from(s, 'latin1')];
/** `n` empty descriptors (field 2, length 0). */
const empties = (n: number): Uint8Array => {
  const b = new Uint8Array(2 * n);
  for (let i = 0; i < n; i++) b[2 * i] = 0x12;
  return b;
};
const varint = (n: number): number[] => (n < 0x80 ? [n] : [(n & 0x7f) | 0x80, ...varint(n >>> 7)]);
/** One descriptor of `n` entries `{a: b}`, after a domain. */
const entries = (n: number): Uint8Array => {
  const entry = [0x0a, 0x06, 0x0a, 0x01, ...ascii('a'), 0x12, 0x01, ...ascii('b')];
  const body = Array.from({ length: n }, () => entry).flat();
  return new Uint8Array([0x0a, 0x04, ...ascii('edge'), 0x12, ...varint(body.length), ...body]);
};

t.test('counted on the raw bytes', async (t) => {
  t.same(overCounts(empties(2_000_000), limits), {
    field: 'descriptors',
    reason: 'more than 16 descriptors (LIMITER_RLS_MAX_DESCRIPTORS)',
  });
  t.same(overCounts(empties(17), limits)?.field, 'descriptors', '17 descriptors: refused');
  t.equal(overCounts(empties(16), limits), undefined, '16: left to the decoder and readRequest');
  t.same(overCounts(entries(17), limits)?.field, 'descriptors[0].entries', 'a descriptor of 17 entries: refused, named');
  t.equal(overCounts(entries(16), limits), undefined, '16 entries: left to the decoder');
  // hits_addend (field 3, varint) and a fixed64 unknown field are skipped, not miscounted.
  const mixed = new Uint8Array([0x18, 0x81, 0x01, 0x21, 1, 2, 3, 4, 5, 6, 7, 8, ...empties(17)]);
  t.equal(overCounts(mixed, limits)?.field, 'descriptors', 'counted past other fields');
  t.equal(overCounts(new Uint8Array([0x12, 0x05, 0x0a]), limits), undefined, 'truncated bytes: the decoder refuses them');
  t.equal(overCounts(new Uint8Array([0x0b, 0x0c]), limits)?.field, 'request', 'a group (no RateLimitRequest has one): refused');
});

t.test('a real sidecar refuses 2,000,000 empty descriptors with INVALID_ARGUMENT naming the field', async (t) => {
  const up = await startUpstream();
  t.teardown(() => up.close());
  const s = await startRlsSidecar(t, { upstream: up.url, quotas: [] });
  const r = await rawShouldRateLimit(t, s.rls, empties(2_000_000));
  t.equal(r.error?.code, grpc.status.INVALID_ARGUMENT);
  t.equal(r.error?.metadata.get(GRPC_ERROR_FIELD_KEY)[0]?.toString(), 'descriptors');
  t.match(r.error?.details, /more than 16 descriptors/);
  const ok = await rawShouldRateLimit(t, s.rls, entries(1));
  t.equal(ok.error, undefined, 'and answers the next call');
});
