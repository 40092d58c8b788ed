/**
 * A campaign end to end on one replica: the request is answered at once, planned into shards,
 * expanded with each member's policies, metered onto the delivery queues and sent; progress is
 * counted per shard; bad requests are refused; an empty segment completes with 0 recipients.
 */
import t from 'tap';
import { scriptedChannels } from '../core/helpers.js';
import { adminCampaign, campaignRequest, givePushTokens, memberIds, startCampaignCore, uploadList } from './helpers.js';

function clock(ms: number): string {
  const d = new Date(ms);
  return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
}

t.test('a stored-list campaign: 202 at once, one delivery per member and channel, policies applied, counted per shard', async (t) => {
  const channels = scriptedChannels();
  const core = await startCampaignCore(t, 'campaign_list', { channels });
  const ids = memberIds(1050);
  t.match(await uploadList(core, 'news', ids), { kind: 'list', size: 1050, version: 1 });
  await givePushTokens(core, ids);
  // u00001 turned marketing push off; u00002 is inside quiet hours (UTC, an hour either side of now).
  await core.api('PATCH', '/api/v1/users/u00001/preferences', { marketing: { push: false } }, core.service);
  const now = Date.now();
  await core.api(
    'PATCH',
    '/api/v1/users/u00002/preferences',
    { quiet_hours: { start: clock(now - 3600_000), end: clock(now + 3600_000) } },
    core.service,
  );

  const r = await core.notify(campaignRequest('news', 'spring'));
  t.equal(r.status, 202);
  t.match(r.body, { notification_id: /^[0-9a-f-]{36}$/, status: 'accepted' });
  const id = r.body.notification_id as string;

  const done = await core.waitStatus(id, (s) => s.campaign?.state === 'expanded' && s.campaign.sent === 1048, 30_000);
  t.match(done.campaign, {
    campaign_id: 'spring',
    segment: 'news',
    segment_version: 1,
    state: 'expanded',
    recipients: 1050,
    expanded: 1050,
    queued: 1,
    sent: 1048,
    suppressed: 1,
    cancelled: 0,
    shards: 11,
    shards_done: 11,
  });
  t.equal(done.status, 'sent');
  t.same(done.channels, { push: 'sent' });

  const { rows } = await core.db.pool.query<{ n: number; users: number; held: number; opted: number }>(
    `SELECT count(*)::int AS n, count(DISTINCT recipient_id)::int AS users,
            count(*) FILTER (WHERE hold_reason = 'quiet_hours')::int AS held, count(*) FILTER (WHERE status = 'opted_out')::int AS opted
       FROM deliveries WHERE notification_id = $1`,
    [id],
  );
  t.same(rows[0], { n: 1050, users: 1050, held: 1, opted: 1 }, 'exactly one delivery per member');
  const calls = channels.primary.push.calls.filter((c) => c.msg.notificationId === id);
  t.equal(calls.length, 1048, 'each member sent once');
  t.equal(new Set(calls.map((c) => c.msg.recipientId)).size, 1048);
  t.notOk(calls.some((c) => c.msg.recipientId === 'u00001' || c.msg.recipientId === 'u00002'));

  const view = await adminCampaign(core, 'spring');
  t.equal(view.status, 200);
  t.match(view.body, {
    campaign_id: 'spring',
    stopped_at: null,
    totals: { recipients: 1050, expanded: 1050, sent: 1048, suppressed: 1, queued: 1 },
    fanouts: [{ notification_id: id, status: 'sent', state: 'expanded', shards: 11 }],
    audit: [],
  });
  t.equal((await adminCampaign(core, 'nope')).status, 404);
  t.equal((await core.api('GET', '/api/v1/admin/campaigns/spring', undefined, core.service)).status, 403, 'operators only');
  const metrics = await fetch(`${core.url}/metrics`).then((res) => res.text());
  t.match(metrics, /\nfanout_recipients_total\{[^}]*\} 1050\n/);
  t.match(metrics, /\nfanout_lag\{[^}]*\} 0\n/);
});

t.test('bad audience requests are refused; an empty segment completes with 0 recipients', async (t) => {
  const core = await startCampaignCore(t, 'campaign_bad', { channels: scriptedChannels() });
  await uploadList(core, 'empty', []);
  const noCampaign = campaignRequest('empty', 'x');
  delete noCampaign['campaign_id'];
  t.match(await core.notify(noCampaign), { status: 400, body: { code: 'invalid_field', field: 'campaign_id' } });
  t.match(await core.notify(campaignRequest('ghost', 'x')), {
    status: 422,
    body: { code: 'segment_not_found', field: 'audience.segment' },
  });
  t.match(await core.notify(campaignRequest('empty', 'x', { priority: 'transactional' })), {
    status: 422,
    body: { code: 'audience_not_allowed', field: 'priority' },
  });
  t.match(await core.notify(campaignRequest('a/b', 'x')), { status: 400, body: { field: 'audience.segment' } });

  const r = await core.notify(campaignRequest('empty', 'x'));
  t.equal(r.status, 202);
  const s = await core.waitStatus(r.body.notification_id, (s) => s.campaign?.state === 'expanded');
  t.match(s, { status: 'sent', channels: {}, campaign: { recipients: 0, expanded: 0, shards: 0, shards_done: 0 } });
});
