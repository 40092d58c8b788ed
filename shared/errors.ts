/**
 * Typed errors with stable codes, and their one mapping to problem+json (RFC 9457).
 *
 * Every error class of the platform descends from `CodedError` and carries a code from the one
 * registry (shared/error-codes.ts), so a caller narrows with `isCodedError(err)` and then
 * `switch (err.code)` over `AnyErrorCode`. Three branches, one per wire (the registry's `wire`):
 *
 *   CodedError<AnyErrorCode>                 code, message, cause
 *   ├── PlatformError<ErrorCode>             problem+json / gRPC: status, detail, field, extra, headers
 *   │     TokenError, CounterStoreError, RenderError, TemplateNotFoundError, ConcurrencyError, …
 *   ├── OAuthError<OAuthErrorCode>           OAuth JSON at the OAuth endpoints (identity/oauth/oauth-error.ts)
 *   └── InternalError<InternalErrorCode>     never on a wire: the operator's and the log's
 *         ConfigError, MigrationError, EmbeddedPostgresError, SnapshotFileError, KeyImportError,
 *         TemplateSyntaxError, TokenRefused
 *
 * At an HTTP edge, `toProblem` turns any thrown value into a problem document: a `PlatformError`
 * whose code the registry marks for the problem wire keeps its code, status and detail; anything
 * else (an `InternalError`, an `OAuthError` off its own edge, a bug) becomes a generic 500 whose
 * cause goes to the log only.
 */
import { ERROR_CODES, wireOf, type AnyErrorCode, type ErrorCode, type InternalErrorCode } from './error-codes.js';

export {
  ERROR_CODES,
  wireOf,
  type AnyErrorCode,
  type ErrorCode,
  type InternalErrorCode,
  type OAuthErrorCode,
  type Wire,
} from './error-codes.js';

/**
 * The base of every error class the platform throws on purpose: a stable `code` from the registry.
 * Abstract: throw the branch for the wire the error may reach (`PlatformError`, `InternalError`,
 * identity's `OAuthError`).
 */
export abstract class CodedError<C extends AnyErrorCode = AnyErrorCode> extends Error {
  readonly code: C;

  constructor(code: C, message: string, opts: { cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'CodedError';
    this.code = code;
  }
}

/** Any error of the platform's own, with its `code` typed as the union of every registered code. */
export function isCodedError(err: unknown): err is CodedError {
  return err instanceof CodedError;
}

/**
 * An error for the operator and the log only (a code the registry marks `wire: 'none'`): every edge
 * answers it as the generic 500 `internal`; its message may name files, hosts and variables.
 */
export abstract class InternalError<C extends InternalErrorCode = InternalErrorCode> extends CodedError<C> {
  constructor(code: C, message: string, opts: { cause?: unknown } = {}) {
    super(code, message, opts);
    this.name = 'InternalError';
  }
}

export interface PlatformErrorOptions {
  /** Human-readable explanation for this occurrence; safe to show the caller. */
  detail?: string;
  /** The input field at fault, for validation errors. */
  field?: string;
  /** Extra members to add to the problem document (safe for the caller). */
  extra?: Record<string, unknown>;
  /** Headers to send with the problem (e.g. Retry-After). */
  headers?: Record<string, string>;
  /** The underlying error; logged, never sent. */
  cause?: unknown;
}

/** An error meant for the caller: problem+json at an HTTP edge, a gRPC status at a gRPC edge. */
export class PlatformError<C extends ErrorCode = ErrorCode> extends CodedError<C> {
  readonly status: number;
  readonly detail: string | undefined;
  readonly field: string | undefined;
  readonly extra: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: C, opts: PlatformErrorOptions = {}) {
    super(code, opts.detail ?? ERROR_CODES[code].title, opts);
    this.name = 'PlatformError';
    this.status = ERROR_CODES[code].status;
    this.detail = opts.detail;
    this.field = opts.field;
    this.extra = opts.extra;
    this.headers = opts.headers;
  }
}

/** A validation failure naming the field: 400 `invalid_field`. */
export function invalidField(field: string, detail: string): PlatformError {
  return new PlatformError('invalid_field', { field, detail: `${field}: ${detail}` });
}

export function isPlatformError(err: unknown): err is PlatformError {
  return err instanceof PlatformError;
}

/**
 * True when `err` may be shown to the caller: a `PlatformError` whose code the registry marks for
 * the problem wire. (The type keeps every other code out of a `PlatformError`; this also holds
 * against a cast.) `toProblem` and shared/grpc.ts `toGrpcError` answer anything else as `internal`.
 */
export function isForCaller(err: unknown): err is PlatformError {
  return err instanceof PlatformError && wireOf(err.code) === 'problem';
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  code: string;
  field?: string;
  instance?: string;
  [extra: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
const TYPE_BASE = 'https://errors.edge-platform.dev/';

/** The problem document for a code, without throwing. */
export function problemFor(code: ErrorCode, opts: Omit<PlatformErrorOptions, 'cause'> = {}): Problem {
  const spec = ERROR_CODES[code];
  const p: Problem = { type: TYPE_BASE + code, title: spec.title, status: spec.status, code };
  if (opts.detail !== undefined) p.detail = opts.detail;
  if (opts.field !== undefined) p.field = opts.field;
  if (opts.extra) for (const [k, v] of Object.entries(opts.extra)) if (!(k in p)) p[k] = v;
  return p;
}

/**
 * Maps any thrown value to a problem document. Only `PlatformError`s (with a code for this wire)
 * carry their own text to the wire; everything else, `InternalError`s and `OAuthError`s included,
 * is a generic 500, and its message stays in the log.
 */
export function toProblem(err: unknown): { problem: Problem; headers: Record<string, string> } {
  if (isForCaller(err)) {
    return {
      problem: problemFor(err.code, { detail: err.detail, field: err.field, extra: err.extra }),
      headers: err.headers ?? {},
    };
  }
  return { problem: problemFor('internal'), headers: {} };
}
