/**
 * Digests end to end with two notifier replicas on one database and a fake clock they share
 * (README, "Notification types, preferences and policies"; workers/route.ts joins, workers/claim.ts
 * flushes): concurrent sends through both replicas fold into one digest sent once with every item;
 * a send after the flush opens the next digest; sends racing the flush land in exactly one digest;
 * a worker that dies in the middle of a flush is taken over by the other replica, which sends the
 * same items under the same idempotency key; and a flush inside the user's quiet hours is held
 * until they end, the digest still taking items meanwhile.
 */
import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import {
  addDevice,
  createTemplate,
  putProfile,
  request,
  scriptedChannels,
  startCore,
  summary,
  type Call,
  type Core,
  type TestChannels,
} from '../core/helpers.js';
import { waitFor } from '../../harness/wait.js';

const MIN = 60_000;
const WINDOW = 5 * MIN;
const T0 = Date.parse('2026-06-10T12:00:00Z');

const DIGEST_TYPES = JSON.stringify({
  social_activity: { events: ['social.*'], channels: ['push'], digest: { window: '5m', template: 'social_digest_v1' } },
  security_alerts: { events: ['auth.*'], channels: ['push'], mandatory: true },
  general: { events: ['*'], channels: ['push'] },
});

/**
 * The same types with the digest in the inbox: an in-app body is stored as written, where a push
 * body is cut at 178 characters (notifier/templates/render.ts). The race below cannot bound how
 * many sends join the first digest (a slow machine routes more of them before the close), so it
 * reads its items where none can be cut off.
 */
const IN_APP_DIGEST_TYPES = JSON.stringify({
  social_activity: { events: ['social.*'], channels: ['in_app'], digest: { window: '5m', template: 'social_digest_v1' } },
  security_alerts: { events: ['auth.*'], channels: ['in_app'], mandatory: true },
  general: { events: ['*'], channels: ['in_app'] },
});

/** The item template and the digest template (short actors: a push body is cut at 178 characters). */
async function setUp(core: Core): Promise<void> {
  await createTemplate(core, 'like_v1', {
    en: { push: { body: '{{actor}} liked your post' }, in_app: { body: '{{actor}} liked your post' } },
  });
  const digestBody = '{{count}} new:{{#items}} {{actor}}{{/items}}';
  await createTemplate(core, 'social_digest_v1', {
    en: { push: { title: 'Latest: {{actor}}', body: digestBody }, in_app: { title: 'Latest: {{actor}}', body: digestBody } },
  });
  await addDevice(core, 'u1', 'tok-u1');
}

async function like(core: Core, actor: string): Promise<string> {
  const r = await core.notify(
    request({
      event_type: 'social.like',
      priority: 'normal',
      template_id: 'like_v1',
      template_data: { actor },
      idempotency_key: `like-${actor}`,
    }),
  );
  if (r.status !== 202) throw new Error(`notify: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.notification_id as string;
}

/** A digest push as the provider saw it: the count and the actors, in order. */
function parse(call: Call): { count: number; actors: string[] } {
  const m = /^(\d+) new:(.*)$/.exec(call.msg.body);
  if (!m) throw new Error(`not a digest body: ${call.msg.body}`);
  return { count: Number(m[1]), actors: m[2]!.trim().split(' ') };
}

interface DigestRow {
  id: string;
  send_id: string;
  status: 'open' | 'closed';
  items: number | null;
  joined: number;
  send_status: string;
  hold_reason: string | null;
}

/** The digests, oldest first, with their sends and how many items joined each. */
async function digests(core: Core): Promise<DigestRow[]> {
  const { rows } = await core.db.pool.query<DigestRow>(
    `SELECT g.id, g.delivery_id AS send_id, g.status, g.items, s.status AS send_status, s.hold_reason,
            (SELECT count(*)::int FROM deliveries i WHERE i.digest_id = g.id AND i.kind = 'single') AS joined
       FROM digests g JOIN deliveries s ON s.id = g.delivery_id ORDER BY g.opened_at, g.id`,
  );
  return rows;
}

/** Waits until every one of these notifications is routed into a digest. */
async function digested(core: Core, ids: readonly string[]): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await core.db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM deliveries WHERE notification_id = ANY($1::uuid[]) AND kind = 'single' AND status = 'digested'`,
        [ids],
      );
      return rows[0]!.n === ids.length;
    },
    { timeoutMs: 15_000, what: `${ids.length} notifications to join a digest` },
  );
}

