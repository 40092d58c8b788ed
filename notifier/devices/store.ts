/** Device tokens in PostgreSQL (migration 052): the SQL. */
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import { MAX_DEVICES_PER_USER, type Platform, type Registration } from './device.js';

export type Queryable = Pool | PoolClient;

export interface Device {
  token: string;
  platform: Platform;
  /** Epoch seconds: first registered by this user, and last registered or refreshed. */
  created_at: number;
  updated_at: number;
}

const COLUMNS = `token, platform,
  extract(epoch FROM created_at)::float8 AS created_at,
  extract(epoch FROM updated_at)::float8 AS updated_at`;

/** The user's devices, most recently registered first. */
export async function listDevices(db: Queryable, userId: string): Promise<Device[]> {
  const { rows } = await db.query<Device>(`SELECT ${COLUMNS} FROM device_tokens WHERE user_id = $1 ORDER BY updated_at DESC, token`, [
    userId,
  ]);
  return rows;
}

/** The tokens of several users, each user's most recently registered first; users without any are absent. */
export async function listTokensOf(db: Queryable, userIds: readonly string[]): Promise<Map<string, string[]>> {
  const { rows } = await db.query<{ user_id: string; token: string }>(
    'SELECT user_id, token FROM device_tokens WHERE user_id = ANY($1::text[]) ORDER BY user_id, updated_at DESC, token',
    [[...userIds]],
  );
  const out = new Map<string, string[]>();
  for (const r of rows) {
    const list = out.get(r.user_id);
    if (list) list.push(r.token);
    else out.set(r.user_id, [r.token]);
  }
  return out;
}

/**
 * Registers (or refreshes) a token for the user, moving it from any other user, then trims the
 * user's tokens to the newest {@link MAX_DEVICES_PER_USER}. `created` when the token is new to this user.
 */
export async function registerDevice(pool: Pool, userId: string, reg: Registration): Promise<{ created: boolean; device: Device }> {
  return withTransaction(pool, async (client) => {
    // Locks the token's row, if any, so a concurrent registration of the same token waits.
    const prev = await client.query<{ user_id: string }>('SELECT user_id FROM device_tokens WHERE token = $1 FOR UPDATE', [reg.token]);
    const previousUser = prev.rows[0]?.user_id;
    const { rows } = await client.query<Device>(
      `INSERT INTO device_tokens AS d (token, user_id, platform, created_at, updated_at)
       VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp())
       ON CONFLICT (token) DO UPDATE
         SET user_id = EXCLUDED.user_id, platform = EXCLUDED.platform, updated_at = EXCLUDED.updated_at,
             created_at = CASE WHEN d.user_id = EXCLUDED.user_id THEN d.created_at ELSE EXCLUDED.created_at END
       RETURNING ${COLUMNS}`,
      [reg.token, userId, reg.platform],
    );
    const device = rows[0]!;
    await client.query(
      `DELETE FROM device_tokens WHERE token IN (
         SELECT token FROM device_tokens WHERE user_id = $1 ORDER BY updated_at DESC, token OFFSET $2)`,
      [userId, MAX_DEVICES_PER_USER],
    );
    return { created: previousUser !== userId, device };
  });
}

/** Deletes one of the user's tokens; true when it was there. */
export async function deleteDevice(db: Queryable, userId: string, token: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM device_tokens WHERE user_id = $1 AND token = $2', [userId, token]);
  return (rowCount ?? 0) > 0;
}
