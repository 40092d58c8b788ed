/**
 * The kill switch (notifier/campaigns/kill-switch.ts) with two notifier replicas, both running
 * workers, on one database:
 *
 * - a campaign draining through a slow provider is stopped: the call answers once both replicas
 *   acknowledged, and from then on no provider call for the campaign starts on either; the sends
 *   already with the provider finish, everything else ends `cancelled`, and the counters say so;
 * - the stop is idempotent and audited, a stopped campaign takes no new request, and a retry of
 *   the original request resumes nothing;
 * - a stop during the expansion cancels the shards not yet expanded, and none of their members
 *   gets a delivery;
 * - a replica whose LISTEN connection is gone (and cannot come back) never hears the stop, yet
 *   never sends for the stopped campaign: its claims cancel the rows instead; it acknowledges once
 *   it reconnects.
 *
 * "After the stop answered" is a flag set when the stop call's response arrives; each provider
 * call checks it as it starts.
 */
import t from 'tap';
import pg from 'pg';
import { testDatabaseUrl } from '../../harness/env.js';
import { waitFor } from '../../harness/wait.js';
import type { TestContext } from '../../harness/db.js';
import { scriptedChannels, type Core, type Json, type TestChannels } from '../core/helpers.js';
import { adminCampaign, campaignRequest, givePushTokens, memberIds, startCampaignCore, uploadList } from './helpers.js';

const KILL_ENV: Record<string, string> = {
  // Sends held in the provider stay theirs: no lease runs out while a test holds them.
  NOTIFIER_SEND_TIMEOUT: '30s',
  NOTIFIER_CONCURRENCY: 'transactional=8,high=8,normal=8,low=8',
  NOTIFIER_CAMPAIGN_QUEUE_DEPTH: '100',
};

/**
 * A push provider that holds its sends until released and notes each send that starts once
 * `afterStop()` is true.
 */
interface HeldPush {
  release(): void;
  /** Calls started for `notificationId` (all of them, in order). */
  callsFor(notificationId: string): string[];
  /** Delivery ids whose provider call started after the stop had answered. */
  late: string[];
}

function holdPush(ch: TestChannels, afterStop: (notificationId: string) => boolean): HeldPush {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const late: string[] = [];
  const push = ch.primary.push;
  push.script = async (msg, ctx) => {
    if (afterStop(msg.notificationId)) late.push(ctx.deliveryId);
    await released;
    return { ok: true, providerMessageId: `fcm-${ctx.idempotencyKey}` };
  };
  return {
    release,
    late,
    callsFor: (id) => push.calls.filter((c) => c.msg.notificationId === id).map((c) => c.ctx.deliveryId),
  };
}

interface Replicas {
  a: Core;
  b: Core;
  chA: TestChannels;
  chB: TestChannels;
}

async function twoReplicas(
  t: TestContext,
  label: string,
  envA: Record<string, string> = {},
  envB: Record<string, string> = {},
): Promise<Replicas> {
  const chA = scriptedChannels();
  const chB = scriptedChannels();
  const a = await startCampaignCore(t, label, { channels: chA, env: { ...KILL_ENV, ...envA } });
  const b = await startCampaignCore(t, `${label}_b`, { channels: chB, db: a.db, env: { ...KILL_ENV, ...envB } });
  return { a, b, chA, chB };
}

async function stop(core: Core, campaign: string, body?: unknown, headers = core.admin): Promise<{ status: number; body: Json }> {
  return core.api('POST', `/api/v1/admin/campaigns/${encodeURIComponent(campaign)}/stop`, body, headers);
}

async function byStatus(db: pg.Pool, id: string): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM deliveries WHERE notification_id = $1 GROUP BY status',
    [id],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

