// @tier: pure
/**
 * The overview's pure core: the Prometheus text reader, the one-hour history (bounded rings, a
 * fake clock), the signals derived from a round of scrapes (counter deltas, restarts, gaps), the
 * sidecar targets, and the SVG chart (gaps break the line, nothing the CSP would refuse). Also the
 * campaign state and approval sentence, and audit details rendered as fields.
 */
import t from 'tap';
import { FakeClock } from '../../shared/clock.js';
import { parsePrometheusText } from '../../console/overview/prom-text.js';
import { MetricHistory } from '../../console/overview/history.js';
import { listedSidecars, SignalDeriver, type Scrape } from '../../console/overview/signals.js';
import { sidecarTargets } from '../../console/overview/scraper.js';
import { lineChart, runs } from '../../console/overview/chart.js';
import { approvalText, campaignState } from '../../console/pages/campaigns.js';
import { detailFields, fieldLabel } from '../../console/pages/ops-format.js';
import { person, personShort, userIdOf } from '../../console/people.js';
import type { CampaignView, Fanout } from '../../console/api/notifier-campaigns.js';

/** Markup with the formatter's whitespace between tags and in tags taken out. */
const flat = (s: string): string => s.replace(/>\s+</g, '><').replace(/\s+/g, ' ');

t.test('Prometheus text: names, labels with escapes, special values; comments and junk skipped', async (t) => {
  const text = [
    '# HELP dlq_depth Dead letters',
    '# TYPE dlq_depth gauge',
    'dlq_depth{channel="email"} 3',
    'dlq_depth{channel="push"} 0',
    'quota_table_version 42 1700000000000',
    'circuit_breaker_state{breaker="smtp \\"primary\\"",x="a\\\\b\\nc"} 2',
    'weird{unclosed="x 1',
    'nan_metric NaN',
    'inf_metric +Inf',
    '',
  ].join('\n');
  const s = parsePrometheusText(text);
  t.same(
    s.map((x) => x.name),
    ['dlq_depth', 'dlq_depth', 'quota_table_version', 'circuit_breaker_state', 'nan_metric', 'inf_metric'],
  );
  t.same(s[0], { name: 'dlq_depth', labels: { channel: 'email' }, value: 3 });
  t.equal(s[2]!.value, 42, 'a timestamp after the value is ignored');
  t.same(s[3]!.labels, { breaker: 'smtp "primary"', x: 'a\\b\nc' });
  t.ok(Number.isNaN(s[4]!.value));
  t.equal(s[5]!.value, Infinity);
});

t.test('history: one hour, bounded per series, gaps kept as null', async (t) => {
  const clock = new FakeClock(1_000_000);
  const h = new MetricHistory({ clock, windowMs: 60 * 60_000, intervalMs: 15_000, maxSeries: 2 });
  t.equal(h.pointsPerSeries, 242, '240 intervals in an hour, the first point and one of slack');
  for (let i = 0; i < 1000; i++) {
    h.record('dlq_depth', i % 7 === 0 ? null : i);
    clock.advance(15_000);
  }
  const pts = h.points('dlq_depth');
  t.ok(pts.length <= 242, `bounded (${pts.length})`);
  t.ok(
    pts.every((p) => p.t >= clock.now() - 60 * 60_000),
    'only the last hour',
  );
  t.ok(
    pts.every((p, i) => i === 0 || p.t > pts[i - 1]!.t),
    'oldest first',
  );
  t.ok(
    pts.some((p) => p.v === null),
    'gaps kept',
  );
  t.equal(pts[pts.length - 1]!.v, 999);
  t.equal(h.latest('dlq_depth'), 999);
  clock.advance(2 * 60 * 60_000);
  t.same(h.points('dlq_depth'), [], 'two hours later, nothing is shown');
  t.equal(h.latest('dlq_depth'), undefined);
  t.ok(h.record('b', 1));
  t.notOk(h.record('c', 1), 'a series beyond the bound is refused');
  t.equal(h.seriesCount, 2);
});

const cpText = (table: number, applied: Record<string, number>) =>
  parsePrometheusText(
    [
      `quota_table_version ${table}`,
      ...Object.entries(applied).map(([id, v]) => `quota_sidecar_applied_version{sidecar="${id}"} ${v}`),
    ].join('\n'),
  );
const sidecarText = (d: Record<string, number>, breaker = 0) =>
  parsePrometheusText(
    [
      ...Object.entries(d).map(([result, n]) => `ratelimit_decisions{result="${result}",tenant="t",route="/a"} ${n}`),
      `circuit_breaker_state{breaker="counter-store"} ${breaker}`,
    ].join('\n'),
  );

