/**
 * The operator endpoints the console lists and searches with: segments (in id byte order, by
 * cursor; a rule segment's size left uncounted in the list) and a list segment's versions;
 * campaigns (newest first, fan-outs counted by state, `pending=true`); the suppression list's
 * search and an operator's own addition (reason `manual`, which a send then honours). Operators
 * only, every one.
 */
import t from 'tap';
import { upload, ndjson } from '../segments/helpers.js';
import { createTemplate, startCore, type Core } from '../core/helpers.js';

const get = (core: Core, path: string) => core.api('GET', path, undefined, core.admin);

t.test('segments: paged in id byte order, versions newest first, operators only', async (t) => {
  const core = await startCore(t, 'admin_segment_lists', { env: { NOTIFIER_WORKERS: 'false' } });
  for (const id of ['b-list', 'a-list', 'Z-list']) t.equal((await upload(core, id, ndjson(['u1', 'u2']))).status, 201);
  t.equal((await upload(core, 'a-list', ndjson(['u1', 'u2', 'u3']))).status, 200, 'a second version');
  const rule = await core.api('PUT', '/api/v1/admin/segments/m-rule', { kind: 'rule', rule: { locale: 'fr' } }, core.admin);
  t.equal(rule.status, 201);

  const seen: { id: string; kind: string; size: number | null; version: number }[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const r = await get(core, `/api/v1/admin/segments?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200);
    seen.push(...r.body.segments);
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor && pages < 10);
  t.same(
    seen.map((s) => s.id),
    ['Z-list', 'a-list', 'b-list', 'm-rule'],
    'byte order (upper case first), each once',
  );
  t.equal(pages, 2);
  t.match(seen[1], { id: 'a-list', kind: 'list', version: 2, size: 3, updated_by: 'user:operator' });
  t.match(seen[3], { id: 'm-rule', kind: 'rule', size: null, rule: { locale: 'fr' } }, 'a rule segment is not counted in the list');
  t.match((await get(core, '/api/v1/admin/segments?cursor=%2F%2F')).body, { code: 'invalid_field', field: 'cursor' });
  t.match((await get(core, '/api/v1/admin/segments?limit=501')).body, { code: 'invalid_field', field: 'limit' });

  const v = await get(core, '/api/v1/admin/segments/a-list/versions');
  t.equal(v.status, 200);
  t.match(v.body, {
    segment_id: 'a-list',
    versions: [
      { version: 2, state: 'live', size: 3, created_by: 'user:operator', created_at: String, completed_at: String, purged: false },
      { version: 1, state: 'retired', size: 2 },
    ],
  });
  t.same((await get(core, '/api/v1/admin/segments/m-rule/versions')).body.versions, [], 'a rule segment keeps no versions');
  t.equal((await get(core, '/api/v1/admin/segments/nothing/versions')).status, 404);
  t.equal((await core.api('GET', '/api/v1/admin/segments', undefined, core.service)).status, 403, 'not a service key');
  t.equal((await core.api('GET', '/api/v1/admin/segments/a-list/versions', undefined, core.user('u1'))).status, 403);
});

t.test('campaigns: newest first by cursor, fan-outs counted, pending=true, operators only', async (t) => {
  const core = await startCore(t, 'admin_campaign_lists', { env: { NOTIFIER_WORKERS: 'false' } });
  const pool = core.db.pool;
  await pool.query(
    `INSERT INTO campaigns (id, created_at, stopped_at, stopped_by) VALUES
       ('old', '2026-11-01T00:00:01Z', NULL, NULL), ('mid-a', '2026-11-01T00:00:02Z', NULL, NULL),
       ('mid-b', '2026-11-01T00:00:02Z', '2026-11-02T00:00:00Z', 'user:ops'), ('new', '2026-11-01T00:00:03Z', NULL, NULL)`,
  );
  // Two fan-outs of `mid-a`, one waiting for approval (the rows as ingestion and planning write them).
  for (const [state, recipients] of [
    ['pending_approval', 200000],
    ['expanded', 50],
  ] as const) {
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO notifications (id, segment_id, event_type, template_id, priority, campaign_id, caller)
       VALUES (gen_random_uuid(), 'seg', 'marketing.x', 'code_v1', 'low', 'mid-a', 'key:x') RETURNING id`,
    );
    await pool.query(
      `INSERT INTO campaign_fanouts (notification_id, campaign_id, segment_id, state, recipients) VALUES ($1, 'mid-a', 'seg', $2, $3)`,
      [rows[0]!.id, state, recipients],
    );
  }
  const seen: { campaign_id: string }[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const r = await get(core, `/api/v1/admin/campaigns?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200);
    seen.push(...r.body.campaigns);
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor && pages < 10);
  t.same(
    seen.map((c) => c.campaign_id),
    ['new', 'mid-b', 'mid-a', 'old'],
    'newest first, a tie broken by id, each once',
  );
  t.match(seen[1], { campaign_id: 'mid-b', stopped_at: '2026-11-02T00:00:00.000Z', stopped_by: 'user:ops', fanouts: 0 });
  t.match(seen[2], { campaign_id: 'mid-a', fanouts: 2, pending_approval: 1, recipients: 200050, stopped_at: null });
  const pending = await get(core, '/api/v1/admin/campaigns?pending=true');
  t.same(
    pending.body.campaigns.map((c: { campaign_id: string }) => c.campaign_id),
    ['mid-a'],
  );
  t.match((await get(core, '/api/v1/admin/campaigns?pending=yes')).body, { code: 'invalid_field', field: 'pending' });
  t.match((await get(core, '/api/v1/admin/campaigns?cursor=zz')).body, { code: 'invalid_field', field: 'cursor' });
  t.equal((await core.api('GET', '/api/v1/admin/campaigns', undefined, core.service)).status, 403);
});

t.test('suppressions: search by part of the address; an operator adds one by hand, and a send to it is suppressed', async (t) => {
  const core = await startCore(t, 'admin_suppression_add', {});
  await core.db.pool.query(
    `INSERT INTO email_suppressions (address, reason, detail, provider, created_at) VALUES
       ('ann@shop.test', 'bounce', 'a permanent bounce', 'ses', '2026-11-01T00:00:01Z'),
       ('bob@mail.test', 'complaint', 'a complaint', 'ses', '2026-11-01T00:00:02Z'),
       ('cat@shop.test', 'bounce', 'a permanent bounce', 'ses', '2026-11-01T00:00:03Z')`,
  );
  const found = await get(core, '/api/v1/admin/suppressions?q=%40SHOP.test');
  t.same(
    found.body.suppressions.map((s: { address: string }) => s.address),
    ['ann@shop.test', 'cat@shop.test'],
    'any case, oldest first',
  );
  t.same((await get(core, '/api/v1/admin/suppressions?q=nobody')).body.suppressions, []);

  const add = (body: unknown, headers = core.admin) => core.api('POST', '/api/v1/admin/suppressions', body, headers);
  const made = await add({ address: ' Dan@Shop.test ', detail: 'asked by phone' });
  t.equal(made.status, 201);
  t.match(made.body, { address: 'dan@shop.test', reason: 'manual', detail: 'asked by phone', provider: 'operator', delivery_id: null });
  const again = await add({ address: 'ann@shop.test' });
  t.equal(again.status, 200, 'already listed');
  t.match(again.body, { address: 'ann@shop.test', reason: 'bounce' }, 'the first reason stands');
  t.match((await add({ address: 'not an address' })).body, { code: 'invalid_field', field: 'address' });
  t.match((await add({ address: 'a@b@c' })).body, { code: 'invalid_field', field: 'address' });
  t.match((await add({})).body, { code: 'invalid_field', field: 'address' });
  t.match((await add({ address: 'x@y.test', detail: 5 })).body, { code: 'invalid_field', field: 'detail' });
  t.match((await add({ address: 'x@y.test', reason: 'bounce' })).body, { code: 'invalid_field', field: 'reason' });
  t.equal((await add({ address: 'x@y.test' }, core.service)).status, 403, 'not a service key');
  t.same(
    (await get(core, '/api/v1/admin/suppressions?reason=manual')).body.suppressions.map((s: { address: string }) => s.address),
    ['dan@shop.test'],
  );

  // A send to the address the operator listed ends `suppressed`, with the reason.
  await core.api('PUT', '/api/v1/users/dan/profile', { email: 'dan@shop.test' }, core.service);
  await createTemplate(core, 'code_v1');
  const sent = await core.notify({
    recipient_id: 'dan',
    event_type: 'order.shipped',
    template_id: 'code_v1',
    template_data: { name: 'Dan', code: '1' },
    priority: 'high',
    channels: ['email'],
  });
  t.equal(sent.status, 202);
  const s = await core.waitStatus(sent.body.notification_id, (v) => v.channels?.email === 'suppressed');
  t.match(s.details.email.reason, /^suppressed: the address is on the suppression list by an operator \(/);
});
