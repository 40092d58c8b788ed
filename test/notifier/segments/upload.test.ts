/**
 * List segments over real HTTP and PostgreSQL: NDJSON and CSV uploads, each a new version switched
 * in when complete; a malformed line, a body over the cap or a client that goes away leave the
 * live version as it was; a reader sees the old version until the switch; a 200,000-id upload is
 * streamed through a bounded reader; GET shows the segment; only admins may call.
 */
import t from 'tap';
import { waitFor } from '../../harness/wait.js';
import { loadSegment, readMembers } from '../../../notifier/segments/index.js';
import { byteOrder, ids, ndjson, openUpload, startSegmentCore, storedMembers, upload, versionRow } from './helpers.js';

const core = await startSegmentCore(t, 'notifier_segments_upload', { NOTIFIER_SEGMENT_MAX_BYTES: '4mb' });
const get = (id: string) => core.api('GET', `/api/v1/admin/segments/${encodeURIComponent(id)}`, undefined, core.admin);

t.test('NDJSON: strings and {"user_id"} objects, blank lines ignored, duplicates collapse; 201, then GET', async (t) => {
  const body = '"bob"\n{"user_id": "alice", "email": "ignored@example.com"}\n\n   \n"carol"\r\n"bob"\n"dave"';
  const res = await upload(core, 'nd-1', body);
  t.equal(res.status, 201, JSON.stringify(res.body));
  t.match(res.body, { id: 'nd-1', kind: 'list', version: 1, size: 4, updated_by: 'user:operator' });
  t.notOk('rule' in res.body, 'a list segment has no rule');
  t.same(await storedMembers(core, 'nd-1', 1), ['alice', 'bob', 'carol', 'dave']);
  const got = await get('nd-1');
  t.equal(got.status, 200);
  t.same(got.body, res.body, 'GET shows what the upload answered');
  t.ok(!Number.isNaN(Date.parse(got.body.updated_at)), 'updated_at is a timestamp');
});

t.test('CSV: optional user_id header, quoted values, CRLF, a BOM; a second upload is version 2 (200) and retires version 1', async (t) => {
  const first = await upload(core, 'csv-1', '\ufeffuser_id\r\nalice\r\n"b""ob"\r\n\r\ncarol\r\n', 'text/csv');
  t.equal(first.status, 201, JSON.stringify(first.body));
  t.same(await storedMembers(core, 'csv-1', 1), ['alice', 'b"ob', 'carol']);
  const second = await upload(core, 'csv-1', 'zed\nalice\n', 'text/csv; charset=utf-8');
  t.equal(second.status, 200);
  t.match(second.body, { version: 2, size: 2 });
  t.equal((await versionRow(core, 'csv-1', 1))?.state, 'retired');
  t.equal((await versionRow(core, 'csv-1', 2))?.state, 'live');
  // The retired version is no one's: the clean-up kicked by the switch deletes its members.
  await waitFor(async () => (await versionRow(core, 'csv-1', 1))?.purged_at, { timeoutMs: 20_000, what: 'version 1 to be purged' });
  t.same(await storedMembers(core, 'csv-1', 1), [], 'version 1 members deleted');
  t.same(await storedMembers(core, 'csv-1', 2), ['alice', 'zed']);
});

t.test('an upload of blank lines (or the CSV header alone) is a segment of 0 members', async (t) => {
  const res = await upload(core, 'empty', '\n\n');
  t.equal(res.status, 201);
  t.match(res.body, { version: 1, size: 0 });
  const csv = await upload(core, 'empty-csv', 'user_id\n', 'text/csv');
  t.equal(csv.status, 201);
  t.match(csv.body, { version: 1, size: 0 });
});

t.test('a body of 0 bytes (curl --data-binary @a-missing-file) is 400 naming the body, never an empty segment', async (t) => {
  const first = await upload(core, 'no-file', '');
  t.equal(first.status, 400);
  t.match(first.body, { code: 'invalid_field', field: 'body', detail: /is empty: send the members as the body/ });
  t.equal((await get('no-file')).status, 404, 'no segment was created');
  const live = await upload(core, 'no-file', ndjson(['a', 'b']));
  t.equal(live.status, 201);
  const again = await upload(core, 'no-file', '', 'text/csv');
  t.equal(again.status, 400);
  t.match((await get('no-file')).body, { version: live.body.version, size: 2 }, 'the live list is unchanged');
});