async function unfinished(db: pg.Pool, id: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM deliveries WHERE notification_id = $1 AND status IN ('queued', 'sending')`,
    [id],
  );
  return rows[0]!.n;
}

/** The status view's counters against the delivery rows, bucket by bucket (campaigns/counts.ts). */
function countersOf(rows: Record<string, number>): Record<string, number> {
  const n = (s: string): number => rows[s] ?? 0;
  return {
    queued: n('queued') + n('sending'),
    sent: n('sent'),
    delivered: n('delivered') + n('opened') + n('read'),
    failed: n('failed') + n('dead_lettered'),
    suppressed: n('opted_out') + n('capped'),
    cancelled: n('cancelled'),
  };
}

function pick(c: Json): Record<string, number> {
  return { queued: c.queued, sent: c.sent, delivered: c.delivered, failed: c.failed, suppressed: c.suppressed, cancelled: c.cancelled };
}

async function replicaIds(db: pg.Pool): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>('SELECT id FROM notifier_replicas ORDER BY id');
  return rows.map((r) => r.id);
}

t.test(
  'a stop while sends are held in the provider: acknowledged by both replicas, no provider call starts after the answer',
  async (t) => {
    const { a, b, chA, chB } = await twoReplicas(t, 'kill_drain');
    const ids = memberIds(600);
    await uploadList(a, 'drain', ids);
    await givePushTokens(a, ids);
    let answered = false;
    let target = '';
    const after = (n: string): boolean => answered && n === target;
    const pa = holdPush(chA, after);
    const pb = holdPush(chB, after);
    t.teardown(() => {
      pa.release();
      pb.release();
    });

    const r = await a.notify(campaignRequest('drain', 'drain-1'));
    t.equal(r.status, 202);
    const id = (target = r.body.notification_id as string);
    // Both replicas have sends held in the provider, and most deliveries are still queued.
    await waitFor(() => pa.callsFor(id).length >= 4 && pb.callsFor(id).length >= 4, {
      timeoutMs: 20_000,
      what: 'both replicas to hold sends in the provider',
    });
    await waitFor(async () => (await a.status(id)).campaign?.state === 'expanded', {
      timeoutMs: 20_000,
      what: 'the fan-out to be expanded',
    });
    const before = await byStatus(a.db.pool, id);
    t.ok((before['queued'] ?? 0) > 400, `most deliveries still queued at the stop (${JSON.stringify(before)})`);

    const s = await stop(a, 'drain-1', { reason: 'wrong audience' });
    answered = true;
    t.equal(s.status, 200);
    t.match(s.body, {
      campaign_id: 'drain-1',
      stopped_at: String,
      stopped_by: 'user:operator',
      reason: 'wrong audience',
      already_stopped: false,
      acknowledged: true,
      acknowledged_in_ms: Number,
    });
    t.same((s.body.replicas as Json[]).map((x) => x.id).sort(), await replicaIds(a.db.pool), 'both live replicas are listed');
    t.equal(s.body.replicas.length, 2);
    for (const x of s.body.replicas as Json[]) t.match(x.acknowledged_at, /^\d{4}-\d\d-\d\dT/, `replica ${x.id} acknowledged`);
    t.comment(`stop → last acknowledgement: ${s.body.acknowledged_in_ms} ms`);
    const heldAtStop = [...pa.callsFor(id), ...pb.callsFor(id)];

    pa.release();
    pb.release();
    await waitFor(async () => (await unfinished(a.db.pool, id)) === 0, {
      timeoutMs: 20_000,
      what: 'nothing of the campaign left queued or sending',
    });

    t.same(pa.late, [], 'replica A started no provider call after the stop answered');
    t.same(pb.late, [], 'replica B started no provider call after the stop answered');
    const after2 = await byStatus(a.db.pool, id);
    t.same(Object.keys(after2).sort(), ['cancelled', 'sent'], `every delivery is sent or cancelled (${JSON.stringify(after2)})`);
    const { rows: sent } = await a.db.pool.query<{ id: string }>(
      `SELECT id FROM deliveries WHERE notification_id = $1 AND status = 'sent'`,
      [id],
    );
    t.same(sent.map((x) => x.id).sort(), [...heldAtStop].sort(), 'the sent ones are exactly those that were with a provider at the stop');
    t.equal(after2['sent']! + after2['cancelled']!, 600);

    const view = await a.waitStatus(id, (v) => v.campaign?.state === 'cancelled' && v.campaign.queued === 0);
    t.match(view.campaign, { state: 'cancelled', recipients: 600, expanded: 600 });
    t.same(pick(view.campaign), countersOf(after2), 'the status counters add up to the deliveries');
    t.equal(view.campaign.cancelled, after2['cancelled']);
    const admin = await adminCampaign(b, 'drain-1');
    t.match(admin.body, { stopped_at: s.body.stopped_at, totals: { cancelled: after2['cancelled'], sent: after2['sent'], queued: 0 } });
  },
);

t.test('the stop is idempotent and audited; a stopped campaign takes no new request and a retry resumes nothing', async (t) => {
  const { a, b, chA, chB } = await twoReplicas(t, 'kill_final');
  const ids = memberIds(200);
  await uploadList(a, 'final', ids);
  await givePushTokens(a, ids);
  let answered = false;
  let target = '';
  const pa = holdPush(chA, (n) => answered && n === target);
  const pb = holdPush(chB, (n) => answered && n === target);
  t.teardown(() => {
    pa.release();
    pb.release();
  });
  const original = campaignRequest('final', 'final-1', { idempotency_key: 'final-1-send' });
  const r = await a.notify(original);
  t.equal(r.status, 202);
  const id = (target = r.body.notification_id as string);
  await waitFor(() => pa.callsFor(id).length + pb.callsFor(id).length >= 4, { timeoutMs: 20_000, what: 'sends held in the provider' });

  t.equal((await stop(a, 'final-1', undefined, a.service)).status, 403, 'a service caller may not stop a campaign');
  t.equal((await stop(a, 'final-1', undefined, a.user('u1'))).status, 403, 'nor may a customer');
  t.equal((await stop(a, 'no-such-campaign')).status, 404, 'an unknown campaign');

  const first = await stop(a, 'final-1');
  answered = true;
  t.equal(first.status, 200);
  t.match(first.body, { already_stopped: false, acknowledged: true });
  const second = await stop(b, 'final-1', { reason: 'again' });
  t.equal(second.status, 200);
  t.match(second.body, {
    already_stopped: true,
    stopped_at: first.body.stopped_at,
    stopped_by: 'user:operator',
    reason: null,
    acknowledged: true,
  });
  pa.release();
  pb.release();
  await waitFor(async () => (await unfinished(a.db.pool, id)) === 0, { timeoutMs: 20_000, what: 'the campaign to settle' });

  const view = await adminCampaign(a, 'final-1');
  t.equal(view.status, 200);
  t.equal(view.body.stopped_at, first.body.stopped_at);
  const stops = (view.body.audit as Json[]).filter((e) => e.action === 'stop');
  t.equal(stops.length, 1, 'one stop in the audit trail, however many calls');
  t.match(stops[0], { action: 'stop', actor: 'user:operator', at: String });

  const again = await a.notify(campaignRequest('final', 'final-1'));
  t.match(again, { status: 409, body: { code: 'campaign_stopped', field: 'campaign_id' } }, 'a new request for the stopped campaign');

  const settled = await byStatus(a.db.pool, id);
  const calls = pa.callsFor(id).length + pb.callsFor(id).length;
  const retry = await b.notify(original);
  t.equal(retry.status, 202, 'the original request retried with its key');
  t.equal(retry.body.notification_id, id, 'answers with the original notification');
  // Anything the retry could have set moving would be queued ahead of this marker on the same
  // tier: once the marker campaign is sent, it would have happened.
  await uploadList(a, 'marker', ['m1']);
  await givePushTokens(a, ['m1']);
  const marker = await a.notify(campaignRequest('marker', 'marker-1'));
  await a.waitStatus(marker.body.notification_id, (v) => v.campaign?.state === 'expanded' && v.campaign.sent === 1, 20_000);
  const { rows } = await a.db.pool.query<{ notifications: number; fanouts: number }>(
    `SELECT (SELECT count(*)::int FROM notifications WHERE campaign_id = 'final-1') AS notifications,
            (SELECT count(*)::int FROM campaign_fanouts WHERE campaign_id = 'final-1') AS fanouts`,
  );
  t.same(rows[0], { notifications: 1, fanouts: 1 }, 'no new notification or fan-out');
  t.same(await byStatus(a.db.pool, id), settled, 'no delivery moved');
  t.equal(pa.callsFor(id).length + pb.callsFor(id).length, calls, 'no provider call');
  t.same([...pa.late, ...pb.late], []);
  t.match((await a.status(id)).campaign, { state: 'cancelled', queued: 0 });
});

t.test('a stop during the expansion cancels the shards not yet expanded; none of their members gets a delivery', async (t) => {
  // 200 shards of 40: as many shards as 20,000 members in the default test shards of 100, for 40%
  // of the rows (suite time); a quarter of them are held below whatever their size.
  const env = { NOTIFIER_CAMPAIGN_CONCURRENCY: '1', NOTIFIER_CAMPAIGN_SHARD_SIZE: '40' };
  const { a, b, chA, chB } = await twoReplicas(t, 'kill_expand', env, env);
  const ids = memberIds(8_000);
  await uploadList(a, 'big', ids);
  await givePushTokens(a, ids);
  let answered = false;
  const late: string[] = [];
  for (const ch of [chA, chB]) {
    ch.primary.push.script = (msg, ctx) => {
      if (answered) late.push(ctx.deliveryId);
      return { ok: true, providerMessageId: `fcm-${ctx.idempotencyKey}` };
    };
  }
  const r = await a.notify(campaignRequest('big', 'big-1'));
  t.equal(r.status, 202);
  const id = r.body.notification_id as string;

  // A quarter of the shards are held (a transaction of the test locks their rows; shard jobs run
  // in no particular order), so the stop is sure to find some not yet expanded, while the
  // replicas may be in the middle of others.
  await waitFor(async () => (await a.db.pool.query('SELECT 1 FROM campaign_shards WHERE notification_id = $1', [id])).rowCount === 200, {
    timeoutMs: 20_000,
    what: 'the fan-out to be planned into 200 shards',
  });
  const holder = await a.db.pool.connect();
  let holding = true;
  const letGo = async (): Promise<void> => {
    if (!holding) return;
    holding = false;
    await holder.query('ROLLBACK').catch(() => {});
    holder.release();
  };
  t.teardown(letGo);
  await holder.query('BEGIN');
  const held = await holder.query(
    `SELECT shard FROM campaign_shards WHERE notification_id = $1 AND shard % 4 = 3 AND state = 'pending' FOR UPDATE`,
    [id],
  );
  t.ok(held.rowCount! >= 40, `${held.rowCount} shards held`);
  await waitFor(async () => (await a.status(id)).campaign?.shards_done >= 1, { timeoutMs: 30_000, what: 'shards to be expanded' });

  const s = await stop(b, 'big-1');
  answered = true;
  t.equal(s.status, 200);
  t.match(s.body, { already_stopped: false, acknowledged: true });
  t.equal(s.body.replicas.length, 2);
  t.comment(`stop during expansion → last acknowledgement: ${s.body.acknowledged_in_ms} ms`);
  const atStop = await a.db.pool.query<{ shards: number; shards_done: number }>(
    'SELECT shards, shards_done FROM campaign_fanouts WHERE notification_id = $1',
    [id],
  );
  t.ok(atStop.rows[0]!.shards_done < atStop.rows[0]!.shards, `stopped while expanding (${JSON.stringify(atStop.rows[0])})`);
  await letGo();

  await waitFor(
    async () =>
      (await a.db.pool.query(`SELECT 1 FROM campaign_shards WHERE notification_id = $1 AND state = 'pending'`, [id])).rowCount === 0 &&
      (await unfinished(a.db.pool, id)) === 0,
    { timeoutMs: 30_000, what: 'no shard pending and no delivery queued' },
  );
  const { rows: shards } = await a.db.pool.query<{ state: string; n: number; members: number }>(
    `SELECT state, count(*)::int AS n, coalesce(sum(members), 0)::int AS members FROM campaign_shards WHERE notification_id = $1 GROUP BY state`,
    [id],
  );
  const byState = Object.fromEntries(shards.map((x) => [x.state, x]));
  t.same(Object.keys(byState).sort(), ['cancelled', 'done'], 'every shard is done or cancelled');
  t.ok(byState['cancelled']!.n >= held.rowCount!, `the shards held at the stop are cancelled (${byState['cancelled']!.n})`);
  const { rows: stray } = await a.db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM deliveries d JOIN campaign_shards s ON s.notification_id = d.notification_id
      WHERE d.notification_id = $1 AND s.state = 'cancelled'
        AND d.recipient_id >= s.first_user AND (s.next_user IS NULL OR d.recipient_id < s.next_user)`,
    [id],
  );
  t.equal(stray[0]!.n, 0, 'no member of a cancelled shard has a delivery');
  const deliveries = await byStatus(a.db.pool, id);
  const total = Object.values(deliveries).reduce((x, y) => x + y, 0);
  t.equal(total, byState['done']!.members, 'one delivery per member of each expanded shard');
  t.same(
    Object.keys(deliveries).filter((x) => x !== 'sent' && x !== 'cancelled'),
    [],
    `sent or cancelled (${JSON.stringify(deliveries)})`,
  );
  t.same(late, [], 'no provider call started after the stop answered');

  const view = await a.waitStatus(id, (v) => v.campaign?.state === 'cancelled' && v.campaign.queued === 0);
  t.equal(view.campaign.expanded, byState['done']!.members, 'the expanded counter is the members of the expanded shards');
  t.same(pick(view.campaign), countersOf(deliveries));
});

