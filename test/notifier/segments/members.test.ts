/**
 * What the campaign fan-out reads: shard boundaries in one pass and each shard's members by keyset
 * range, for list segments (at the pinned version, even once retired) and rule segments (live
 * profiles by locale, timezone and tags), checked against a model in JavaScript byte order; and
 * the clean-up keeps a retired version while an open fan-out pins it.
 */
import t, { type Test } from 'tap';
import { keyAfter, loadSegment, readMembers, shardBoundaries, type SegmentRef } from '../../../notifier/segments/index.js';
import { cleanUpSegments } from '../../../notifier/segments/cleanup.js';
import { byteOrder, ndjson, startSegmentCore, storedMembers, upload, versionRow } from './helpers.js';

const core = await startSegmentCore(t, 'notifier_segments_members');
const pool = core.db.pool;

/** Ids whose byte order differs from a locale's: case, punctuation, prefixes of each other. */
const MIXED = ['B', 'a', 'a-1', 'a.1', 'a1', 'aa', 'Z', '_x', '~end', '!first', 'A', 'ab', 'a:b', 'user-10', 'user-9', 'user-100'];

/** Every member read shard by shard, and each shard within its bounds. */
async function readAllShards(t: Test, seg: SegmentRef, shardSize: number, model: string[]): Promise<void> {
  const { firstUsers, size } = await shardBoundaries(pool, seg, shardSize);
  t.equal(size, model.length, `size ${model.length}`);
  t.same(
    firstUsers,
    model.filter((_, i) => i % shardSize === 0),
    `shard starts every ${shardSize}`,
  );
  const out: string[] = [];
  for (let i = 0; i < firstUsers.length; i++) {
    const range = { first: firstUsers[i]!, next: firstUsers[i + 1] ?? null };
    const shard = await readMembers(pool, seg, range);
    t.ok(shard.length === shardSize || (i === firstUsers.length - 1 && shard.length <= shardSize), `shard ${i} has ${shard.length}`);
    out.push(...shard);
  }
  t.same(out, model, 'the shards together are the segment in byte order, once each');
}

t.test('list segment: boundaries and shards across sizes, in byte order', async (t) => {
  const list = [...MIXED, ...Array.from({ length: 2_500 }, (_, i) => `m${(i * 7919) % 10_007}`)];
  const res = await upload(core, 'keys', ndjson(list));
  t.equal(res.status, 201);
  const model = [...new Set(list)].sort(byteOrder);
  const seg = (await loadSegment(pool, 'keys'))!;
  for (const n of [1_000, 7, model.length, model.length + 1]) await t.test(`shards of ${n}`, (t) => readAllShards(t, seg, n, model));
  await t.test('shard size 1', (t) => readAllShards(t, seg, 1, model));
});

t.test('readMembers: half-open ranges, limits and keyAfter paging', async (t) => {
  const seg = (await loadSegment(pool, 'keys'))!;
  const model = (await storedMembers(core, 'keys', seg.version)).sort(byteOrder);
  t.same(await readMembers(pool, seg, { first: 'a', next: 'a1' }), ['a', 'a-1', 'a.1'], '[a, a1) excludes a1');
  t.same(await readMembers(pool, seg, { first: 'a1', next: 'a1' }), [], 'an empty range');
  t.same(await readMembers(pool, seg, { first: '', next: 'A' }), ['!first'], 'from the start');
  // Paging through everything with a limit: keyAfter(last) starts the next page.
  const paged: string[] = [];
  let first = '';
  for (;;) {
    const page = await readMembers(pool, seg, { first, next: null }, 333);
    paged.push(...page);
    if (page.length < 333) break;
    first = keyAfter(page[page.length - 1]!);
  }
  t.same(paged, model, 'pages of 333 cover the segment once');
});

t.test('empty segment: no shards, size 0', async (t) => {
  await upload(core, 'none', 'user_id\n', 'text/csv'); // the CSV header alone: 0 bytes is refused
  const seg = (await loadSegment(pool, 'none'))!;
  t.same(await shardBoundaries(pool, seg, 1000), { firstUsers: [], size: 0 });
  t.same(await readMembers(pool, seg, { first: '', next: null }), []);
});

