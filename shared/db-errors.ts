/**
 * Telling "PostgreSQL cannot be reached or cannot serve right now" apart from every other failure,
 * so that every endpoint of every service answers an outage with 503 and Retry-After (retry later;
 * nothing was done) instead of a generic 500. shared/http.ts `errorReply` applies it to whatever a
 * handler throws; the OAuth endpoints map the same test to `temporarily_unavailable`
 * (identity/oauth/oauth-error.ts); the control plane's gRPC API to UNAVAILABLE.
 */
import { PlatformError } from './errors.js';

// SQLSTATE classes: 08 connection exception, 53 insufficient resources, 57 operator intervention
// (admin shutdown, cannot connect now, statement timeout = 57014), 58 system error, 3D invalid
// catalog name (the database is gone), 40 transaction rollback (serialization, deadlock).
const UNAVAILABLE_CLASSES = new Set(['08', '53', '57', '58', '3D', '40']);
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN']);
// pg and pg-pool report some failures with a plain Error and a message only.
const MESSAGES =
  /timeout exceeded when trying to connect|connection terminated|Connection .* ended|connection is not queryable|Client has encountered a connection error|connection error|cannot use a pool after calling end|Client was closed/i;

/** True for a connection failure, a server going away or refusing work, or a pool that could not get a connection in time. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (NET_CODES.has(code)) return true;
      if (/^[0-9A-Z]{5}$/.test(code) && UNAVAILABLE_CLASSES.has(code.slice(0, 2))) return true;
    }
    if (MESSAGES.test(e.message)) return true;
  }
  return false;
}

/** The problem+json 503 for an outage (the cause goes to the log, never the wire). */
export function databaseUnavailable(err: unknown, detail = 'the database is unavailable; try again shortly'): PlatformError {
  return new PlatformError('dependency_unavailable', { detail, headers: { 'retry-after': '1' }, cause: err });
}
