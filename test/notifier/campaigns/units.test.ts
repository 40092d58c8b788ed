/**
 * The pure parts of the campaign fan-out: what one member's deliveries are (member-plan.ts), how
 * counters become totals and a status (counts.ts, progress.ts).
 */
import t from 'tap';
import { planMember, type MemberInput } from '../../../notifier/campaigns/member-plan.js';
import { totalsOf, type Counts } from '../../../notifier/campaigns/counts.js';
import { campaignStatus, type FanoutRow } from '../../../notifier/campaigns/progress.js';
import { policyFor } from '../../../notifier/policy/table.js';
import { DEFAULT_NOTIFICATION_TYPES, parseTypeCatalog } from '../../../notifier/policy/types.js';
import type { ChannelName, Tier } from '../../../notifier/queues/names.js';
import type { DeliveryStatus } from '../../../notifier/tracking/states.js';

const catalog = parseTypeCatalog(DEFAULT_NOTIFICATION_TYPES);
const settings = { quietHoursTiers: ['normal', 'low'] as Tier[] };
// 2026-11-24 03:00 UTC
const NOW = Date.UTC(2026, 10, 24, 3, 0);

function input(over: Partial<MemberInput> & { typeName?: string } = {}): MemberInput {
  const type = catalog.types.get(over.typeName ?? 'marketing')!;
  const tier = over.tier ?? 'low';
  return {
    requested: [],
    type,
    tier,
    policy: policyFor(type, tier, settings),
    prefs: { types: {} },
    timeZone: undefined,
    nowMs: NOW,
    counted: () => 0,
    ...over,
  };
}

t.test('planMember: the type defaults, the user off, quiet hours, caps', async (t) => {
  t.same(
    planMember(input()).map((d) => [d.channel, d.status]),
    [
      ['push', 'queued'],
      ['email', 'queued'],
      ['in_app', 'queued'],
    ],
    "marketing's defaults when the request names none",
  );
  t.match(planMember(input({ requested: ['push'], prefs: { types: { marketing: { push: false } } } })), [
    { channel: 'push', status: 'opted_out', error: /turned push off for marketing/ },
  ]);
  const quiet = planMember(
    input({ requested: ['push'], prefs: { types: {}, quiet_hours: { start: '22:00', end: '07:00' } }, timeZone: 'Europe/Paris' }),
  );
  t.same(
    quiet,
    [{ channel: 'push', status: 'queued', hold: 'quiet_hours', nextMs: Date.UTC(2026, 10, 24, 6, 0) }],
    '04:00 in Paris: held until 07:00',
  );
  t.same(
    planMember(input({ requested: ['push'], prefs: { types: {}, quiet_hours: { start: '22:00', end: '07:00' } }, timeZone: 'Asia/Tokyo' })),
    [{ channel: 'push', status: 'queued' }],
    'noon in Tokyo: not held',
  );
  t.match(planMember(input({ requested: ['push'], counted: () => 5 })), [
    { channel: 'push', status: 'capped', error: /marketing push cap/ },
  ]);
  t.match(planMember(input({ requested: ['push'], counted: () => 4 })), [{ channel: 'push', status: 'queued' }], 'under the cap');
  t.match(
    planMember(
      input({ requested: ['push'], tier: 'high', counted: () => 50, prefs: { types: {}, quiet_hours: { start: '00:00', end: '23:00' } } }),
    ),
    [{ channel: 'push', status: 'queued' }],
    'high: no caps, no quiet hours by default',
  );
  t.match(
    planMember(input({ typeName: 'social_activity', requested: ['push'], tier: 'normal' })),
    [{ channel: 'push', status: 'queued' }],
    'never folded into a digest',
  );
});

t.test('totals and the status of a fan-out', async (t) => {
  const counts: Counts = {
    members: 10,
    rows: 4,
    byChannel: new Map<ChannelName, Map<DeliveryStatus, number>>([
      [
        'push',
        new Map<DeliveryStatus, number>([
          ['sent', 5],
          ['opened', 1],
          ['sending', 1],
          ['queued', 1],
          ['capped', 1],
          ['cancelled', 1],
        ]),
      ],
      ['email', new Map<DeliveryStatus, number>([['dead_lettered', 2]])],
    ]),
  };
  t.same(totalsOf([counts]), { expanded: 10, queued: 2, sent: 5, delivered: 1, failed: 2, suppressed: 1, cancelled: 1 });
  const f: FanoutRow = {
    notification_id: 'n',
    campaign_id: 'c',
    segment_id: 's',
    segment_version: 1,
    state: 'expanding',
    recipients: 10,
    shards: 1,
    shards_done: 1,
    approved: null,
    decided_by: null,
    decided_at: null,
    notification_type: 'marketing',
    created_at: new Date(NOW),
  };
  t.match(campaignStatus(f, counts), { status: 'opened', channels: { push: 'opened', email: 'dead_lettered' } });
  const none: Counts = { members: 0, rows: 0, byChannel: new Map() };
  t.equal(campaignStatus({ ...f, state: 'pending_approval' }, none).status, 'pending_approval');
  t.equal(campaignStatus({ ...f, state: 'planning' }, none).status, 'queued');
  t.equal(campaignStatus({ ...f, state: 'expanded' }, none).status, 'sent', 'an empty segment: nothing left to do');
  t.equal(campaignStatus({ ...f, state: 'rejected' }, none).status, 'cancelled');
  t.equal(campaignStatus({ ...f, state: 'cancelled' }, none).status, 'cancelled');
});
