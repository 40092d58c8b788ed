// @tier: pure
/**
 * Wire fixtures that do not come from our encoder: RateLimitRequests published by Envoy and
 * envoyproxy/ratelimit, encoded here by hand, byte by byte, from the protobuf wire format (tag =
 * field number << 3 | wire type; 2 = length-delimited, 0 = varint), sent to a real sidecar as raw
 * gRPC message bytes. Each fixture names its source (repository, commit, file and line).
 *
 * What comes back is checked twice: decoded by our schema, and for the descriptors that limit
 * nothing, byte for byte against the hand-encoded response. The published JSON response of
 * envoyproxy/ratelimit's README is also read with our schema, which checks our field and enum names
 * against theirs.
 */
import t from 'tap';
import { fromBinary, fromJson, toBinary, type JsonValue } from '@bufbuild/protobuf';
import {
  RateLimitRequestSchema,
  RateLimitResponse_Code as Code,
  RateLimitResponse_RateLimit_Unit as Unit,
  RateLimitResponseSchema,
} from '../../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { readRequest } from '../../../limiter/rls/descriptors.js';
import { startUpstream } from '../../harness/upstream.js';
import { decodeResponse, rawShouldRateLimit, startRlsSidecar } from './fixtures.js';

const ascii = (s: string): number[] => [...Buffer.from(s, 'latin1')];
const bytes = (...parts: Array<number | number[]>): Uint8Array => new Uint8Array(parts.flat());

/**
 * envoyproxy/ratelimit README.md, "/json endpoint" (commit f2fb15770f7fd1c88ca6c3a1b58ee513917ace96):
 * `{"domain": "dummy", "descriptors": [{"entries": [{"key": "one_per_day", "value": "something"}]}]}`
 */
const README_JSON_REQUEST = bytes(
  [0x0a, 0x05], ascii('dummy'), // domain = 1
  [0x12, 0x1a], // descriptors = 2, 26 bytes
  [0x0a, 0x18], // entries = 1, 24 bytes
  [0x0a, 0x0b], ascii('one_per_day'), // key = 1
  [0x12, 0x09], ascii('something'), // value = 2
); // prettier-ignore

/**
 * envoyproxy/ratelimit test/integration/integration_test.go line 142 (same commit):
 * `common.NewRateLimitRequest("basic", [][][2]string{{{"key1", "foo"}}}, 1)`, whose builder
 * (test/common/common.go line 60) sets domain, one descriptor of one entry, and hits_addend 1.
 */
const INTEGRATION_BASIC_REQUEST = bytes(
  [0x0a, 0x05], ascii('basic'),
  [0x12, 0x0d],
  [0x0a, 0x0b],
  [0x0a, 0x04], ascii('key1'),
  [0x12, 0x03], ascii('foo'),
  [0x18, 0x01], // hits_addend = 3
); // prettier-ignore

/**
 * envoyproxy/ratelimit test/memcached/cache_impl_test.go line 107 (same commit):
 * `NewRateLimitRequestWithPerDescriptorHitsAddend("domain", {{key3: value3}}, {{key3: value3},
 * {subkey3: subvalue3}}}, {1, 2})`: request hits_addend 1, and a google.protobuf.UInt64Value
 * hits_addend (field 3 of the descriptor) of 1 and 2.
 */
const PER_DESCRIPTOR_HITS_REQUEST = bytes(
  [0x0a, 0x06], ascii('domain'),
  [0x12, 0x14],
  [0x0a, 0x0e], [0x0a, 0x04], ascii('key3'), [0x12, 0x06], ascii('value3'),
  [0x1a, 0x02], [0x08, 0x01], // hits_addend = 3: UInt64Value { value = 1 }
  [0x12, 0x2a],
  [0x0a, 0x0e], [0x0a, 0x04], ascii('key3'), [0x12, 0x06], ascii('value3'),
  [0x0a, 0x14], [0x0a, 0x07], ascii('subkey3'), [0x12, 0x09], ascii('subvalue3'),
  [0x1a, 0x02], [0x08, 0x02],
  [0x18, 0x01],
); // prettier-ignore

/**
 * Envoy's API docs: the RateLimitDescriptor comment in envoy/extensions/common/ratelimit/v3/
 * ratelimit.proto (envoyproxy/data-plane-api commit 84e84367f2560cdb47b9bb78fd3e615feb80c3e4),
 * `["authenticated": "false"], ["remote_address": "10.0.0.1"]`, in the domain its RateLimitRequest
 * comment gives as the example, "envoy". The one fixture here whose entries our rule reads.
 */
const ENVOY_DOCS_REMOTE_ADDRESS_REQUEST = bytes(
  [0x0a, 0x05], ascii('envoy'),
  [0x12, 0x34],
  [0x0a, 0x16], [0x0a, 0x0d], ascii('authenticated'), [0x12, 0x05], ascii('false'),
  [0x0a, 0x1a], [0x0a, 0x0e], ascii('remote_address'), [0x12, 0x08], ascii('10.0.0.1'),
); // prettier-ignore

