// @tier: pure
/**
 * The sidecar's route table (limiter/routes.ts): `LIMITER_ROUTES` parsing, option by option and
 * one fixture per bad value; longest-prefix matching on segment boundaries; overrides of a default
 * route that inherit what they do not name (the ownership rule above all); and the ownership rule
 * as a property of the whole table (`ownerOf`).
 */
import t from 'tap';
import { canonicalPath } from '../../limiter/request-target.js';
import { defaultRoutes, parseRoutes, RouteTable, USERS_OWNER, type RouteSpec } from '../../limiter/routes.js';

const N = 'http://notifier:8082';
const I = 'http://identity:8083';
const defaults = (): RouteSpec[] => defaultRoutes(N, I);
const tableWith = (raw: string): RouteTable => new RouteTable([...defaults(), ...parseRoutes(raw)]);

t.test('parseRoutes: each option', async (t) => {
  t.same(
    parseRoutes('/v1=http://127.0.0.1:3000'),
    [{ prefix: '/v1', upstream: 'http://127.0.0.1:3000' }],
    'no options: all left undefined',
  );
  t.same(
    parseRoutes(' /v1/ = https://up.example:8443/ '),
    [{ prefix: '/v1', upstream: 'https://up.example:8443' }],
    'trimmed, trailing / dropped',
  );
  t.same(parseRoutes(''), [], 'empty');
  t.same(
    parseRoutes('/a=http://h:1;auth=optional, /b=http://h:2;auth=required,,'),
    [
      { prefix: '/a', upstream: 'http://h:1', auth: 'optional' },
      { prefix: '/b', upstream: 'http://h:2', auth: 'required' },
    ],
    'auth, and empty entries skipped',
  );
  for (const c of ['default', 'public_read', 'auth', 'payment', 'sms', 'webhook'] as const) {
    t.same(parseRoutes(`/c=http://h;class=${c}`), [{ prefix: '/c', upstream: 'http://h', class: c }], `class=${c}`);
  }
  t.same(
    parseRoutes('/api=http://h;owner=/api/users/'),
    [{ prefix: '/api', upstream: 'http://h', owner: '/api/users' }],
    'owner under the prefix, trailing / dropped',
  );
  t.same(parseRoutes('/api=http://h;owner=/api'), [{ prefix: '/api', upstream: 'http://h', owner: '/api' }], 'owner equal to the prefix');
  t.same(parseRoutes('/api=http://h;owner=off'), [{ prefix: '/api', upstream: 'http://h', owner: 'off' }], 'owner=off');
  t.same(parseRoutes('/up=http://h;body=50mb'), [{ prefix: '/up', upstream: 'http://h', maxBody: 50 * 1024 * 1024 }], 'body=50mb');
  t.same(parseRoutes('/up=http://h;body=512'), [{ prefix: '/up', upstream: 'http://h', maxBody: 512 }], 'body in bytes');
  t.same(
    parseRoutes('/hooks=http://h;ip=500/5000'),
    [{ prefix: '/hooks', upstream: 'http://h', ipLimit: { rate: 500, burst: 5000 } }],
    'ip=rate/burst',
  );
  t.same(
    parseRoutes('/x=http://h; auth = optional ;class=sms;owner=/x/u;body=1kb'),
    [{ prefix: '/x', upstream: 'http://h', auth: 'optional', class: 'sms', owner: '/x/u', maxBody: 1024 }],
    'all options together, spaces around names and values',
  );
});