t.test('a malformed line: 400 invalid_field naming the line; the live version unchanged, the upload abandoned', async (t) => {
  await upload(core, 'bad-1', ndjson(['keep-a', 'keep-b']));
  const cases: [string, string, string, RegExp][] = [
    ['application/x-ndjson', ndjson(ids(25_000)) + 'not json\n' + ndjson(['late']), 'line 25001', /not JSON/],
    ['application/x-ndjson', '"a"\n"b c"\n', 'line 2', /visible ASCII/],
    ['application/x-ndjson', '"a"\n\n42\n', 'line 3', /JSON string or an object/],
    ['application/x-ndjson', '{"id": "x"}\n', 'line 1', /JSON string or an object/],
    ['text/csv', 'user_id\nalice\nbob,extra\n', 'line 3', /more than one column/],
    ['text/csv', 'alice\n"bob","x"\n', 'line 2', /more than one column/],
    ['text/csv', 'alice\n"bob\n', 'line 2', /does not end/],
    ['text/csv', `alice\n${'x'.repeat(5000)}\n`, 'line 2', /longer than 4096/],
  ];
  for (const [ct, body, field, detail] of cases) {
    const res = await upload(core, 'bad-1', body, ct);
    t.equal(res.status, 400, `${field}: 400`);
    t.match(res.body, { code: 'invalid_field', field, detail }, `${field}: ${res.body.detail}`);
  }
  const seg = await get('bad-1');
  t.match(seg.body, { version: 1, size: 2 }, 'still version 1');
  t.same(await storedMembers(core, 'bad-1', 1), ['keep-a', 'keep-b']);
  const { rows } = await core.db.pool.query<{ state: string; n: string }>(
    "SELECT state, count(*) AS n FROM segment_versions WHERE segment_id = 'bad-1' GROUP BY state ORDER BY state",
  );
  t.same(rows, [
    { state: 'abandoned', n: String(cases.length) },
    { state: 'live', n: '1' },
  ]);
  await waitFor(
    async () => {
      const r = await core.db.pool.query("SELECT 1 FROM segment_members WHERE segment_id = 'bad-1' AND version > 1 LIMIT 1");
      return r.rowCount === 0;
    },
    { timeoutMs: 20_000, what: 'the abandoned uploads to be purged' },
  );
  t.pass('the 25,000 ids stored before line 25001 were deleted');
});

t.test('a failed first upload leaves no segment behind', async (t) => {
  const res = await upload(core, 'never', '"ok"\n"not ok"\n');
  t.equal(res.status, 400);
  const got = await get('never');
  t.equal(got.status, 404);
  t.equal(got.body.code, 'not_found');
});

t.test('a body over NOTIFIER_SEGMENT_MAX_BYTES: 413, declared or streamed; the live version unchanged', async (t) => {
  await upload(core, 'big', ndjson(['small']));
  // ~5.4 MB > 4 MiB of one repeated id: what is stored before the cap collapses to one row.
  const over = '"dup"\n'.repeat(900_000);
  const declared = await core.api('PUT', '/api/v1/admin/segments/big/members', over, {
    ...core.admin,
    'content-type': 'application/x-ndjson',
  });
  t.equal(declared.status, 413);
  t.equal(declared.body.code, 'body_too_large');
  // Chunked: no length up front, so the cap is found while streaming.
  const u = openUpload(core, 'big');
  for (let i = 0; i < over.length; i += 256 * 1024) {
    await u.write(over.slice(i, i + 256 * 1024));
    if (i > 4.5 * 1024 * 1024) break;
  }
  const res = await u.end();
  t.equal(res.status, 413);
  t.equal(res.body.code, 'body_too_large');
  t.match((await get('big')).body, { version: 1, size: 1 });
});

