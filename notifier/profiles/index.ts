/**
 * User profiles (README, "Profiles"): a recipient's email, phone (E.164), locale and IANA timezone,
 * written through `PUT /api/v1/users/{user_id}/profile` and read by the delivery worker with
 * {@link getProfiles} (one query per fetched batch).
 */
import { loadProfile, loadProfiles, type Queryable, type StoredProfile } from './store.js';
import type { Profile } from './profile.js';

export type { Profile } from './profile.js';
export { canonicalEmail, canonicalTimeZone, isE164 } from './profile.js';
export { registerProfileRoutes } from './routes.js';

/** The user's contact details, or undefined when the user has no profile. Fields not set are absent. */
export async function getProfile(db: Queryable, userId: string): Promise<Profile | undefined> {
  const p = await loadProfile(db, userId);
  return p ? withoutTimes(p) : undefined;
}

/** {@link getProfile} for several users in one query: a map with an entry for each user who has a profile. */
export async function getProfiles(db: Queryable, userIds: readonly string[]): Promise<Map<string, Profile>> {
  return new Map((await loadProfiles(db, userIds)).map((p) => [p.user_id, withoutTimes(p)]));
}

function withoutTimes(p: StoredProfile): Profile {
  const { created_at: _c, updated_at: _u, ...profile } = p;
  return profile;
}
