/**
 * Making an administrator. Signup only ever creates customers (accounts/routes.ts), so the first
 * admin is made outside the HTTP API by someone with access to the database or the deployment:
 * `npm run admin -- promote <email>` (bin/admin.ts) or IDENTITY_BOOTSTRAP_ADMIN (bootstrap-admin.ts).
 * Both come here: one transaction that locks the account's credentials row, sets the role and
 * writes the `role_changes` audit row (migration 180).
 *
 * Tokens issued before the promotion keep the role they were issued with until they expire: the
 * new admin signs in again to act as one.
 */
import type { Pool } from '../../shared/db.js';
import { withTransaction } from '../../shared/db.js';
import type { Clock } from '../../shared/clock.js';
import { normalizeEmail } from '../domain/email.js';
import type { UserRole } from '../oauth/credentials.js';

export type PromoteOutcome =
  | { outcome: 'promoted'; userId: string; from: UserRole }
  | { outcome: 'already_admin'; userId: string }
  /** Only for the bootstrap: it promoted this account once, and an operator changed it since. */
  | { outcome: 'bootstrapped_before'; userId: string }
  | { outcome: 'no_account' };

export interface PromoteOptions {
  /** Who asks, for the audit row: `cli:<os user>` or `bootstrap`. */
  by: string;
  clock: Clock;
  /** The bootstrap's rule: never promote an account it promoted before (a demotion stands). */
  oncePerAccount?: boolean;
}

/** Gives the account with `email` the role admin (idempotent: an admin stays one, unaudited). */
export async function promoteToAdmin(pool: Pool, email: string, o: PromoteOptions): Promise<PromoteOutcome> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ user_id: string; role: UserRole }>(
      'SELECT user_id, role FROM credentials WHERE email = $1 FOR UPDATE',
      [normalizeEmail(email)],
    );
    const row = rows[0];
    if (!row) return { outcome: 'no_account' } as const;
    if (row.role === 'admin') return { outcome: 'already_admin', userId: row.user_id } as const;
    if (o.oncePerAccount) {
      const before = await client.query('SELECT 1 FROM role_changes WHERE user_id = $1 AND changed_by = $2', [row.user_id, o.by]);
      if (before.rowCount !== 0) return { outcome: 'bootstrapped_before', userId: row.user_id } as const;
    }
    await client.query(`UPDATE credentials SET role = 'admin', updated_at = now() WHERE user_id = $1`, [row.user_id]);
    await client.query(
      `INSERT INTO role_changes (user_id, from_role, to_role, changed_by, at) VALUES ($1, $2, 'admin', $3, to_timestamp($4::float8 / 1000))`,
      [row.user_id, row.role, o.by, o.clock.now()],
    );
    return { outcome: 'promoted', userId: row.user_id, from: row.role } as const;
  });
}
