/**
 * The operator API of the dead-letter queue (roles NOTIFIER_ADMIN_ROLES):
 *
 * - `GET /api/v1/admin/dlq?channel=&reason=&all=&cursor=&limit=`: open entries, oldest first
 *   (`all=true` includes re-driven ones), `{dead_letters, next_cursor}`;
 * - `GET /api/v1/admin/dlq/{id}`: one entry;
 * - `POST /api/v1/admin/dlq` with `{"ids": [...]}`, or `{"channel": "push", "limit": 100}` for the
 *   oldest open entries: re-drives them → 200 `{results: [{id, delivery_id, result}]}` where
 *   `result` is `redriven`, `already_redriven`, `not_dead_lettered` or `not_found`;
 * - `POST /api/v1/admin/dlq/{id}/redrive`: one entry → 200 `{id, delivery_id, result}` (404 if
 *   there is no such entry).
 *
 * Re-driving is idempotent: repeating a call re-drives nothing twice.
 */
import type { Pool } from '../../shared/db.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireRole, type CallerResolver } from '../caller.js';
import type { Boss } from '../queues/boss.js';
import { isChannel, type ChannelName } from '../queues/names.js';
import { isUuid } from '../tracking/advance.js';
import { getDeadLetter, listDeadLetters, openDeadLetterIds, redrive, type RedriveResult } from './dlq.js';

export interface DlqRoutesOptions {
  pool: Pool;
  boss: Boss;
  caller: CallerResolver;
  adminRoles: readonly string[];
  wake: (queue: string) => void;
}

const MAX_BATCH = 1000;

function channelParam(raw: unknown, field: string): ChannelName | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string' || !isChannel(raw)) throw invalidField(field, 'must be push, email, sms or in_app');
  return raw;
}

function limitParam(raw: unknown, field: string, dflt: number, max: number): number {
  if (raw === undefined || raw === null) return dflt;
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > max) throw invalidField(field, `must be an integer from 1 to ${max}`);
  return n;
}

export function registerDlqRoutes(app: TemplatedApp, edge: EdgeOptions, o: DlqRoutesOptions): void {
  const admin = async (ctx: { headers: Readonly<Record<string, string>> }): Promise<string> => {
    const caller = await o.caller.callerOf(ctx);
    requireRole(caller, o.adminRoles);
    return caller.subject;
  };
  const redriveAll = async (ids: readonly string[], by: string): Promise<RedriveResult[]> => {
    const out: RedriveResult[] = [];
    for (const id of ids) {
      if (!isUuid(id)) {
        out.push({ id, result: 'not_found' });
        continue;
      }
      const r = await redrive(o.pool, o.boss, id.toLowerCase(), by);
      if (r.queue) o.wake(r.queue);
      out.push(r.result);
    }
    return out;
  };

  route(
    app,
    'get',
    '/api/v1/admin/dlq',
    async (ctx) => {
      await admin(ctx);
      const all = ctx.query.get('all');
      if (all !== null && !['true', 'false'].includes(all)) throw invalidField('all', 'must be true or false');
      const reason = ctx.query.get('reason') ?? undefined;
      if (reason !== undefined && !/^[a-z_]{1,64}$/.test(reason)) throw invalidField('reason', 'must be a reason code');
      const cursor = ctx.query.get('cursor') || undefined;
      return {
        body: await listDeadLetters(o.pool, {
          channel: channelParam(ctx.query.get('channel') ?? undefined, 'channel'),
          reason,
          all: all === 'true',
          cursor,
          limit: limitParam(ctx.query.get('limit') ?? undefined, 'limit', 50, 500),
        }),
      };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/dlq/:id',
    async (ctx) => {
      await admin(ctx);
      const id = ctx.params[0]!;
      const entry = isUuid(id) ? await getDeadLetter(o.pool, id.toLowerCase()) : undefined;
      if (!entry) throw new PlatformError('not_found', { detail: 'no dead-letter entry with this id' });
      return { body: entry };
    },
    edge,
  );

  route(
    app,
    'post',
    '/api/v1/admin/dlq',
    async (ctx) => {
      const by = await admin(ctx);
      const body = jsonBody(ctx);
      for (const k of Object.keys(body))
        if (!['ids', 'channel', 'limit'].includes(k)) throw invalidField(k, 'is not a field of a re-drive');
      let ids: string[];
      if (body['ids'] !== undefined) {
        if (body['channel'] !== undefined || body['limit'] !== undefined)
          throw invalidField('ids', 'give either ids, or channel and limit');
        const raw = body['ids'];
        if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_BATCH) throw invalidField('ids', `must be 1 to ${MAX_BATCH} ids`);
        raw.forEach((v, i) => {
          if (typeof v !== 'string') throw invalidField(`ids[${i}]`, 'must be a string');
        });
        ids = [...new Set(raw as string[])];
      } else {
        const channel = channelParam(body['channel'], 'channel');
        ids = await openDeadLetterIds(o.pool, channel, limitParam(body['limit'], 'limit', 100, MAX_BATCH));
      }
      return { body: { results: await redriveAll(ids, by) } };
    },
    edge,
  );

  route(
    app,
    'post',
    '/api/v1/admin/dlq/:id/redrive',
    async (ctx) => {
      const by = await admin(ctx);
      const [r] = await redriveAll([ctx.params[0]!], by);
      if (!r || r.result === 'not_found') throw new PlatformError('not_found', { detail: 'no dead-letter entry with this id' });
      return { body: r };
    },
    edge,
  );
}
