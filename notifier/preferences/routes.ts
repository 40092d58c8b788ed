/**
 * `GET` and `PATCH /api/v1/users/{user_id}/preferences`: the user themself or a service role (403
 * otherwise). Both answer 200 with the whole stored document (document.ts); a user who never set
 * anything has `{}`. PATCH is a partial update (document.ts) and is answered once it applies to
 * every send (store.ts).
 */
import type { Pool } from '../../shared/db.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import type { CallerResolver } from '../caller.js';
import type { TypeCatalog } from '../policy/types.js';
import { authorizeUser } from '../profiles/routes.js';
import { parsePreferencePatch, preferencesJson } from './document.js';
import { loadPreferences, patchPreferences } from './store.js';

export interface PreferenceRoutesOptions {
  pool: Pool;
  caller: CallerResolver;
  catalog: TypeCatalog;
  /** The delivery lease: the longest a PATCH waits for sends already in their provider call. */
  leaseMs: number;
}

export function registerPreferenceRoutes(app: TemplatedApp, edge: EdgeOptions, o: PreferenceRoutesOptions): void {
  route(
    app,
    'get',
    '/api/v1/users/:user_id/preferences',
    async (ctx) => {
      const userId = await authorizeUser(ctx, o.caller);
      const doc = (await loadPreferences(o.pool, [userId])).get(userId)!;
      return { body: preferencesJson(doc) };
    },
    edge,
  );

  route(
    app,
    'patch',
    '/api/v1/users/:user_id/preferences',
    async (ctx) => {
      const userId = await authorizeUser(ctx, o.caller);
      const patch = parsePreferencePatch(jsonBody(ctx), o.catalog);
      const doc = await patchPreferences(o.pool, userId, patch, { leaseMs: o.leaseMs });
      return { body: preferencesJson(doc) };
    },
    edge,
  );
}
