/**
 * The operator API of the e-mail suppression list (roles NOTIFIER_ADMIN_ROLES):
 *
 * - `GET /api/v1/admin/suppressions?reason=&q=&cursor=&limit=`: entries, oldest first,
 *   `{suppressions, next_cursor}`; `q` keeps the addresses containing it (any case);
 * - `POST /api/v1/admin/suppressions` `{"address", "detail"?}`: puts an address on the list by
 *   hand (reason `manual`) → 201 with the entry, or 200 with the entry already there (unchanged);
 * - `GET /api/v1/admin/suppressions/{address}`: one entry (404 when the address is not listed);
 * - `DELETE /api/v1/admin/suppressions/{address}`: removes it → 204 (404 when not listed); later
 *   e-mail to the address is sent again.
 */
import type { Pool } from '../../shared/db.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireRole, type CallerResolver } from '../caller.js';
import type { Logger } from '../../shared/log.js';
import { addSuppression, getSuppression, listSuppressions, removeSuppression, type SuppressionReason } from './suppressions.js';

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

/** An address typed by an operator: one `local@domain`, no spaces or control characters. */
function newAddress(raw: unknown): string {
  if (typeof raw !== 'string') throw invalidField('address', 'must be an e-mail address');
  const a = address(raw);
  // eslint-disable-next-line no-control-regex
  if (!/^[^@\s\u0000-\u001f\u007f]+@[^@\s\u0000-\u001f\u007f]+$/.test(a))
    throw invalidField('address', 'must be one e-mail address (local@domain)');
  return a;
}

const REASONS: readonly SuppressionReason[] = ['bounce', 'complaint', 'manual'];
const MAX_DETAIL = 500;

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
      const reason = (ctx.query.get('reason') || undefined) as SuppressionReason | undefined;
      if (reason !== undefined && !REASONS.includes(reason)) throw invalidField('reason', 'must be bounce, complaint or manual');
      const contains = ctx.query.get('q')?.trim() || undefined;
      if (contains !== undefined && contains.length > 320) throw invalidField('q', 'must be at most 320 characters');
      const rawLimit = ctx.query.get('limit');
      const limit = rawLimit === null ? 50 : /^\d+$/.test(rawLimit) ? Number(rawLimit) : NaN;
      if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw invalidField('limit', 'must be an integer from 1 to 500');
      const cursor = ctx.query.get('cursor') || undefined;
      return {
        body: await listSuppressions(o.pool, {
          ...(reason ? { reason } : {}),
          ...(contains ? { contains } : {}),
          ...(cursor ? { cursor } : {}),
          limit,
        }),
      };
    },
    edge,
  );
  route(
    app,
    'post',
    '/api/v1/admin/suppressions',
    async (ctx) => {
      const by = await admin(ctx);
      const body = jsonBody(ctx);
      for (const k of Object.keys(body))
        if (k !== 'address' && k !== 'detail') throw invalidField(k, 'is not a field here (address, detail are)');
      const a = newAddress(body['address']);
      const d = body['detail'];
      if (d !== undefined && d !== null && (typeof d !== 'string' || d.length > MAX_DETAIL))
        throw invalidField('detail', `must be a string of at most ${MAX_DETAIL} characters`);
      const { created, entry } = await addSuppression(o.pool, a, typeof d === 'string' && d.trim() !== '' ? d.trim() : null);
      if (created) o.log.info({ by, reason: 'operator' }, 'an address was put on the suppression list');
      return { status: created ? 201 : 200, body: entry };
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
