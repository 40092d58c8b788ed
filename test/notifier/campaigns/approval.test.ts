/**
 * Approval (notifier/campaigns/approval.ts): a fan-out whose segment is larger than
 * NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD waits in `pending_approval` with nothing expanded until an
 * operator approves it (then it expands, on the segment version counted when it was held) or
 * rejects it (it ends, nothing sent). Decisions are audited; a decision with nothing pending is
 * refused; an approval racing a stop either loses (409 `campaign_stopped`) or is cancelled by it.
 */
import t from 'tap';
import type pg from 'pg';
import { waitFor } from '../../harness/wait.js';
import { scriptedChannels, type Core, type Json } from '../core/helpers.js';
import { adminCampaign, campaignRequest, givePushTokens, memberIds, startCampaignCore, uploadList } from './helpers.js';

const APPROVAL_ENV = { NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD: '10' };

function decide(core: Core, campaign: string, verb: 'approve' | 'reject' | 'stop', body?: unknown, headers = core.admin) {
  return core.api('POST', `/api/v1/admin/campaigns/${encodeURIComponent(campaign)}/${verb}`, body, headers);
}

async function count(pool: pg.Pool, sql: string, params: unknown[]): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(sql, params);
  return rows[0]!.n;
}

const deliveriesOf = (pool: pg.Pool, id: string): Promise<number> =>
  count(pool, 'SELECT count(*)::int AS n FROM deliveries WHERE notification_id = $1', [id]);
const shardsOf = (pool: pg.Pool, id: string): Promise<number> =>
  count(pool, 'SELECT count(*)::int AS n FROM campaign_shards WHERE notification_id = $1', [id]);

async function pending(core: Core, segment: string, campaign: string): Promise<{ id: string; view: Json }> {
  const r = await core.notify(campaignRequest(segment, campaign));
  if (r.status !== 202) throw new Error(`${campaign}: ${r.status} ${JSON.stringify(r.body)}`);
  const id = r.body.notification_id as string;
  const view = await core.waitStatus(id, (s) => s.status === 'pending_approval', 20_000);
  return { id, view };
}

t.test('above the threshold a fan-out waits with nothing expanded; approved, it expands and sends; decisions are audited', async (t) => {
  const channels = scriptedChannels();
  const core = await startCampaignCore(t, 'approval', { channels, env: APPROVAL_ENV });
  const pool = core.db.pool;
  const ids = memberIds(50);
  await uploadList(core, 'vip', ids);
  await givePushTokens(core, ids);

  const { id, view } = await pending(core, 'vip', 'vip-1');
  t.match(view, { status: 'pending_approval', channels: {} });
  t.match(view.campaign, { campaign_id: 'vip-1', state: 'pending_approval', recipients: 50, expanded: 0, shards: 0, segment_version: 1 });
  t.notOk('approved' in view.campaign, 'not decided yet');
  t.equal(await shardsOf(pool, id), 0, 'no shard planned');
  t.equal(await deliveriesOf(pool, id), 0, 'no delivery written');

  t.equal((await decide(core, 'vip-1', 'approve', undefined, core.service)).status, 403, 'a service caller may not approve');
  t.equal((await decide(core, 'nope', 'approve')).status, 404, 'an unknown campaign');
  const ok = await decide(core, 'vip-1', 'approve', { reason: 'checked the list' });
  t.equal(ok.status, 200);
  t.match(ok.body, { campaign_id: 'vip-1', decision: 'approved', decided_by: 'user:operator', decided_at: String, notification_ids: [id] });

  const done = await core.waitStatus(id, (s) => s.campaign?.state === 'expanded' && s.campaign.sent === 50, 20_000);
  t.match(done.campaign, { approved: true, decided_by: 'user:operator', decided_at: ok.body.decided_at, recipients: 50, expanded: 50 });
  t.equal(done.status, 'sent');
  const sent = channels.primary.push.calls.filter((c) => c.msg.notificationId === id);
  t.same(sent.map((c) => c.msg.recipientId).sort(), ids, 'each member sent once');

  const admin = await adminCampaign(core, 'vip-1');
  t.match(admin.body.audit, [
    { action: 'approve', actor: 'user:operator', notification_id: id, at: ok.body.decided_at, detail: { reason: 'checked the list' } },
  ]);
  t.equal(admin.body.audit.length, 1);

  for (const verb of ['approve', 'reject'] as const) {
    t.match(await decide(core, 'vip-1', verb), { status: 409, body: { code: 'campaign_not_pending' } }, `${verb} with nothing pending`);
  }
  t.match(await decide(core, 'vip-1', 'approve', { notification_id: id }), { status: 409, body: { code: 'campaign_not_pending' } });
});

