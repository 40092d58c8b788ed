/**
 * Accepting a notification: the request is validated, persisted, enqueued and acknowledged before
 * any provider is called (README, "Notifications"). In ONE transaction: the notification row, the
 * caller's idempotency record, and the routing job (pg-boss `send` on the transaction's client).
 * The 202 is sent only after the commit, so an acknowledged notification is never lost; when the
 * database cannot be reached the answer is 503 and nothing was accepted.
 *
 * Idempotency, per caller (the subject the sidecar vouches for), for NOTIFIER_IDEMPOTENCY_TTL:
 * - the same key with the same request (requestHash) → the original 202 body again, nothing new;
 * - the same key with a different request → 422 `idempotency_key_reused`;
 * - the same key while the first request's transaction is still open → 409
 *   `idempotency_in_flight` with Retry-After (a transaction-scoped advisory lock on the key, tried
 *   without waiting, marks the request in flight).
 * A request naming a `campaign_id` that was stopped is refused (409 `campaign_stopped`); one with
 * an `audience` is stored with its fan-out (`planning`) and its campaign job instead of a routing
 * job (notifier/campaigns). A key past its time is forgotten: reusing it starts a new notification. One case stays
 * ambiguous: a connection lost during COMMIT is answered 503 although the commit may have landed;
 * a caller that retries with its idempotency key gets the original 202 in that case.
 */
import { createHash, randomUUID } from 'node:crypto';
import { withTransaction, type Pool } from '../../shared/db.js';
import { PlatformError } from '../../shared/errors.js';
import type { Boss } from '../queues/boss.js';
import { campaignQueue, routeQueue } from '../queues/names.js';
import { wakeCampaign, wakeRouter } from '../queues/wake-ups.js';
import { openCampaign, requireSegment } from '../campaigns/store.js';
import { databaseUnavailable, isDatabaseUnavailable } from '../../shared/db-errors.js';
import { requestHash, type NewNotification } from './validate.js';

export interface IngestionBody {
  notification_id: string;
  status: 'accepted';
}

export interface AcceptDeps {
  pool: Pool;
  boss: Boss;
  idempotencyTtlMs: number;
  /** Freezes the template version; throws the templates module's TemplateNotFoundError (422) for an unknown one. */
  markTemplateUsed: (templateId: string) => Promise<void>;
  /** Called after the commit with the routing queue that has new work. */
  wake: (queue: string) => void;
}

export interface Accepted {
  body: IngestionBody;
  /** True when this is the answer to an earlier request with the same idempotency key. */
  replayed: boolean;
}

// Two-int advisory locks, namespace 'ntfy', apart from the migration runner's and pg-boss's keys.
const LOCK_NAMESPACE = 0x6e746679;

/** The advisory-lock key of (caller, idempotency key). Exported for tests. */
export function idempotencyLockKey(caller: string, key: string): number {
  return createHash('sha256').update(`${caller}\0${key}`).digest().readInt32BE(0);
}

/** How long a 409 asks the caller to wait: the first request's transaction takes milliseconds. */
const IN_FLIGHT_RETRY_AFTER_S = 1;

export async function acceptNotification(deps: AcceptDeps, caller: string, n: NewNotification): Promise<Accepted> {
  try {
    await deps.markTemplateUsed(n.templateId);
    const hash = requestHash(n);
    const result = await withTransaction(deps.pool, async (client): Promise<Accepted> => {
      const key = n.idempotencyKey;
      if (key !== undefined) {
        const lock = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1, $2) AS ok', [
          LOCK_NAMESPACE,
          idempotencyLockKey(caller, key),
        ]);
        if (!lock.rows[0]?.ok) {
          throw new PlatformError('idempotency_in_flight', {
            field: 'idempotency_key',
            detail: 'idempotency_key: a request with this key is still being accepted; retry to get its answer',
            headers: { 'retry-after': String(IN_FLIGHT_RETRY_AFTER_S) },
          });
        }
        const { rows } = await client.query<{ body_hash: string; response: IngestionBody }>(
          'SELECT body_hash, response FROM idempotency_keys WHERE caller = $1 AND key = $2 AND expires_at > now()',
          [caller, key],
        );
        const seen = rows[0];
        if (seen) {
          if (seen.body_hash === hash)
            return { body: { notification_id: seen.response.notification_id, status: 'accepted' }, replayed: true };
          throw new PlatformError('idempotency_key_reused', {
            field: 'idempotency_key',
            detail: 'idempotency_key: already used for a different request',
            extra: { notification_id: seen.response.notification_id },
          });
        }
      }
      if (n.campaignId !== undefined) await openCampaign(client, n.campaignId);
      if (n.segment !== undefined) await requireSegment(client, n.segment);
      const id = randomUUID();
      const body: IngestionBody = { notification_id: id, status: 'accepted' };
      await client.query(
        `INSERT INTO notifications (id, caller, event_type, recipient_id, segment_id, template_id, template_data, priority, channels, locale,
                                    campaign_id, idempotency_key, notification_type)
         VALUES ($1, $2, $3, $4, $13, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [
          id,
          caller,
          n.eventType,
          n.recipientId ?? null,
          n.templateId,
          n.templateData,
          n.priority,
          n.channels,
          n.locale ?? null,
          n.campaignId ?? null,
          key ?? null,
          n.notificationType,
          n.segment ?? null,
        ],
      );
      if (key !== undefined) {
        // Replaces an expired record of the same key, if one is still there.
        await client.query(
          `INSERT INTO idempotency_keys (caller, key, body_hash, notification_id, response, expires_at)
           VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::double precision / 1000))
           ON CONFLICT (caller, key) DO UPDATE
             SET body_hash = excluded.body_hash, notification_id = excluded.notification_id, response = excluded.response,
                 created_at = now(), expires_at = excluded.expires_at`,
          [caller, key, hash, id, body, deps.idempotencyTtlMs],
        );
      }
      if (n.segment !== undefined) {
        // Nothing is expanded here: the fan-out is planned by its campaign job (notifier/campaigns/fanout.ts).
        await client.query('INSERT INTO campaign_fanouts (notification_id, campaign_id, segment_id) VALUES ($1, $2, $3)', [
          id,
          n.campaignId,
          n.segment,
        ]);
        await wakeCampaign(client, deps.boss, id, n.priority);
      } else await wakeRouter(client, deps.boss, id, n.priority);
      return { body, replayed: false };
    });
    if (!result.replayed) deps.wake(n.segment !== undefined ? campaignQueue(n.priority) : routeQueue(n.priority));
    return result;
  } catch (err) {
    if (isDatabaseUnavailable(err))
      throw databaseUnavailable(err, 'the notification store cannot be reached; nothing was accepted, retry later');
    throw err;
  }
}
