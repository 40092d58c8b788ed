/**
 * Preferences end to end against a real notifier and Postgres (README, "Notification types,
 * preferences and policies"): the API, channel resolution and opt-outs at routing, a write that
 * reaches the other replica's cache at once, a flip racing 1,000 queued sends, and the
 * conservative default while the preference store does not answer.
 */
import t from 'tap';
import pg from 'pg';
import {
  addDevice,
  createTemplate,
  putProfile,
  request,
  scriptedChannels,
  settled,
  startCore,
  summary,
  type Core,
} from '../core/helpers.js';
import { waitFor } from '../../harness/wait.js';

/** The default catalogue without caps on marketing, so that 1,000 sends to one user are not capped. */
const UNCAPPED_TYPES = JSON.stringify({
  order_updates: { events: ['order.*'], channels: ['push', 'email'] },
  social_activity: { events: ['social.*'], channels: ['push', 'in_app'] },
  security_alerts: { events: ['auth.*'], channels: ['push', 'email'], mandatory: true },
  marketing: { events: ['marketing.*'], channels: ['push', 'email'], sms: false },
  general: { events: ['*'], channels: ['push'] },
});

async function terminal(core: Core, n: number, where = 'true'): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await core.db.pool.query<{ open: number; all: number }>(
        `SELECT count(*) FILTER (WHERE status IN ('queued', 'sending'))::int AS open, count(*)::int AS all FROM deliveries WHERE ${where}`,
      );
      return rows[0]!.all >= n && rows[0]!.open === 0;
    },
    { timeoutMs: 60_000, what: `${n} deliveries to end` },
  );
}

t.test('the preferences API: partial updates merged, the whole document answered, bad input named', async (t) => {
  const core = await startCore(t, 'prefs_api', { env: { NOTIFIER_WORKERS: 'false' } });
  const path = '/api/v1/users/u1/preferences';
  t.same((await core.api('GET', path, undefined, core.user('u1'))).body, {}, 'nothing set: {}');

  const first = await core.api(
    'PATCH',
    path,
    { marketing: { push: false, email: true }, quiet_hours: { start: '22:00', end: '07:00' } },
    core.user('u1'),
  );
  t.equal(first.status, 200);
  t.same(first.body, { marketing: { push: false, email: true }, quiet_hours: { start: '22:00', end: '07:00' } });

  const second = await core.api('PATCH', path, { marketing: { email: null }, social_activity: { push: false } }, core.service);
  t.same(
    second.body,
    { marketing: { push: false }, social_activity: { push: false }, quiet_hours: { start: '22:00', end: '07:00' } },
    'merged into what was stored; null forgets a choice; quiet hours untouched',
  );
  t.same((await core.api('GET', path, undefined, core.user('u1'))).body, second.body, 'GET answers the same document');

  const cleared = await core.api('PATCH', path, { quiet_hours: null }, core.user('u1'));
  t.notOk('quiet_hours' in cleared.body, 'quiet_hours: null removes them');

  const bad: [unknown, string][] = [
    [{ marketing: { fax: true } }, 'marketing.fax'],
    [{ marketing: { push: 'no' } }, 'marketing.push'],
    [{ gossip: { push: true } }, 'gossip'],
    [{ quiet_hours: { start: '24:00', end: '07:00' } }, 'quiet_hours.start'],
    [{ quiet_hours: { start: '22:00', end: '7:00' } }, 'quiet_hours.end'],
    [{ quiet_hours: { start: '22:00', end: '22:00' } }, 'quiet_hours.end'],
    [{ security_alerts: { email: false } }, 'security_alerts.email'],
    [{ marketing: { sms: true } }, 'marketing.sms'],
    [[1, 2], 'body'],
  ];
  for (const [body, field] of bad) {
    const r = await core.api('PATCH', path, body, core.user('u1'));
    t.match(r, { status: 400, body: { code: 'invalid_field', field } }, `${JSON.stringify(body)} → 400 naming ${field}`);
  }
  t.same((await core.api('GET', path, undefined, core.user('u1'))).body, cleared.body, 'a refused PATCH changed nothing');

  t.equal((await core.api('GET', path, undefined, core.user('u2'))).status, 403, "another user's preferences are not yours");
  t.equal((await core.api('PATCH', path, { marketing: { push: true } }, core.user('u2'))).status, 403);
});

