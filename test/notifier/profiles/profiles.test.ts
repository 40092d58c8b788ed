/**
 * Profiles over real HTTP and PostgreSQL: PUT replaces the whole profile with canonical values
 * (E.164 phone, IANA timezone checked with Intl, xx_YY locale), GET reads it, getProfile gives
 * routing the same; only the user or a service role may call; bad input names the field.
 */
import t from 'tap';
import { canonicalEmail, canonicalTimeZone, getProfile, getProfiles, isE164 } from '../../../notifier/profiles/index.js';
import { useTestDatabase } from '../../harness/db.js';
import { call, startTestServer } from '../templates/server.js';

const db = await useTestDatabase(t, 'notifier_profiles');
const srv = await startTestServer(t, db);
const path = (user: string): string => `/api/v1/users/${encodeURIComponent(user)}/profile`;

t.test('PUT creates (201), PUT replaces (200), GET reads; getProfile agrees', async (t) => {
  const created = await call(srv.url, 'PUT', path('alice'), srv.user('alice'), {
    email: 'Alice@Example.COM',
    phone: '+14155550123',
    locale: 'fr-ca',
    timezone: 'america/toronto',
  });
  t.equal(created.status, 201);
  t.match(created.body, {
    user_id: 'alice',
    email: 'Alice@example.com',
    phone: '+14155550123',
    locale: 'fr_CA',
    timezone: 'America/Toronto',
  });
  t.type(created.body['updated_at'], 'number');
  t.same(await getProfile(db.pool, 'alice'), {
    user_id: 'alice',
    email: 'Alice@example.com',
    phone: '+14155550123',
    locale: 'fr_CA',
    timezone: 'America/Toronto',
  });

  const replaced = await call(srv.url, 'PUT', path('alice'), srv.user('alice'), { email: 'a@example.org', phone: null });
  t.equal(replaced.status, 200);
  t.same(await getProfile(db.pool, 'alice'), { user_id: 'alice', email: 'a@example.org' }, 'fields left out are cleared');
  const got = await call(srv.url, 'GET', path('alice'), srv.user('alice'));
  t.equal(got.status, 200);
  t.same(got.body, replaced.body);
  t.equal(await getProfile(db.pool, 'bob'), undefined, 'no profile: undefined');
  t.same(
    [...(await getProfiles(db.pool, ['alice', 'bob']))],
    [['alice', { user_id: 'alice', email: 'a@example.org' }]],
    'the batch read (the delivery worker’s) agrees; users without a profile have no entry',
  );
  const none = await call(srv.url, 'GET', path('bob'), srv.user('bob'));
  t.equal(none.status, 404);
  t.equal(none.body['code'], 'not_found');
});

t.test('only the user or a service role', async (t) => {
  const other = await call(srv.url, 'PUT', path('alice'), srv.user('mallory'), { email: 'm@evil.test' });
  t.equal(other.status, 403);
  t.equal(other.body['code'], 'forbidden');
  t.equal((await call(srv.url, 'GET', path('alice'), srv.user('mallory'))).status, 403);
  t.equal((await call(srv.url, 'GET', path('alice'), {})).status, 401);
  t.equal((await call(srv.url, 'GET', path('alice'), { ...srv.user('alice'), 'x-subject-secret': 'nope' })).status, 401);
  t.equal((await call(srv.url, 'GET', path('alice'), srv.service)).status, 200, 'a service (API key) caller');
  t.equal((await call(srv.url, 'GET', path('alice'), srv.admin)).status, 200, 'an admin');
  t.equal((await call(srv.url, 'GET', path('alice'), srv.bearer({ sub: 'alice', user_id: 'alice' }))).status, 200, 'her own access token');
  t.equal((await call(srv.url, 'GET', path('alice'), srv.bearer({ sub: 'bob', user_id: 'bob' }))).status, 403, "bob's token");
  const tenant = srv.as('tenant:acme', 'customer');
  t.equal((await call(srv.url, 'GET', path('alice'), tenant)).status, 403, 'a tenant subject names no user');
  t.equal(
    (await call(srv.url, 'GET', path('alice'), { ...tenant, ...srv.bearer({ sub: 'alice', user_id: 'alice', tenant_id: 'acme' }) })).status,
    200,
    "a tenant subject with the user's token",
  );
  const odd = 'user/with space';
  t.equal((await call(srv.url, 'PUT', path(odd), srv.user(odd), {})).body['field'], 'user_id', 'the user id itself is validated');
  t.equal(await getProfile(db.pool, 'mallory'), undefined);
  t.equal((await getProfile(db.pool, 'alice'))?.email, 'a@example.org', "mallory did not change alice's profile");
});