t.test('a rejected fan-out ends: state rejected, status cancelled, no delivery', async (t) => {
  const channels = scriptedChannels();
  const core = await startCampaignCore(t, 'approval_reject', { channels, env: APPROVAL_ENV });
  const pool = core.db.pool;
  const ids = memberIds(50);
  await uploadList(core, 'vip', ids);
  await givePushTokens(core, ids);
  const kept = await pending(core, 'vip', 'vip-2');
  const dropped = await pending(core, 'vip', 'vip-2');

  const no = await decide(core, 'vip-2', 'reject', { notification_id: dropped.id, reason: 'duplicate send' });
  t.equal(no.status, 200);
  t.match(no.body, { decision: 'rejected', decided_by: 'user:operator', notification_ids: [dropped.id] });
  const view = await core.status(dropped.id);
  t.match(view, {
    status: 'cancelled',
    campaign: { state: 'rejected', approved: false, decided_by: 'user:operator', recipients: 50, expanded: 0 },
  });
  t.match(await decide(core, 'vip-2', 'approve', { notification_id: dropped.id }), { status: 409, body: { code: 'campaign_not_pending' } });

  // The other fan-out of the campaign still waits; approving the campaign now approves only it.
  t.match((await core.status(kept.id)).campaign, { state: 'pending_approval' });
  const yes = await decide(core, 'vip-2', 'approve');
  t.match(yes.body, { decision: 'approved', notification_ids: [kept.id] });
  await core.waitStatus(kept.id, (s) => s.campaign?.state === 'expanded' && s.campaign.sent === 50, 20_000);

  t.equal(await deliveriesOf(pool, dropped.id), 0, 'the rejected fan-out wrote no delivery');
  t.equal(await shardsOf(pool, dropped.id), 0);
  t.equal(channels.primary.push.calls.filter((c) => c.msg.notificationId === dropped.id).length, 0);
  t.match((await core.status(dropped.id)).campaign, { state: 'rejected' });
  const audit = (await adminCampaign(core, 'vip-2')).body.audit as Json[];
  t.match(
    audit.map((e) => [e.action, e.notification_id, e.actor]),
    [
      ['reject', dropped.id, 'user:operator'],
      ['approve', kept.id, 'user:operator'],
    ],
  );
});

