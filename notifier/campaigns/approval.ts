/**
 * Approval: a fan-out whose segment is larger than NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD waits in
 * `pending_approval` (fanout.ts) until an operator approves it (its planning job runs again and
 * expands it, on the version pinned when it was held) or rejects it (it ends, nothing sent). Under
 * the campaign row's lock, so an approval and a stop are ordered: an approval after a stop is
 * refused (409 `campaign_stopped`), a stop after an approval cancels what the approval started.
 * Every decision is audited (campaign_audit: who, when) and recorded on the fan-out.
 */
import { withTransaction, type Pool } from '../../shared/db.js';
import { PlatformError } from '../../shared/errors.js';
import type { Boss } from '../queues/boss.js';
import type { Tier } from '../queues/names.js';
import { wakeCampaign } from '../queues/wake-ups.js';

export interface Decision {
  campaignId: string;
  /** One fan-out of the campaign; all its pending ones when absent. */
  notificationId?: string;
  approve: boolean;
  actor: string;
  reason: string | null;
}

export interface Decided {
  campaign_id: string;
  decision: 'approved' | 'rejected';
  decided_by: string;
  decided_at: string;
  notification_ids: string[];
}

/**
 * @throws PlatformError `not_found` (no such campaign) | `campaign_stopped` | `campaign_not_pending` (409)
 */
export async function decide(pool: Pool, boss: Boss, d: Decision, wake: (queue: string) => void): Promise<Decided> {
  const { out, due } = await withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ stopped_at: Date | null }>('SELECT stopped_at FROM campaigns WHERE id = $1 FOR UPDATE', [
      d.campaignId,
    ]);
    const c = rows[0];
    if (!c) throw new PlatformError('not_found', { detail: `no campaign ${d.campaignId}` });
    if (c.stopped_at) {
      throw new PlatformError('campaign_stopped', {
        detail: `campaign ${d.campaignId} was stopped at ${c.stopped_at.toISOString()}; its fan-outs can no longer be approved`,
      });
    }
    // Decided when the campaign row was ours (clock_timestamp, not the transaction's start): a stop
    // that began earlier but waited for this one is recorded after it.
    const decided = await client.query<{ notification_id: string; priority: Tier; decided_at: Date }>(
      `WITH at AS (SELECT clock_timestamp() AS t), f AS (
         UPDATE campaign_fanouts SET approved = $3, decided_by = $4, decided_at = (SELECT t FROM at),
                state = CASE WHEN $3 THEN 'planning' ELSE 'rejected' END, updated_at = now()
          WHERE campaign_id = $1 AND state = 'pending_approval' AND ($2::uuid IS NULL OR notification_id = $2::uuid)
          RETURNING notification_id, decided_at)
       SELECT f.notification_id, n.priority, f.decided_at FROM f JOIN notifications n ON n.id = f.notification_id
        ORDER BY f.notification_id`,
      [d.campaignId, d.notificationId ?? null, d.approve, d.actor],
    );
    if (decided.rows.length === 0) {
      throw new PlatformError('campaign_not_pending', {
        detail: d.notificationId
          ? `notification ${d.notificationId} of campaign ${d.campaignId} is not waiting for approval`
          : `campaign ${d.campaignId} has no fan-out waiting for approval`,
      });
    }
    const due = new Set<string>();
    if (d.approve) {
      // Unrouted again, with a planning job: the reconciler keeps it moving from here.
      await client.query('UPDATE notifications SET routed_at = NULL WHERE id = ANY($1::uuid[])', [
        decided.rows.map((r) => r.notification_id),
      ]);
      for (const r of decided.rows) due.add(await wakeCampaign(client, boss, r.notification_id, r.priority));
    }
    for (const r of decided.rows) {
      await client.query(
        `INSERT INTO campaign_audit (campaign_id, notification_id, action, actor, detail, at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [d.campaignId, r.notification_id, d.approve ? 'approve' : 'reject', d.actor, { reason: d.reason }, r.decided_at],
      );
    }
    const out: Decided = {
      campaign_id: d.campaignId,
      decision: d.approve ? 'approved' : 'rejected',
      decided_by: d.actor,
      decided_at: decided.rows[0]!.decided_at.toISOString(),
      notification_ids: decided.rows.map((r) => r.notification_id),
    };
    return { out, due: [...due] };
  });
  for (const q of due) wake(q);
  return out;
}
