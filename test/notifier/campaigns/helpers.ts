/**
 * Campaign tests: a notifier core with small shards and a quick pump, list segments uploaded
 * through the operator API, push tokens for every member written in one statement, and the
 * campaign views.
 */
import type { TestContext } from '../../harness/db.js';
import { openUpload } from '../segments/helpers.js';
import { createTemplate, request, startCore, type Core, type CoreOptions, type Json } from '../core/helpers.js';

export const CAMPAIGN_ENV: Record<string, string> = {
  NOTIFIER_CAMPAIGN_SHARD_SIZE: '100',
  NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD: '1000000',
  NOTIFIER_CAMPAIGN_PUMP_IDLE: '20ms',
  NOTIFIER_REPLICA_HEARTBEAT: '200ms',
  NOTIFIER_RECONCILE_INTERVAL: '1h',
};

export async function startCampaignCore(t: TestContext, label: string, opts: CoreOptions = {}): Promise<Core> {
  const core = await startCore(t, label, { ...opts, env: { ...CAMPAIGN_ENV, ...opts.env } });
  if (!opts.db) await createTemplate(core, 'code_v1');
  return core;
}

/** `prefix` + 5 digits, 0 … n-1: ids whose byte order is their number's. */
export function memberIds(n: number, prefix = 'u'): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(5, '0')}`);
}

/** Uploads a list segment as NDJSON, in pieces; returns the answer. */
export async function uploadList(core: Core, id: string, ids: readonly string[]): Promise<Json> {
  const up = openUpload(core, id);
  // No ids: one blank line, an empty list on purpose (a body of 0 bytes is refused as a missing file).
  if (ids.length === 0) await up.write('\n');
  for (let i = 0; i < ids.length; i += 5000) {
    await up.write(
      ids
        .slice(i, i + 5000)
        .map((u) => `${JSON.stringify(u)}\n`)
        .join(''),
    );
  }
  const r = await up.end();
  if (r.status !== 200 && r.status !== 201) throw new Error(`segment upload: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** One push token per member, written in one statement. */
export async function givePushTokens(core: Core, ids: readonly string[]): Promise<void> {
  await core.db.pool.query(
    `INSERT INTO device_tokens (token, user_id, platform) SELECT 'tok-' || u, u, 'android' FROM unnest($1::text[]) AS u`,
    [[...ids]],
  );
}

/** An audience request for `campaign` to `segment`. */
export function campaignRequest(segment: string, campaign: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  const r = request({ event_type: 'marketing.spring', priority: 'low', channels: ['push'], campaign_id: campaign, ...over });
  delete r['recipient_id'];
  return { ...r, audience: { segment } };
}

export function adminCampaign(core: Core, id: string): Promise<{ status: number; body: Json }> {
  return core.api('GET', `/api/v1/admin/campaigns/${encodeURIComponent(id)}`, undefined, core.admin);
}