t.test(
  'approval racing a stop: the approval is refused, or the approved fan-out is cancelled; nothing is sent after the stop answers',
  async (t) => {
    const channels = scriptedChannels();
    const core = await startCampaignCore(t, 'approval_race', { channels, env: APPROVAL_ENV });
    const pool = core.db.pool;
    const ids = memberIds(50);
    await uploadList(core, 'vip', ids);
    await givePushTokens(core, ids);
    const stopped = new Set<string>();
    const late: string[] = [];
    channels.primary.push.script = (msg, ctx) => {
      if (stopped.has(msg.notificationId)) late.push(msg.notificationId);
      return { ok: true, providerMessageId: `fcm-${ctx.idempotencyKey}` };
    };

    const campaigns = Array.from({ length: 10 }, (_, i) => `race-${i}`);
    const fanouts = new Map<string, string>();
    for (const c of campaigns) fanouts.set(c, (await pending(core, 'vip', c)).id);

    const outcomes = await Promise.all(
      campaigns.map(async (c) => {
        const [approve, stop] = await Promise.all([
          decide(core, c, 'approve'),
          decide(core, c, 'stop').then((r) => {
            stopped.add(fanouts.get(c)!);
            return r;
          }),
        ]);
        return { c, id: fanouts.get(c)!, approve, stop };
      }),
    );

    let refused = 0;
    for (const { c, id, approve, stop } of outcomes) {
      t.equal(stop.status, 200, `${c}: the stop answers`);
      t.match(stop.body, { already_stopped: false, acknowledged: true });
      if (approve.status === 409) {
        refused++;
        t.match(approve.body, { code: 'campaign_stopped' }, `${c}: the approval came after the stop`);
      } else {
        t.equal(approve.status, 200, `${c}: approved before the stop`);
        t.same(approve.body.notification_ids, [id]);
      }
    }
    t.comment(`${refused} of ${campaigns.length} approvals came after their stop`);

    const all = [...fanouts.values()];
    await waitFor(
      async () =>
        (await count(pool, `SELECT count(*)::int AS n FROM notifications WHERE id = ANY($1::uuid[]) AND routed_at IS NULL`, [all])) === 0 &&
        (await count(
          pool,
          `SELECT count(*)::int AS n FROM deliveries WHERE notification_id = ANY($1::uuid[]) AND status IN ('queued', 'sending')`,
          [all],
        )) === 0 &&
        (await count(pool, `SELECT count(*)::int AS n FROM campaign_shards WHERE notification_id = ANY($1::uuid[]) AND state = 'pending'`, [
          all,
        ])) === 0,
      { timeoutMs: 30_000, what: 'every raced fan-out to settle' },
    );
    for (const { c, id, approve } of outcomes) {
      const s = await core.status(id);
      t.equal(s.campaign.state, 'cancelled', `${c}: the fan-out ends cancelled`);
      t.equal(s.campaign.queued, 0);
      const actions = ((await adminCampaign(core, c)).body.audit as Json[]).map((e) => e.action);
      if (approve.status === 409) {
        t.same(actions, ['stop'], `${c}: only the stop is audited`);
        t.equal(await deliveriesOf(pool, id), 0, `${c}: nothing expanded`);
        t.notOk(s.campaign.approved, `${c}: never approved`);
      } else {
        t.same(actions, ['approve', 'stop'], `${c}: approved, then stopped`);
        t.equal(s.campaign.approved, true);
        const { rows } = await pool.query<{ status: string }>(
          `SELECT DISTINCT status FROM deliveries WHERE notification_id = $1 AND status NOT IN ('sent', 'cancelled')`,
          [id],
        );
        t.same(rows, [], `${c}: every delivery written is sent or cancelled`);
      }
    }
    t.same(late, [], 'no provider call for a campaign started after its stop answered');
  },
);

t.test('a list re-uploaded while a fan-out waits for approval: the approved fan-out expands the version it was held with', async (t) => {
  const channels = scriptedChannels();
  const core = await startCampaignCore(t, 'approval_version', { channels, env: APPROVAL_ENV });
  const v1 = memberIds(50, 'a');
  const v2 = memberIds(60, 'b');
  t.match(await uploadList(core, 'rotating', v1), { version: 1, size: 50 });
  await givePushTokens(core, [...v1, ...v2]);
  const { id, view } = await pending(core, 'rotating', 'rot-1');
  t.match(view.campaign, { segment_version: 1, recipients: 50 });

  t.match(await uploadList(core, 'rotating', v2), { version: 2, size: 60 });
  t.match((await core.api('GET', '/api/v1/admin/segments/rotating', undefined, core.admin)).body, { version: 2, size: 60 });
  // A campaign sent now gets the new version; the held one keeps its own.
  const fresh = await pending(core, 'rotating', 'rot-2');
  t.match(fresh.view.campaign, { segment_version: 2, recipients: 60 });

  t.equal((await decide(core, 'rot-1', 'approve')).status, 200);
  const done = await core.waitStatus(id, (s) => s.campaign?.state === 'expanded' && s.campaign.sent === 50, 20_000);
  t.match(done.campaign, { segment_version: 1, recipients: 50, expanded: 50 });
  const { rows } = await core.db.pool.query<{ recipient_id: string }>(
    'SELECT recipient_id FROM deliveries WHERE notification_id = $1 ORDER BY recipient_id',
    [id],
  );
  t.same(
    rows.map((r) => r.recipient_id),
    v1,
    'the members of version 1, not those of version 2',
  );
});