t.test(
  'a replica that is not listening never sends for a stopped campaign (its claim cancels the row) and acknowledges on reconnect',
  async (t) => {
    // One campaign job at a time per replica, so a decoy campaign can keep both replicas' campaign
    // workers busy, and with them the stop's sweep: only claims cancel anything until it is let go.
    const env = { NOTIFIER_CAMPAIGN_CONCURRENCY: '1' };
    const { a, b, chA, chB } = await twoReplicas(t, 'kill_deaf', { ...env, NOTIFIER_CAMPAIGN_STOP_WAIT: '500ms' }, env);
    const pool = a.db.pool;
    const ids = memberIds(400);
    await uploadList(a, 'deaf', ids);
    await uploadList(a, 'decoy', memberIds(3000, 'd'));
    await givePushTokens(a, ids);
    let answered = false;
    let target = '';
    const pa = holdPush(chA, (n) => answered && n === target);
    const pb = holdPush(chB, (n) => answered && n === target);
    t.teardown(() => {
      pa.release();
      pb.release();
    });

    const r = await a.notify(campaignRequest('deaf', 'deaf-1'));
    const id = (target = r.body.notification_id as string);
    await waitFor(() => pa.callsFor(id).length === 8 && pb.callsFor(id).length === 8, {
      timeoutMs: 20_000,
      what: 'both replicas to have all their push slots held in the provider',
    });
    await waitFor(async () => (await a.status(id)).campaign?.state === 'expanded', {
      timeoutMs: 20_000,
      what: 'the fan-out to be expanded',
    });

    // The decoy's shards wait on its campaign row, which the test holds once the decoy is planned:
    // each replica's only campaign worker is stuck in one, and the stop's sweep queues behind them.
    const decoy = await a.notify(campaignRequest('decoy', 'decoy-1', { channels: ['in_app'] }));
    t.equal(decoy.status, 202);
    await waitFor(async () => (await a.status(decoy.body.notification_id)).campaign?.state === 'expanding', {
      timeoutMs: 20_000,
      what: 'the decoy to be planned',
    });
    const holder = await pool.connect();
    let holding = true;
    const letGo = async (): Promise<void> => {
      if (!holding) return;
      holding = false;
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    };
    t.teardown(letGo);
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM campaigns WHERE id = 'decoy-1' FOR UPDATE`);
    await waitFor(
      async () =>
        (
          await pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM campaign_shards s%'`,
          )
        ).rows[0]!.n === 2,
      { timeoutMs: 20_000, what: "both replicas' campaign workers to wait on the decoy" },
    );

    // B's LISTEN connection goes, and cannot come back while the database refuses new connections
    // (the pools keep theirs).
    const { rows: listeners } = await pool.query<{ pid: number; backend_start: Date }>(
      `SELECT pid, backend_start FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'notifier:listen' ORDER BY backend_start`,
    );
    t.equal(listeners.length, 2, 'one LISTEN connection per replica');
    const deafPid = listeners[1]!.pid;
    // (A database's connections are switched off from another one.)
    const server = async (sql: string): Promise<void> => {
      const c = new pg.Client({ connectionString: testDatabaseUrl() });
      await c.connect();
      await c.query(sql).finally(() => c.end());
    };
    let refusing = true;
    const allow = async (): Promise<void> => {
      if (!refusing) return;
      refusing = false;
      await server(`ALTER DATABASE ${a.db.name} ALLOW_CONNECTIONS true`);
    };
    t.teardown(allow);
    await server(`ALTER DATABASE ${a.db.name} ALLOW_CONNECTIONS false`);
    await pool.query('SELECT pg_terminate_backend($1)', [deafPid]);
    await waitFor(
      async () =>
        (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'notifier:listen'`))
          .rowCount === 1,
      { what: "B's LISTEN connection to be gone" },
    );

    const s = await stop(a, 'deaf-1');
    answered = true;
    t.equal(s.status, 200);
    t.match(s.body, { already_stopped: false, acknowledged: false }, 'the stop says it was not acknowledged by every replica');
    const acks = (s.body.replicas as Json[]).filter((x) => x.acknowledged_at !== null);
    t.equal(s.body.replicas.length, 2, 'both replicas are live (B still beats)');
    t.equal(acks.length, 1, 'only A heard the stop');

    // B, which has not heard, gets its slots back and takes the campaign's waiting wake-ups.
    const waiting = async (): Promise<number> =>
      (
        await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM deliveries WHERE notification_id = $1 AND status = 'queued' AND wake_job_id IS NOT NULL`,
          [id],
        )
      ).rows[0]!.n;
    t.ok((await waiting()) > 0, 'wake-ups of the campaign are waiting');
    pb.release();
    await waitFor(async () => (await waiting()) === 0, { timeoutMs: 20_000, what: 'B to take every waiting wake-up of the campaign' });
    const { rows: claimed } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM deliveries WHERE notification_id = $1 AND status = 'cancelled' AND wake_job_id IS NOT NULL`,
      [id],
    );
    t.ok(claimed[0]!.n > 0, `B's claims cancelled ${claimed[0]!.n} deliveries of the stopped campaign`);
    t.same(pb.late, [], 'B started no provider call for the stopped campaign');
    const { rows: bAck } = await pool.query(`SELECT 1 FROM campaign_stop_acks WHERE campaign_id = 'deaf-1'`);
    t.equal(bAck.length, 1, 'B has still not acknowledged: it has not heard');

    await allow();
    await waitFor(async () => (await pool.query(`SELECT 1 FROM campaign_stop_acks WHERE campaign_id = 'deaf-1'`)).rowCount === 2, {
      timeoutMs: 30_000,
      what: 'B to acknowledge after it reconnects',
    });
    const { rows: order } = await pool.query<{ reconnected: boolean }>(
      `SELECT (SELECT max(acked_at) FROM campaign_stop_acks WHERE campaign_id = 'deaf-1') >=
            (SELECT backend_start FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'notifier:listen' AND pid <> $1 ORDER BY backend_start DESC LIMIT 1)
            AS reconnected`,
      [listeners[0]!.pid],
    );
    t.equal(order[0]!.reconnected, true, 'B acknowledged after its new LISTEN connection started');
    const again = await stop(b, 'deaf-1');
    t.match(again.body, { already_stopped: true, acknowledged: true }, 'every replica has acknowledged now');

    await letGo();
    pa.release();
    await waitFor(async () => (await unfinished(pool, id)) === 0, { timeoutMs: 20_000, what: 'the campaign to settle' });
    t.same([...pa.late, ...pb.late], [], 'no provider call started after the stop answered');
    const final = await byStatus(pool, id);
    t.same(Object.keys(final).sort(), ['cancelled', 'sent'], JSON.stringify(final));
    t.equal(final['sent'], 16, 'the sends held at the stop finished; nothing else was sent');
    t.match((await b.status(id)).campaign, { state: 'cancelled', queued: 0, cancelled: 400 - 16, sent: 16 });
  },
);