/**
 * Makes a digest send's wake-up due now. The database's clock is the queue's: the send was
 * enqueued with a real-time delay of (flush time − fake now), so as the test moved the fake clock
 * to the flush time, it moves that job's time to now.
 */
async function wakeNow(core: Core, deliveryId: string): Promise<void> {
  const r = await core.db.pool.query(
    `UPDATE pgboss.job SET start_after = now() WHERE id = (SELECT wake_job_id FROM deliveries WHERE id = $1)`,
    [deliveryId],
  );
  if (r.rowCount !== 1) throw new Error(`no wake-up job for delivery ${deliveryId}`);
}

const pushCalls = (...chs: TestChannels[]): Call[] => chs.flatMap((c) => c.primary.push.calls);
const inAppCalls = (...chs: TestChannels[]): Call[] => chs.flatMap((c) => c.primary.in_app.calls);
/** The push calls of one delivery, on whichever replica made them. */
const callsFor = (deliveryId: string, ...chs: TestChannels[]): Call[] => chs.flatMap((c) => c.primary.push.callsFor(deliveryId));
const inAppCallsFor = (deliveryId: string, ...chs: TestChannels[]): Call[] => chs.flatMap((c) => c.primary.in_app.callsFor(deliveryId));
const sorted = (xs: readonly string[]): string[] => [...xs].sort();
const actorsOf = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);

t.test('two replicas, 30 sends at once: one digest, sent once with all 30; a later send opens the next digest', async (t) => {
  const clock = new FakeClock(T0);
  const chA = scriptedChannels();
  const chB = scriptedChannels();
  const env = { NOTIFIER_NOTIFICATION_TYPES: DIGEST_TYPES };
  const a = await startCore(t, 'digest_replicas', { channels: chA, env, deps: { clock } });
  const b = await startCore(t, 'digest_replicas', { db: a.db, channels: chB, env, deps: { clock } });
  await setUp(a);

  const actors = actorsOf('a', 30);
  const ids = await Promise.all(actors.map((x, i) => like(i % 2 === 0 ? a : b, x)));
  await digested(a, ids);
  const [first, ...others] = await digests(a);
  t.same(others, [], 'one digest for (user, type, channel)');
  t.match(first, { status: 'open', joined: 30, send_status: 'queued', hold_reason: 'digest' });
  const views = await Promise.all(ids.map((id, i) => (i % 2 === 0 ? a : b).status(id)));
  t.same(views.map(summary), Array(30).fill({ status: 'digest', channels: { push: 'digest' } }), 'all 30 show digest');
  t.same(
    views.map((v) => v.details.push.release_at),
    Array(30).fill((T0 + WINDOW) / 1000),
    'each released when the window ends',
  );
  t.equal(pushCalls(chA, chB).length, 0, 'nothing sent before the flush');

  clock.advance(WINDOW);
  await wakeNow(a, first!.send_id);
  await waitFor(() => pushCalls(chA, chB).length === 1, { what: 'the digest to be sent' });
  const flush = pushCalls(chA, chB)[0]!;
  t.equal(flush.ctx.deliveryId, first!.send_id, "sent as the digest's own delivery");
  const got = parse(flush);
  t.equal(got.count, 30, 'count 30');
  t.same(sorted(got.actors), actors, 'every actor exactly once');
  t.equal(flush.msg.title, `Latest: ${got.actors[29]}`, 'the top level reads the last item');
  t.comment(`flushed by replica ${chA.primary.push.calls.length === 1 ? 'A' : 'B'}`);

  await waitFor(
    async () => (await a.db.pool.query(`SELECT status FROM deliveries WHERE id = $1`, [first!.send_id])).rows[0].status === 'sent',
    {
      what: 'the digest send to be recorded sent',
    },
  );
  const after = await Promise.all(ids.map((id, i) => (i % 2 === 0 ? b : a).status(id)));
  t.same(after.map(summary), Array(30).fill({ status: 'sent', channels: { push: 'sent' } }), 'all 30 show sent after the flush');
  t.match((await digests(a))[0], { status: 'closed', items: 30 });

  // After the flush: a new digest, carrying only the new send.
  const late = await like(b, 'late');
  await digested(a, [late]);
  const opened = clock.now();
  const second = (await digests(a))[1];
  t.match(second, { status: 'open', joined: 1 }, 'a send after the flush opens a new digest');
  t.equal((await b.status(late)).details.push.release_at, (opened + WINDOW) / 1000, "released when the new digest's window ends");
  clock.advance(WINDOW);
  await wakeNow(a, second!.send_id);
  await waitFor(() => pushCalls(chA, chB).length === 2, { what: 'the second digest to be sent' });
  t.same(parse(callsFor(second!.send_id, chA, chB)[0]!), { count: 1, actors: ['late'] }, 'the second flush carries only it');
  await b.waitStatus(late, (s) => s.status === 'sent');

  const all = await digests(a);
  t.same(
    all.map((g) => g.items),
    [30, 1],
    'digests.items: 31 in all, as many as sends',
  );
  t.same(
    sorted(pushCalls(chA, chB).flatMap((c) => parse(c).actors)),
    sorted([...actors, 'late']),
    'no item lost or repeated across flushes',
  );
});

