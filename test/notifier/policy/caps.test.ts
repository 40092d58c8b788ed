/**
 * Caps end to end with two notifier replicas on one database (README, "Notification types,
 * preferences and policies"; workers/claim.ts): a burst spread over both replicas' APIs and
 * workers admits exactly the cap between them, the rest are `capped` and say so; the window
 * slides with the injected clock (shared by both replicas); `high` and `transactional` are never
 * capped; and a retried send is not capped by its own earlier count.
 */
import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import { addDevice, createTemplate, request, scriptedChannels, startCore, summary, type Core, type TestChannels } from '../core/helpers.js';
import { waitFor } from '../../harness/wait.js';

const MIN = 60_000;

/** A catalogue with one capped type, `promo`: at most 5 pushes an hour per user. */
const CAPPED_TYPES = JSON.stringify({
  promo: { events: ['promo.*'], channels: ['push'], caps: { push: { limit: 5, window: '1h' } } },
  security_alerts: { events: ['auth.*'], channels: ['push'], mandatory: true },
  general: { events: ['*'], channels: ['push'] },
});

async function promo(core: Core, priority: string, key: string): Promise<string> {
  const r = await core.notify(request({ event_type: 'promo.sale', priority, channels: ['push'], idempotency_key: key }));
  if (r.status !== 202) throw new Error(`notify: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.notification_id as string;
}

/** Waits until the notifications' push deliveries have all ended; their statuses by notification. */
async function ended(core: Core, ids: readonly string[]): Promise<Map<string, string>> {
  return waitFor(
    async () => {
      const { rows } = await core.db.pool.query<{ notification_id: string; status: string }>(
        `SELECT notification_id, status FROM deliveries WHERE notification_id = ANY($1::uuid[]) AND channel = 'push'`,
        [ids],
      );
      if (rows.length !== ids.length || rows.some((r) => r.status === 'queued' || r.status === 'sending')) return undefined;
      return new Map(rows.map((r) => [r.notification_id, r.status]));
    },
    { timeoutMs: 15_000, what: `${ids.length} push deliveries to end` },
  );
}

const pushCalls = (...chs: TestChannels[]): number => chs.reduce((n, c) => n + c.primary.push.calls.length, 0);

t.test('two replicas, 20 sends at once against a cap of 5 an hour: exactly 5 go out; the window slides', async (t) => {
  const clock = new FakeClock(Date.parse('2026-06-10T12:00:00Z'));
  const chA = scriptedChannels();
  const chB = scriptedChannels();
  const env = { NOTIFIER_NOTIFICATION_TYPES: CAPPED_TYPES };
  const a = await startCore(t, 'caps_replicas', { channels: chA, env, deps: { clock } });
  const b = await startCore(t, 'caps_replicas', { db: a.db, channels: chB, env, deps: { clock } });
  await createTemplate(a, 'code_v1');
  await addDevice(a, 'u1', 'tok-u1');

  const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => promo(i % 2 === 0 ? a : b, 'normal', `burst-${i}`)));
  const statuses = await ended(a, ids);
  const count = (s: string): number => [...statuses.values()].filter((x) => x === s).length;
  t.equal(count('sent'), 5, '5 sent');
  t.equal(count('capped'), 15, '15 capped');
  t.equal(pushCalls(chA, chB), 5, 'exactly 5 provider calls between the two replicas');
  t.comment(`provider calls: replica A ${chA.primary.push.calls.length}, replica B ${chB.primary.push.calls.length}`);
  const counted = await a.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM deliveries WHERE counted_at IS NOT NULL`);
  t.equal(counted.rows[0]!.n, 5, 'the window holds the 5 admitted sends');

  const cappedId = ids.find((id) => statuses.get(id) === 'capped')!;
  const s = await b.status(cappedId);
  t.same(summary(s), { status: 'capped', channels: { push: 'capped' } }, 'a capped one shows capped');
  t.match(s.details.push, { status: 'capped', reason: /over the promo push cap/, notification_type: 'promo' }, 'naming the cap');

  const high = await a.waitStatus(await promo(a, 'high', 'high-1'), (s) => s.status === 'sent');
  t.same(summary(high), { status: 'sent', channels: { push: 'sent' } }, 'high: not capped');
  const tx = await b.waitStatus(await promo(b, 'transactional', 'tx-1'), (s) => s.status === 'sent');
  t.same(summary(tx), { status: 'sent', channels: { push: 'sent' } }, 'transactional: not capped');
  t.equal(pushCalls(chA, chB), 7, 'two more provider calls');
  const stillCounted = await a.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM deliveries WHERE counted_at IS NOT NULL`);
  t.equal(stillCounted.rows[0]!.n, 5, 'neither was counted against the cap');

  // Half an hour later the window still holds the burst's 5.
  clock.advance(30 * MIN);
  const half = await a.waitStatus(await promo(a, 'normal', 'half'), (s) => s.status !== 'queued');
  t.equal(half.status, 'capped', '30 minutes later: still capped');

  // 61 minutes after the burst, its sends have left the window.
  clock.advance(31 * MIN);
  const later = await b.waitStatus(await promo(b, 'normal', 'later'), (s) => s.status !== 'queued');
  t.equal(later.status, 'sent', '61 minutes later: sent');
  t.equal(pushCalls(chA, chB), 8, 'exactly one more provider call');
  const capped = await a.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'capped'`);
  t.equal(capped.rows[0]!.n, 16, "capped in all: the burst's 15 and the half-hour one");
});

t.test('a send retried after a transient failure is not capped by its own first attempt', async (t) => {
  const clock = new FakeClock(Date.parse('2026-06-10T12:00:00Z'));
  const channels = scriptedChannels();
  channels.primary.push.script = (_m, ctx, n) =>
    n === 0 ? { ok: false, kind: 'retry', reason: 'provider_unavailable' } : { ok: true, providerMessageId: `fcm-${ctx.idempotencyKey}` };
  const types = JSON.stringify({
    promo: { events: ['promo.*'], channels: ['push'], caps: { push: { limit: 1, window: '1h' } } },
    security_alerts: { events: ['auth.*'], channels: ['push'], mandatory: true },
    general: { events: ['*'], channels: ['push'] },
  });
  const core = await startCore(t, 'caps_retry', { channels, deps: { clock }, env: { NOTIFIER_NOTIFICATION_TYPES: types } });
  await createTemplate(core, 'code_v1');
  await addDevice(core, 'u1', 'tok-u1');

  const id = await promo(core, 'normal', 'once');
  const status = (await ended(core, [id])).get(id);
  t.equal(status, 'sent', 'the one send of the hour, retried, is sent (not capped by its own first attempt)');
  t.equal(channels.primary.push.calls.length, 2, 'two provider calls: the failed attempt and the retry');
  const counted = await core.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM deliveries WHERE counted_at IS NOT NULL`);
  t.equal(counted.rows[0]!.n, 1, 'counted once');
});