t.test('signals: counts, sidecars behind, breakers, deny ratio and fail-open from counter deltas', async (t) => {
  const d = new SignalDeriver();
  const round = (sc: Record<string, number>, breaker = 0, notifierUp = true): Scrape[] => [
    {
      kind: 'notifier',
      id: 'notifier',
      url: 'n',
      ...(notifierUp
        ? {
            samples: parsePrometheusText(
              'dlq_depth{channel="email"} 2\ndlq_depth{channel="sms"} 1\ncampaigns_pending_approval 1\ncircuit_breaker_state{breaker="smtp"} 2',
            ),
          }
        : { error: 'unreachable' }),
    },
    { kind: 'control-plane', id: 'control-plane', url: 'c', samples: cpText(7, { a: 7, b: 5 }) },
    { kind: 'sidecar', id: 'a', url: 'http://a/metrics', samples: sidecarText(sc, breaker) },
  ];
  const first = d.derive(round({ allow: 100, deny: 0 }));
  t.same(first.values, {
    dlq_depth: 3,
    campaigns_pending: 1,
    sidecars_behind: 1,
    breakers_open: 1,
    fail_open: 0,
    deny_ratio: null,
  });
  t.same(first.behind, ['b']);
  t.same(first.openBreakers, ['notifier/smtp']);
  t.equal(first.values.deny_ratio, null, 'one reading is no rate');

  const second = d.derive(round({ allow: 130, deny: 10 }, 2));
  t.equal(second.values.deny_ratio, 0.25, '10 denied of 40 decided since the last round');
  t.same(second.openBreakers, ['a/counter-store', 'notifier/smtp']);

  const third = d.derive(round({ allow: 130, deny: 10, fail_open: 5 }, 2, false));
  t.equal(third.values.fail_open, 1, 'the sidecar admitted on its fail mode since the last round');
  t.same(third.failingOpen, ['a']);
  t.equal(third.values.deny_ratio, 0, 'five decisions, none refused');
  t.equal(third.values.dlq_depth, null, 'the notifier did not answer: a gap, not a stale number');
  t.equal(third.values.campaigns_pending, null);

  const restarted = d.derive(round({ allow: 4, deny: 4 }));
  t.equal(restarted.values.deny_ratio, 0.5, 'a restarted sidecar counts from zero');
  t.equal(restarted.values.fail_open, 0);

  t.same(listedSidecars(cpText(1, { z: 1, a: 1 })), ['a', 'z']);
});

t.test('sidecar targets: one per listed id through the template, else the one URL', async (t) => {
  t.same(sidecarTargets('http://{sidecar}:9090/metrics', ['pod-1', 'pod 2']), [
    { id: 'pod-1', url: 'http://pod-1:9090/metrics' },
    { id: 'pod 2', url: 'http://pod%202:9090/metrics' },
  ]);
  t.same(sidecarTargets('http://127.0.0.1:9090/metrics', ['only']), [{ id: 'only', url: 'http://127.0.0.1:9090/metrics' }]);
  t.same(sidecarTargets('http://127.0.0.1:9090/metrics', []), [{ id: 'sidecar', url: 'http://127.0.0.1:9090/metrics' }]);
});

t.test('chart: SVG over the window, gaps break the line, no inline style or script', async (t) => {
  const now = 3_600_000;
  const pts = [
    { t: 0, v: 0 },
    { t: 900_000, v: 2 },
    { t: 1_800_000, v: null },
    { t: 2_700_000, v: 4 },
  ];
  t.same(
    runs(pts).map((r) => r.length),
    [2, 1],
  );
  const svg = flat(lineChart(pts, { now, windowMs: 3_600_000, label: 'Dead letters over the last hour', width: 100, height: 20 }).value);
  t.match(svg, /^<svg class="chart" viewBox="0 0 100 20"/);
  t.match(svg, /<title>Dead letters over the last hour<\/title>/);
  t.match(svg, /<polyline class="chart-line" fill="none" points="2,18 26,10" \/>/, 'x over the hour, y from 0 to the maximum');
  t.match(svg, /<circle class="chart-dot" cx="74" cy="2"/, 'a lone point after a gap is a dot');
  t.notMatch(svg, /style=|<script|on[a-z]+=/i, 'nothing a strict CSP refuses');
  t.match(lineChart([], { now, windowMs: 3_600_000, label: 'x' }).value, /data-points="0"/);
  t.match(lineChart([{ t: now, v: 0.5 }], { now, windowMs: 3_600_000, label: '<b>' }).value, /aria-label="&lt;b&gt;"/, 'labels escaped');
});

