/**
 * Validation of a quota record on its way into the store, and its resolved ("stored") form. Pure:
 * whether a referenced plan exists is checked by the store, inside the write's transaction.
 *
 * Three kinds of record:
 * - **own limits** (`rate` ≥ 1): `algorithm` is required; `burst` 0 means `rate` (no burst above the
 *   rate); `interval_ms` 0 means `unit` when given, else 1000 (README, "Quota records"); `cost` 0
 * means 1 and may
 *   not exceed `burst` (such a request could never be admitted); a route rule's `cost` 0 means the
 *   record's cost. `fail_mode` unset leaves the route class's default to the sidecar. `accuracy`
 *   unset means exact; `approximate` (leases, limiter/admission/README.md) needs a token or leaky
 *   bucket: a window's count cannot be handed out and taken back.
 * - **plans** (`plan:<name>`): own limits, and `plan` is the plan's own name (filled in when empty).
 *   A plan cannot reference another plan, so its `rate` must be at least 1.
 * - **plan references** (`rate` 0, any other subject): the subject takes everything from the plan
 *   named by `plan`, which must exist. Fields that would have no effect (`algorithm`, `burst`,
 *   `interval_ms`, `unit`, `cost`, `fail_mode`, `routes`, `accuracy`) are refused rather than silently stored;
 *   only `shadow` may be set. Stored with those fields at zero.
 *
 * Errors are `invalid_field` naming the field with the caller's prefix (`quota.rate` for gRPC,
 * `rate` for the HTTP body).
 */
import { create } from '@bufbuild/protobuf';
import {
  Accuracy,
  Algorithm,
  FailMode,
  QuotaSchema,
  RouteRuleSchema,
  Unit,
  type Quota,
  type RouteRule,
} from '../../proto/gen/quota/v1/quota_pb.js';
import { invalidField } from '../../shared/errors.js';
import { checkSubjectId, isPlanName, planOfSubject } from './subject.js';

/** interval_ms defaults to 1000 (README, "Quota records"). */
export const DEFAULT_INTERVAL_MS = 1000;
/** The longest interval a record may count over: 31 days. */
export const MAX_INTERVAL_MS = 31 * 86_400_000;
export const MAX_ROUTES = 64;
export const MAX_PATH_PREFIX_LENGTH = 256;

/**
 * Milliseconds of each `unit`: `second`, and our additions `minute`, `hour` and `day` (README,
 * "Quota records").
 */
export const UNIT_MS: Readonly<Record<number, number>> = {
  [Unit.SECOND]: 1000,
  [Unit.MINUTE]: 60_000,
  [Unit.HOUR]: 3_600_000,
  [Unit.DAY]: 86_400_000,
};

const ALGORITHMS = new Set<number>([Algorithm.TOKEN_BUCKET, Algorithm.SLIDING_WINDOW, Algorithm.LEAKY_BUCKET, Algorithm.FIXED_WINDOW]);
const FAIL_MODES = new Set<number>([FailMode.UNSPECIFIED, FailMode.OPEN, FailMode.CLOSED]);
const ACCURACIES = new Set<number>([Accuracy.UNSPECIFIED, Accuracy.EXACT, Accuracy.APPROXIMATE]);
const LEASABLE = new Set<number>([Algorithm.TOKEN_BUCKET, Algorithm.LEAKY_BUCKET]);
const METHOD_RE = /^[A-Z]{1,16}$/;
const PATH_RE = /^\/[\x21-\x7e]*$/;

/** What a validated record needs from the store: the plan it references, if any. */
export interface ValidatedQuota {
  /** The record in its stored form; `version` and `updated_at` are assigned by the store. */
  quota: Quota;
  /** Set for a plan reference: the plan that must exist (`plan:<name>`). */
  referencedPlan: string | undefined;
}

/**
 * Validates `input` and returns its stored form.
 *
 * @param prefix prepended to field names in errors (`quota.` for gRPC, empty for HTTP bodies).
 * @throws PlatformError `invalid_field` naming the first field at fault.
 */