t.test('sends racing the flush on two replicas: each lands in exactly one digest', async (t) => {
  const clock = new FakeClock(T0);
  const chA = scriptedChannels();
  const chB = scriptedChannels();
  const env = { NOTIFIER_NOTIFICATION_TYPES: IN_APP_DIGEST_TYPES };
  const a = await startCore(t, 'digest_race', { channels: chA, env, deps: { clock } });
  const b = await startCore(t, 'digest_race', { db: a.db, channels: chB, env, deps: { clock } });
  await setUp(a);

  const before = actorsOf('b', 20);
  await digested(a, await Promise.all(before.map((x, i) => like(i % 2 === 0 ? a : b, x))));
  const [first] = await digests(a);

  // Sends keep arriving on both replicas, four at a time, while the flush runs, and a few more
  // after it was seen: some are routed before the close, the last ones surely after it.
  clock.advance(WINDOW);
  await wakeNow(a, first!.send_id);
  const racing: string[] = [];
  const racingIds: string[] = [];
  for (let round = 0, after = 0; after < 2; round++) {
    if (round >= 100) throw new Error('the flush was not seen after 100 rounds of sends');
    if (inAppCalls(chA, chB).length > 0) after++;
    const batch = actorsOf(`r${round}x`, 4);
    racing.push(...batch);
    racingIds.push(...(await Promise.all(batch.map((x, i) => like(i % 2 === 0 ? a : b, x)))));
  }
  await digested(a, racingIds);

  const open = (await digests(a)).filter((g) => g.status === 'open');
  t.equal(open.length, 1, 'the sends after the close opened one new digest');
  clock.advance(WINDOW);
  await wakeNow(a, open[0]!.send_id);
  await waitFor(() => inAppCalls(chA, chB).length === 2, { what: 'the next digest to be sent' });

  const all = await digests(a);
  t.comment(`${racing.length} racing sends; items per digest: ${all.map((g) => g.items).join(', ')}`);
  t.equal(
    all.reduce((n, g) => n + (g.items ?? 0), 0),
    before.length + racing.length,
    'digests.items add up to the sends',
  );
  t.same(
    all.map((g) => g.items),
    all.map((g) => g.joined),
    "each digest's count is the items that joined it",
  );
  const sentActors = inAppCalls(chA, chB).flatMap((c) => parse(c).actors);
  t.same(sorted(sentActors), sorted([...before, ...racing]), 'every send in exactly one flush: none lost, none twice');
  t.same(
    all.map((g) => inAppCallsFor(g.send_id, chA, chB).map((c) => parse(c).count)),
    all.map((g) => [g.items]),
    'each digest sent once, saying how many it carries',
  );
});