const fanout = (over: Partial<Fanout>): Fanout => ({ notification_id: 'n1', status: 'queued', recipients: 3003, ...over });
const campaign = (fanouts: Fanout[], over: Partial<CampaignView> = {}): CampaignView => ({
  campaign_id: 'c',
  created_at: '2026-11-24T00:00:00Z',
  stopped_at: null,
  stopped_by: null,
  stop_reason: null,
  totals: { recipients: 0, expanded: 0, queued: 0, sent: 0, delivered: 0, failed: 0, suppressed: 0, cancelled: 0 },
  fanouts,
  audit: [],
  ...over,
});

t.test('campaign state: never finished while a fan-out expands or deliveries wait', async (t) => {
  const q = (n: number) => ({ recipients: 0, expanded: 0, queued: n, sent: 0, delivered: 0, failed: 0, suppressed: 0, cancelled: 0 });
  t.equal(campaignState(campaign([fanout({ state: 'expanding', shards: 4, shards_done: 1 })])), 'expanding');
  t.equal(campaignState(campaign([fanout({ state: 'planning' })])), 'expanding');
  t.equal(
    campaignState(campaign([fanout({ state: 'expanded' }), fanout({ state: 'expanding' })])),
    'expanding',
    'one of two still expanding',
  );
  t.equal(campaignState(campaign([fanout({})])), 'expanding', 'not planned yet');
  t.equal(campaignState(campaign([fanout({ state: 'expanded', queued: 10 })], { totals: q(10) })), 'sending');
  t.equal(campaignState(campaign([fanout({ state: 'expanded' })])), 'finished');
  t.equal(campaignState(campaign([fanout({ state: 'rejected' })])), 'finished');
  t.equal(campaignState(campaign([fanout({ state: 'pending_approval' })])), 'waiting for approval');
  t.equal(campaignState(campaign([fanout({ state: 'expanding' })], { stopped_at: '2026-11-24T00:01:00Z' })), 'stopped');
});

t.test('approval text: the recipients are what approving sends to, never the threshold', async (t) => {
  const one = approvalText([fanout({ state: 'pending_approval', recipients: 3003 })]);
  t.equal(
    one,
    "1 request of this campaign is held: its segment has more members than the notifier's approval threshold " +
      '(NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD). Approving sends to 3,003 recipients; nothing is sent until an operator decides.',
  );
  t.notMatch(one, /threshold \(3,003/);
  t.match(
    approvalText([fanout({ recipients: 1 }), fanout({ recipients: 2 })]),
    /^2 requests of this campaign are held: their segments have .* 3 recipients;/,
  );
});

t.test('audit details as fields, never raw JSON', async (t) => {
  t.equal(fieldLabel('stop_reason'), 'Stop reason');
  t.equal(fieldLabel('fanouts'), 'Fan-outs');
  const out = flat(
    detailFields({ reason: 'too big', fanouts: 2, notification_ids: ['a', 'b'], extra: { nested: true }, none: null }).value,
  );
  t.match(out, /<dt>Reason<\/dt><dd>too big<\/dd>/);
  t.match(out, /<dt>Fan-outs<\/dt><dd>2<\/dd>/);
  t.match(out, /<dt>Requests<\/dt><dd>a, b<\/dd>/);
  t.match(out, /<dt>Extra<\/dt><dd><dl class="fields">[\s\S]*<dt>Nested<\/dt><dd>yes<\/dd>/);
  t.notMatch(out, /None|[{}]|&quot;/, 'no JSON punctuation; an unset member left out');
  t.equal(detailFields({ reason: null }).value.trim(), '', 'nothing to say');
  t.match(detailFields({ reason: '<script>' }).value, /&lt;script&gt;/, 'escaped');
});

t.test('people: name or e-mail with the subject on hover; the subject when identity does not know it', async (t) => {
  const dir = new Map([
    ['u-1', { name: 'Olive Operator', email: 'ops@example.com' }],
    ['u-2', { name: null, email: 'nameless@example.com' }],
  ]);
  t.equal(userIdOf('user:u-1'), 'u-1');
  t.equal(userIdOf('service:x'), undefined);
  t.equal(userIdOf('u-1', true), 'u-1', 'a bare id (a recipient)');
  t.equal(
    person('user:u-1', dir).value,
    '<span class="person" title="user:u-1" data-subject="user:u-1">Olive Operator (ops@example.com)</span>',
  );
  t.match(person('user:u-2', dir).value, />nameless@example\.com</);
  t.equal(person('user:u-9', dir).value, '<span class="subject" data-subject="user:u-9">user:u-9</span>');
  t.match(personShort('u-1', dir, true).value, />Olive Operator</);
  t.match(personShort('user:0b7e4a2c-1111-4222-8333-444455556666', dir).value, />user:0b7e4a2c…</);
});
