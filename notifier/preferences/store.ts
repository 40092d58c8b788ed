/**
 * Preferences in PostgreSQL (migration 070): reading them, and the write that applies at once.
 *
 * A write (PATCH) runs in one transaction: it takes the user's preference lock exclusively, merges
 * the patch into the stored document, stores it and NOTIFYs `notifier_preferences` (delivered to
 * every replica at the commit, which drops its cached entry: cache.ts). The delivery worker takes
 * the same lock, shared, around its claim and the check before the provider call
 * (policy/gate.ts), so the write waits for claims under way and every later claim sees the new
 * document. After the commit the write waits until the user's sends claimed before it have left
 * the provider call (at most one lease): when the PATCH is answered, no send it turned off is
 * still on its way out, and none will start.
 */
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import { applyPreferencePatch, EMPTY_PREFERENCES, storedPreferences, type PreferenceDoc, type PreferencePatch } from './document.js';

export type Queryable = Pool | PoolClient;

/** NOTIFY channel of preference writes; the payload is the user id. */
export const PREFERENCES_CHANNEL = 'notifier_preferences';

/** Namespace of the two-int advisory lock on a user's preferences ('npref'). */
export const PREFERENCE_LOCK_NAMESPACE = 0x6e707266;

/** SQL taking the shared preference lock of every user in $1 (text[]), in lock-key order. */
export const LOCK_USERS_SHARED = `SELECT count(pg_advisory_xact_lock_shared(${PREFERENCE_LOCK_NAMESPACE}, k))
  FROM (SELECT DISTINCT hashtext(u) AS k FROM unnest($1::text[]) AS u ORDER BY k) AS keys`;

/** The stored documents of these users; a user without one gets the empty document. */
export async function loadPreferences(db: Queryable, userIds: readonly string[]): Promise<Map<string, PreferenceDoc>> {
  const { rows } = await db.query<{ user_id: string; prefs: unknown }>(
    'SELECT user_id, prefs FROM user_preferences WHERE user_id = ANY($1::text[])',
    [[...userIds]],
  );
  const out = new Map<string, PreferenceDoc>();
  for (const id of userIds) out.set(id, EMPTY_PREFERENCES);
  for (const r of rows) out.set(r.user_id, storedPreferences(r.prefs));
  return out;
}

/**
 * Runs `read` inside the caller's transaction with a lock and statement timeout of `timeoutMs`,
 * under a savepoint, so a read that gives up (a lock held on the table, a struggling server) does
 * not abort the transaction; the timeouts are lifted again afterwards. A throw means "the store is
 * unavailable".
 */
export async function readWithTimeout<T>(client: PoolClient, timeoutMs: number, read: () => Promise<T>): Promise<T> {
  const ms = Math.max(1, Math.round(timeoutMs));
  await client.query('SAVEPOINT timed_read');
  try {
    await client.query(`SET LOCAL lock_timeout = ${ms}`);
    await client.query(`SET LOCAL statement_timeout = ${ms}`);
    const out = await read();
    await client.query('RELEASE SAVEPOINT timed_read');
    await client.query('SET LOCAL lock_timeout = 0');
    await client.query('SET LOCAL statement_timeout = 0');
    return out;
  } catch (err) {
    await client.query('ROLLBACK TO SAVEPOINT timed_read');
    throw err;
  }
}

/** {@link loadPreferences} inside a transaction, giving up after `timeoutMs` ({@link readWithTimeout}). */
export function loadPreferencesInTransaction(
  client: PoolClient,
  userIds: readonly string[],
  timeoutMs: number,
): Promise<Map<string, PreferenceDoc>> {
  return readWithTimeout(client, timeoutMs, () => loadPreferences(client, userIds));
}

export interface PatchOptions {
  /** How long a claimed send may stay in its provider call (the delivery lease). */
  leaseMs: number;
  /** Pause between looks at the sends in flight. */
  pollMs?: number;
}

/** Merges `patch` into the user's preferences; see the module comment for what the answer means. */
export async function patchPreferences(pool: Pool, userId: string, patch: PreferencePatch, o: PatchOptions): Promise<PreferenceDoc> {
  const doc = await withTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [PREFERENCE_LOCK_NAMESPACE, userId]);
    const { rows } = await client.query<{ prefs: unknown }>('SELECT prefs FROM user_preferences WHERE user_id = $1 FOR UPDATE', [userId]);
    const next = applyPreferencePatch(rows[0] ? storedPreferences(rows[0].prefs) : EMPTY_PREFERENCES, patch);
    await client.query(
      `INSERT INTO user_preferences (user_id, prefs) VALUES ($1, $2)
       ON CONFLICT (user_id) DO UPDATE SET prefs = excluded.prefs, updated_at = now()`,
      [userId, next],
    );
    await client.query('SELECT pg_notify($1, $2)', [PREFERENCES_CHANNEL, userId]);
    return next;
  });
  await sendsSettled(pool, userId, o);
  return doc;
}

/** Waits until no policy-checked send of the user is in a provider call (a live `sending` claim). */
async function sendsSettled(pool: Pool, userId: string, o: PatchOptions): Promise<void> {
  const pollMs = o.pollMs ?? 20;
  for (let waited = 0; waited <= o.leaseMs; waited += pollMs) {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM deliveries
        WHERE recipient_id = $1 AND status = 'sending' AND priority <> 'transactional'
          AND sending_since > now() - make_interval(secs => $2::double precision / 1000)`,
      [userId, o.leaseMs],
    );
    if ((rows[0]?.n ?? 0) === 0) return;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
