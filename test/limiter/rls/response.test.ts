// @tier: pure
/**
 * The pure halves of the RLS: response.ts (units, figures clamped to Envoy's uint32s, a fractional
 * reset from a store in whole ms, which descriptor's headers are sent, headers.ts's packed pairs
 * split back) and descriptors.ts under random bytes: whatever arrives, decoding and reading end in
 * a request or an `invalid_field` refusal, never another exception.
 */
import t from 'tap';
import fc from 'fast-check';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  RateLimitRequestSchema,
  RateLimitResponse_Code as Code,
  RateLimitResponse_RateLimit_Unit as Unit,
  RateLimitResponseSchema,
} from '../../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { headerPairs, rlsResponse, unitOf } from '../../../limiter/rls/response.js';
import { readRequest } from '../../../limiter/rls/descriptors.js';
import { rateLimitHeaders } from '../../../limiter/headers.js';
import { isPlatformError } from '../../../shared/errors.js';
import type { Outcome } from '../../../limiter/gate.js';

const NOW = 1_795_200_000_000;
const outcome = (over: Partial<Outcome['figures']> & { forward?: boolean; policy?: string; windowSec?: number } = {}): Outcome => ({
  forward: over.forward ?? true,
  status: over.forward === false ? 429 : 200,
  result: over.forward === false ? 'deny' : 'allow',
  figures: {
    allowed: over.forward ?? true,
    limit: over.limit ?? 10,
    remaining: over.remaining ?? 5,
    resetAtMs: over.resetAtMs ?? NOW + 2_500,
    retryAfterMs: over.retryAfterMs ?? 1_000,
  },
  policy: over.policy ?? 'gold',
  windowSec: over.windowSec ?? 1,
});

t.test('units: Envoy’s for the windows it has, UNKNOWN otherwise', async (t) => {
  t.same([1, 60, 3_600, 86_400, 604_800, 10, 2].map(unitOf), [
    Unit.SECOND,
    Unit.MINUTE,
    Unit.HOUR,
    Unit.DAY,
    Unit.WEEK,
    Unit.UNKNOWN,
    Unit.UNKNOWN,
  ]);
});

t.test('figures fit Envoy’s fields: whole, non-negative, uint32; a fractional reset in whole ms', async (t) => {
  const r = rlsResponse([outcome({ remaining: 3.7, limit: 2 ** 40, resetAtMs: NOW + 1_234.4 }), outcome({ remaining: -2 })], NOW);
  t.same(
    r.statuses.map((s) => [s.limitRemaining, s.currentLimit?.requestsPerUnit]),
    [
      [3, 0xffff_ffff],
      [0, 10],
    ],
  );
  t.same([r.statuses[0]!.durationUntilReset?.seconds, r.statuses[0]!.durationUntilReset?.nanos], [1n, 235_000_000], '1.235 s');
  t.doesNotThrow(() => toBinary(RateLimitResponseSchema, r), 'serializable');
  const past = rlsResponse([outcome({ resetAtMs: NOW - 5_000 })], NOW);
  t.same([past.statuses[0]!.durationUntilReset?.seconds, past.statuses[0]!.durationUntilReset?.nanos], [0n, 0], 'a reset in the past is 0');
});

t.test('headers: the first refused descriptor’s, else the one with the least remaining; none without a subject', async (t) => {
  const h = (r: ReturnType<typeof rlsResponse>) => Object.fromEntries(r.responseHeadersToAdd.map((x) => [x.key, x.value]));
  const ok = rlsResponse([outcome({ remaining: 5, policy: 'a' }), undefined, outcome({ remaining: 2, policy: 'b' })], NOW);
  t.equal(ok.overallCode, Code.OK);
  t.equal(h(ok)['ratelimit-policy'], '"b";q=10;w=1', 'the least remaining');
  t.equal(h(ok)['retry-after'], undefined, 'no Retry-After when admitted');
  const over = rlsResponse(
    [
      outcome({ remaining: 0, policy: 'a' }),
      outcome({ forward: false, remaining: 0, policy: 'b' }),
      outcome({ forward: false, policy: 'c' }),
    ],
    NOW,
  );
  t.equal(over.overallCode, Code.OVER_LIMIT);
  t.equal(h(over)['ratelimit-policy'], '"b";q=10;w=1', 'the first refused one');
  t.equal(h(over)['retry-after'], '1');
  t.same(rlsResponse([undefined], NOW).responseHeadersToAdd, [], 'no subject, no headers');
});

t.test('headerPairs splits headers.ts’s packed block, and passes plain pairs through', async (t) => {
  const o = outcome({ forward: false, remaining: 0 });
  const packed = rateLimitHeaders(o.figures, { name: 'gold', windowSec: 1 }, NOW, true);
  const pairs = headerPairs(packed).map((x) => [x.key, x.value]);
  t.same(
    pairs.map(([k]) => k),
    ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit', 'retry-after'],
  );
  t.notOk(
    pairs.some(([, v]) => v!.includes('\r') || v!.includes('\n')),
    'no line breaks left in a value',
  );
  t.same(
    headerPairs(['a', '1', 'b', '2']).map((x) => [x.key, x.value]),
    [
      ['a', '1'],
      ['b', '2'],
    ],
  );
});

t.test('random bytes: a request or an invalid_field refusal, never another exception', async () => {
  const limits = { maxDescriptors: 4, maxEntries: 4, maxValueBytes: 64 };
  const seed = toBinary(
    RateLimitRequestSchema,
    fromBinary(
      RateLimitRequestSchema,
      new Uint8Array([0x0a, 0x01, 0x65, 0x12, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 0x6b, 0x12, 0x03, 0x31, 0x2e, 0x32]),
    ),
  );
  fc.assert(
    fc.property(
      fc.oneof(
        fc.uint8Array({ maxLength: 200 }),
        // Mutations of a valid request reach deeper than noise.
        fc.tuple(fc.nat(seed.length - 1), fc.integer({ min: 0, max: 255 })).map(([i, b]) => {
          const m = seed.slice();
          m[i] = b;
          return m;
        }),
      ),
      (bytes) => {
        let req;
        try {
          req = fromBinary(RateLimitRequestSchema, bytes, { readUnknownFields: false });
        } catch {
          return; // answered INVALID_ARGUMENT by the server's decoder
        }
        try {
          readRequest(req, limits);
        } catch (err) {
          if (!isPlatformError(err) || err.code !== 'invalid_field') throw err;
        }
      },
    ),
    { numRuns: 2_000 },
  );
});
