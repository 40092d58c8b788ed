/**
 * Quiet-hour holds end to end against a real notifier and Postgres, under a fake clock (README,
 * "Notification types, preferences and policies"; workers/claim.ts): a send inside the user's
 * quiet hours is held with its release time shown, the tiers the table exempts go out, and the
 * hold is released at the end of the window on the user's wall clock, across a spring-forward
 * night in Paris and a fall-back night in New York; a user without a time zone is read in UTC.
 */
import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import { addDevice, createTemplate, putProfile, request, scriptedChannels, startCore, summary, type Core } from '../core/helpers.js';
import { waitFor } from '../../harness/wait.js';

const NIGHT = { start: '22:00', end: '07:00' };

async function setUp(core: Core, user: string, profile: Record<string, string> | undefined): Promise<void> {
  if (profile) await putProfile(core, user, profile);
  await addDevice(core, user, `tok-${user}`);
  const r = await core.api('PATCH', `/api/v1/users/${user}/preferences`, { quiet_hours: NIGHT }, core.user(user));
  if (r.status !== 200) throw new Error(`quiet hours of ${user}: ${r.status} ${JSON.stringify(r.body)}`);
}

/** A marketing push to `user` at `priority`; its notification id. */
async function marketing(core: Core, user: string, priority: string): Promise<string> {
  const r = await core.notify(request({ event_type: 'marketing.spring', recipient_id: user, priority, channels: ['push'] }));
  if (r.status !== 202) throw new Error(`notify: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.notification_id as string;
}

/** The push delivery of a notification. */
async function pushDelivery(core: Core, notificationId: string): Promise<{ id: string; wake_job_id: string }> {
  const { rows } = await core.db.pool.query<{ id: string; wake_job_id: string }>(
    `SELECT id, wake_job_id FROM deliveries WHERE notification_id = $1 AND channel = 'push' AND kind = 'single'`,
    [notificationId],
  );
  if (rows.length !== 1) throw new Error(`expected one push delivery for ${notificationId}, found ${rows.length}`);
  return rows[0]!;
}

/**
 * Makes a held delivery's wake-up due now. The database's clock is the queue's: a hold until a
 * fake-clock instant was enqueued as a real-time delay of (release − fake now), so as the test
 * moved the fake clock to the release, it moves that job's time to now.
 */
async function wakeNow(core: Core, deliveryId: string): Promise<void> {
  const r = await core.db.pool.query(
    `UPDATE pgboss.job SET start_after = now() WHERE id = (SELECT wake_job_id FROM deliveries WHERE id = $1)`,
    [deliveryId],
  );
  if (r.rowCount !== 1) throw new Error(`no wake-up job for delivery ${deliveryId}`);
}

const held = (s: { channels: Record<string, string> }): boolean => s.channels['push'] === 'quiet_hours';
const sent = (s: { status: string }): boolean => s.status === 'sent';

t.test('inside quiet hours (23:30 in Paris): low and normal are held until 07:00 Paris, high and transactional go out', async (t) => {
  const clock = new FakeClock(Date.parse('2026-06-10T23:30:00+02:00'));
  const release = Date.parse('2026-06-11T07:00:00+02:00');
  const channels = scriptedChannels();
  const push = channels.primary.push;
  const core = await startCore(t, 'holds_quiet', { channels, deps: { clock } });
  await createTemplate(core, 'code_v1');
  await setUp(core, 'u1', { timezone: 'Europe/Paris' });

  const low = await marketing(core, 'u1', 'low');
  const normal = await marketing(core, 'u1', 'normal');
  const high = await marketing(core, 'u1', 'high');
  const tx = await marketing(core, 'u1', 'transactional');

  for (const [id, tier] of [
    [low, 'low'],
    [normal, 'normal (NOTIFIER_QUIET_HOURS_TIERS defaults to normal)'],
  ] as const) {
    const s = await core.waitStatus(id, held);
    t.same(summary(s), { status: 'quiet_hours', channels: { push: 'quiet_hours' } }, `${tier}: held`);
    t.match(s.details.push, { status: 'quiet_hours', reason: 'quiet_hours', notification_type: 'marketing' });
    t.equal(s.details.push.release_at, release / 1000, `${tier}: released at 07:00 Paris the next morning (epoch seconds)`);
  }
  t.same(summary(await core.waitStatus(high, sent)), { status: 'sent', channels: { push: 'sent' } }, 'high: sent at once');
  t.same(summary(await core.waitStatus(tx, sent)), { status: 'sent', channels: { push: 'sent' } }, 'transactional: sent at once');

  const lowD = await pushDelivery(core, low);
  const normalD = await pushDelivery(core, normal);
  t.same(
    push.calls.map((c) => c.ctx.deliveryId).sort(),
    [(await pushDelivery(core, high)).id, (await pushDelivery(core, tx)).id].sort(),
    'the provider saw the high and transactional sends, nothing of the held ones',
  );

  // Woken a second before the end (06:59:59 Paris), the low send is held again, to the same release.
  clock.set(release - 1000);
  await wakeNow(core, lowD.id);
  await waitFor(async () => (await pushDelivery(core, low)).wake_job_id !== lowD.wake_job_id, {
    what: 'the early wake-up to be handled (a new wake-up recorded)',
  });
  const again = await core.status(low);
  t.same(summary(again), { status: 'quiet_hours', channels: { push: 'quiet_hours' } }, 'at 06:59:59: still held');
  t.equal(again.details.push.release_at, release / 1000, 'to the same release');
  t.equal(push.callsFor(lowD.id).length, 0, 'and not sent');

  clock.set(release + 1000);
  await wakeNow(core, lowD.id);
  await wakeNow(core, normalD.id);
  for (const [id, d] of [
    [low, lowD],
    [normal, normalD],
  ] as const) {
    const s = await core.waitStatus(id, sent);
    t.same(summary(s), { status: 'sent', channels: { push: 'sent' } }, 'at 07:00:01: released and sent');
    t.equal(push.callsFor(d.id).length, 1, 'one provider call');
  }
  t.equal(push.calls.length, 4, 'four sends, four provider calls');
});

t.test('NOTIFIER_QUIET_HOURS_TIERS=high: high is held too, normal is not', async (t) => {
  const clock = new FakeClock(Date.parse('2026-06-10T23:30:00+02:00'));
  const channels = scriptedChannels();
  const core = await startCore(t, 'holds_tiers', { channels, deps: { clock }, env: { NOTIFIER_QUIET_HOURS_TIERS: 'high' } });
  await createTemplate(core, 'code_v1');
  await setUp(core, 'u1', { timezone: 'Europe/Paris' });

  const high = await core.waitStatus(await marketing(core, 'u1', 'high'), held);
  t.equal(high.details.push.release_at, Date.parse('2026-06-11T07:00:00+02:00') / 1000, 'high: held until 07:00 Paris');
  const normal = await core.waitStatus(await marketing(core, 'u1', 'normal'), sent);
  t.same(summary(normal), { status: 'sent', channels: { push: 'sent' } }, 'normal: sent (not listed)');
  const low = await core.waitStatus(await marketing(core, 'u1', 'low'), held);
  t.equal(low.channels.push, 'quiet_hours', 'low: always held');
  t.equal(channels.primary.push.calls.length, 1, 'only the normal send reached the provider');
});

t.test('a DST night in two zones and a user without a zone: held at 23:30 local, released at 07:00 local', async (t) => {
  // Chronological, so the clock only moves forward.
  const nights: { user: string; profile: Record<string, string> | undefined; now: string; release: string; what: string }[] = [
    {
      user: 'paris',
      profile: { timezone: 'Europe/Paris' },
      // Spring forward: 02:00 CET → 03:00 CEST. 07:00 CEST is 05:00Z, an hour sooner than 07:00 CET.
      now: '2026-03-28T23:30:00+01:00',
      release: '2026-03-29T05:00:00Z',
      what: '07:00 CEST after the spring-forward night (05:00Z, not 06:00Z)',
    },
    {
      user: 'nozone',
      profile: { email: 'nozone@example.test' },
      now: '2026-06-10T23:30:00Z',
      release: '2026-06-11T07:00:00Z',
      what: '07:00 UTC for a profile without a time zone',
    },
    {
      user: 'newyork',
      profile: { timezone: 'America/New_York' },
      // Fall back: 02:00 EDT → 01:00 EST. 07:00 EST is 12:00Z, an hour later than 07:00 EDT.
      now: '2026-10-31T23:30:00-04:00',
      release: '2026-11-01T12:00:00Z',
      what: '07:00 EST after the fall-back night (12:00Z, not 11:00Z)',
    },
    {
      user: 'noprofile',
      profile: undefined,
      now: '2026-11-20T23:30:00Z',
      release: '2026-11-21T07:00:00Z',
      what: '07:00 UTC for a user with no profile at all',
    },
  ];
  const clock = new FakeClock(Date.parse(nights[0]!.now));
  const channels = scriptedChannels();
  const push = channels.primary.push;
  const core = await startCore(t, 'holds_dst', { channels, deps: { clock } });
  await createTemplate(core, 'code_v1');
  for (const n of nights) await setUp(core, n.user, n.profile);

  for (const n of nights) {
    clock.set(Date.parse(n.now));
    const release = Date.parse(n.release);
    const id = await marketing(core, n.user, 'low');
    const s = await core.waitStatus(id, held);
    t.equal(s.details.push.release_at, release / 1000, `${n.user}: held until ${n.what}`);
    const d = await pushDelivery(core, id);
    t.equal(push.callsFor(d.id).length, 0, `${n.user}: nothing sent while held`);

    clock.set(release + 1000);
    await wakeNow(core, d.id);
    t.same(summary(await core.waitStatus(id, sent)), { status: 'sent', channels: { push: 'sent' } }, `${n.user}: released and sent`);
    t.equal(push.callsFor(d.id).length, 1, `${n.user}: one provider call`);
  }
});