t.test('a worker dies in the middle of a flush: the other replica sends the same digest, same key', async (t) => {
  const clock = new FakeClock(T0);
  // Replica A's provider call never returns: A is stuck in the flush's send when it goes away.
  // The promise is never settled; resolving it after A's pool is closed would only make the dead
  // worker's late writes fail.
  const chA = scriptedChannels();
  chA.primary.push.script = () => new Promise<never>(() => {});
  const chB = scriptedChannels();
  // A short send timeout makes the lease 1 s; jobs held by a dead worker come back after 1 s.
  const env = {
    NOTIFIER_NOTIFICATION_TYPES: DIGEST_TYPES,
    NOTIFIER_SEND_TIMEOUT: '500ms',
    NOTIFIER_JOB_EXPIRE: '1s',
    NOTIFIER_QUEUE_MAINTENANCE: '1s',
    SHUTDOWN_GRACE: '100ms',
  };
  const a = await startCore(t, 'digest_crash', { channels: chA, env, deps: { clock } });
  await setUp(a);
  const early = actorsOf('e', 5);
  const earlyIds = await Promise.all(early.map((x) => like(a, x)));
  await digested(a, earlyIds);
  const [first] = await digests(a);

  clock.advance(WINDOW);
  await wakeNow(a, first!.send_id);
  await waitFor(() => chA.primary.push.calls.length === 1, { what: "A's provider call for the flush" });
  const stuck = chA.primary.push.calls[0]!;
  t.equal(parse(stuck).count, 5, 'A is sending the digest: count 5');
  t.same(sorted(parse(stuck).actors), early, 'with the 5 items');
  t.match((await digests(a))[0], { status: 'closed', items: 5, send_status: 'sending' }, 'the digest was closed by the flush');

  // Replica B starts; sends arriving now open the next digest.
  const b = await startCore(t, 'digest_crash', { db: a.db, channels: chB, env, deps: { clock } });
  const afterwards = actorsOf('f', 3);
  const afterIds = await Promise.all(afterwards.map((x) => like(b, x)));
  await digested(b, afterIds);
  t.match((await digests(b))[1], { status: 'open', joined: 3 }, 'items joined after the close went to a new digest');

  await a.notifier.close();
  await waitFor(() => chB.primary.push.callsFor(first!.send_id).length === 1, {
    timeoutMs: 20_000,
    what: 'replica B to take the flush over after the lease',
  });
  const again = chB.primary.push.callsFor(first!.send_id)[0]!;
  t.same(parse(again), parse(stuck), 'the same items, in the same order, and count');
  t.equal(again.ctx.idempotencyKey, stuck.ctx.idempotencyKey, 'the same idempotency key');
  t.equal(again.ctx.deliveryId, stuck.ctx.deliveryId, 'the same delivery');
  t.equal(again.msg.title, stuck.msg.title, 'the same rendering');
  for (const id of earlyIds) {
    t.same(summary(await b.waitStatus(id, (s) => s.status === 'sent')), { status: 'sent', channels: { push: 'sent' } });
  }
  t.match((await digests(b))[0], { status: 'closed', items: 5, send_status: 'sent' });
  const { rows } = await b.db.pool.query<{ attempts: number }>('SELECT attempts FROM deliveries WHERE id = $1', [first!.send_id]);
  t.equal(rows[0]!.attempts, 2, "a takeover of A's counted attempt, not a claim A gave back");

  const second = (await digests(b))[1]!;
  clock.advance(WINDOW);
  await wakeNow(b, second.send_id);
  await waitFor(() => chB.primary.push.callsFor(second.send_id).length === 1, { what: 'the second digest to be sent' });
  const next = parse(chB.primary.push.callsFor(second.send_id)[0]!);
  t.same({ count: next.count, actors: sorted(next.actors) }, { count: 3, actors: afterwards }, 'the next digest carries the later sends');
  t.equal(chB.primary.push.calls.length, 2, "B's provider calls: the takeover and the next digest, nothing else");
});

