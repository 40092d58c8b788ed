/**
 * The suppression list's operator API: pages by cursor (oldest first, ties broken by address, no
 * entry twice or missed), the reason filter, reads and removals by address in any case, and
 * operators only.
 */
import t from 'tap';
import { startCore } from '../core/helpers.js';

t.test('the suppression list: cursor pages, filter, get and delete by address, operators only', async (t) => {
  const core = await startCore(t, 'feedback_suppressions', {});
  // Five entries; two share a timestamp (the cursor breaks the tie by address).
  await core.db.pool.query(
    `INSERT INTO email_suppressions (address, reason, detail, provider, created_at) VALUES
       ('e@x.test', 'bounce', 'a permanent bounce', 'ses', '2026-11-01T00:00:05Z'),
       ('b@x.test', 'complaint', 'a complaint', 'ses', '2026-11-01T00:00:02Z'),
       ('a@x.test', 'bounce', 'a permanent bounce', 'ses', '2026-11-01T00:00:01Z'),
       ('d@x.test', 'bounce', 'a permanent bounce', 'ses', '2026-11-01T00:00:02Z'),
       ('c@x.test', 'complaint', 'a complaint', 'ses', '2026-11-01T00:00:04Z')`,
  );
  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const r = await core.api('GET', `/api/v1/admin/suppressions?limit=2${cursor ? `&cursor=${cursor}` : ''}`, undefined, core.admin);
    t.equal(r.status, 200);
    seen.push(...r.body.suppressions.map((s: { address: string }) => s.address));
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor && pages < 10);
  t.same(seen, ['a@x.test', 'b@x.test', 'd@x.test', 'c@x.test', 'e@x.test'], 'every entry once, oldest first');
  t.equal(pages, 3);
  const complaints = await core.api('GET', '/api/v1/admin/suppressions?reason=complaint', undefined, core.admin);
  t.same(
    complaints.body.suppressions.map((s: { address: string }) => s.address),
    ['b@x.test', 'c@x.test'],
  );
  t.match(complaints.body.suppressions[0], {
    reason: 'complaint',
    detail: 'a complaint',
    provider: 'ses',
    delivery_id: null,
    created_at: Date.parse('2026-11-01T00:00:02Z') / 1000,
  });
  t.match((await core.api('GET', '/api/v1/admin/suppressions?cursor=garbage', undefined, core.admin)).body, {
    code: 'invalid_field',
    field: 'cursor',
  });
  t.match((await core.api('GET', '/api/v1/admin/suppressions?limit=0', undefined, core.admin)).body, {
    code: 'invalid_field',
    field: 'limit',
  });
  t.match((await core.api('GET', '/api/v1/admin/suppressions?reason=spam', undefined, core.admin)).body, {
    code: 'invalid_field',
    field: 'reason',
  });

  t.match(
    (await core.api('GET', '/api/v1/admin/suppressions/C%40X.test', undefined, core.admin)).body,
    { address: 'c@x.test' },
    'any case',
  );
  t.equal((await core.api('GET', '/api/v1/admin/suppressions/nobody%40x.test', undefined, core.admin)).status, 404);
  t.match((await core.api('GET', '/api/v1/admin/suppressions/not-an-address', undefined, core.admin)).body, { code: 'invalid_field' });
  t.equal((await core.api('DELETE', '/api/v1/admin/suppressions/c@x.test', undefined, core.user('c'))).status, 403, 'not a user');
  t.equal((await core.api('DELETE', '/api/v1/admin/suppressions/c@x.test', undefined, core.service)).status, 403, 'not a service key');
  t.equal((await core.api('DELETE', '/api/v1/admin/suppressions/C@X.TEST', undefined, core.admin)).status, 204);
  t.equal((await core.api('GET', '/api/v1/admin/suppressions/c@x.test', undefined, core.admin)).status, 404, 'gone');
});