t.test('rule segments: locale, timezone and tags over profiles, canonical forms; size counted on GET', async (t) => {
  const profiles: [string, Record<string, unknown>][] = [
    ['p1', { locale: 'fr', timezone: 'Europe/Paris', tags: ['beta', 'vip'] }],
    ['p2', { locale: 'fr', timezone: 'Europe/Paris', tags: ['beta'] }],
    ['p3', { locale: 'fr', timezone: 'America/Toronto', tags: ['beta'] }],
    ['p4', { locale: 'fr_CA', timezone: 'Europe/Paris', tags: ['beta'] }],
    ['P5', { locale: 'FR', timezone: 'europe/paris', tags: ['vip', 'beta', 'beta'] }],
    ['p6', { locale: 'en', timezone: 'Europe/Paris' }],
    ['p7', { email: 'p7@example.com' }],
  ];
  for (const [id, body] of profiles) {
    const r = await core.api('PUT', `/api/v1/users/${id}/profile`, body);
    t.ok(r.status === 201, `profile ${id}: ${JSON.stringify(r.body)}`);
  }
  t.same((await core.api('GET', '/api/v1/users/P5/profile')).body.tags, ['beta', 'vip'], 'tags stored sorted and distinct');
  t.notOk('tags' in (await core.api('GET', '/api/v1/users/p6/profile')).body, 'no tags: absent');

  const put = (id: string, rule: unknown) => core.api('PUT', `/api/v1/admin/segments/${id}`, { kind: 'rule', rule }, core.admin);
  const paris = await put('paris-fr', { locale: 'fr', timezone: 'europe/paris' });
  t.equal(paris.status, 201);
  t.match(paris.body, { id: 'paris-fr', kind: 'rule', version: 1, size: 3, rule: { locale: 'fr', timezone: 'Europe/Paris' } });
  let seg = (await loadSegment(pool, 'paris-fr'))!;
  t.same(await readMembers(pool, seg, { first: '', next: null }), ['P5', 'p1', 'p2'], 'byte order: P before p');

  const same = await put('paris-fr', { timezone: 'Europe/Paris', locale: 'FR' });
  t.equal(same.status, 200);
  t.equal(same.body.version, 1, 'the same rule: no new version');

  const vip = await put('paris-fr', { locale: 'fr', timezone: 'Europe/Paris', tags: ['vip', 'beta'] });
  t.equal(vip.status, 200);
  t.match(vip.body, { version: 2, size: 2, rule: { tags: ['beta', 'vip'] }, updated_by: 'user:operator' });
  seg = (await loadSegment(pool, 'paris-fr'))!;
  t.same(await readMembers(pool, seg, { first: '', next: null }), ['P5', 'p1']);

  await put('beta', { tags: ['beta'] });
  seg = (await loadSegment(pool, 'beta'))!;
  t.equal(seg.size, 5);
  await readAllShards(t, seg, 2, ['P5', 'p1', 'p2', 'p3', 'p4']);

  // Live: a profile change shows at once.
  await core.api('PUT', '/api/v1/users/p7/profile', { tags: ['beta'] });
  const got = await core.api('GET', '/api/v1/admin/segments/beta', undefined, core.admin);
  t.match(got.body, { kind: 'rule', version: 1, size: 6 }, 'size counted now');

  for (const [rule, field] of [
    [{}, 'rule'],
    [{ locale: 'french' }, 'rule.locale'],
    [{ timezone: '+02:00' }, 'rule.timezone'],
    [{ tags: [] }, 'rule.tags'],
    [{ tags: ['has space'] }, 'rule.tags[0]'],
    [{ country: 'FR' }, 'rule.country'],
    ['fr', 'rule'],
  ] as const) {
    const r = await put('bad-rule', rule);
    t.match(r, { status: 400, body: { code: 'invalid_field', field } }, `${JSON.stringify(rule)} → ${field}`);
  }
  t.match(await core.api('PUT', '/api/v1/admin/segments/k', { kind: 'list' }, core.admin), { status: 400, body: { field: 'kind' } });
  const badTags = await core.api('PUT', '/api/v1/users/p8/profile', { tags: Array.from({ length: 33 }, (_, i) => `t${i}`) });
  t.match(badTags, { status: 400, body: { field: 'tags' } }, 'at most 32 tags');
  t.match(await core.api('PUT', '/api/v1/users/p8/profile', { tags: ['x'.repeat(65)] }), { status: 400, body: { field: 'tags[0]' } });
});

t.test('the clean-up keeps a retired version while an open fan-out pins it', async (t) => {
  await upload(core, 'pinned', ndjson(['v1-a', 'v1-b']));
  // A fan-out pins the live version inside a transaction holding the segment FOR SHARE.
  const c = await pool.connect();
  t.teardown(() => c.release());
  await c.query('BEGIN');
  const seg = (await loadSegment(c, 'pinned', { lock: true }))!;
  t.equal(seg.version, 1);
  const n = await c.query<{ id: string }>(
    `INSERT INTO notifications (id, caller, event_type, recipient_id, template_id, priority)
     VALUES (gen_random_uuid(), 'test', 'promo.spring', 'campaign', 'promo_v1', 'low') RETURNING id`,
  );
  await c.query("INSERT INTO campaigns (id) VALUES ('camp-pin')");
  await c.query(
    `INSERT INTO campaign_fanouts (notification_id, campaign_id, segment_id, segment_version, state)
     VALUES ($1, 'camp-pin', 'pinned', $2, 'expanding')`,
    [n.rows[0]!.id, seg.version],
  );
  // The upload is sent while the pin is held: its switch waits for the pinning transaction.
  const switching = upload(core, 'pinned', ndjson(['v2-a']));
  await c.query('COMMIT');
  const res = await switching;
  t.match(res.body, { version: 2, size: 1 });
  await cleanUpSegments(pool, 60_000);
  t.equal((await versionRow(core, 'pinned', 1))?.state, 'retired');
  t.same(await storedMembers(core, 'pinned', 1), ['v1-a', 'v1-b'], 'kept while pinned');
  t.same(
    await readMembers(pool, { id: 'pinned', kind: 'list', version: 1 }, { first: '', next: null }),
    ['v1-a', 'v1-b'],
    'readable at the pinned version',
  );
  // The run the switch kicked has found version 1 pinned; none runs again before the interval.
  await core.notifier.segmentCleanup.idle();
  await pool.query("UPDATE campaign_fanouts SET state = 'expanded' WHERE segment_id = 'pinned'");
  const r = await cleanUpSegments(pool, 60_000, 1);
  t.equal(r.members, 2, 'deleted once the fan-out is done (in batches of 1)');
  t.same(await storedMembers(core, 'pinned', 1), []);
  t.ok((await versionRow(core, 'pinned', 1))?.purged_at, 'marked purged');
  t.same(await storedMembers(core, 'pinned', 2), ['v2-a'], 'the live version untouched');
});