t.test(
  'routing follows the preferences: resolution, opt-outs shown per channel, mandatory and transactional sends go through',
  async (t) => {
    const channels = scriptedChannels();
    const core = await startCore(t, 'prefs_route', { channels, env: { NOTIFIER_NOTIFICATION_TYPES: UNCAPPED_TYPES } });
    await createTemplate(core, 'code_v1');
    await putProfile(core, 'u1', { email: 'u1@example.com' });
    await addDevice(core, 'u1', 'tok-u1');
    await core.api('PATCH', '/api/v1/users/u1/preferences', { marketing: { push: false }, social_activity: { email: true } }, core.service);

    const marketing = await core.notify(request({ event_type: 'marketing.spring', priority: 'low' }));
    const m = await core.waitStatus(marketing.body.notification_id, settled);
    t.same(
      summary(m),
      { status: 'sent', channels: { push: 'opted_out', email: 'sent' } },
      "the type's defaults, minus what the user turned off",
    );
    t.match(m.details.push, { status: 'opted_out', reason: /turned push off for marketing/, notification_type: 'marketing' });

    const named = await core.notify(request({ event_type: 'marketing.spring', priority: 'low', channels: ['push'] }));
    const n = await core.waitStatus(named.body.notification_id, (s) => s.status !== 'queued');
    t.same(summary(n), { status: 'opted_out', channels: { push: 'opted_out' } }, "a channel the request names: the user's off still wins");

    const social = await core.notify(request({ event_type: 'social.like', priority: 'normal' }));
    const s = await core.waitStatus(social.body.notification_id, settled);
    t.same(
      summary(s),
      { status: 'sent', channels: { push: 'sent', in_app: 'sent', email: 'sent' } },
      'a channel the user turned on for the type joins its defaults',
    );

    const tx = await core.notify(request({ event_type: 'marketing.receipt', priority: 'transactional', channels: ['push'] }));
    const x = await core.waitStatus(tx.body.notification_id, settled);
    t.same(summary(x), { status: 'sent', channels: { push: 'sent' } }, "the transactional tier ignores the user's off");

    const before = channels.primary.push.calls.length;
    const alert = await core.notify(request({ event_type: 'auth.new_login', priority: 'normal' }));
    const a = await core.waitStatus(alert.body.notification_id, settled);
    t.equal(a.details.push.notification_type, 'security_alerts');
    t.equal(channels.primary.push.calls.length, before + 1, 'a security alert goes out');
  },
);

t.test("a write on one replica drops the other replica's cached preferences at once", async (t) => {
  const channels = scriptedChannels();
  // Replica B routes and sends, with a cache TTL far longer than the test; replica A serves the API only.
  const b = await startCore(t, 'prefs_replicas', {
    channels,
    env: { NOTIFIER_NOTIFICATION_TYPES: UNCAPPED_TYPES, NOTIFIER_PREFERENCES_TTL: '1h' },
  });
  const a = await startCore(t, 'prefs_replicas', { db: b.db, env: { NOTIFIER_WORKERS: 'false' } });
  await createTemplate(a, 'code_v1');
  await addDevice(a, 'u1', 'tok-u1');
  const first = await a.notify(request({ event_type: 'marketing.spring', priority: 'low', channels: ['push'] }));
  await b.waitStatus(first.body.notification_id, (s) => s.status === 'sent');
  t.ok(b.notifier.preferences.has('u1'), "B cached u1's preferences when it routed");

  await a.api('PATCH', '/api/v1/users/u1/preferences', { marketing: { push: false } }, a.service);
  await waitFor(() => !b.notifier.preferences.has('u1'), { what: "B's cache to drop u1 on A's NOTIFY" });
  const second = await a.notify(request({ event_type: 'marketing.spring', priority: 'low', channels: ['push'] }));
  const s = await b.waitStatus(second.body.notification_id, (s) => s.status !== 'queued');
  t.same(summary(s), { status: 'opted_out', channels: { push: 'opted_out' } }, 'the next send routed on B honours it');
});

