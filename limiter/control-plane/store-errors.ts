/**
 * Which store failures mean "PostgreSQL is unavailable" (the caller gets 503 / UNAVAILABLE and may
 * retry) rather than a bug (500 / INTERNAL). Writes must never answer 500 because the database is
 * down, restarting, dropped or slow.
 */
import { isPlatformError, PlatformError } from '../../shared/errors.js';

// SQLSTATE classes: 08 connection exception, 53 insufficient resources, 57 operator intervention
// (admin shutdown, cannot connect now, statement timeout = 57014), 58 system error, 3D invalid
// catalog name (the database is gone), 40 transaction rollback (serialization, deadlock).
const UNAVAILABLE_CLASSES = new Set(['08', '53', '57', '58', '3D', '40']);
const NODE_NET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EPIPE',
  'EAI_AGAIN',
]);
// pg and pg-pool report some failures with a plain Error and a message only.
const MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Connection .* ended/i,
  /Client has encountered a connection error/i,
  /cannot use a pool after calling end/i,
  /Client was closed/i,
];

/** True when `err` says the database cannot be reached or cannot serve right now. */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (/^[0-9A-Z]{5}$/.test(code) && UNAVAILABLE_CLASSES.has(code.slice(0, 2))) return true;
    if (NODE_NET_CODES.has(code)) return true;
  }
  if (MESSAGES.some((re) => re.test(err.message))) return true;
  const cause = (err as { cause?: unknown }).cause;
  return cause !== undefined && cause !== err && isUnavailable(cause);
}

/**
 * Rethrows `err` as `dependency_unavailable` (503) when it is an availability failure; a
 * PlatformError passes unchanged; anything else is rethrown as it is (a bug: 500).
 */
export function asStoreError(err: unknown): unknown {
  if (isPlatformError(err)) return err;
  if (isUnavailable(err))
    return new PlatformError('dependency_unavailable', { detail: 'the quota store (PostgreSQL) is unavailable; retry later', cause: err });
  return err;
}
