/**
 * Operator endpoints for the projections, under /auth/admin/ (role admin):
 *
 * | route | does |
 * |---|---|
 * | `GET /auth/admin/projections` | each projector: live and rebuilding generation, positions, open dead letters |
 * | `POST /auth/admin/projections/{name}/rebuild` | replays the log into a new generation; the live model switches when it has caught up (202) |
 * | `GET /auth/admin/dead-letters?projector=&status=` | dead letters (default: open ones) |
 * | `POST /auth/admin/dead-letters/redrive` | re-drives open dead letters after a fix; body `{ "projector"?, "ids"? }`; answers `{ redriven, failed, remaining }`, where only what really projected counts as redriven (dead-letters.ts) |
 */
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions, type RequestContext } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import type { BearerAuth } from '../http/orders-auth.js';
import { listDeadLetters, redriveDeadLetters, type DeadLetter, type RedriveDeps } from './dead-letters.js';
import type { ProjectionRunner } from './projection-runner.js';

export interface ProjectionAdminDeps extends RedriveDeps {
  runner: ProjectionRunner;
  auth: BearerAuth;
}

const STATUSES: readonly DeadLetter['status'][] = ['open', 'redriven', 'superseded'];

export function registerProjectionAdminRoutes(app: TemplatedApp, edge: EdgeOptions, deps: ProjectionAdminDeps): void {
  const admin = async (ctx: RequestContext): Promise<void> => {
    const caller = await deps.auth.authenticate(ctx);
    if (caller.actor.role !== 'admin') throw new PlatformError('forbidden', { detail: 'projection operations need the admin role' });
  };
  const projector = (name: string | null | undefined, field: string): string | undefined => {
    if (name === null || name === undefined || name === '') return undefined;
    if (!deps.projectors.some((p) => p.name === name))
      throw invalidField(field, `must be one of ${deps.projectors.map((p) => p.name).join(', ')}`);
    return name;
  };

  route(
    app,
    'get',
    '/auth/admin/projections',
    async (ctx) => {
      await admin(ctx);
      const [status, lag] = await Promise.all([deps.runner.status(), deps.runner.lagSeconds()]);
      return { body: status.map((s) => ({ ...s, lagSeconds: lag[s.projector] ?? 0 })) };
    },
    edge,
  );

  route(
    app,
    'post',
    '/auth/admin/projections/:name/rebuild',
    async (ctx) => {
      await admin(ctx);
      const name = ctx.params[0] ?? '';
      if (!deps.projectors.some((p) => p.name === name)) throw new PlatformError('not_found', { detail: `no projector ${name}` });
      const generation = await deps.runner.rebuild(name);
      return { status: 202, body: { projector: name, generation } };
    },
    edge,
  );

  route(
    app,
    'get',
    '/auth/admin/dead-letters',
    async (ctx) => {
      await admin(ctx);
      const status = ctx.query.get('status') ?? 'open';
      if (!(STATUSES as readonly string[]).includes(status)) throw invalidField('status', `must be one of ${STATUSES.join(', ')}`);
      const list = await listDeadLetters(deps.pool, {
        projector: projector(ctx.query.get('projector'), 'projector'),
        status: status as DeadLetter['status'],
      });
      return { body: list };
    },
    edge,
  );

  route(
    app,
    'post',
    '/auth/admin/dead-letters/redrive',
    async (ctx) => {
      await admin(ctx);
      const body = ctx.body.length === 0 ? {} : jsonBody(ctx);
      for (const k of Object.keys(body)) if (k !== 'projector' && k !== 'ids') throw invalidField(k, 'is not a field of this request');
      let ids: number[] | undefined;
      if (body.ids !== undefined) {
        if (!Array.isArray(body.ids) || !body.ids.every((i) => Number.isSafeInteger(i) && (i as number) > 0)) {
          throw invalidField('ids', 'must be a list of dead-letter ids');
        }
        ids = body.ids as number[];
      }
      if (body.projector !== undefined && typeof body.projector !== 'string') throw invalidField('projector', 'must be a string');
      return { body: await redriveDeadLetters(deps, { projector: projector(body.projector, 'projector'), ids }) };
    },
    edge,
  );
}