t.test('a client that goes away mid-upload: the live version unchanged, the upload abandoned and purged', async (t) => {
  await upload(core, 'abort', ndjson(['old-1', 'old-2']));
  const u = openUpload(core, 'abort');
  u.req.on('error', () => {});
  await u.write(ndjson(ids(30_000)));
  await waitFor(async () => Number((await versionRow(core, 'abort', 2))?.size ?? 0) > 0, { what: 'a batch of version 2 to be stored' });
  u.req.destroy();
  await waitFor(async () => (await versionRow(core, 'abort', 2))?.state === 'abandoned', { what: 'version 2 to be abandoned' });
  t.match((await get('abort')).body, { version: 1, size: 2 });
  await waitFor(async () => (await versionRow(core, 'abort', 2))?.purged_at, { timeoutMs: 20_000, what: 'version 2 to be purged' });
  t.same(await storedMembers(core, 'abort', 2), []);
  const again = await upload(core, 'abort', ndjson(['new']));
  t.equal(again.status, 200, 'the next upload is accepted');
  t.match(again.body, { version: 3, size: 1 });
});

t.test('one upload at a time: a second one meanwhile is 409 segment_upload_in_progress', async (t) => {
  const u = openUpload(core, 'one');
  await u.write(ndjson(ids(15_000)));
  await waitFor(async () => Number((await versionRow(core, 'one', 1))?.size ?? 0) > 0, { what: 'the first upload to be under way' });
  const second = await upload(core, 'one', ndjson(['x']));
  t.equal(second.status, 409);
  t.match(second.body, { code: 'segment_upload_in_progress', retryable: true });
  const first = await u.end();
  t.equal(first.status, 201);
  t.match(first.body, { version: 1, size: 15_000 });
});

t.test('a reader sees the live version until the switch, then the new one', async (t) => {
  await upload(core, 'swap', ndjson(['a-old', 'b-old']));
  const u = openUpload(core, 'swap');
  await u.write(ndjson(ids(20_000, 'new-')));
  await waitFor(async () => Number((await versionRow(core, 'swap', 2))?.size ?? 0) >= 10_000, { what: 'version 2 to be half stored' });
  const during = await loadSegment(core.db.pool, 'swap');
  t.match(during, { kind: 'list', version: 1, size: 2 }, 'loadSegment: still version 1');
  t.same(await readMembers(core.db.pool, during!, { first: '', next: null }), ['a-old', 'b-old'], 'its members');
  t.match((await get('swap')).body, { version: 1, size: 2 });
  const res = await u.end();
  t.equal(res.status, 200);
  const after = await loadSegment(core.db.pool, 'swap');
  t.match(after, { version: 2, size: 20_000 });
  t.same(await readMembers(core.db.pool, after!, { first: '', next: null }, 3), ['new-000000', 'new-000001', 'new-000002']);
});

t.test('200,000 ids in small chunks: stored exactly, through a reader that never holds more than a bounded amount', async (t) => {
  const all = ids(200_000, 'u');
  const body = ndjson(all);
  const before = core.bodies.length;
  const u = openUpload(core, 'huge');
  for (let i = 0; i < body.length; i += 4096) await u.write(body.slice(i, i + 4096));
  const res = await u.end();
  t.equal(res.status, 201, JSON.stringify(res.body));
  t.match(res.body, { version: 1, size: 200_000 });
  const reader = core.bodies[before]!;
  t.equal(reader.received, body.length, `the reader received the whole body (${body.length} bytes)`);
  // 256 KiB high-water mark plus at most one socket read (uWS reads up to 512 KiB).
  t.ok(reader.maxQueuedBytes <= 768 * 1024, `at most 768 KiB queued at once (was ${reader.maxQueuedBytes} of ${body.length})`);
  t.ok(reader.maxQueuedBytes < body.length / 3, 'far less than the body');
  t.ok(reader.pauses > 0, `the client was paused while batches were stored (${reader.pauses} times)`);
  const stored = await storedMembers(core, 'huge', 1);
  t.equal(stored.length, 200_000);
  t.same(stored, [...all].sort(byteOrder), 'every id, once');
});

