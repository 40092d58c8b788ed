/**
 * The operator API of the e-mail suppression list (roles NOTIFIER_ADMIN_ROLES):
 *
 * - `GET /api/v1/admin/suppressions?reason=&cursor=&limit=`: entries, oldest first,
 *   `{suppressions, next_cursor}`;
 * - `GET /api/v1/admin/suppressions/{address}`: one entry (404 when the address is not listed);
 * - `DELETE /api/v1/admin/suppressions/{address}`: removes it → 204 (404 when not listed); later
 *   e-mail to the address is sent again.
 */
import type { Pool } from '../../shared/db.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { route, type EdgeOptions } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireRole, type CallerResolver } from '../caller.js';
import type { Logger } from '../../shared/log.js';
import { getSuppression, listSuppressions, removeSuppression } from './suppressions.js';

export interface SuppressionRoutesOptions {
  pool: Pool;
  caller: CallerResolver;
  adminRoles: readonly string[];
  log: Logger;
}

function address(raw: string): string {
  const a = raw.trim().toLowerCase();
  if (a.length === 0 || a.length > 320 || !a.includes('@')) throw invalidField('address', 'must be an e-mail address');
  return a;
}

export function registerSuppressionRoutes(app: TemplatedApp, edge: EdgeOptions, o: SuppressionRoutesOptions): void {
  const admin = async (ctx: { headers: Readonly<Record<string, string>> }): Promise<string> => {
    const caller = await o.caller.callerOf(ctx);
    requireRole(caller, o.adminRoles);
    return caller.subject;
  };
  route(
    app,
    'get',
    '/api/v1/admin/suppressions',
    async (ctx) => {
      await admin(ctx);
      const reason = ctx.query.get('reason') ?? undefined;
      if (reason !== undefined && reason !== 'bounce' && reason !== 'complaint')
        throw invalidField('reason', 'must be bounce or complaint');
      const rawLimit = ctx.query.get('limit');
      const limit = rawLimit === null ? 50 : /^\d+$/.test(rawLimit) ? Number(rawLimit) : NaN;
      if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw invalidField('limit', 'must be an integer from 1 to 500');
      const cursor = ctx.query.get('cursor') || undefined;
      return { body: await listSuppressions(o.pool, { ...(reason ? { reason } : {}), ...(cursor ? { cursor } : {}), limit }) };
    },
    edge,
  );
  route(
    app,
    'get',
    '/api/v1/admin/suppressions/:address',
    async (ctx) => {
      await admin(ctx);
      const entry = await getSuppression(o.pool, address(ctx.params[0]!));
      if (!entry) throw new PlatformError('not_found', { detail: 'this address is not on the suppression list' });
      return { body: entry };
    },
    edge,
  );
  route(
    app,
    'del',
    '/api/v1/admin/suppressions/:address',
    async (ctx) => {
      const by = await admin(ctx);
      const a = address(ctx.params[0]!);
      if (!(await removeSuppression(o.pool, a)))
        throw new PlatformError('not_found', { detail: 'this address is not on the suppression list' });
      o.log.info({ by, reason: 'operator' }, 'an address was removed from the suppression list');
      return { status: 204 };
    },
    edge,
  );
}