t.test(
  'a stop while the fan-out is being planned waits for the plan: no deadlock, the stop answers and the plan is not retried',
  async (t) => {
    const { a } = await twoReplicas(t, 'kill_plan');
    const pool = a.db.pool;
    const ids = memberIds(300);
    await uploadList(a, 'plan', ids);
    await givePushTokens(a, ids);
    // The planning step takes the segment's row FOR SHARE after it has locked its fan-out: holding
    // the segment row keeps a plan in the middle of its transaction.
    const holder = await pool.connect();
    let holding = true;
    const letGo = async (): Promise<void> => {
      if (!holding) return;
      holding = false;
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    };
    t.teardown(letGo);
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM segments WHERE id = 'plan' FOR UPDATE`);
    const r = await a.notify(campaignRequest('plan', 'plan-1'));
    t.equal(r.status, 202);
    const id = r.body.notification_id as string;
    await waitFor(
      async () =>
        (
          await pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM segments WHERE id%'`,
          )
        ).rowCount === 1,
      { what: 'the planning step to wait on the segment' },
    );
    const stopping = stop(a, 'plan-1');
    // The stop is under way (it has the campaign row, or waits for the plan's hold on it).
    await waitFor(
      async () =>
        (
          await pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND (query LIKE '%UPDATE campaign_fanouts SET state = CASE%' OR query LIKE '%FROM campaigns WHERE id = $1 FOR UPDATE%')`,
          )
        ).rowCount === 1,
      { what: 'the stop to wait' },
    );
    await letGo();
    const s = await stopping;
    t.equal(s.status, 200, `the stop answers (${JSON.stringify(s.body)})`);
    t.match(s.body, { already_stopped: false, acknowledged: true });
    await waitFor(async () => (await a.status(id)).campaign?.state === 'cancelled', { what: 'the fan-out to be cancelled' });
    await waitFor(async () => (await unfinished(pool, id)) === 0, { timeoutMs: 20_000, what: 'nothing left queued' });
    const { rows } = await pool.query<{ state: string; retry_count: number }>(
      `SELECT state, retry_count FROM pgboss.job WHERE name = 'notify-campaign-low' AND data->>'step' = 'plan' AND data->>'notification_id' = $1
      ORDER BY created_on`,
      [id],
    );
    t.same(
      rows.map((x) => x.retry_count),
      rows.map(() => 0),
      `no planning job failed and was retried (${JSON.stringify(rows)})`,
    );
  },
);

t.test('a replica that hears a stop while it is still starting acknowledges it once it has started', async (t) => {
  const chA = scriptedChannels();
  const a = await startCampaignCore(t, 'kill_starting', { channels: chA, env: { ...KILL_ENV, NOTIFIER_CAMPAIGN_STOP_WAIT: '2s' } });
  const pool = a.db.pool;
  await uploadList(a, 'early', memberIds(10));
  const r = await a.notify(campaignRequest('early', 'early-1'));
  t.equal(r.status, 202);

  // B is held half-way through its start, after its LISTEN connection and its kill switch exist
  // but before the kill switch is registered: its retention schedule's row is held by the test.
  const holder = await pool.connect();
  let holding = true;
  const letGo = async (): Promise<void> => {
    if (!holding) return;
    holding = false;
    await holder.query('ROLLBACK').catch(() => {});
    holder.release();
  };
  t.teardown(letGo);
  await holder.query('BEGIN');
  t.equal((await holder.query(`SELECT 1 FROM pgboss.schedule WHERE name = 'notify-retention' FOR UPDATE`)).rowCount, 1);
  const starting = startCampaignCore(t, 'kill_starting_b', { channels: scriptedChannels(), db: a.db, env: KILL_ENV });
  starting.catch(() => {});
  await waitFor(
    async () =>
      (
        await pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO pgboss.schedule%'`,
        )
      ).rowCount === 1,
    { timeoutMs: 20_000, what: 'B to wait in the middle of its start' },
  );
  t.equal(
    (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'notifier:listen'`))
      .rowCount,
    2,
    'B is listening already',
  );

  const first = await stop(a, 'early-1');
  t.match(first.body, { already_stopped: false, acknowledged: true });
  t.equal(first.body.replicas.length, 1, 'B is not registered yet: only A is waited for');
  await letGo();
  await starting;

  const again = await stop(a, 'early-1');
  t.equal(again.body.replicas.length, 2, 'B is live now');
  t.match(again.body, { already_stopped: true, acknowledged: true }, 'and has acknowledged the stop it heard while starting');
});

t.test('a planning run that overlaps the stop leaves the sweep to the stop: no delivery of the campaign stays queued', async (t) => {
  const channels = scriptedChannels();
  const core = await startCampaignCore(t, 'kill_overlap', {
    channels,
    env: {
      ...KILL_ENV,
      NOTIFIER_CAMPAIGN_QUEUE_DEPTH: '20',
      NOTIFIER_CONCURRENCY: 'transactional=4,high=4,normal=4,low=4',
      // One campaign job at a time: the stop's own job runs after the overlapping one has finished.
      NOTIFIER_CAMPAIGN_CONCURRENCY: '1',
    },
  });
  const pool = core.db.pool;
  const ids = memberIds(300);
  await uploadList(core, 'overlap', ids);
  await givePushTokens(core, ids);
  let answered = false;
  let target = '';
  const held = holdPush(channels, (n) => answered && n === target);
  t.teardown(() => held.release());
  const r = await core.notify(campaignRequest('overlap', 'overlap-1'));
  const id = (target = r.body.notification_id as string);
  await waitFor(async () => (await core.status(id)).campaign?.state === 'expanded' && held.callsFor(id).length === 4, {
    timeoutMs: 20_000,
    what: 'the fan-out to be expanded, with sends held',
  });
  const unwoken = await pool.query(`SELECT 1 FROM deliveries WHERE notification_id = $1 AND status = 'queued' AND wake_job_id IS NULL`, [
    id,
  ]);
  t.ok(unwoken.rowCount! > 200, "most deliveries not even woken yet (only the stop's sweep cancels those)");

  // The stop is held after it has taken the campaign row (the test holds the fan-out's row), and a
  // planning run of the fan-out (as the reconciler sends during an expansion) starts meanwhile:
  // it reads the fan-out before the stop commits and goes on after.
  const lockWaiters = async (): Promise<number> =>
    (
      await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      )
    ).rows[0]!.n;
  const holder = await pool.connect();
  let holding = true;
  const letGo = async (): Promise<void> => {
    if (!holding) return;
    holding = false;
    await holder.query('ROLLBACK').catch(() => {});
    holder.release();
  };
  t.teardown(letGo);
  await holder.query('BEGIN');
  await holder.query('SELECT 1 FROM campaign_fanouts WHERE notification_id = $1 FOR UPDATE', [id]);
  const stopping = stop(core, 'overlap-1');
  await waitFor(async () => (await lockWaiters()) === 1, { what: 'the stop to wait for the fan-out row' });
  t.ok(await core.notifier.boss.send('notify-campaign-low', { notification_id: id, step: 'plan' }), 'a planning job is queued');
  await waitFor(async () => (await lockWaiters()) === 2, { what: 'the planning run to wait behind the stop' });
  await letGo();
  const s = await stopping;
  answered = true;
  t.equal(s.status, 200);
  held.release();

  await waitFor(async () => (await unfinished(pool, id)) === 0, {
    timeoutMs: 20_000,
    what: 'no delivery of the stopped campaign left queued',
  });
  t.same(held.late, []);
  const final = await byStatus(pool, id);
  t.same(final, { sent: 4, cancelled: 296 });
  t.match((await core.status(id)).campaign, { state: 'cancelled', queued: 0, cancelled: 296, sent: 4 });
});
