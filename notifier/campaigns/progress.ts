/**
 * What a campaign's fan-out looks like from outside: the status view of an audience request
 * (GET /api/v1/notifications/{id}/status, tracking/status.ts) and the admin view of a campaign
 * (routes.ts), from the fan-out rows and the summed counters (counts.ts), never by counting the
 * deliveries themselves.
 */
import { create } from '@bufbuild/protobuf';
import type { Pool } from '../../shared/db.js';
import {
  CampaignProgressSchema,
  ChannelDetailSchema,
  type CampaignProgress,
  type ChannelDetail,
} from '../../proto/gen/notify/v1/notify_pb.js';
import { highest, overallStatus, visible, type OverallStatus, type VisibleStatus } from '../tracking/states.js';
import { compactCounts, readCounts, totalsOf, type Counts } from './counts.js';

export interface FanoutRow {
  notification_id: string;
  campaign_id: string;
  segment_id: string;
  segment_version: number | null;
  state: string;
  recipients: number | null;
  shards: number | null;
  shards_done: number;
  approved: boolean | null;
  decided_by: string | null;
  decided_at: Date | null;
  notification_type: string | null;
  created_at: Date;
}

const FANOUT_COLUMNS = `f.notification_id, f.campaign_id, f.segment_id, f.segment_version, f.state, f.recipients::float8 AS recipients,
  f.shards, f.shards_done, f.approved, f.decided_by, f.decided_at, n.notification_type, f.created_at`;

export async function fanoutsOfCampaign(pool: Pool, campaignId: string): Promise<FanoutRow[]> {
  const { rows } = await pool.query<FanoutRow>(
    `SELECT ${FANOUT_COLUMNS} FROM campaign_fanouts f JOIN notifications n ON n.id = f.notification_id
      WHERE f.campaign_id = $1 ORDER BY f.created_at, f.notification_id`,
    [campaignId],
  );
  return rows;
}

export async function fanoutOf(pool: Pool, notificationId: string): Promise<FanoutRow | undefined> {
  const { rows } = await pool.query<FanoutRow>(
    `SELECT ${FANOUT_COLUMNS} FROM campaign_fanouts f JOIN notifications n ON n.id = f.notification_id WHERE f.notification_id = $1`,
    [notificationId],
  );
  return rows[0];
}

/** Delta rows past which reading the counters folds them first. */
const FOLD_AT_ROWS = 500;

/** The counters of these fan-outs, folded first where they have piled up. */
export async function countsOf(pool: Pool, ids: readonly string[]): Promise<Map<string, Counts>> {
  const counts = await readCounts(pool, ids);
  const heavy = ids.filter((id) => (counts.get(id)?.rows ?? 0) > FOLD_AT_ROWS);
  if (heavy.length === 0) return counts;
  for (const id of heavy) await compactCounts(pool, id);
  return readCounts(pool, ids);
}

export function progressOf(f: FanoutRow, c: Counts): CampaignProgress {
  const t = totalsOf([c]);
  const p = create(CampaignProgressSchema, {
    campaignId: f.campaign_id,
    segment: f.segment_id,
    segmentVersion: f.segment_version ?? 0,
    state: f.state,
    recipients: f.recipients ?? 0,
    expanded: t.expanded,
    queued: t.queued,
    sent: t.sent,
    delivered: t.delivered,
    failed: t.failed,
    suppressed: t.suppressed,
    cancelled: t.cancelled,
    shards: f.shards ?? 0,
    shardsDone: f.shards_done,
  });
  if (f.approved !== null) p.approved = f.approved;
  if (f.decided_by !== null) p.decidedBy = f.decided_by;
  if (f.decided_at !== null) p.decidedAt = f.decided_at.toISOString();
  return p;
}

/**
 * Each channel's status (the most advanced state it has deliveries in) and the overall one. A
 * fan-out waiting for an operator is `pending_approval`; one not expanded yet is `queued`; one
 * rejected, or stopped before anything went out, is `cancelled`; one that finished with nothing to
 * send (an empty segment) is `sent`: nothing is left to do, and its counts say 0.
 */
export function campaignStatus(
  f: FanoutRow,
  c: Counts,
): { status: OverallStatus; channels: Record<string, VisibleStatus>; details: Record<string, ChannelDetail> } {
  const channels: Record<string, VisibleStatus> = {};
  const details: Record<string, ChannelDetail> = {};
  for (const [channel, byStatus] of c.byChannel) {
    const present = [...byStatus].filter(([, n]) => n > 0).map(([s]) => visible(s));
    if (present.length === 0) continue;
    const state = highest(present);
    channels[channel] = state;
    const d = create(ChannelDetailSchema, { status: state });
    if (f.notification_type !== null) d.notificationType = f.notification_type;
    details[channel] = d;
  }
  let status: OverallStatus;
  if (f.state === 'pending_approval') status = 'pending_approval';
  else if (Object.keys(channels).length > 0) status = overallStatus(Object.values(channels));
  else if (f.state === 'planning' || f.state === 'expanding') status = 'queued';
  else if (f.state === 'expanded') status = 'sent';
  else status = 'cancelled';
  return { status, channels, details };
}

/** `fanout_lag`: how long the oldest fan-out still expanding has been at it, seconds (0: none). */
export async function fanoutLag(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ s: number }>(
    `SELECT coalesce(extract(epoch FROM now() - min(planned_at)), 0)::float8 AS s FROM campaign_fanouts WHERE state = 'expanding'`,
  );
  return rows[0]?.s ?? 0;
}

/** `campaigns_pending_approval`: campaigns with a fan-out waiting for an operator's decision. */
export async function campaignsPendingApproval(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(DISTINCT campaign_id)::int AS n FROM campaign_fanouts WHERE state = 'pending_approval'`,
  );
  return rows[0]?.n ?? 0;
}
