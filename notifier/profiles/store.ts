/** Profiles in PostgreSQL (migration 051): the SQL. */
import type { Pool, PoolClient } from '../../shared/db.js';
import type { Profile, ProfileFields } from './profile.js';

export type Queryable = Pool | PoolClient;

interface ProfileRow {
  user_id: string;
  email: string | null;
  phone: string | null;
  locale: string | null;
  timezone: string | null;
  tags: string[];
  created_at: number;
  updated_at: number;
}

export interface StoredProfile extends Profile {
  /** Epoch seconds. */
  created_at: number;
  updated_at: number;
}

const COLUMNS = `user_id, email, phone, locale, timezone, tags,
  extract(epoch FROM created_at)::float8 AS created_at,
  extract(epoch FROM updated_at)::float8 AS updated_at`;

function toProfile(r: ProfileRow): StoredProfile {
  const p: StoredProfile = { user_id: r.user_id, created_at: r.created_at, updated_at: r.updated_at };
  if (r.email !== null) p.email = r.email;
  if (r.phone !== null) p.phone = r.phone;
  if (r.locale !== null) p.locale = r.locale;
  if (r.timezone !== null) p.timezone = r.timezone;
  if (r.tags.length > 0) p.tags = r.tags;
  return p;
}

export async function loadProfile(db: Queryable, userId: string): Promise<StoredProfile | undefined> {
  const { rows } = await db.query<ProfileRow>(`SELECT ${COLUMNS} FROM user_profiles WHERE user_id = $1`, [userId]);
  return rows[0] ? toProfile(rows[0]) : undefined;
}

/** The profiles of several users at once (the users without one are absent). */
export async function loadProfiles(db: Queryable, userIds: readonly string[]): Promise<StoredProfile[]> {
  const { rows } = await db.query<ProfileRow>(`SELECT ${COLUMNS} FROM user_profiles WHERE user_id = ANY($1::text[])`, [[...userIds]]);
  return rows.map(toProfile);
}

/** Replaces the whole profile; `created` when the user had none. */
export async function putProfile(db: Queryable, userId: string, f: ProfileFields): Promise<{ created: boolean; profile: StoredProfile }> {
  const { rows } = await db.query<ProfileRow & { created: boolean }>(
    `INSERT INTO user_profiles AS p (user_id, email, phone, locale, timezone, tags)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (user_id) DO UPDATE
       SET email = EXCLUDED.email, phone = EXCLUDED.phone, locale = EXCLUDED.locale,
           timezone = EXCLUDED.timezone, tags = EXCLUDED.tags, updated_at = now()
     RETURNING ${COLUMNS}, (xmax = 0) AS created`,
    [userId, f.email ?? null, f.phone ?? null, f.locale ?? null, f.timezone ?? null, f.tags ?? []],
  );
  const row = rows[0]!;
  return { created: row.created, profile: toProfile(row) };
}
