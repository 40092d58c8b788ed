/**
 * The list of campaigns an operator pages through (GET /api/v1/admin/campaigns): newest first,
 * each with its fan-outs counted by state, from the campaign and fan-out rows only (the progress
 * counters are read when one campaign is opened, routes.ts).
 */
import type { Pool } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';

export interface CampaignSummary {
  campaign_id: string;
  created_at: string;
  stopped_at: string | null;
  stopped_by: string | null;
  /** Audience requests that named it. */
  fanouts: number;
  /** Of those, waiting for an operator's approval. */
  pending_approval: number;
  /** Members of its segments when planned, summed. */
  recipients: number;
}

function encodeCursor(t: string, id: string): string {
  return Buffer.from(JSON.stringify([t, id])).toString('base64url');
}

function decodeCursor(raw: string): { t: string; id: string } {
  try {
    const v: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string' && !Number.isNaN(Date.parse(v[0]))) {
      return { t: v[0], id: v[1] };
    }
  } catch {
    // fall through
  }
  throw invalidField('cursor', 'is not a cursor this list returned');
}

/** Newest first (ties by id), `limit` per page; `pendingOnly`: campaigns with a fan-out waiting for approval. */
export async function listCampaigns(
  pool: Pool,
  q: { cursor?: string; limit: number; pendingOnly?: boolean },
): Promise<{ campaigns: CampaignSummary[]; next_cursor?: string }> {
  const params: unknown[] = [q.limit + 1];
  const where: string[] = [];
  if (q.cursor) {
    const c = decodeCursor(q.cursor);
    where.push(`(c.created_at, c.id) < ($${params.push(c.t)}::timestamptz, $${params.push(c.id)})`);
  }
  const having = q.pendingOnly ? `HAVING count(*) FILTER (WHERE f.state = 'pending_approval') > 0` : '';
  const { rows } = await pool.query<{
    id: string;
    created_at: Date;
    t: string;
    stopped_at: Date | null;
    stopped_by: string | null;
    fanouts: number;
    pending_approval: number;
    recipients: number;
  }>(
    `SELECT c.id, c.created_at, c.created_at::text AS t, c.stopped_at, c.stopped_by,
            count(f.notification_id)::int AS fanouts,
            count(*) FILTER (WHERE f.state = 'pending_approval')::int AS pending_approval,
            coalesce(sum(f.recipients), 0)::float8 AS recipients
       FROM campaigns c LEFT JOIN campaign_fanouts f ON f.campaign_id = c.id
      ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
      GROUP BY c.id ${having}
      ORDER BY c.created_at DESC, c.id DESC LIMIT $1`,
    params,
  );
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  return {
    campaigns: page.map((r) => ({
      campaign_id: r.id,
      created_at: r.created_at.toISOString(),
      stopped_at: r.stopped_at?.toISOString() ?? null,
      stopped_by: r.stopped_by,
      fanouts: r.fanouts,
      pending_approval: r.pending_approval,
      recipients: r.recipients,
    })),
    ...(rows.length > q.limit && last ? { next_cursor: encodeCursor(last.t, last.id) } : {}),
  };
}
