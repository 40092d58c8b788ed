/**
 * `/api/v1/users/{user_id}/devices`: the user themself or a service role (403 otherwise).
 * - `POST` `{token, platform}` registers a push token: 201 when new to this user, 200 when it was
 *   already theirs (refreshed); the body is the device.
 * - `GET` lists them: `{devices: [{token, platform, created_at, updated_at}]}`, newest first.
 * - `DELETE /api/v1/users/{user_id}/devices/{token}` (token URL-encoded) unregisters it: 204, or
 *   404 `not_found` when the user has no such token.
 */
import { PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { Pool } from '../../shared/db.js';
import type { TemplatedApp } from '../../shared/uws.js';
import type { CallerResolver } from '../caller.js';
import { authorizeUser } from '../profiles/routes.js';
import { parseRegistration, parseToken } from './device.js';
import { deleteDevice, listDevices, registerDevice } from './store.js';

export function registerDeviceRoutes(app: TemplatedApp, edge: EdgeOptions, pool: Pool, caller: CallerResolver): void {
  route(
    app,
    'post',
    '/api/v1/users/:user_id/devices',
    async (ctx) => {
      const userId = await authorizeUser(ctx, caller);
      const reg = parseRegistration(jsonBody(ctx));
      const { created, device } = await registerDevice(pool, userId, reg);
      return { status: created ? 201 : 200, body: device };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/users/:user_id/devices',
    async (ctx) => {
      const userId = await authorizeUser(ctx, caller);
      return { body: { devices: await listDevices(pool, userId) } };
    },
    edge,
  );

  route(
    app,
    'del',
    '/api/v1/users/:user_id/devices/:token',
    async (ctx) => {
      const userId = await authorizeUser(ctx, caller);
      const token = parseToken(ctx.params[1]!);
      if (!(await deleteDevice(pool, userId, token))) throw new PlatformError('not_found', { detail: 'the user has no such device token' });
      return { status: 204 };
    },
    edge,
  );
}
