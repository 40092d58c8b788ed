/**
 * The one registry of error codes. A code is a stable string that callers and tests match on; it
 * is never renamed or reused once shipped (retired codes move to `RETIRED_CODES`). docs/errors.md
 * lists the same codes; test/shared/errors.test.ts checks the two in both directions.
 *
 * Every error class of the platform carries one of these codes (shared/errors.ts `CodedError`), so
 * one union, `AnyErrorCode`, covers everything a caller can `switch (err.code)` on. Each domain
 * appends its own section. `status` is the HTTP status the code maps to at an HTTP edge; `wire`
 * says which edge may send the code at all (see {@link Wire}).
 */

/**
 * Which wire a code may reach:
 * - `problem` (the default, when `wire` is absent): problem+json at an HTTP edge (`toProblem`),
 *   gRPC status and metadata at a gRPC edge (`toGrpcError`). Thrown as a `PlatformError`.
 * - `oauth`: RFC 6749 / RFC 8628 error codes, sent only by the OAuth endpoints as
 *   `{"error", "error_description"}` (identity/oauth/oauth-error.ts `oauthErrorReply`). Thrown as
 *   an `OAuthError`; any other edge answers it as the generic `internal`.
 * - `none`: for the operator and the log only (configuration, migrations, startup, files, key
 *   import, a provider refusing our credentials). Thrown as an `InternalError`; every edge answers it
 *   as the generic 500 `internal`, its message and cause to the log only. `status` is that 500.
 */
export type Wire = 'problem' | 'oauth' | 'none';

export interface CodeSpec {
  readonly status: number;
  readonly title: string;
  /** Absent means `problem`. */
  readonly wire?: Exclude<Wire, 'problem'>;
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
  dpop_proof_invalid: { status: 401, title: 'The DPoP proof is missing or invalid' },
  dpop_nonce_required: { status: 401, title: 'A DPoP proof with the server nonce is required' },
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
  duplicate_credentials: { status: 400, title: 'A credential header is sent more than once' },
  uri_too_long: { status: 414, title: 'The request target is longer than allowed' },
  transfer_coding_not_implemented: { status: 501, title: 'Transfer codings other than chunked are not supported' },
  // ── identity: event store, users and orders (identity/events, identity/domain) ──
  concurrency_conflict: { status: 409, title: 'The record changed since it was read; retry' },
  user_already_exists: { status: 409, title: 'A user with this id already exists' },
  invalid_email: { status: 400, title: 'The email address is not valid' },
  email_taken: { status: 409, title: 'The email address belongs to another user' },
  user_not_found: { status: 404, title: 'No such user' },
  order_not_found: { status: 404, title: 'No such order' },
  order_already_exists: { status: 409, title: 'An order with this id already exists' },
  invalid_order_transition: { status: 409, title: "The order's status does not allow this command" },
  // ── identity: accounts (identity/accounts) ─────────────────────────────────
  invalid_credentials: { status: 401, title: 'The email or password is wrong' },
  login_throttled: { status: 429, title: 'Too many failed sign-ins; try again later' },
  // ── identity: the sign-in and device pages (identity/oauth/csrf.ts, form-guard.ts) ──
  cross_site_request: { status: 403, title: 'A form posted from another site is refused' },
  invalid_form_token: { status: 403, title: "The form's anti-forgery token is missing, expired or not this browser's" },
  // ── notifier: templates, profiles, devices ─────────────────────────────────
  unknown_template: { status: 422, title: 'The template does not exist' },
  template_render_failed: { status: 422, title: 'The template could not be rendered with this data' },
  template_version_immutable: { status: 409, title: 'This template version has been used and can no longer change' },
  // ── notifier: ingestion, deliveries, dead-letter queue ────────────────────
  channel_not_allowed: { status: 422, title: 'This channel is not used for this notification type at this priority' },
  audience_not_allowed: { status: 422, title: 'A transactional notification cannot be sent to an audience' },
  segment_not_found: { status: 422, title: 'The audience names a segment that does not exist' },
  // ── notifier: campaigns (notifier/campaigns) ───────────────────────────────
  campaign_stopped: { status: 409, title: 'The campaign was stopped by its kill switch' },
  campaign_not_pending: { status: 409, title: 'The campaign has no fan-out waiting for approval' },
  idempotency_key_reused: { status: 422, title: 'This idempotency key was used with a different request' },
  idempotency_in_flight: { status: 409, title: 'A request with this idempotency key is still being processed' },
  idempotency_key_mismatch: { status: 422, title: 'The Idempotency-Key header and the body idempotency_key differ' },
  // ── notifier: segments (notifier/segments) ────────────────────────────────
  segment_kind_conflict: { status: 409, title: 'The segment exists with another kind' },
  segment_upload_in_progress: { status: 409, title: 'Another upload of this segment is in progress' },
  // ── notifier: provider webhooks (notifier/feedback) ──────────────────────
  webhook_signature_missing: { status: 401, title: 'The provider webhook is not signed' },
  webhook_signature_invalid: { status: 403, title: "The provider webhook's signature does not verify" },
  webhook_cert_untrusted: { status: 403, title: 'The signing certificate is not from an allowed host or cannot be used' },
  webhook_cert_unavailable: { status: 503, title: 'The signing certificate could not be fetched' },
  webhook_topic_not_allowed: { status: 403, title: 'The notification comes from a topic we did not subscribe to' },
  webhook_message_stale: { status: 403, title: "The provider message's timestamp is outside the accepted window" },
  // ── notifier: provider ramp (notifier/ramp) ──────────────────────────────
  provider_ramp_not_configured: { status: 409, title: 'The channel has no new provider configured to ramp' },
  ramp_test_recipients_missing: { status: 409, title: 'A shadow share needs test recipients for this channel' },

