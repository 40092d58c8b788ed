/**
 * Typed errors with stable codes, and their one mapping to problem+json (RFC 9457).
 *
 * Throw a `PlatformError` (or a domain subclass) with a code from the registry. At an HTTP edge,
 * `toProblem` turns any thrown value into a problem document: a `PlatformError` keeps its code,
 * status and detail; anything else becomes a generic 500 whose cause goes to the log only.
 */
import { ERROR_CODES, type ErrorCode } from './error-codes.js';

export { ERROR_CODES, type ErrorCode } from './error-codes.js';

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

export class PlatformError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly detail: string | undefined;
  readonly field: string | undefined;
  readonly extra: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, opts: PlatformErrorOptions = {}) {
    super(opts.detail ?? ERROR_CODES[code].title, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'PlatformError';
    this.code = code;
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
 * Maps any thrown value to a problem document. Only `PlatformError`s carry their own text to the
 * wire; everything else is a generic 500, and its message stays in the log.
 */
export function toProblem(err: unknown): { problem: Problem; headers: Record<string, string> } {
  if (err instanceof PlatformError) {
    return {
      problem: problemFor(err.code, { detail: err.detail, field: err.field, extra: err.extra }),
      headers: err.headers ?? {},
    };
  }
  return { problem: problemFor('internal'), headers: {} };
}
