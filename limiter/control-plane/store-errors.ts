/**
 * Which store failures mean "PostgreSQL is unavailable" (the caller gets 503 / UNAVAILABLE and may
 * retry) rather than a bug (500 / INTERNAL). Writes must never answer 500 because the database is
 * down, restarting, dropped or slow.
 */
import { isPlatformError } from '../../shared/errors.js';
import { databaseUnavailable, isDatabaseUnavailable } from '../../shared/db-errors.js';

/**
 * Rethrows `err` as `dependency_unavailable` (503, Retry-After) when it is an availability failure
 * (shared/db-errors.ts); a PlatformError passes unchanged; anything else is rethrown as it is (a
 * bug: 500).
 */
export function asStoreError(err: unknown): unknown {
  if (isPlatformError(err)) return err;
  if (isDatabaseUnavailable(err)) return databaseUnavailable(err, 'the quota store (PostgreSQL) is unavailable; retry later');
  return err;
}