export function validateQuota(input: Quota, prefix = ''): ValidatedQuota {
  const f = (name: string): string => `${prefix}${name}`;
  checkSubjectId(input.subjectId, f('subject_id'));
  const planName = planOfSubject(input.subjectId);
  const isPlan = planName !== undefined;

  if (input.plan !== '' && !isPlanName(input.plan)) throw invalidField(f('plan'), 'a plan name is 1 to 64 of A-Z a-z 0-9 _ . -');
  if (!FAIL_MODES.has(input.failMode)) throw invalidField(f('fail_mode'), 'must be open or closed');
  if (!ACCURACIES.has(input.accuracy)) throw invalidField(f('accuracy'), 'must be exact or approximate');

  if (input.rate === 0) {
    if (isPlan) throw invalidField(f('rate'), 'a plan must have a rate of at least 1 (a plan cannot reference another plan)');
    return { quota: referenceRecord(input, f), referencedPlan: `plan:${input.plan}` };
  }

  if (isPlan && input.plan !== '' && input.plan !== planName)
    throw invalidField(f('plan'), `must be empty or ${planName} on plan:${planName}`);
  if (input.algorithm === Algorithm.UNSPECIFIED) throw invalidField(f('algorithm'), 'required');
  if (!ALGORITHMS.has(input.algorithm))
    throw invalidField(f('algorithm'), 'must be token_bucket, sliding_window, leaky_bucket or fixed_window');
  if (input.accuracy === Accuracy.APPROXIMATE && !LEASABLE.has(input.algorithm))
    throw invalidField(f('accuracy'), 'approximate needs algorithm token_bucket or leaky_bucket (a window count cannot be leased)');
  const burst = input.burst === 0 ? input.rate : input.burst;
  const intervalMs = resolveInterval(input, f);
  const cost = input.cost === 0 ? 1 : input.cost;
  if (cost > burst) throw invalidField(f('cost'), `must not exceed burst (${burst}): such a request could never be admitted`);
  const routes = validateRoutes(input.routes, cost, burst, f);

  return {
    quota: create(QuotaSchema, {
      subjectId: input.subjectId,
      algorithm: input.algorithm,
      rate: input.rate,
      burst,
      intervalMs,
      cost,
      failMode: input.failMode,
      shadow: input.shadow,
      plan: isPlan ? planName : input.plan,
      routes,
      accuracy: input.accuracy,
    }),
    referencedPlan: undefined,
  };
}

function referenceRecord(input: Quota, f: (name: string) => string): Quota {
  if (input.plan === '') throw invalidField(f('plan'), 'required when rate is 0 (the record then takes its limits from that plan)');
  const unused = (name: string): never => {
    throw invalidField(f(name), `has no effect on a plan reference (rate 0): plan ${input.plan}'s applies; leave it unset`);
  };
  if (input.algorithm !== Algorithm.UNSPECIFIED) unused('algorithm');
  if (input.burst !== 0) unused('burst');
  if (input.intervalMs !== 0) unused('interval_ms');
  if (input.unit !== Unit.UNSPECIFIED) unused('unit');
  if (input.cost !== 0) unused('cost');
  if (input.failMode !== FailMode.UNSPECIFIED) unused('fail_mode');
  if (input.routes.length > 0) unused('routes');
  if (input.accuracy !== Accuracy.UNSPECIFIED) unused('accuracy');
  return create(QuotaSchema, { subjectId: input.subjectId, rate: 0, shadow: input.shadow, plan: input.plan });
}

function resolveInterval(input: Quota, f: (name: string) => string): number {
  let fromUnit: number | undefined;
  if (input.unit !== Unit.UNSPECIFIED) {
    fromUnit = UNIT_MS[input.unit];
    if (fromUnit === undefined) throw invalidField(f('unit'), 'must be second, minute, hour or day');
  }
  if (input.intervalMs === 0) return fromUnit ?? DEFAULT_INTERVAL_MS;
  if (input.intervalMs > MAX_INTERVAL_MS) throw invalidField(f('interval_ms'), `must be at most ${MAX_INTERVAL_MS} (31 days)`);
  if (fromUnit !== undefined && fromUnit !== input.intervalMs) {
    throw invalidField(f('unit'), `conflicts with interval_ms ${input.intervalMs}; give one of them`);
  }
  return input.intervalMs;
}

function validateRoutes(routes: readonly RouteRule[], cost: number, burst: number, f: (name: string) => string): RouteRule[] {
  if (routes.length > MAX_ROUTES) throw invalidField(f('routes'), `at most ${MAX_ROUTES} rules`);
  return routes.map((r, i) => {
    const at = (name: string): string => f(`routes[${i}].${name}`);
    if (r.pathPrefix === '') throw invalidField(at('path_prefix'), 'required');
    if (r.pathPrefix.length > MAX_PATH_PREFIX_LENGTH)
      throw invalidField(at('path_prefix'), `must be at most ${MAX_PATH_PREFIX_LENGTH} characters`);
    if (!PATH_RE.test(r.pathPrefix)) throw invalidField(at('path_prefix'), 'must start with / and contain no spaces');
    const seen = new Set<string>();
    r.methods.forEach((m, j) => {
      if (!METHOD_RE.test(m)) throw invalidField(at(`methods[${j}]`), 'must be an upper-case HTTP method such as GET');
      if (seen.has(m)) throw invalidField(at(`methods[${j}]`), `${m} is listed twice`);
      seen.add(m);
    });
    if (r.rate !== undefined && r.rate === 0) throw invalidField(at('rate'), 'must be at least 1 when given');
    if (r.burst !== undefined && r.burst === 0) throw invalidField(at('burst'), 'must be at least 1 when given');
    const routeCost = r.cost === 0 ? cost : r.cost;
    // As the sidecar compiles it: a rule without a burst of its own counts against the record's burst.
    const routeBurst = r.burst ?? burst;
    if (routeCost > routeBurst) throw invalidField(at('cost'), `must not exceed the rule's burst (${routeBurst})`);
    return create(RouteRuleSchema, {
      pathPrefix: r.pathPrefix,
      methods: [...r.methods],
      cost: routeCost,
      ...(r.rate !== undefined ? { rate: r.rate } : {}),
      ...(r.burst !== undefined ? { burst: r.burst } : {}),
    });
  });
}
