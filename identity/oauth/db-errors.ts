/**
 * Telling "PostgreSQL cannot be reached" apart from other failures, so the endpoints answer 503
 * (`temporarily_unavailable` in OAuth form, `dependency_unavailable` as problem+json) and never a
 * 500 for an outage.
 */
import { PlatformError } from '../../shared/errors.js';

const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EPIPE']);

/** True for a connection failure, a server going away, or a pool that could not get a connection in time. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (NET_CODES.has(code)) return true;
      // SQLSTATE class 08 (connection exception), 57P01-57P03 (shutdown, cannot connect now).
      if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
    }
    if (/timeout exceeded when trying to connect|Connection terminated|connection is not queryable|connection error/i.test(e.message)) {
      return true;
    }
  }
  return false;
}

/** The problem+json 503 for an outage (the cause goes to the log, never the wire). */
export function databaseUnavailable(err: unknown): PlatformError {
  return new PlatformError('dependency_unavailable', {
    detail: 'the database is unavailable; try again shortly',
    headers: { 'retry-after': '1' },
    cause: err,
  });
}
