/**
 * `GET /auth/admin/users?id=…` (identity/accounts/admin-users.ts), how the console shows people
 * by name: an admin's access token (or IDENTITY_ADMIN_TOKEN) reads who some ids are; an unknown id
 * is left out; a customer's token is refused; the ids are checked (none, too many, unknown
 * parameters).
 */
import t from 'tap';
import { startTestIdentity } from './helpers.js';

const PASSWORD = 'correct horse battery staple';
const ADMIN_TOKEN = 'admin-users-test-admin-token-0123456789abcdef';

t.test('who some user ids are: admins only, unknown ids left out', async (t) => {
  const id = await startTestIdentity(t, 'admin_users', { IDENTITY_ADMIN_TOKEN: ADMIN_TOKEN });
  const ops = await id.signup('ops@example.test', PASSWORD, 'admin');
  const ada = await id.signup('ada@example.test', PASSWORD);
  const adminToken = await id.login('ops@example.test', PASSWORD);
  const customerToken = await id.login('ada@example.test', PASSWORD);
  const q = (...ids: string[]) => `/auth/admin/users?${ids.map((x) => `id=${encodeURIComponent(x)}`).join('&')}`;

  const r = await id.call('GET', q(ada, ops, 'no-such-user', ada), { token: adminToken });
  t.equal(r.status, 200, r.text);
  t.same(
    r.json,
    {
      users: [
        { user_id: ada, email: 'ada@example.test', name: 'ada', role: 'customer' },
        { user_id: ops, email: 'ops@example.test', name: 'ops', role: 'admin' },
      ].sort((a, b) => (a.user_id < b.user_id ? -1 : 1)),
    },
    'each known id once, by id; the unknown one left out',
  );
  t.equal(r.headers.get('cache-control'), 'no-store');
  t.equal((await id.call('GET', q(ada), { token: ADMIN_TOKEN })).status, 200, 'the admin token works too');

  t.equal((await id.call('GET', q(ada), { token: customerToken })).status, 403, "a customer's token is refused");
  t.equal((await id.call('GET', q(ada))).status, 401, 'no token');
  for (const [path, field] of [
    ['/auth/admin/users', 'id'],
    [q(...Array.from({ length: 101 }, (_, i) => `u${i}`)), 'id'],
    [`${q(ada)}&email=x`, 'email'],
    ['/auth/admin/users?id=', 'id'],
  ] as const) {
    const bad = await id.call('GET', path, { token: adminToken });
    t.match([bad.status, bad.json], [400, { code: 'invalid_field', field }], `${path.slice(0, 60)}: names ${field}`);
  }
});