  // ── OAuth endpoints (RFC 6749 §5.2, RFC 8628 §3.5, OpenID Connect): OAuth JSON only ──────────
  invalid_request: { status: 400, title: 'The request is missing, repeats or misuses a parameter', wire: 'oauth' },
  invalid_client: { status: 401, title: 'Client authentication failed', wire: 'oauth' },
  invalid_grant: { status: 400, title: 'The grant is invalid, expired, revoked or was issued to another client', wire: 'oauth' },
  unauthorized_client: { status: 400, title: 'The client may not use this grant type', wire: 'oauth' },
  unsupported_grant_type: { status: 400, title: 'The grant type is not supported', wire: 'oauth' },
  unsupported_response_type: { status: 400, title: 'The response type is not supported', wire: 'oauth' },
  invalid_scope: { status: 400, title: 'The requested scope is invalid or not allowed', wire: 'oauth' },
  access_denied: { status: 400, title: 'The user or the server denied the request', wire: 'oauth' },
  server_error: { status: 500, title: 'The server could not complete the request', wire: 'oauth' },
  temporarily_unavailable: { status: 503, title: 'The server is temporarily unavailable', wire: 'oauth' },
  authorization_pending: { status: 400, title: 'The user has not approved the device request yet', wire: 'oauth' },
  slow_down: { status: 400, title: 'The device is polling too fast', wire: 'oauth' },
  expired_token: { status: 400, title: 'The device code has expired', wire: 'oauth' },
  login_required: { status: 400, title: 'The user must sign in', wire: 'oauth' },
  invalid_dpop_proof: { status: 400, title: 'The DPoP proof is missing or invalid', wire: 'oauth' },
  use_dpop_nonce: { status: 400, title: 'A DPoP proof with the server nonce is required', wire: 'oauth' },

  // ── never on a wire: the operator's and the log's (answered as `internal`) ───────────────────
  // shared/config.ts ConfigError
  config_variable_invalid: { status: 500, title: 'A configuration variable is missing or invalid', wire: 'none' },
  // shared/migrate.ts MigrationError
  migration_invalid_name: { status: 500, title: 'A migration file is not named NNN_name.sql', wire: 'none' },
  migration_duplicate_version: { status: 500, title: 'Two migration files share a version', wire: 'none' },
  migration_checksum_mismatch: { status: 500, title: 'An applied migration file was changed', wire: 'none' },
  migration_failed: { status: 500, title: 'A migration failed and was rolled back', wire: 'none' },
  migration_dir_missing: { status: 500, title: 'The migrations folder cannot be read', wire: 'none' },
  // shared/embedded-postgres.ts EmbeddedPostgresError
  port_in_use: { status: 500, title: 'The embedded PostgreSQL port is in use', wire: 'none' },
  no_postgres_user: { status: 500, title: 'Running as root and there is no postgres OS user', wire: 'none' },
  data_dir_unusable: { status: 500, title: 'The embedded PostgreSQL data directory cannot be used', wire: 'none' },
  data_dir_in_use: { status: 500, title: 'Another server runs on the embedded PostgreSQL data directory', wire: 'none' },
  binaries_unusable: { status: 500, title: 'The PostgreSQL binaries cannot be run', wire: 'none' },
  init_failed: { status: 500, title: 'initdb failed', wire: 'none' },
  start_failed: { status: 500, title: 'The embedded PostgreSQL did not start', wire: 'none' },
  // limiter/snapshot-store.ts SnapshotFileError
  snapshot_file_unusable: { status: 500, title: 'The last-known-good snapshot file cannot be used', wire: 'none' },
  // shared/jwt/keys.ts KeyImportError
  key_import_failed: { status: 500, title: 'A published key cannot be used for verification', wire: 'none' },
  // notifier/templates/errors.ts TemplateSyntaxError
  template_syntax_error: { status: 500, title: 'A template source does not parse', wire: 'none' },
  // notifier/channels/google-oauth.ts TokenRefused
  provider_token_refused: { status: 500, title: "A provider's token endpoint refused our credentials", wire: 'none' },
} as const satisfies Record<string, CodeSpec>;

type Registry = typeof ERROR_CODES;
type CodesOnWire<W extends Wire> = {
  [C in keyof Registry]: (Registry[C] extends { readonly wire: infer X } ? X : 'problem') extends W ? C : never;
}[keyof Registry];

/** Every code in the registry: what `err.code` of any `CodedError` is. */
export type AnyErrorCode = keyof Registry;
/** The codes a caller receives as problem+json or gRPC metadata: a `PlatformError`'s. */
export type ErrorCode = CodesOnWire<'problem'>;
/** The RFC error codes only the OAuth endpoints send: an `OAuthError`'s. */
export type OAuthErrorCode = CodesOnWire<'oauth'>;
/** The codes that never reach a caller: an `InternalError`'s. */
export type InternalErrorCode = CodesOnWire<'none'>;

/** The wire a code may reach (see {@link Wire}). */
export function wireOf(code: AnyErrorCode): Wire {
  const spec: CodeSpec | undefined = (ERROR_CODES as Record<string, CodeSpec>)[code];
  // An unregistered string (a cast, a JS caller) is treated as never meant for a caller.
  return spec === undefined ? 'none' : (spec.wire ?? 'problem');
}

/** Codes that shipped once and must never be used again. */
export const RETIRED_CODES: readonly string[] = ['sms_not_allowed_for_tier', 'audience_not_supported'];