t.test('a flip racing 1,000 queued marketing sends: nothing goes out after the PATCH is answered', async (t) => {
  const channels = scriptedChannels();
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let flipped = false;
  let afterFlip = 0;
  channels.primary.push.script = async (_msg, ctx) => {
    await released;
    if (flipped) afterFlip++;
    // A provider taking a few milliseconds, so the queue drains while the PATCH arrives.
    await new Promise((r) => setTimeout(r, 3));
    return { ok: true, providerMessageId: `fcm-${ctx.idempotencyKey}` };
  };
  const core = await startCore(t, 'prefs_flip', {
    channels,
    env: { NOTIFIER_NOTIFICATION_TYPES: UNCAPPED_TYPES, NOTIFIER_CONCURRENCY: 'transactional=8,high=8,normal=8,low=8' },
  });
  await createTemplate(core, 'code_v1');
  await addDevice(core, 'u1', 'tok-u1');
  const N = 1000;
  for (let i = 0; i < N; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, N - i) }, (_, k) =>
        core.notify(request({ event_type: 'marketing.spring', priority: 'low', channels: ['push'], idempotency_key: `m-${i + k}` })),
      ),
    );
  }
  release();
  await waitFor(() => channels.primary.push.calls.length >= 100, { timeoutMs: 30_000, what: '100 pushes to start' });
  const patch = await core.api('PATCH', '/api/v1/users/u1/preferences', { marketing: { push: false } }, core.user('u1'));
  flipped = true;
  t.equal(patch.status, 200);
  await terminal(core, N);
  const { rows } = await core.db.pool.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM deliveries GROUP BY status ORDER BY status',
  );
  const by = Object.fromEntries(rows.map((r) => [r.status, r.n]));
  t.equal(afterFlip, 0, 'no provider call started after the PATCH was answered');
  t.ok((by['opted_out'] ?? 0) > 0, `sends still queued at the flip were suppressed (${by['opted_out']})`);
  t.equal((by['sent'] ?? 0) + (by['opted_out'] ?? 0), N, 'every send ended sent or opted_out, none lost');
  t.equal(channels.primary.push.calls.length, by['sent'], 'the provider saw exactly the sends recorded sent');
});

t.test('the preference store does not answer: the conservative default, counted, nothing lost', async (t) => {
  const channels = scriptedChannels();
  const core = await startCore(t, 'prefs_down', {
    channels,
    env: { NOTIFIER_NOTIFICATION_TYPES: UNCAPPED_TYPES, NOTIFIER_PREFERENCES_TIMEOUT: '100ms', NOTIFIER_PREFERENCES_TTL: '0' },
  });
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u1', { email: 'u1@example.com' });
  await addDevice(core, 'u1', 'tok-u1');

  // "Down": another session holds the table locked, so every read of it waits past the timeout.
  const locker = new pg.Client({ connectionString: core.db.url });
  await locker.connect();
  t.teardown(() => locker.end());
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE user_preferences IN ACCESS EXCLUSIVE MODE');

  const resolved = await core.notify(request({ event_type: 'marketing.spring', priority: 'low' }));
  t.equal(resolved.status, 202, 'ingestion does not need the preferences');
  const r = await core.waitStatus(resolved.body.notification_id, (s) => s.status === 'sent');
  t.same(summary(r), { status: 'sent', channels: { push: 'sent' } }, 'no channels named: push only, not the type default e-mail');

  const named = await core.notify(request({ event_type: 'marketing.spring', priority: 'low', channels: ['email'] }));
  const held = await core.waitStatus(named.body.notification_id, (s) => s.details?.email?.reason === 'preferences_unavailable');
  t.equal(held.channels.email, 'queued', 'a named e-mail is held, not sent and not dropped');
  t.equal(channels.primary.email.calls.length, 0);

  const metrics = await fetch(`${core.url}/metrics`).then((res) => res.text());
  t.match(metrics, /preference_fallback_total\{stage="route"[^}]*\} [1-9]/, 'routing fell back, counted');
  t.match(metrics, /preference_fallback_total\{stage="check"[^}]*\} [1-9]/, 'the check before the send fell back, counted');

  await locker.query('ROLLBACK');
  const sent = await core.waitStatus(named.body.notification_id, (s) => s.status === 'sent');
  t.same(summary(sent), { status: 'sent', channels: { email: 'sent' } }, 'once the store answers, the held e-mail goes out');
});
