/** The notifier's campaign operator API (notifier/campaigns/routes.ts, README "Campaigns"), as the console calls it. */
import { seg, type ServiceClient } from './client.js';

export interface CampaignSummary {
  campaign_id: string;
  created_at: string;
  stopped_at: string | null;
  stopped_by: string | null;
  fanouts: number;
  pending_approval: number;
  recipients: number;
}

/** Delivery counts (one per member and channel), except `recipients` and `expanded` (members). */
export interface CampaignCounts {
  recipients: number;
  expanded: number;
  queued: number;
  sent: number;
  delivered: number;
  failed: number;
  suppressed: number;
  cancelled: number;
}

export interface Fanout extends Partial<CampaignCounts> {
  notification_id: string;
  /** The audience request's overall status (`pending_approval`, `queued`, `sent`, …). */
  status: string;
  campaign_id?: string;
  segment?: string;
  segment_version?: number;
  /** planning, pending_approval, expanding, expanded, rejected, cancelled. */
  state?: string;
  shards?: number;
  shards_done?: number;
  approved?: boolean;
  decided_by?: string;
  decided_at?: string;
}

export interface CampaignAudit {
  action: 'approve' | 'reject' | 'stop';
  actor: string;
  notification_id: string | null;
  detail: unknown;
  at: string;
}

export interface CampaignView {
  campaign_id: string;
  created_at: string;
  stopped_at: string | null;
  stopped_by: string | null;
  stop_reason: string | null;
  totals: CampaignCounts;
  fanouts: Fanout[];
  audit: CampaignAudit[];
}

export interface StopAnswer {
  campaign_id: string;
  stopped_at: string;
  stopped_by: string;
  reason: string | null;
  already_stopped: boolean;
  replicas: { id: string; acknowledged_at: string | null }[];
  acknowledged: boolean;
  acknowledged_in_ms?: number;
  [more: string]: unknown;
}

export interface Decision {
  campaign_id: string;
  decision: 'approved' | 'rejected';
  decided_by: string;
  decided_at: string;
  notification_ids: string[];
}

const BASE = '/api/v1/admin/campaigns';

export async function listCampaigns(
  api: ServiceClient,
  q: { cursor?: string; limit?: number; pending?: boolean } = {},
): Promise<{ campaigns: CampaignSummary[]; next_cursor?: string }> {
  return (await api.get<{ campaigns: CampaignSummary[]; next_cursor?: string }>(BASE, { query: q })).data;
}

/** The campaign, or undefined when no request ever named it. */
export async function getCampaign(api: ServiceClient, id: string): Promise<CampaignView | undefined> {
  const r = await api.get<CampaignView>(`${BASE}/${seg(id)}`, { accept: [404] });
  return r.status === 404 ? undefined : r.data;
}

/** The kill switch: answers once every live replica acknowledged (or the wait ran out). */
export async function stopCampaign(api: ServiceClient, id: string, reason?: string): Promise<StopAnswer> {
  return (await api.post<StopAnswer>(`${BASE}/${seg(id)}/stop`, reason ? { reason } : {})).data;
}

/** Approves or rejects the fan-outs waiting (all of them, or the one named). */
export async function decideCampaign(
  api: ServiceClient,
  id: string,
  verb: 'approve' | 'reject',
  o: { notification_id?: string; reason?: string } = {},
): Promise<Decision> {
  const body: Record<string, string> = {};
  if (o.notification_id) body.notification_id = o.notification_id;
  if (o.reason) body.reason = o.reason;
  return (await api.post<Decision>(`${BASE}/${seg(id)}/${verb}`, body)).data;
}
