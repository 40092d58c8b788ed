/**
 * User profiles (issue 7, item 3): a recipient's email, phone (E.164), locale and IANA timezone,
 * written through `PUT /api/v1/users/{user_id}/profile` and read by routing with {@link getProfile}.
 */
import { loadProfile, type Queryable } from './store.js';
import type { Profile } from './profile.js';

export type { Profile } from './profile.js';
export { canonicalEmail, canonicalTimeZone, isE164 } from './profile.js';
export { registerProfileRoutes } from './routes.js';

/** The user's contact details, or undefined when the user has no profile. Fields not set are absent. */
export async function getProfile(db: Queryable, userId: string): Promise<Profile | undefined> {
  const p = await loadProfile(db, userId);
  if (!p) return undefined;
  const { created_at: _c, updated_at: _u, ...profile } = p;
  return profile;
}
