/**
 * `PUT` and `GET /api/v1/users/{user_id}/profile`: the user themself or a service role (403
 * otherwise). PUT replaces the whole profile (profile.ts) and answers 201 when it is new, 200 when
 * replaced, with the stored profile; GET answers 404 `not_found` for a user without one.
 */
import { PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions, type RequestContext } from '../../shared/http.js';
import type { Pool } from '../../shared/db.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireUserOrService, type CallerResolver } from '../caller.js';
import { parseProfileBody } from './profile.js';
import { loadProfile, putProfile } from './store.js';
import { parseUserId } from './user-id.js';

/** Checks the caller may act for the path's user; returns the user id. */
export async function authorizeUser(ctx: RequestContext, caller: CallerResolver): Promise<string> {
  const who = await caller.callerOf(ctx);
  const raw = ctx.params[0]!;
  requireUserOrService(who, raw, caller.serviceRoles);
  return parseUserId(raw);
}

export function registerProfileRoutes(app: TemplatedApp, edge: EdgeOptions, pool: Pool, caller: CallerResolver): void {
  route(
    app,
    'put',
    '/api/v1/users/:user_id/profile',
    async (ctx) => {
      const userId = await authorizeUser(ctx, caller);
      const fields = parseProfileBody(jsonBody(ctx));
      const { created, profile } = await putProfile(pool, userId, fields);
      return { status: created ? 201 : 200, body: profile };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/users/:user_id/profile',
    async (ctx) => {
      const userId = await authorizeUser(ctx, caller);
      const profile = await loadProfile(pool, userId);
      if (!profile) throw new PlatformError('not_found', { detail: `user ${userId} has no profile` });
      return { body: profile };
    },
    edge,
  );
}
