/**
 * The one registry of error codes. A code is a stable string that callers and tests match on; it
 * is never renamed or reused once shipped (retired codes move to `RETIRED_CODES`). docs/errors.md
 * lists the same codes; test/shared/errors.test.ts checks the two in both directions.
 *
 * Each domain appends its own section. `status` is the HTTP status the code maps to at an HTTP edge.
 */
export interface CodeSpec {
  readonly status: number;
  readonly title: string;
}

export const ERROR_CODES = {
  // ── shared ────────────────────────────────────────────────────────────────
  internal: { status: 500, title: 'Internal server error' },
  bad_request: { status: 400, title: 'Bad request' },
  invalid_field: { status: 400, title: 'A field is missing or invalid' },
  invalid_json: { status: 400, title: 'The body is not valid JSON' },
  body_too_large: { status: 413, title: 'The body is larger than allowed' },
  headers_too_large: { status: 431, title: 'The request headers are larger than allowed' },
  unsupported_media_type: { status: 415, title: 'Unsupported content type' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  unavailable: { status: 503, title: 'Service unavailable' },
  dependency_unavailable: { status: 503, title: 'A dependency is unavailable' },
  config_invalid: { status: 500, title: 'Configuration is invalid' },
  circuit_open: { status: 503, title: 'Circuit breaker is open' },
  shutting_down: { status: 503, title: 'The service is shutting down' },
  // ── authentication (shared verifier, sidecar, identity) ──────────────────
  credentials_required: { status: 401, title: 'Credentials are required' },
  invalid_token: { status: 401, title: 'The access token is invalid' },
  token_expired: { status: 401, title: 'The access token has expired' },
  forbidden: { status: 403, title: 'Forbidden' },
  // ── limiter ───────────────────────────────────────────────────────────────
  rate_limited: { status: 429, title: 'Too many requests' },
  limiter_unavailable: { status: 503, title: 'Admission is unavailable and this route fails closed' },
  upstream_timeout: { status: 504, title: 'The upstream did not answer in time' },
  upstream_unreachable: { status: 502, title: 'The upstream could not be reached' },
  upstream_bad_response: { status: 502, title: 'The upstream sent an invalid response' },
  no_route: { status: 404, title: 'No upstream is configured for this path' },
  counter_store_timeout: { status: 503, title: 'The counter store did not answer within its deadline' },
  counter_store_unavailable: { status: 503, title: 'The counter store cannot be reached' },
  bad_request_target: { status: 400, title: 'The request target cannot be read unambiguously' },
  bad_framing: { status: 400, title: "The request's length or host is ambiguous" },
  bad_header: { status: 400, title: 'A header cannot be forwarded exactly as received' },
  uri_too_long: { status: 414, title: 'The request target is longer than allowed' },
  transfer_coding_not_implemented: { status: 501, title: 'Transfer codings other than chunked are not supported' },
  // ── identity: event store, users and orders (issue 5) ────────────────────
  concurrency_conflict: { status: 409, title: 'The record changed since it was read; retry' },
  user_already_exists: { status: 409, title: 'A user with this id already exists' },
  invalid_email: { status: 400, title: 'The email address is not valid' },
  email_taken: { status: 409, title: 'The email address belongs to another user' },
  user_not_found: { status: 404, title: 'No such user' },
  order_not_found: { status: 404, title: 'No such order' },
  order_already_exists: { status: 409, title: 'An order with this id already exists' },
  invalid_order_transition: { status: 409, title: "The order's status does not allow this command" },
  // ── identity: accounts (issue 6) ──────────────────────────────────────────
  invalid_credentials: { status: 401, title: 'The email or password is wrong' },
  login_throttled: { status: 429, title: 'Too many failed sign-ins; try again later' },
  // ── notifier: templates, profiles, devices ─────────────────────────────────
  unknown_template: { status: 422, title: 'The template does not exist' },
  template_render_failed: { status: 422, title: 'The template could not be rendered with this data' },
  template_version_immutable: { status: 409, title: 'This template version has been used and can no longer change' },
  // ── notifier: ingestion, deliveries, dead-letter queue ────────────────────
  sms_not_allowed_for_tier: { status: 422, title: 'SMS is only for transactional and high-priority notifications' },
  audience_not_supported: { status: 422, title: 'Segment (audience) notifications are not supported yet' },
  idempotency_key_reused: { status: 422, title: 'This idempotency key was used with a different request' },
  idempotency_in_flight: { status: 409, title: 'A request with this idempotency key is still being processed' },
} as const satisfies Record<string, CodeSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Codes that shipped once and must never be used again. */
export const RETIRED_CODES: readonly string[] = [];