t.test('bad input: 400 naming the field, nothing stored', async (t) => {
  const cases: [Record<string, unknown>, string, string][] = [
    [{ email: 'not-an-email' }, 'email', 'email: must be an email address, local@domain.tld'],
    [{ email: 'a@b' }, 'email', 'email: must be an email address, local@domain.tld'],
    [{ email: 'a@example.com\r\nBcc: x@evil.test' }, 'email', 'email: must be an email address, local@domain.tld'],
    [{ email: 'a b@example.com' }, 'email', 'email: must be an email address, local@domain.tld'],
    [{ email: 5 }, 'email', 'email: must be a string'],
    [{ phone: '4155550123' }, 'phone', 'phone: must be an E.164 number: + and 2 to 15 digits, e.g. +14155550123'],
    [{ phone: '+1 415 555 0123' }, 'phone', 'phone: must be an E.164 number: + and 2 to 15 digits, e.g. +14155550123'],
    [{ phone: '+0123456' }, 'phone', 'phone: must be an E.164 number: + and 2 to 15 digits, e.g. +14155550123'],
    [{ phone: '+1234567890123456' }, 'phone', 'phone: must be an E.164 number: + and 2 to 15 digits, e.g. +14155550123'],
    [{ locale: 'english' }, 'locale', 'locale: must be a locale: xx or xx_YY, e.g. en or fr_CA'],
    [{ timezone: 'Mars/Olympus_Mons' }, 'timezone', 'timezone: must be an IANA time zone, e.g. Europe/Paris'],
    [{ timezone: '+02:00' }, 'timezone', 'timezone: must be an IANA time zone, e.g. Europe/Paris'],
    [{ nickname: 'al' }, 'nickname', 'nickname: unknown field; a profile has email, phone, locale, timezone'],
  ];
  for (const [body, field, detail] of cases) {
    const r = await call(srv.url, 'PUT', path('carol'), srv.user('carol'), body);
    t.equal(r.status, 400, detail);
    t.match(r.body, { code: 'invalid_field', field, detail });
  }
  const arr = await call(srv.url, 'PUT', path('carol'), srv.user('carol'), []);
  t.match(arr.body, { status: 400, field: 'body' });
  t.equal(await getProfile(db.pool, 'carol'), undefined);
});

t.test('validators', async (t) => {
  t.equal(
    canonicalEmail('Ann.Lee+tag@Sub.Example.co.UK'),
    'Ann.Lee+tag@sub.example.co.uk',
    'the domain is lower-cased, the local part kept',
  );
  t.equal(canonicalEmail(`${'a'.repeat(65)}@example.com`), undefined, 'local part over 64');
  t.equal(canonicalEmail('<a@example.com>'), undefined);
  t.equal(canonicalEmail('a@-example.com'), undefined);
  t.ok(isE164('+447911123456'));
  t.ok(isE164('+12'));
  t.notOk(isE164('+1'));
  t.equal(canonicalTimeZone('UTC'), 'UTC');
  t.equal(canonicalTimeZone('Europe/Paris'), 'Europe/Paris');
  t.equal(canonicalTimeZone('asia/tokyo'), 'Asia/Tokyo');
  t.ok(canonicalTimeZone('America/Argentina/Buenos_Aires'), 'three-part names (ICU may name its canonical alias)');
  t.equal(canonicalTimeZone('Not/AZone'), undefined);
  t.equal(canonicalTimeZone('../../etc/passwd'), undefined);
});
