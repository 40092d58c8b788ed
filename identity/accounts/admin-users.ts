/**
 * `GET /auth/admin/users?id=<user_id>&id=…` (admin): who some user ids are, for operator tools
 * that hold ids (the console shows people by name or e-mail instead of `user:<uuid>`). Up to 100
 * ids per call; an id that names no account is left out of the answer (no error: an operator tool
 * shows the id itself then). Answers `{"users": [{"user_id", "email", "name", "role"}]}`, `name`
 * null when the account has none. Callers authenticate as for the client registry
 * (oauth/admin-auth.ts: IDENTITY_ADMIN_TOKEN or an access token whose role is `admin`).
 */
import { invalidField } from '../../shared/errors.js';
import type { Handler } from '../../shared/http.js';
import { requireAdmin } from '../oauth/admin-auth.js';
import type { OAuthRuntime } from '../oauth/runtime.js';

export const MAX_USER_IDS = 100;

export interface UserSummary {
  user_id: string;
  email: string;
  name: string | null;
  role: string;
}

export function adminUserRoutes(rt: OAuthRuntime): { method: 'get'; pattern: string; handler: Handler }[] {
  return [
    {
      method: 'get',
      pattern: '/auth/admin/users',
      handler: async (ctx) => {
        await requireAdmin(rt, ctx, 'user look-ups');
        for (const k of ctx.query.keys()) if (k !== 'id') throw invalidField(k, 'is not a parameter here (id is)');
        const ids = [...new Set(ctx.query.getAll('id'))];
        if (ids.length === 0) throw invalidField('id', 'is required (one or more user ids)');
        if (ids.length > MAX_USER_IDS) throw invalidField('id', `at most ${MAX_USER_IDS} per call`);
        if (ids.some((id) => id.length === 0 || id.length > 128)) throw invalidField('id', 'must be 1 to 128 characters');
        const { rows } = await rt.pool.query<UserSummary>(
          'SELECT user_id, email, name, role FROM credentials WHERE user_id = ANY($1::text[]) ORDER BY user_id',
          [ids],
        );
        return { body: { users: rows }, headers: { 'cache-control': 'no-store' } };
      },
    },
  ];
}
