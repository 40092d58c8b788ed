/**
 * The sign-in throttle, kept in Postgres (`login_failures`) so that every identity replica agrees:
 * a client cannot spread its guesses over replicas. Per account (the SHA-256 of the normalised
 * email, whether or not it has an account, so the throttle reveals nothing) and per client
 * address. The windows follow throttle-window.ts; the SQL applies the same rule atomically.
 *
 * A sign-in is refused (429 `login_throttled`, with `Retry-After`) while either key is over its
 * limit, before the password is checked, so a correct password does not get through either. A
 * successful sign-in clears the account's count, not the address's. Under a burst of parallel
 * guesses a few more than the limit may be checked (the check and the count are two statements);
 * the count itself is exact.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import { normalizeEmail } from '../domain/email.js';
import { blockedForMs, type FailureWindow } from './throttle-window.js';

export interface ThrottleLimits {
  /** IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT */
  readonly perAccount: number;
  /** IDENTITY_LOGIN_MAX_FAILURES_PER_IP */
  readonly perIp: number;
  /** IDENTITY_LOGIN_FAILURE_WINDOW, ms */
  readonly windowMs: number;
}

export interface ThrottleKeys {
  readonly account: string;
  readonly ip: string;
}

/** The account key of an email: its normal form, hashed (no address is stored in clear). */
export function accountKey(email: string): string {
  return createHash('sha256').update(normalizeEmail(email)).digest('hex');
}

const READ = {
  name: 'login_failures_read',
  text: `SELECT scope, failures, (extract(epoch FROM window_start) * 1000)::float8 AS start_ms
           FROM login_failures WHERE (scope = 'account' AND key = $1) OR (scope = 'ip' AND key = $2)`,
};

// One failure for both keys; a window that has closed starts over at now.
const FAIL = {
  name: 'login_failures_fail',
  text: `INSERT INTO login_failures AS f (scope, key, window_start, failures)
         VALUES ('account', $1, to_timestamp($3::float8 / 1000), 1), ('ip', $2, to_timestamp($3::float8 / 1000), 1)
         ON CONFLICT (scope, key) DO UPDATE SET
           failures = CASE WHEN f.window_start + make_interval(secs => $4::float8 / 1000) <= EXCLUDED.window_start
                           THEN 1 ELSE f.failures + 1 END,
           window_start = CASE WHEN f.window_start + make_interval(secs => $4::float8 / 1000) <= EXCLUDED.window_start
                               THEN EXCLUDED.window_start ELSE f.window_start END`,
};

const CLEAR = { name: 'login_failures_clear', text: `DELETE FROM login_failures WHERE scope = 'account' AND key = $1` };

const PURGE = {
  name: 'login_failures_purge',
  text: `DELETE FROM login_failures WHERE window_start + make_interval(secs => $2::float8 / 1000) <= to_timestamp($1::float8 / 1000)`,
};

export class LoginThrottle {
  constructor(
    private readonly pool: pg.Pool,
    private readonly limits: ThrottleLimits,
    private readonly clock: Clock,
  ) {}

  /** Milliseconds the sign-in must wait; 0 when it may go ahead. */
  async blockedForMs(keys: ThrottleKeys): Promise<number> {
    const { rows } = await this.pool.query<{ scope: 'account' | 'ip'; failures: number; start_ms: number }>({
      ...READ,
      values: [keys.account, keys.ip],
    });
    const now = this.clock.now();
    let wait = 0;
    for (const r of rows) {
      const w: FailureWindow = { failures: r.failures, startMs: r.start_ms };
      const limit = r.scope === 'account' ? this.limits.perAccount : this.limits.perIp;
      wait = Math.max(wait, blockedForMs(w, limit, this.limits.windowMs, now));
    }
    return wait;
  }

  async failed(keys: ThrottleKeys): Promise<void> {
    await this.pool.query({ ...FAIL, values: [keys.account, keys.ip, this.clock.now(), this.limits.windowMs] });
  }

  async succeeded(keys: ThrottleKeys): Promise<void> {
    await this.pool.query({ ...CLEAR, values: [keys.account] });
  }

  /** Deletes windows that have closed; returns how many. */
  async purge(): Promise<number> {
    const r = await this.pool.query({ ...PURGE, values: [this.clock.now(), this.limits.windowMs] });
    return r.rowCount ?? 0;
  }
}