t.test('wrong kind, wrong type, bad id, unknown segment, auth', async (t) => {
  const rule = await core.api('PUT', '/api/v1/admin/segments/rule-x', { kind: 'rule', rule: { locale: 'fr' } }, core.admin);
  t.equal(rule.status, 201);
  const toRule = await upload(core, 'rule-x', ndjson(['a']));
  t.equal(toRule.status, 409);
  t.match(toRule.body, { code: 'segment_kind_conflict', kind: 'rule' });
  t.match((await get('rule-x')).body, { kind: 'rule', version: 1 }, 'the rule segment unchanged');

  const asRule = await core.api('PUT', '/api/v1/admin/segments/nd-1', { kind: 'rule', rule: { locale: 'fr' } }, core.admin);
  t.equal(asRule.status, 409);
  t.match(asRule.body, { code: 'segment_kind_conflict', kind: 'list' });

  const json = await upload(core, 'typed', '["a"]', 'application/json');
  t.equal(json.status, 415);
  t.equal(json.body.code, 'unsupported_media_type');

  const longId = await upload(core, 'x'.repeat(129), ndjson(['a']));
  t.match(longId, { status: 400, body: { code: 'invalid_field', field: 'segment_id' } });
  const slash = await upload(core, 'a/b', ndjson(['a']));
  t.match(slash, { status: 400, body: { code: 'invalid_field', field: 'segment_id' } }, 'an encoded / is refused');
  t.match(await get('no-such'), { status: 404, body: { code: 'not_found' } });

  for (const [who, headers] of [
    ['a customer', core.user('alice')],
    ['a service key', core.service],
  ] as const) {
    const up = await upload(core, 'nd-1', ndjson(['intruder']), 'application/x-ndjson', headers);
    t.match(up, { status: 403, body: { code: 'forbidden' } }, `${who} may not upload`);
    t.match(await core.api('GET', '/api/v1/admin/segments/nd-1', undefined, headers), { status: 403 }, `${who} may not read`);
    t.match(await core.api('PUT', '/api/v1/admin/segments/r-2', { kind: 'rule', rule: { locale: 'fr' } }, headers), { status: 403 });
  }
  const none = await upload(core, 'nd-1', ndjson(['x']), 'application/x-ndjson', {});
  t.match(none, { status: 401, body: { code: 'credentials_required' } });
  t.match((await get('nd-1')).body, { version: 1, size: 4 }, 'nothing changed nd-1');
});

t.test('DELETE: 204, then 404; the members go once nothing pins them; the id can be used again', async (t) => {
  await upload(core, 'gone', ndjson(['g1', 'g2']));
  const del = await core.api('DELETE', '/api/v1/admin/segments/gone', undefined, core.admin);
  t.equal(del.status, 204);
  t.match(await get('gone'), { status: 404, body: { code: 'not_found' } });
  t.match(await core.api('DELETE', '/api/v1/admin/segments/gone', undefined, core.admin), { status: 404 });
  t.match(await core.api('DELETE', '/api/v1/admin/segments/nd-1', undefined, core.user('alice')), { status: 403 });
  await waitFor(async () => (await versionRow(core, 'gone', 1))?.purged_at, {
    timeoutMs: 20_000,
    what: 'the deleted version to be purged',
  });
  t.equal((await versionRow(core, 'gone', 1))?.state, 'retired');
  t.same(await storedMembers(core, 'gone', 1), []);
  const again = await upload(core, 'gone', ndjson(['g3']));
  t.equal(again.status, 201, 'a new segment');
  t.match(again.body, { version: 2, size: 1 }, 'its version follows the deleted one: a pinned version number is never reused');
  const rule = await core.api('PUT', '/api/v1/admin/segments/rule-gone', { kind: 'rule', rule: { tags: ['x'] } }, core.admin);
  t.equal(rule.status, 201);
  t.equal((await core.api('DELETE', '/api/v1/admin/segments/rule-gone', undefined, core.admin)).status, 204);
  t.match(await get('rule-gone'), { status: 404 });
});
