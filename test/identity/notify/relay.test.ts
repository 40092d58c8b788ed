/**
 * The relay against a scripted notifier (a plain HTTP server) over a real, migrated identity
 * database: the retry and park rule (pure, table by table), the backoff, the messages; two relays
 * on one outbox never send a row twice; a user's rows go in order; a row is marked sent only after
 * the 202 (and is locked while its call is out); 5xx and Retry-After are retried, a refusal of the
 * row is parked and does not hold up the user's next row.
 */
import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Pool } from 'pg';
import { systemClock } from '../../../shared/clock.js';
import { migrate } from '../../../shared/migrate.js';
import { migrationsDir } from '../../../shared/paths.js';
import { NotifierClient } from '../../../identity/notify/notifier-client.js';
import { NotifyRelay } from '../../../identity/notify/relay.js';
import { backoffMs, parseRetryAfter, verdictOf } from '../../../identity/notify/policy.js';
import { ALERTS, idempotencyKey, notificationFor } from '../../../identity/notify/messages.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useTestDatabase, type TestContext } from '../../harness/db.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';

t.test('the retry and park rule', async (t) => {
  const cases: [number, string | undefined, string][] = [
    [202, undefined, 'done'],
    [200, undefined, 'done'],
    [201, undefined, 'done'],
    [500, 'internal', 'retry'],
    [502, undefined, 'retry'],
    [503, 'dependency_unavailable', 'retry'],
    [429, 'rate_limited', 'retry'],
    [409, 'idempotency_in_flight', 'retry'],
    [401, 'credentials_required', 'retry'],
    [403, 'forbidden', 'retry'],
    [404, 'not_found', 'retry'],
    [408, undefined, 'retry'],
    [422, 'unknown_template', 'retry'],
    [400, 'invalid_field', 'park'],
    [413, 'payload_too_large', 'park'],
    [422, 'idempotency_key_reused', 'park'],
    [422, 'channel_not_allowed', 'park'],
    [422, undefined, 'park'],
  ];
  for (const [status, code, kind] of cases) t.equal(verdictOf({ status, code }).kind, kind, `${status} ${code ?? ''} → ${kind}`);
  t.same(verdictOf({ status: 400, code: 'invalid_field', detail: 'phone: not E.164' }), {
    kind: 'park',
    reason: '400 invalid_field phone: not E.164',
  });
  t.equal((verdictOf({ status: 503, retryAfterMs: 2000 }) as { retryAfterMs?: number }).retryAfterMs, 2000);
});

t.test('backoff: doubling from the minimum, jittered, capped, Retry-After honoured up to the cap', async (t) => {
  const b = { minMs: 100, maxMs: 1000 };
  t.equal(
    backoffMs(1, b, () => 1),
    100,
  );
  t.equal(
    backoffMs(2, b, () => 1),
    200,
  );
  t.equal(
    backoffMs(3, b, () => 1),
    400,
  );
  t.equal(
    backoffMs(3, b, () => 0),
    200,
    'half at the least',
  );
  t.equal(
    backoffMs(10, b, () => 1),
    1000,
    'capped',
  );
  t.equal(
    backoffMs(500, b, () => 1),
    1000,
    'no overflow',
  );
  t.equal(
    backoffMs(1, b, () => 1, 700),
    700,
    'a longer Retry-After wins',
  );
  t.equal(
    backoffMs(1, b, () => 1, 60_000),
    1000,
    'still capped',
  );
  t.equal(parseRetryAfter('2', 0), 2000);
  t.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4000), 6000);
  t.equal(parseRetryAfter('soon', 0), undefined);
  t.equal(parseRetryAfter(undefined, 0), undefined);
});

t.test('messages: a transactional security_alerts notification per alert, keyed by the outbox id', async (t) => {
  for (const [alert, text] of Object.entries(ALERTS)) {
    const req = notificationFor({
      id: '42',
      kind: 'security_alert',
      userId: 'u1',
      payload: { alert, client_id: 'web', at: 1_790_000_000 },
    });
    t.match(req, {
      event_type: text.eventType,
      recipient_id: 'u1',
      notification_type: 'security_alerts',
      template_id: 'security_alert_v1',
      priority: 'transactional',
      idempotency_key: 'identity-outbox-42',
      template_data: { title: text.title, when: '2026-09-21T14:13:20Z' },
    });
    t.ok(/^security\./.test(text.eventType), 'matches the mandatory type security.*');
    t.ok(
      Object.values(req!.template_data as Record<string, unknown>).every((v) => typeof v === 'string'),
      'template data are strings',
    );
  }
  t.match(notificationFor({ id: '7', kind: 'welcome', userId: 'u1', payload: { name: 'Ada' } }), {
    event_type: 'user.welcome',
    template_id: 'account_welcome_v1',
    template_data: { name: 'Ada' },
    idempotency_key: idempotencyKey('7'),
  });
  t.equal(notificationFor({ id: '8', kind: 'carrier_pigeon', userId: 'u1', payload: {} }), undefined, 'an unknown kind');
});

