/**
 * POST /api/v1/notifications through a real notifier (workers off, so the queued work stays put to
 * be inspected): validation naming the field, the 422s, who may call it, the notification row, its
 * idempotency record and its routing job written together, idempotent repeats (same body, other
 * body, in flight, expired, other caller; the key in the Idempotency-Key header or the body), and 503 with nothing acknowledged when PostgreSQL
 * cannot be reached.
 */
import t from 'tap';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { withTransaction } from '../../../shared/db.js';
import { idempotencyLockKey } from '../../../notifier/ingest/accept.js';
import { createTemplate, request, startCore, summary } from './helpers.js';
import { useTestDatabase } from '../../harness/db.js';

t.test('ingestion', async (t) => {
  const core = await startCore(t, 'core_ingest', { env: { NOTIFIER_WORKERS: 'false' } });
  await createTemplate(core, 'code_v1');
  const count = async (table: string): Promise<number> => (await core.db.pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;
  const jobs = async (): Promise<number> =>
    (await core.db.pool.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE name LIKE 'notify-route-%'`)).rows[0].n;

  await t.test('bad bodies are 400 problems naming the field', async (t) => {
    const cases: [unknown, string, RegExp?][] = [
      [request({ event_type: undefined }), 'event_type'],
      [request({ event_type: 'shipped' }), 'event_type', /<domain>\.<action>/],
      [request({ event_type: 'order.shipped.now' }), 'event_type'],
      [request({ recipient_id: undefined }), 'recipient_id'],
      [request({ recipient_id: 'has space' }), 'recipient_id'],
      [request({ template_id: 'welcome' }), 'template_id', /<name>_v<N>/],
      [request({ template_id: 42 }), 'template_id'],
      [request({ template_data: { code: 7 } }), 'template_data.code'],
      [request({ priority: undefined }), 'priority', /required/],
      [request({ priority: 'urgent' }), 'priority'],
      [request({ channels: ['push', 'fax'] }), 'channels[1]'],
      [request({ channels: ['push', 'push'] }), 'channels[1]', /twice/],
      [request({ locale: 'not a locale' }), 'locale'],
      [request({ idempotency_key: 'two words' }), 'idempotency_key'],
      [request({ colour: 'red' }), 'colour'],
      [request({ audience: { segment: 's' } }), 'audience'],
    ];
    for (const [body, field, detail] of cases) {
      const r = await core.notify(body as Record<string, unknown>);
      t.equal(r.status, 400, `${field}: 400`);
      t.equal(r.headers.get('content-type'), 'application/problem+json');
      t.equal(r.body.field, field, `names ${field} (${r.body.detail})`);
      if (detail) t.match(r.body.detail, detail);
    }
    const notJson = await core.api('POST', '/api/v1/notifications', '{"event_type":', core.service);
    t.match(notJson, { status: 400, body: { code: 'invalid_json' } });
    const array = await core.api('POST', '/api/v1/notifications', '[]', core.service);
    t.equal(array.status, 400);
    t.equal(await count('notifications'), 0, 'nothing was stored');
  });

  await t.test('well-formed requests the service will not take are 422', async (t) => {
    // The type × tier table (notifier/policy/table.ts) decides which channels a request may name.
    const sms = await core.notify(request({ event_type: 'social.like', priority: 'low', channels: ['push', 'sms'] }));
    t.match(sms, { status: 422, body: { code: 'channel_not_allowed', field: 'channels[1]' } });
    t.equal(
      (await core.notify(request({ event_type: 'order.shipped', priority: 'normal', channels: ['sms'] }))).body.code,
      'channel_not_allowed',
    );
    const marketing = await core.notify(request({ event_type: 'marketing.spring', priority: 'high', channels: ['sms'] }));
    t.match(marketing, { status: 422, body: { code: 'channel_not_allowed', detail: /marketing/ } }, 'marketing never goes by SMS');
    t.equal(
      (await core.notify(request({ event_type: 'order.shipped', priority: 'high', channels: ['sms'], idempotency_key: 'h' }))).status,
      202,
      'sms is fine for high',
    );
    t.equal(
      (await core.notify(request({ event_type: 'auth.code', priority: 'normal', channels: ['sms'], idempotency_key: 'm' }))).status,
      202,
      'and for a mandatory type (security alerts) at any tier',
    );
    const unknownType = await core.notify(request({ notification_type: 'gossip' }));
    t.match(unknownType, { status: 400, body: { code: 'invalid_field', field: 'notification_type' } });
    // request() is transactional: a campaign never is (test/notifier/campaigns/ covers the rest).
    const audience = await core.notify(request({ recipient_id: undefined, audience: { segment: 'all-users' }, campaign_id: 'c1' }));
    t.match(audience, { status: 422, body: { code: 'audience_not_allowed' } });
    const unknown = await core.notify(request({ template_id: 'nope_v1' }));
    t.match(unknown, { status: 422, body: { code: 'unknown_template', field: 'template_id' } });
  });

  await t.test('who may send', async (t) => {
    const none = await core.api('POST', '/api/v1/notifications', request(), {});
    t.match(none, { status: 401, body: { code: 'credentials_required' } });
    const forged = await core.api('POST', '/api/v1/notifications', request(), { ...core.service, 'x-subject-secret': 'wrong' });
    t.equal(forged.status, 401, 'X-Subject without the right secret is not trusted');
    const user = await core.notify(request(), core.user('u1'));
    t.match(user, { status: 403, body: { code: 'forbidden' } });
  });

  await t.test('accepted: the row, the idempotency record and the routing job, together', async (t) => {
    const before = await jobs();
    const r = await core.notify(request({ idempotency_key: 'order-1', channels: ['email', 'push'], locale: 'fr-CA', campaign_id: 'c1' }));
    t.equal(r.status, 202);
    const id = r.body.notification_id;
    t.same(r.body, { notification_id: id, status: 'accepted' });
    const { rows } = await core.db.pool.query('SELECT * FROM notifications WHERE id = $1', [id]);
    t.match(rows[0], {
      caller: 'key:' + 'a'.repeat(64),
      event_type: 'auth.code',
      recipient_id: 'u1',
      template_id: 'code_v1',
      template_data: { name: 'Ada', code: '123456' },
      priority: 'transactional',
      channels: ['email', 'push'],
      locale: 'fr_CA',
      campaign_id: 'c1',
      idempotency_key: 'order-1',
    });
    const job = await core.db.pool.query(
      `SELECT data FROM pgboss.job WHERE name = 'notify-route-transactional' AND data->>'notification_id' = $1`,
      [id],
    );
    t.equal(job.rowCount, 1, 'one routing job on the transactional queue');
    t.equal(await jobs(), before + 1);
    const s = await core.status(id);
    t.same(summary(s), { status: 'queued', channels: { email: 'queued', push: 'queued' } }, 'queued before routing');
  });

  await t.test('idempotency keys', async (t) => {
    const body = request({ idempotency_key: 'k-1' });
    const first = await core.notify(body);
    t.equal(first.status, 202);
    const n = await count('notifications');
    const repeat = await core.notify({ ...body, template_data: { code: '123456', name: 'Ada' } });
    t.equal(repeat.status, 202);
    t.same(repeat.body, first.body, 'the same request (other key order) gets the original answer');
    t.equal(repeat.headers.get('idempotent-replayed'), 'true');
    t.equal(await count('notifications'), n, 'and nothing new');

    const other = await core.notify({ ...body, template_data: { name: 'Ada', code: '999999' } });
    t.match(other, {
      status: 422,
      body: { code: 'idempotency_key_reused', field: 'idempotency_key', notification_id: first.body.notification_id },
    });

    const otherCaller = await core.notify(body, core.as('tenant:acme', 'service'));
    t.equal(otherCaller.status, 202);
    t.not(otherCaller.body.notification_id, first.body.notification_id, 'keys are per caller');

    // While the first request's transaction holds the key: 409 with Retry-After.
    await withTransaction(core.db.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, $2)', [0x6e746679, idempotencyLockKey('key:' + 'a'.repeat(64), 'k-busy')]);
      const busy = await core.notify(request({ idempotency_key: 'k-busy' }));
      t.match(busy, { status: 409, body: { code: 'idempotency_in_flight' } });
      t.equal(busy.headers.get('retry-after'), '1');
    });
    t.equal((await core.notify(request({ idempotency_key: 'k-busy' }))).status, 202, 'accepted once the first is done');

    // Past its time the key is forgotten.
    await core.db.pool.query(
      `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'k-1' AND caller LIKE 'key:%'`,
    );
    const later = await core.notify(body);
    t.equal(later.status, 202);
    t.not(later.body.notification_id, first.body.notification_id, 'an expired key starts a new notification');
    const ttl = await core.db.pool.query(
      `SELECT extract(epoch FROM expires_at - created_at)::int AS s FROM idempotency_keys WHERE key = 'k-1' AND caller LIKE 'key:%'`,
    );
    t.equal(ttl.rows[0].s, 86400, 'kept 24 h by default');
  });

  await t.test('the Idempotency-Key header is the same key as the body field (as the OpenAPI document says)', async (t) => {
    const withHeader = (key: string) => ({ ...core.service, 'idempotency-key': key });
    const body = request({});
    const before = await count('notifications');
    const first = await core.notify(body, withHeader('hdr-1'));
    t.equal(first.status, 202);
    const repeat = await core.notify(body, withHeader('hdr-1'));
    t.equal(repeat.status, 202);
    t.same(repeat.body, first.body, 'the same header twice: the original answer');
    t.equal(repeat.headers.get('idempotent-replayed'), 'true');
    t.equal(await count('notifications'), before + 1, 'one notification');

    // Header and body field are one key: either way round, and the IETF draft's quoted form.
    const viaBody = await core.notify({ ...body, idempotency_key: 'hdr-1' });
    t.same(viaBody.body, first.body, 'the body field replays what the header created');
    const both = await core.notify({ ...body, idempotency_key: 'hdr-1' }, withHeader('hdr-1'));
    t.same(both.body, first.body, 'both, equal: the same key');
    const quoted = await core.notify(body, withHeader('"hdr-1"'));
    t.same(quoted.body, first.body, 'a structured-field string ("hdr-1") is the same key');
    const bodyFirst = await core.notify({ ...body, idempotency_key: 'body-1' });
    const headerAfter = await core.notify(body, withHeader('body-1'));
    t.same(headerAfter.body, bodyFirst.body, 'the header replays what the body field created');
    t.equal(await count('notifications'), before + 2, 'two keys, two notifications');
    const reused = await core.notify({ ...body, template_data: { code: '000000' } }, withHeader('hdr-1'));
    t.match(reused, { status: 422, body: { code: 'idempotency_key_reused' } }, 'a different request under the header key');

    const conflict = await core.notify({ ...body, idempotency_key: 'body-2' }, withHeader('hdr-2'));
    t.match(conflict, { status: 422, body: { code: 'idempotency_key_mismatch', field: 'idempotency_key' } });
    t.equal(conflict.headers.get('content-type'), 'application/problem+json');
    t.match(conflict.body.detail, /Idempotency-Key header/);
    const bad = await core.notify(body, withHeader('two words'));
    t.match(bad, { status: 400, body: { code: 'invalid_field', field: 'Idempotency-Key' } });
    t.equal(await count('notifications'), before + 2, 'neither refused request created anything');
  });
});

/** A TCP proxy in front of PostgreSQL that a test can cut. */
async function pgProxy(target: URL): Promise<{ url: (db: string) => string; cut(): Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const cut = async (): Promise<void> => {
    server.close();
    for (const s of sockets) s.destroy();
  };
  return {
    url: (db) => {
      const u = new URL(target);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      u.pathname = `/${db}`;
      return u.toString();
    },
    cut,
    close: cut,
  };
}

t.test('PostgreSQL unreachable at ingestion: 503, nothing acknowledged', async (t) => {
  const db = await useTestDatabase(t, 'core_ingest_down');
  const proxy = await pgProxy(new URL(db.url));
  t.teardown(() => proxy.close());
  const core = await startCore(t, 'unused', {
    db: { ...db, url: proxy.url(db.name) },
    env: { NOTIFIER_WORKERS: 'false' },
  });
  await createTemplate(core, 'code_v1');
  t.equal((await core.notify(request({ idempotency_key: 'up' }))).status, 202);

  await proxy.cut();
  const down = await core.notify(request({ idempotency_key: 'down' }));
  t.equal(down.status, 503);
  t.equal(down.body.code, 'dependency_unavailable');
  t.equal(down.headers.get('retry-after'), '1');
  t.notMatch(JSON.stringify(down.body), /ECONN|127\.0\.0\.1/, 'the cause stays in the log');
  const { rows } = await db.pool.query(`SELECT idempotency_key FROM notifications`);
  t.same(
    rows.map((r) => r.idempotency_key),
    ['up'],
    'only the request acknowledged before the outage is stored',
  );
});
