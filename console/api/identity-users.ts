/** identity's user look-up (`GET /auth/admin/users?id=…`, identity/accounts/admin-users.ts), as the console calls it. */
import type { ServiceClient } from './client.js';

export interface UserSummary {
  user_id: string;
  email: string;
  name: string | null;
  role: string;
}

/** identity answers at most this many ids per call. */
export const MAX_IDS_PER_CALL = 100;

export async function lookUpUsers(c: ServiceClient, ids: readonly string[]): Promise<UserSummary[]> {
  const out: UserSummary[] = [];
  for (let i = 0; i < ids.length; i += MAX_IDS_PER_CALL) {
    const q = new URLSearchParams();
    for (const id of ids.slice(i, i + MAX_IDS_PER_CALL)) q.append('id', id);
    out.push(...(await c.get<{ users: UserSummary[] }>(`/auth/admin/users?${q.toString()}`)).data.users);
  }
  return out;
}
