/**
 * The gate's outcomes as Envoy's RateLimitResponse (limiter/rls/README.md, "Responses"): pure,
 * the time passed in.
 *
 * - one DescriptorStatus per descriptor, in order: OK when the outcome is forwarded (shadow-mode
 *   denials included), OVER_LIMIT when it is refused (a quota spent, an unknown API key's decoy, a
 *   fail-closed quota while the store is down); `current_limit` is the policy name with the
 *   `X-RateLimit-Limit` figure per the quota's window, `limit_remaining` and `duration_until_reset`
 *   the bucket's; a descriptor that names no subject is a bare OK;
 * - `overall_code`: OVER_LIMIT when any descriptor is, else OK;
 * - `response_headers_to_add`: the rate-limit headers the HTTP side sends (limiter/headers.ts), of
 *   one descriptor: the first refused one, else the one with the least remaining. Retry-After only
 *   on a refusal, as on HTTP.
 */
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  RateLimitResponse_Code as Code,
  RateLimitResponse_RateLimit_Unit as Unit,
  RateLimitResponseSchema,
  type RateLimitResponse,
  type RateLimitResponse_DescriptorStatusSchema,
} from '../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import type { HeaderValueSchema } from '../../proto/gen/envoy/config/core/v3/base_pb.js';

type StatusInit = MessageInitShape<typeof RateLimitResponse_DescriptorStatusSchema>;
type HeaderInit = MessageInitShape<typeof HeaderValueSchema>;
import { rateLimitHeaders } from '../headers.js';
import type { Outcome } from '../gate.js';

export { Code };

const UNITS: ReadonlyMap<number, Unit> = new Map([
  [1, Unit.SECOND],
  [60, Unit.MINUTE],
  [3_600, Unit.HOUR],
  [86_400, Unit.DAY],
  [604_800, Unit.WEEK],
]);

/** Envoy's unit for a window of `windowSec`; UNKNOWN when it is not one of Envoy's units. */
export function unitOf(windowSec: number): Unit {
  return UNITS.get(windowSec) ?? Unit.UNKNOWN;
}

const UINT32_MAX = 0xffff_ffff;
const clampU32 = (n: number): number => (n <= 0 ? 0 : n >= UINT32_MAX ? UINT32_MAX : Math.floor(n));

/** The response to a request whose descriptors had these outcomes (undefined: the descriptor limits nothing). */
export function rlsResponse(outcomes: ReadonlyArray<Outcome | undefined>, nowMs: number): RateLimitResponse {
  const statuses: StatusInit[] = [];
  let over = false;
  let reported: Outcome | undefined;
  for (const o of outcomes) {
    if (o === undefined) {
      statuses.push({ code: Code.OK });
      continue;
    }
    const refused = !o.forward;
    const f = o.figures;
    // Whole ms: a store may report a fractional reset time, and Duration's nanos is an int32.
    const untilResetMs = Math.max(0, Math.ceil(f.resetAtMs - nowMs));
    statuses.push({
      code: refused ? Code.OVER_LIMIT : Code.OK,
      currentLimit: { name: o.policy, requestsPerUnit: clampU32(f.limit), unit: unitOf(o.windowSec) },
      limitRemaining: clampU32(f.remaining),
      durationUntilReset: { seconds: BigInt(Math.floor(untilResetMs / 1000)), nanos: (untilResetMs % 1000) * 1_000_000 },
    });
    if (refused && !over) {
      over = true;
      reported = o;
    } else if (!over && (reported === undefined || f.remaining < reported.figures.remaining)) {
      reported = o;
    }
  }
  return create(RateLimitResponseSchema, {
    overallCode: over ? Code.OVER_LIMIT : Code.OK,
    statuses,
    responseHeadersToAdd: reported === undefined ? [] : headerValues(reported, nowMs),
  });
}

/** The HTTP side's rate-limit headers for an outcome, as HeaderValues. */
export function headerValues(o: Outcome, nowMs: number): HeaderInit[] {
  return headerPairs(rateLimitHeaders(o.figures, { name: o.policy, windowSec: o.windowSec }, nowMs, !o.forward));
}

/**
 * Flat [name, value, …] pairs as headers.ts writes them for uWS, where one value may carry further
 * `\r\n`-separated header lines (its one-native-call trick): split back into one HeaderValue each.
 */
export function headerPairs(flat: readonly string[]): HeaderInit[] {
  const out: HeaderInit[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const lines = flat[i + 1]!.split('\r\n');
    out.push({ key: flat[i]!, value: lines[0]! });
    for (let j = 1; j < lines.length; j++) {
      const line = lines[j]!;
      const colon = line.indexOf(':');
      out.push({ key: line.slice(0, colon), value: line.slice(colon + 1).trim() });
    }
  }
  return out;
}
