/**
 * The campaign rows ingestion touches (notifier/ingest/accept.ts), in the request's transaction.
 */
import type { PoolClient } from '../../shared/db.js';
import { PlatformError } from '../../shared/errors.js';

/**
 * Records the campaign on first use and refuses a stopped one. The shared row lock holds a stop
 * back until this request has committed, so the stop then finds (and cancels) its fan-out.
 * @throws PlatformError `campaign_stopped` (409)
 */
export async function openCampaign(client: PoolClient, campaignId: string): Promise<void> {
  await client.query('INSERT INTO campaigns (id) VALUES ($1) ON CONFLICT (id) DO NOTHING', [campaignId]);
  const { rows } = await client.query<{ stopped_at: Date | null }>('SELECT stopped_at FROM campaigns WHERE id = $1 FOR SHARE', [
    campaignId,
  ]);
  const at = rows[0]?.stopped_at;
  if (at) {
    throw new PlatformError('campaign_stopped', {
      field: 'campaign_id',
      detail: `campaign_id: campaign ${campaignId} was stopped at ${at.toISOString()}; a stopped campaign does not resume`,
    });
  }
}

/** @throws PlatformError `segment_not_found` (422) */
export async function requireSegment(client: PoolClient, segmentId: string): Promise<void> {
  const { rows } = await client.query('SELECT 1 FROM segments WHERE id = $1', [segmentId]);
  if (rows.length === 0) {
    throw new PlatformError('segment_not_found', { field: 'audience.segment', detail: `audience.segment: no segment ${segmentId}` });
  }
}