t.test('parseRoutes: every bad entry is refused with a message naming the route and the option', async (t) => {
  const help =
    'auth=required|optional, class=default|public_read|auth|payment|sms|webhook, owner=/prefix|off, body=<size>, ip=<rate>/<burst>';
  const cases: [raw: string, message: string][] = [
    ['/v1', 'route "/v1" must look like /prefix=http://host:port'],
    ['=http://h', 'route "=http://h" must look like /prefix=http://host:port'],
    ['v1=http://h', 'route prefix "v1" must start with /'],
    ['/v1=not a url', 'route "/v1": upstream "not a url" is not a URL'],
    ['/v1=ftp://h', 'route "/v1": upstream must be http or https'],
    ['/v1=http://h/base', 'route "/v1": upstream must be an origin without a path'],
    ['/v1=http://h;auth=maybe', `route "/v1": unknown option "auth=maybe" (${help})`],
    ['/v1=http://h;auth', `route "/v1": unknown option "auth" (${help})`],
    ['/v1=http://h;class=premium', `route "/v1": unknown option "class=premium" (${help})`],
    ['/v1=http://h;owner=users', `route "/v1": unknown option "owner=users" (${help})`],
    ['/v1=http://h;owner=', `route "/v1": unknown option "owner=" (${help})`],
    ['/v1=http://h;size=1mb', `route "/v1": unknown option "size=1mb" (${help})`],
    ['/v1=http://h;owner=/v2/users', 'route "/v1": owner /v2/users must lie under the route\'s prefix'],
    ['/v1=http://h;owner=/v1x/users', 'route "/v1": owner /v1x/users must lie under the route\'s prefix'],
    ['/v1/users=http://h;owner=/v1', 'route "/v1/users": owner /v1 must lie under the route\'s prefix'],
    ['/v1=http://h;body=lots', 'route "/v1": body "lots" is not a size (e.g. 512kb, 50mb)'],
    ['/v1=http://h;body=', 'route "/v1": body "" is not a size (e.g. 512kb, 50mb)'],
    ['/ok=http://h,/v1=http://h;body=-1', 'route "/v1": body "-1" is not a size (e.g. 512kb, 50mb)'],
    ['/v1=http://h;ip=500', 'route "/v1": ip "500" must be <rate per second>/<burst>, both at least 1 (e.g. 500/5000)'],
    ['/v1=http://h;ip=0/10', 'route "/v1": ip "0/10" must be <rate per second>/<burst>, both at least 1 (e.g. 500/5000)'],
    ['/v1=http://h;ip=5/0', 'route "/v1": ip "5/0" must be <rate per second>/<burst>, both at least 1 (e.g. 500/5000)'],
  ];
  for (const [raw, message] of cases) t.throws(() => parseRoutes(raw), { message }, raw);
});

t.test('RouteTable: longest prefix, on segment boundaries only', async (t) => {
  const table = new RouteTable(defaults());
  const prefixOf = (path: string): string | undefined => table.match(path)?.prefix;
  t.equal(prefixOf('/orders'), '/orders');
  t.equal(prefixOf('/orders/'), '/orders');
  t.equal(prefixOf('/orders/7'), '/orders');
  t.equal(prefixOf('/order'), '/order');
  t.equal(prefixOf('/order/7'), '/order');
  t.equal(prefixOf('/ordersx'), undefined, '/ordersx is not under /orders (nor /order)');
  t.equal(prefixOf('/api/v1/track'), '/api/v1/track');
  t.equal(prefixOf('/api/v1/track/abc'), '/api/v1/track');
  t.equal(prefixOf('/api/v1/tracking'), '/api/v1', '/api/v1/tracking falls back to /api/v1');
  t.equal(prefixOf('/api/v1/users/bob/profile'), '/api/v1');
  t.equal(prefixOf('/api/v10'), undefined);
  t.equal(prefixOf('/api'), undefined);
  t.equal(prefixOf('/'), undefined, 'no catch-all in the default table');
  t.equal(table.match('/.well-known/jwks.json')?.upstream, I);
  t.throws(() => table.require('/nowhere'), { code: 'no_route' }, 'require: a missing route is a typed error');

  const withRoot = tableWith('/=http://fallback:1;auth=optional');
  t.equal(withRoot.match('/')?.prefix, '/', '/ matches itself');
  t.equal(withRoot.match('/ordersx')?.prefix, '/', 'the catch-all takes what nothing longer does');
  t.equal(withRoot.match('/orders/7')?.prefix, '/orders', 'a longer prefix still wins over /');
  t.equal(withRoot.match('/ordersx')?.auth, 'optional');

  const table2 = new RouteTable([
    { prefix: '/a', upstream: 'http://1' },
    { prefix: '/a/b/c', upstream: 'http://3' },
    { prefix: '/a/b', upstream: 'http://2' },
  ]);
  t.equal(table2.match('/a/b/c/d')?.upstream, 'http://3', 'the longest wins whatever the order given');
  t.equal(table2.match('/a/b/cd')?.upstream, 'http://2');
  t.equal(table2.match('/a/bc')?.upstream, 'http://1');
  t.same(table2.upstreams, ['http://1', 'http://3', 'http://2'], 'one pool per upstream');
  t.same(
    table2.routes.map((r) => r.upstreamIndex),
    [0, 1, 2],
  );
});

