/**
 * The device registry over real HTTP and PostgreSQL: registering, refreshing, listing and
 * unregistering push tokens; a token moving to the user who registers it last; the per-user cap;
 * and the functions the push worker calls, listDeviceTokens and removeDeviceToken (a pruned token
 * is gone from the next send's list).
 */
import t from 'tap';
import { listDeviceTokens, listDeviceTokensOf, MAX_DEVICES_PER_USER, removeDeviceToken } from '../../../notifier/devices/index.js';
import { useTestDatabase } from '../../harness/db.js';
import { call, startTestServer } from '../templates/server.js';

const db = await useTestDatabase(t, 'notifier_devices');
const srv = await startTestServer(t, db);
const devices = (user: string): string => `/api/v1/users/${encodeURIComponent(user)}/devices`;
const device = (user: string, token: string): string => `${devices(user)}/${encodeURIComponent(token)}`;

const FCM = 'fcm:APA91bH-' + 'x'.repeat(140);
const APNS = 'a1b2c3d4'.repeat(8);
const WEB = 'web/token+with=odd/chars';

t.test('register (201), refresh (200), list newest first', async (t) => {
  const a = await call(srv.url, 'POST', devices('alice'), srv.user('alice'), { token: FCM, platform: 'android' });
  t.equal(a.status, 201);
  t.match(a.body, { token: FCM, platform: 'android' });
  t.type(a.body['created_at'], 'number');
  t.equal((await call(srv.url, 'POST', devices('alice'), srv.user('alice'), { token: APNS, platform: 'ios' })).status, 201);
  t.equal(
    (await call(srv.url, 'POST', devices('alice'), srv.service, { token: WEB, platform: 'web' })).status,
    201,
    'a service may register',
  );
  t.same(await listDeviceTokens(db.pool, 'alice'), [WEB, APNS, FCM], 'newest first');
  t.same((await listDeviceTokensOf(db.pool, ['alice'])).get('alice'), [WEB, APNS, FCM], 'the batch read keeps the order');

  const again = await call(srv.url, 'POST', devices('alice'), srv.user('alice'), { token: FCM, platform: 'android' });
  t.equal(again.status, 200, 'the same token again is a refresh');
  t.equal(again.body['created_at'], a.body['created_at']);
  t.ok((again.body['updated_at'] as number) >= (a.body['updated_at'] as number));
  t.same(await listDeviceTokens(db.pool, 'alice'), [FCM, WEB, APNS], 'refreshed to the front');

  const list = await call(srv.url, 'GET', devices('alice'), srv.user('alice'));
  t.equal(list.status, 200);
  t.same(
    (list.body['devices'] as { token: string; platform: string }[]).map((d) => [d.token, d.platform]),
    [
      [FCM, 'android'],
      [WEB, 'web'],
      [APNS, 'ios'],
    ],
  );
  t.same(await listDeviceTokens(db.pool, 'nobody'), []);
});

t.test('unregister: 204, then 404; a token with URL-special characters', async (t) => {
  t.equal((await call(srv.url, 'DELETE', device('alice', WEB), srv.user('alice'))).status, 204);
  const gone = await call(srv.url, 'DELETE', device('alice', WEB), srv.user('alice'));
  t.equal(gone.status, 404);
  t.equal(gone.body['code'], 'not_found');
  t.same(await listDeviceTokens(db.pool, 'alice'), [FCM, APNS]);
});

t.test('a pruned token is gone from the next send', async (t) => {
  await removeDeviceToken(db.pool, 'alice', APNS);
  await removeDeviceToken(db.pool, 'alice', APNS); // idempotent
  t.same(await listDeviceTokens(db.pool, 'alice'), [FCM]);
  await removeDeviceToken(db.pool, 'bob', FCM); // another user's token is not touched
  t.same(await listDeviceTokens(db.pool, 'alice'), [FCM]);
});

t.test('a token registered by another user moves to them', async (t) => {
  const moved = await call(srv.url, 'POST', devices('bob'), srv.user('bob'), { token: FCM, platform: 'android' });
  t.equal(moved.status, 201, 'new to bob');
  t.same(await listDeviceTokens(db.pool, 'bob'), [FCM]);
  const batch = await listDeviceTokensOf(db.pool, ['alice', 'bob', 'nobody']);
  t.same([...batch], [['bob', [FCM]]], 'the batch read agrees: users without tokens have no entry');
  t.same(await listDeviceTokens(db.pool, 'alice'), [], 'no longer alice’s: her notifications do not reach bob’s session');
  t.equal((await call(srv.url, 'DELETE', device('alice', FCM), srv.user('alice'))).status, 404, "alice cannot delete bob's token");
});

t.test(`at most ${MAX_DEVICES_PER_USER} tokens per user; the oldest goes`, async (t) => {
  for (let i = 0; i < MAX_DEVICES_PER_USER + 2; i++) {
    const r = await call(srv.url, 'POST', devices('carol'), srv.user('carol'), { token: `tok-${i}`, platform: 'web' });
    t.equal(r.status, 201);
  }
  const tokens = await listDeviceTokens(db.pool, 'carol');
  t.equal(tokens.length, MAX_DEVICES_PER_USER);
  t.equal(tokens[0], `tok-${MAX_DEVICES_PER_USER + 1}`);
  t.notOk(tokens.includes('tok-0') || tokens.includes('tok-1'), 'the two oldest were dropped');
});

t.test('only the user or a service role', async (t) => {
  t.equal((await call(srv.url, 'GET', devices('bob'), srv.user('alice'))).status, 403);
  t.equal((await call(srv.url, 'POST', devices('bob'), srv.user('alice'), { token: 'hijack', platform: 'ios' })).status, 403);
  t.equal((await call(srv.url, 'DELETE', device('bob', FCM), srv.user('alice'))).status, 403);
  t.equal((await call(srv.url, 'GET', devices('bob'), {})).status, 401);
  t.same(await listDeviceTokens(db.pool, 'bob'), [FCM]);
  t.equal((await call(srv.url, 'GET', devices('bob'), srv.bearer({ sub: 'bob', user_id: 'bob' }))).status, 200);
});

t.test('bad input: 400 naming the field', async (t) => {
  const cases: [unknown, string, string][] = [
    [{ platform: 'ios' }, 'token', 'token: is required'],
    [{ token: '', platform: 'ios' }, 'token', 'token: must be 1 to 4096 visible ASCII characters'],
    [{ token: 'has space', platform: 'ios' }, 'token', 'token: must be 1 to 4096 visible ASCII characters'],
    [{ token: 'x'.repeat(4097), platform: 'ios' }, 'token', 'token: must be 1 to 4096 visible ASCII characters'],
    [{ token: 7, platform: 'ios' }, 'token', 'token: must be a string'],
    [{ token: 'ok' }, 'platform', 'platform: is required'],
    [{ token: 'ok', platform: 'windows' }, 'platform', 'platform: must be one of ios, android, web'],
    [{ token: 'ok', platform: 'ios', app: 'x' }, 'app', 'app: unknown field'],
  ];
  for (const [body, field, detail] of cases) {
    const r = await call(srv.url, 'POST', devices('dave'), srv.user('dave'), body);
    t.equal(r.status, 400, detail);
    t.match(r.body, { code: 'invalid_field', field, detail });
  }
  t.same(await listDeviceTokens(db.pool, 'dave'), []);
  const nope = await call(srv.url, 'PATCH', devices('dave'), srv.user('dave'), {});
  t.equal(nope.status, 405);
});