/** `overall_code: OK` (1 = varint 1) and one bare `statuses { code: OK }` per descriptor. */
const okFor = (descriptors: number): Uint8Array =>
  bytes([0x08, 0x01], ...Array.from({ length: descriptors }, () => [0x12, 0x02, 0x08, 0x01]));

const up = await startUpstream();
t.teardown(() => up.close());
const s = await startRlsSidecar(t, { upstream: up.url, quotas: [], env: { LIMITER_IP_RATE: '1', LIMITER_IP_BURST: '2' } });

t.test('the hand encodings are what their published JSON means (cross-check with a protobuf decoder)', async (t) => {
  const readme = fromBinary(RateLimitRequestSchema, README_JSON_REQUEST);
  t.same(
    fromJson(RateLimitRequestSchema, { domain: 'dummy', descriptors: [{ entries: [{ key: 'one_per_day', value: 'something' }] }] }),
    readme,
    'README /json request',
  );
  t.same(toBinary(RateLimitRequestSchema, readme), README_JSON_REQUEST, 'and its canonical bytes');
  const limits = { maxDescriptors: 16, maxEntries: 16, maxValueBytes: 4096 };
  t.same(
    readRequest(fromBinary(RateLimitRequestSchema, PER_DESCRIPTOR_HITS_REQUEST), limits).map((q) => q.hits),
    [1, 2],
    'per-descriptor hits_addend read from field 3 of the descriptor',
  );
  t.same(
    readRequest(fromBinary(RateLimitRequestSchema, INTEGRATION_BASIC_REQUEST), limits).map((q) => q.hits),
    [1],
    'request hits_addend from field 3 of the request',
  );
});

t.test('descriptors that name none of our subjects: OK, byte for byte', async (t) => {
  for (const [what, req, n] of [
    ['README /json request', README_JSON_REQUEST, 1],
    ['integration test request', INTEGRATION_BASIC_REQUEST, 1],
    ['per-descriptor hits_addend request', PER_DESCRIPTOR_HITS_REQUEST, 2],
  ] as const) {
    const r = await rawShouldRateLimit(t, s.rls, req);
    t.equal(r.error, undefined, `${what}: answered`);
    t.same(new Uint8Array(r.response!), okFor(n), `${what}: overall OK, ${n} bare OK status(es)`);
  }
});

t.test('Envoy’s documented remote_address descriptor: the per-IP cap', async (t) => {
  const answers = [];
  for (let i = 0; i < 3; i++) {
    const r = await rawShouldRateLimit(t, s.rls, ENVOY_DOCS_REMOTE_ADDRESS_REQUEST);
    answers.push(decodeResponse(r.response!));
  }
  t.same(
    answers.map((a) => [a.overallCode, a.statuses[0]!.code, a.statuses[0]!.limitRemaining]),
    [
      [Code.OK, Code.OK, 1],
      [Code.OK, Code.OK, 0],
      [Code.OVER_LIMIT, Code.OVER_LIMIT, 0],
    ],
    'LIMITER_IP_BURST 2 for 10.0.0.1; "authenticated" is ignored',
  );
  const limit = answers[0]!.statuses[0]!.currentLimit!;
  t.same([limit.name, limit.requestsPerUnit, limit.unit], ['anonymous', 2, Unit.SECOND], 'current_limit');
  const raw = (await rawShouldRateLimit(t, s.rls, ENVOY_DOCS_REMOTE_ADDRESS_REQUEST)).response!;
  // overall_code = 1, varint 2 (OVER_LIMIT): the first two bytes of the answer.
  t.same([...raw.subarray(0, 2)], [0x08, 0x02], 'OVER_LIMIT on the wire as Envoy numbers it');
});

t.test('envoyproxy/ratelimit’s published JSON response reads with our schema (names and enum values agree)', async (t) => {
  // README.md "/json endpoint", same commit as above.
  const published: JsonValue = {
    overallCode: 'OVER_LIMIT',
    statuses: [
      { code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 1, unit: 'MINUTE' } },
      { code: 'OK', currentLimit: { requestsPerUnit: 2, unit: 'MINUTE' }, limitRemaining: 1 },
    ],
  };
  const r = fromJson(RateLimitResponseSchema, published);
  t.equal(r.overallCode, Code.OVER_LIMIT);
  t.same(
    r.statuses.map((x) => [x.code, x.currentLimit?.requestsPerUnit, x.currentLimit?.unit, x.limitRemaining]),
    [
      [Code.OVER_LIMIT, 1, Unit.MINUTE, 0],
      [Code.OK, 2, Unit.MINUTE, 1],
    ],
  );
});