t.test('RouteTable: defaults for what no spec names', async (t) => {
  const r = new RouteTable([{ prefix: '/x/', upstream: 'http://h' }]).match('/x/y');
  t.same(r, {
    prefix: '/x',
    upstream: 'http://h',
    upstreamIndex: 0,
    auth: 'required',
    class: 'default',
    owner: undefined,
    maxBody: undefined,
    ipLimit: undefined,
  });
  const hooks = new RouteTable(defaults()).match('/api/v1/webhooks/ses');
  t.match(
    hooks,
    { prefix: '/api/v1/webhooks', auth: 'optional', class: 'webhook', owner: undefined, ipLimit: { rate: 500, burst: 5000 } },
    "the notifier's provider webhooks: no credentials, their own class and per-IP cap",
  );
  t.equal(
    tableWith('/api/v1/webhooks=http://n2;auth=required').match('/api/v1/webhooks/ses')?.ipLimit?.burst,
    5000,
    'the cap is inherited by an override',
  );
});

t.test('RouteTable: an override of a default prefix changes only what it names', async (t) => {
  const moved = tableWith('/api/v1=http://other:8082');
  const r = moved.match('/api/v1/users/bob/profile');
  t.equal(r?.upstream, 'http://other:8082', 'the upstream moves');
  t.equal(r?.auth, 'required', 'auth inherited');
  t.equal(r?.class, 'default', 'class inherited');
  t.equal(r?.owner, USERS_OWNER, 'the ownership rule inherited');
  t.same(moved.owners, [USERS_OWNER]);
  t.equal(moved.ownerOf('/api/v1/users/bob/profile'), 'bob', 'and enforced');
  t.same(
    new RouteTable([
      { prefix: '/a', upstream: 'http://old' },
      { prefix: '/a/', upstream: 'http://new' },
    ]).upstreams,
    ['http://new'],
    'no pool is kept for an upstream that only an overridden route used',
  );

  const track = tableWith('/api/v1/track=http://n2;auth=required').match('/api/v1/track/x');
  t.equal(track?.auth, 'required', 'the named option changes');
  t.equal(track?.class, 'public_read', 'the unnamed class is inherited');

  const classOnly = tableWith('/api/v1=http://n;class=payment').match('/api/v1/x');
  t.equal(classOnly?.class, 'payment');
  t.equal(classOnly?.owner, USERS_OWNER, 'owner kept when only the class changes');

  const bodyOnly = tableWith('/api/v1=http://n;body=50mb,/api/v1=http://n;auth=optional').match('/api/v1/x');
  t.equal(bodyOnly?.maxBody, 50 * 1024 * 1024, 'two overrides in turn: the body limit of the first is kept');
  t.equal(bodyOnly?.auth, 'optional');
  t.equal(bodyOnly?.owner, USERS_OWNER);

  const off = tableWith('/api/v1=http://n;owner=off');
  t.equal(off.match('/api/v1/users/bob/profile')?.owner, undefined, 'owner=off drops the rule from the route');
  t.same(off.owners, [], 'and from the table');
  t.equal(off.ownerOf('/api/v1/users/bob/profile'), undefined, 'so no path belongs to a user');

  const offThenOther = tableWith('/api/v1=http://n;owner=off,/api/v1=http://n;class=sms');
  t.same(offThenOther.owners, [], 'a later override that names no owner keeps it off');

  const replaced = tableWith('/api/v1=http://n;owner=/api/v1/accounts');
  t.same(replaced.owners, ['/api/v1/accounts'], 'a named owner replaces the inherited one');
  t.equal(replaced.ownerOf('/api/v1/accounts/carol'), 'carol');
  t.equal(replaced.ownerOf('/api/v1/users/bob'), undefined);
});

t.test('ownerOf: the rule covers every route, including longer ones added under it', async (t) => {
  const table = tableWith('/api/v1/users/export=http://exporter:1;auth=optional,/api/v1/users/x=http://x:1');
  t.equal(table.match('/api/v1/users/export/all')?.prefix, '/api/v1/users/export');
  t.equal(table.match('/api/v1/users/export/all')?.owner, undefined, 'the longer route declares no rule of its own');
  t.equal(table.ownerOf('/api/v1/users/export/all'), 'export', 'yet its paths are still owned under /api/v1/users');
  t.equal(table.ownerOf('/api/v1/users/x/profile'), 'x');
  t.equal(table.ownerOf('/api/v1/users/x'), 'x', '<owner>/{id} itself');
  t.equal(table.ownerOf('/api/v1/users/bob/profile'), 'bob');

  const elsewhere = tableWith('/v2=http://h;owner=/v2/people');
  t.equal(elsewhere.ownerOf('/v2/people/dan/x'), 'dan', 'a configured rule');
  t.equal(elsewhere.ownerOf('/api/v1/users/bob'), 'bob', 'beside the default one');
  t.equal(elsewhere.ownerOf('/v2/other/dan'), undefined);
});