t.test('a flush inside quiet hours is held until they end; the digest keeps taking items meanwhile', async (t) => {
  const clock = new FakeClock(Date.parse('2026-06-10T21:57:00+02:00'));
  const quietEnd = Date.parse('2026-06-11T07:00:00+02:00');
  const channels = scriptedChannels();
  const push = channels.primary.push;
  const core = await startCore(t, 'digest_quiet', { channels, env: { NOTIFIER_NOTIFICATION_TYPES: DIGEST_TYPES }, deps: { clock } });
  await setUp(core);
  await putProfile(core, 'u1', { timezone: 'Europe/Paris' });
  t.equal(
    (await core.api('PATCH', '/api/v1/users/u1/preferences', { quiet_hours: { start: '22:00', end: '07:00' } }, core.user('u1'))).status,
    200,
  );

  // 21:57: opens a digest flushing at 22:02, inside the quiet hours.
  const n1 = await like(core, 'q0');
  await digested(core, [n1]);
  const [g] = await digests(core);
  t.equal((await core.status(n1)).details.push.release_at, Date.parse('2026-06-10T22:02:00+02:00') / 1000, 'the window ends at 22:02');

  clock.advance(WINDOW);
  await wakeNow(core, g!.send_id);
  const held = await core.waitStatus(n1, (s) => s.channels.push === 'quiet_hours');
  t.equal(held.details.push.release_at, quietEnd / 1000, 'the flush is held until 07:00 Paris');
  t.match((await digests(core))[0], { status: 'open', send_status: 'queued', hold_reason: 'quiet_hours' }, 'the digest stays open');
  t.match(held.details.push.reason, /quiet_hours/, 'the reason says quiet hours');

  // 22:10: a send joins the held digest.
  clock.advance(8 * MIN);
  const n2 = await like(core, 'q1');
  await digested(core, [n2]);
  t.equal((await digests(core)).length, 1, 'no new digest: it joined the held one');
  const s2 = await core.status(n2);
  t.same(summary(s2), { status: 'quiet_hours', channels: { push: 'quiet_hours' } });
  t.equal(s2.details.push.release_at, quietEnd / 1000, 'released with it at 07:00');
  t.equal(push.calls.length, 0, 'nothing sent during the quiet hours');

  clock.set(quietEnd + 1000);
  await wakeNow(core, g!.send_id);
  await waitFor(() => push.calls.length === 1, { what: 'the digest to be sent at 07:00' });
  t.same(parse(push.calls[0]!), { count: 2, actors: ['q0', 'q1'] }, 'one digest with both, sent when the quiet hours end');
  for (const id of [n1, n2]) t.equal((await core.waitStatus(id, (s) => s.status === 'sent')).channels.push, 'sent');
  t.match((await digests(core))[0], { status: 'closed', items: 2 });
});

t.test("the default catalogue digests social_activity's normal sends for 5 minutes into the notifier's own social_digest_v1", async (t) => {
  // No NOTIFIER_NOTIFICATION_TYPES and no digest template put by the test: the defaults alone.
  const clock = new FakeClock(T0);
  const ch = scriptedChannels();
  const core = await startCore(t, 'digest_defaults', { channels: ch, deps: { clock } });
  await createTemplate(core, 'like_v1', {
    en: { push: { body: '{{actor}} liked your post' }, in_app: { body: '{{actor}} liked your post' } },
  });
  await addDevice(core, 'u1', 'tok-u1');
  const ids = [await like(core, 'ann'), await like(core, 'bo')];
  // Each goes to the type's default channels, push and in_app: a digest per channel.
  await waitFor(
    async () =>
      (
        await core.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM deliveries WHERE notification_id = ANY($1::uuid[]) AND status = 'digested'`,
          [ids],
        )
      ).rows[0]!.n === 4,
    { timeoutMs: 15_000, what: 'both notifications to join the push and in-app digests' },
  );
  const views = await Promise.all(ids.map((id) => core.status(id)));
  t.same(views.map(summary), Array(2).fill({ status: 'digest', channels: { push: 'digest', in_app: 'digest' } }));
  t.same(
    views.map((v) => v.details.push.release_at),
    [(T0 + WINDOW) / 1000, (T0 + WINDOW) / 1000],
    'held for the seed’s 5-minute window',
  );
  const held = await digests(core);
  t.equal(held.length, 2, 'one digest per channel');
  t.equal(ch.primary.push.calls.length + ch.primary.in_app.calls.length, 0, 'nothing sent before the window ends');

  clock.advance(WINDOW);
  for (const d of held) await wakeNow(core, d.send_id);
  await waitFor(() => ch.primary.push.calls.length === 1 && ch.primary.in_app.calls.length === 1, { what: 'both digests to be sent' });
  t.match(ch.primary.push.calls[0]!.msg, { title: 'New activity', body: '2 new since your last update' }, 'the push digest');
  t.match(ch.primary.in_app.calls[0]!.msg, { title: 'New activity', body: '2 new since your last update' }, 'the in-app digest');
  await core.waitStatus(ids[1]!, (s) => s.status === 'sent');
});