interface Fake {
  url: string;
  posts: { key: string; user: string; at: number }[];
  answer: (body: Record<string, unknown>, req: IncomingMessage) => Promise<[number, Record<string, unknown>?, Record<string, string>?]>;
}

async function fakeNotifier(t: TestContext): Promise<Fake> {
  const fake: Fake = { url: '', posts: [], answer: async () => [202, { status: 'accepted' }] };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      void (async () => {
        const body = raw === '' ? {} : (JSON.parse(raw) as Record<string, unknown>);
        if (req.method === 'POST') fake.posts.push({ key: String(body.idempotency_key), user: String(body.recipient_id), at: Date.now() });
        const [status, out, headers] = await fake.answer(body, req);
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(out === undefined ? '' : JSON.stringify(out));
      })();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

function relayOn(t: TestContext, pool: Pool, url: string, backoff = { minMs: 20, maxMs: 100 }): NotifyRelay {
  const client = new NotifierClient({ baseUrl: url, auth: async () => ({}), timeoutMs: 5000, clock: systemClock });
  const relay = new NotifyRelay({ pool, client, log: testLogger('relay'), clock: systemClock, backoff, pollIntervalMs: 20, batchSize: 8 });
  t.teardown(() => relay.close());
  return relay;
}

async function queue(pool: Pool, rows: [user: string, alert: string][]): Promise<string[]> {
  const { rows: out } = await pool.query<{ id: string }>(
    `INSERT INTO notification_outbox (kind, user_id, event_id, payload)
     SELECT 'security_alert', u, gen_random_uuid(), jsonb_build_object('alert', a, 'at', 1790000000) FROM unnest($1::text[], $2::text[]) AS x(u, a)
     RETURNING id::text`,
    [rows.map((r) => r[0]), rows.map((r) => r[1])],
  );
  return out.map((r) => r.id);
}

const pending = async (pool: Pool): Promise<number> =>
  Number(
    (await pool.query<{ n: string }>('SELECT count(*) AS n FROM notification_outbox WHERE sent_at IS NULL AND parked_at IS NULL')).rows[0]!
      .n,
  );

t.test('against a scripted notifier', async (t) => {
  const db = await useTestDatabase(t, 'notify_relay', { poolMax: 8 });
  await migrate(db.pool, { service: 'identity', dir: migrationsDir('identity') });
  const pool = db.pool;

  await t.test('two relays on one outbox: every row sent once, a user’s rows in order', async (t) => {
    const fake = await fakeNotifier(t);
    fake.answer = async () => {
      await new Promise((r) => setTimeout(r, 15));
      return [202, { status: 'accepted' }];
    };
    const rows: [string, string][] = [];
    for (let i = 0; i < 40; i++) rows.push([`u${i % 10}`, 'PasswordChanged']);
    const ids = await queue(pool, rows);
    const a = relayOn(t, pool, fake.url);
    const b = relayOn(t, pool, fake.url);
    a.start();
    b.start();
    await waitFor(async () => (await pending(pool)) === 0, { timeoutMs: 20_000, what: 'the outbox to drain' });
    const keys = fake.posts.map((p) => p.key);
    t.equal(keys.length, 40, 'forty POSTs for forty rows');
    t.same([...new Set(keys)].sort(), ids.map(idempotencyKey).sort(), 'each row once, keyed by its id');
    for (let u = 0; u < 10; u++) {
      const mine = fake.posts.filter((p) => p.user === `u${u}`).map((p) => Number(p.key.replace('identity-outbox-', '')));
      t.same(
        mine,
        [...mine].sort((x, y) => x - y),
        `u${u}'s rows in id order`,
      );
    }
    await a.close();
    await b.close();
  });

  await t.test('marked sent only after the 202; locked while the call is out', async (t) => {
    const fake = await fakeNotifier(t);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    fake.answer = async () => {
      await held;
      return [202, { status: 'accepted' }];
    };
    const [id] = await queue(pool, [['held-user', 'PasswordChanged']]);
    const relay = relayOn(t, pool, fake.url);
    relay.start();
    await waitFor(() => fake.posts.some((p) => p.key === idempotencyKey(id!)), { what: 'the call to be out' });
    const row = await pool.query('SELECT sent_at FROM notification_outbox WHERE id = $1', [id]);
    t.equal(row.rows[0].sent_at, null, 'not sent while the notifier has not answered');
    const other = await pool.connect();
    try {
      await other.query('BEGIN');
      const claimable = await other.query('SELECT id FROM notification_outbox WHERE id = $1 FOR UPDATE SKIP LOCKED', [id]);
      t.equal(claimable.rowCount, 0, 'another replica skips it');
      await other.query('ROLLBACK');
    } finally {
      other.release();
    }
    release();
    await waitFor(async () => (await pool.query('SELECT sent_at FROM notification_outbox WHERE id = $1', [id])).rows[0].sent_at !== null, {
      what: 'the row to be marked after the 202',
    });
    t.equal(fake.posts.filter((p) => p.key === idempotencyKey(id!)).length, 1);
    await relay.close();
  });

  await t.test(
    '5xx and Retry-After are retried until accepted; a refusal of the row is parked and does not hold up the next',
    async (t) => {
      const fake = await fakeNotifier(t);
      const [flaky, bad, next] = await queue(pool, [
        ['r1', 'PasswordChanged'],
        ['r2', 'PasswordChanged'],
        ['r2', 'RefreshTokenReuseDetected'],
      ]);
      let flakyCalls = 0;
      fake.answer = async (body) => {
        if (body.idempotency_key === idempotencyKey(flaky!)) {
          flakyCalls++;
          if (flakyCalls === 1) return [503, { code: 'dependency_unavailable' }, { 'retry-after': '0' }];
          if (flakyCalls === 2) return [500, { code: 'internal' }];
        }
        if (body.idempotency_key === idempotencyKey(bad!)) return [400, { code: 'invalid_field', detail: 'recipient_id: too long' }];
        return [202, { status: 'accepted' }];
      };
      const relay = relayOn(t, pool, fake.url);
      relay.start();
      await waitFor(async () => (await pending(pool)) === 0, { timeoutMs: 10_000, what: 'the three rows to settle' });
      const { rows } = await pool.query<{ id: string; attempts: number; sent: boolean; parked: boolean; last_error: string | null }>(
        `SELECT id::text AS id, attempts, sent_at IS NOT NULL AS sent, parked_at IS NOT NULL AS parked, last_error
         FROM notification_outbox WHERE id = ANY($1::bigint[]) ORDER BY id`,
        [[flaky, bad, next]],
      );
      t.same(rows, [
        { id: flaky, attempts: 3, sent: true, parked: false, last_error: null },
        { id: bad, attempts: 1, sent: false, parked: true, last_error: '400 invalid_field recipient_id: too long' },
        { id: next, attempts: 1, sent: true, parked: false, last_error: null },
      ]);
      t.equal(fake.posts.filter((p) => p.key === idempotencyKey(bad!)).length, 1, 'a parked row is never tried again');
      await relay.close();
    },
  );
  await t.test('migration 170 records the address of users registered before the relay, and leaves recorded ones alone', async (t) => {
    await pool.query(
      `INSERT INTO email_reservations (email, user_id) VALUES ('old@example.com', 'old-user'), ('kept@example.com', 'kept-user')`,
    );
    await pool.query(
      `INSERT INTO notifier_profile_sync (user_id, email, version, synced_version) VALUES ('kept-user', 'kept@example.com', 3, 3)`,
    );
    await pool.query(readFileSync(join(migrationsDir('identity'), '170_notifier_profile_backfill.sql'), 'utf8'));
    const { rows } = await pool.query(
      `SELECT user_id, email, version, synced_version FROM notifier_profile_sync WHERE user_id IN ('old-user', 'kept-user') ORDER BY user_id`,
    );
    t.same(rows, [
      { user_id: 'kept-user', email: 'kept@example.com', version: 3, synced_version: 3 },
      { user_id: 'old-user', email: 'old@example.com', version: 1, synced_version: 0 },
    ]);
  });
});