t.test('ownerOf: the id as the upstream router decodes it', async (t) => {
  const table = new RouteTable(defaults());
  const cases: [path: string, owner: string | undefined][] = [
    ['/api/v1/users/bob/profile', 'bob'],
    ['/api/v1/users/b%40c/profile', 'b@c'],
    ['/api/v1/users/%C3%A9/profile', '\u00e9'],
    ['/api/v1/users/%25/profile', '%'],
    ['/api/v1/users/%C3/profile', '%C3'], // not UTF-8: left as it is, as the services' router does
    ['/api/v1/users/bob', 'bob'],
    ['/api/v1/users/bob/', 'bob'],
    ['/api/v1/users/', undefined],
    ['/api/v1/users', undefined],
    ['/api/v1/usersx/bob', undefined],
    ['/api/v1/user/bob', undefined],
    ['/api/v1/track/users/bob', undefined],
    ['/api/v2/users/bob', undefined],
  ];
  for (const [path, owner] of cases) t.equal(table.ownerOf(path), owner, path);
  // Through the canonical form, as the data plane calls it.
  const viaCanonical = (raw: string): string | undefined => {
    const c = canonicalPath(raw);
    return typeof c === 'string' ? table.ownerOf(c) : undefined;
  };
  t.equal(viaCanonical('/api/v1/users/b%40c/profile'), 'b@c');
  t.equal(viaCanonical('/api/v1/%75sers/%62ob/profile'), 'bob');
  t.equal(viaCanonical('/api/v1/users/alice/../bob/profile'), 'bob');
});

// A rule declared on the catch-all route (`owner=/` is accepted: it lies under the prefix `/`)
// never matches: ownerOf looks for `/` right after the owner prefix, and after `/` comes the id.
// Every path `/{id}/…` should belong to `{id}`; today none does, so the rule fails open.
t.test('ownerOf: a rule at the root covers /{id}/…', async (t) => {
  const table = new RouteTable(parseRoutes('/=http://h;owner=/'));
  t.same(table.owners, ['/'], 'the rule is accepted');
  t.equal(table.ownerOf('/bob/profile'), 'bob', '/bob/profile belongs to bob');
  t.equal(table.ownerOf('/bob'), 'bob', '/bob belongs to bob');
  t.equal(table.ownerOf('/'), undefined, '/ belongs to nobody');
});

// Route matching is over the canonical path, but a configured prefix or owner is not
// canonicalised: `/files/%c3%a9` (lower-case hex), `/api//v2`, `/api/./v2` or `/%7Euser` can never
// match a canonical path, so the route (or the ownership rule) is silently dead and its paths fall
// to a shorter route. A start-up check should either canonicalise such a prefix or refuse it.
t.test('a configured prefix or owner that is not canonical is canonicalised or refused', async (t) => {
  const cases: [routes: string, raw: string, prefix: string][] = [
    ['/files/%c3%a9=http://h;auth=optional', '/files/%C3%A9/x', '/files/%C3%A9'],
    ['/api//v2=http://h', '/api/v2/x', '/api/v2'],
    ['/api/./v2=http://h', '/api/v2/x', '/api/v2'],
    ['/%7Euser=http://h', '/~user/x', '/~user'],
  ];
  for (const [routes, raw, prefix] of cases) {
    let table: RouteTable;
    try {
      table = new RouteTable(parseRoutes(routes));
    } catch (err) {
      t.match(err, { message: /route/ }, `${routes}: refused at start`);
      continue;
    }
    const c = canonicalPath(raw);
    t.equal(typeof c === 'string' ? table.match(c)?.prefix : c.detail, prefix, `${routes}: ${raw} reaches the route`);
  }
  let owners: RouteTable | undefined;
  try {
    owners = new RouteTable(parseRoutes('/api=http://h;owner=/api/%75sers'));
  } catch (err) {
    t.match(err, { message: /route "\/api"/ }, 'owner=/api/%75sers refused at start');
  }
  if (owners) t.equal(owners.ownerOf('/api/users/bob'), 'bob', 'owner=/api/%75sers covers /api/users/bob');
});
