/**
 * The operator template API over real HTTP and PostgreSQL: who may call it, creating and replacing
 * versions, immutability once used (409), reading a template or one variant by its
 * `<template_id>.<locale>` id, listing with a cursor, previews, and 400s that name the field.
 */
import t from 'tap';
import { markTemplateUsed } from '../../../notifier/templates/index.js';
import { useTestDatabase } from '../../harness/db.js';
import { call, startTestServer } from './server.js';

const db = await useTestDatabase(t, 'notifier_templates_api');
const srv = await startTestServer(t, db);
const BASE = '/api/v1/admin/templates';

const SHIPPED = {
  default_locale: 'en',
  description: 'Order shipped',
  variants: {
    en: {
      push: { title: 'Order {{order_id}} shipped', body: '{{body}}' },
      email: { subject: 'Your order {{order_id}}', text: 'Hi {{name}}, it is on its way.', html: '<p>Hi {{name}}, it is on its way.</p>' },
      sms: { body: 'Order {{order_id}} shipped' },
    },
    fr: {
      push: { title: 'Commande {{order_id}} expédiée', body: '{{body}}' },
      email: { subject: 'Votre commande {{order_id}}', text: 'Bonjour {{name}}', html: '<p>Bonjour {{name}}</p>' },
      sms: { body: 'Commande {{order_id}} expédiée' },
    },
  },
};

t.test('who may call: admin or service roles only', async (t) => {
  const path = `${BASE}/auth_check_v1`;
  const none = await call(srv.url, 'GET', path, {});
  t.equal(none.status, 401);
  t.equal(none.body['code'], 'credentials_required');
  t.match(none.headers.get('content-type'), /^application\/problem\+json/);
  const forged = await call(srv.url, 'GET', path, { ...srv.admin, 'x-subject-secret': 'wrong' });
  t.equal(forged.status, 401, 'X-Subject without the right secret is not trusted');
  t.equal(forged.body['code'], 'credentials_required');
  const customer = await call(srv.url, 'GET', path, srv.user('u1'));
  t.equal(customer.status, 403);
  t.equal(customer.body['code'], 'forbidden');
  t.equal((await call(srv.url, 'GET', path, srv.admin)).status, 404, 'admin gets through (to a 404)');
  t.equal((await call(srv.url, 'GET', path, srv.service)).status, 404, 'service gets through');
  t.equal((await call(srv.url, 'GET', path, srv.bearer({ role: 'admin' }))).status, 404, 'an admin access token');
  t.equal((await call(srv.url, 'GET', path, srv.bearer({ role: 'customer' }))).status, 403, 'a customer access token');
  const bad = await call(srv.url, 'GET', path, { authorization: 'Bearer a.b.c' });
  t.equal(bad.status, 401);
  t.equal(bad.body['code'], 'invalid_token');
});

t.test('create, read, replace', async (t) => {
  const created = await call(srv.url, 'PUT', `${BASE}/order_shipped_v1`, srv.admin, SHIPPED);
  t.equal(created.status, 201);
  t.match(created.body, {
    template_id: 'order_shipped_v1',
    name: 'order_shipped',
    version: 1,
    default_locale: 'en',
    description: 'Order shipped',
    used: false,
    locales: ['en', 'fr'],
    channels: ['push', 'email', 'sms'],
    variant_ids: ['order_shipped_v1.en', 'order_shipped_v1.fr'],
    variants: SHIPPED.variants,
  });
  t.type(created.body['created_at'], 'number');
  t.notOk('used_at' in created.body);

  const got = await call(srv.url, 'GET', `${BASE}/order_shipped_v1`, srv.service);
  t.equal(got.status, 200);
  t.same(got.body, created.body);

  const again = await call(srv.url, 'PUT', `${BASE}/order_shipped_v1`, srv.admin, SHIPPED);
  t.equal(again.status, 200, 'the same definition again: 200');

  const changed = { ...SHIPPED, description: 'Order shipped (edited)' };
  const replaced = await call(srv.url, 'PUT', `${BASE}/order_shipped_v1`, srv.admin, changed);
  t.equal(replaced.status, 200);
  t.equal(replaced.body['description'], 'Order shipped (edited)');
  t.equal((await call(srv.url, 'GET', `${BASE}/order_shipped_v1`, srv.admin)).body['description'], 'Order shipped (edited)');
});

t.test('a variant by its id <template_id>.<locale>', async (t) => {
  const fr = await call(srv.url, 'GET', `${BASE}/order_shipped_v1.fr`, srv.admin);
  t.equal(fr.status, 200);
  t.equal(fr.body['variant_id'], 'order_shipped_v1.fr');
  t.same(fr.body['variants'], { fr: SHIPPED.variants.fr });
  const de = await call(srv.url, 'GET', `${BASE}/order_shipped_v1.de`, srv.admin);
  t.equal(de.status, 404);
  t.equal(de.body['detail'], 'order_shipped_v1 has no de variant');
  const put = await call(srv.url, 'PUT', `${BASE}/order_shipped_v1.fr`, srv.admin, SHIPPED);
  t.equal(put.status, 400);
  t.equal(put.body['field'], 'template_id');
});

t.test('a used version is immutable: 409', async (t) => {
  await call(srv.url, 'PUT', `${BASE}/otp_v1`, srv.admin, { default_locale: 'en', variants: { en: { sms: { body: 'Code {{code}}' } } } });
  await markTemplateUsed(db.pool, 'otp_v1');
  const same = await call(srv.url, 'PUT', `${BASE}/otp_v1`, srv.admin, {
    default_locale: 'en',
    variants: { en: { sms: { body: 'Code {{code}}' } } },
  });
  t.equal(same.status, 200, 'the same definition is not a change');
  t.equal(same.body['used'], true);
  t.type(same.body['used_at'], 'number');
  const changed = await call(srv.url, 'PUT', `${BASE}/otp_v1`, srv.admin, {
    default_locale: 'en',
    variants: { en: { sms: { body: 'Your code {{code}}' } } },
  });
  t.equal(changed.status, 409);
  t.equal(changed.body['code'], 'template_version_immutable');
  t.equal(changed.body['detail'], 'otp_v1 has been used and can no longer change; create otp_v2 instead');
  const next = await call(srv.url, 'PUT', `${BASE}/otp_v2`, srv.admin, {
    default_locale: 'en',
    variants: { en: { sms: { body: 'Your code {{code}}' } } },
  });
  t.equal(next.status, 201, 'the next version is a new template');
});

t.test('bad input: 400 naming the field', async (t) => {
  const cases: [string, unknown, string][] = [
    ['order_shipped', SHIPPED, 'template_id'],
    ['Order_v1', SHIPPED, 'template_id'],
    ['x_v1', { variants: SHIPPED.variants }, 'default_locale'],
    ['x_v1', { default_locale: 'en', variants: { en: { push: { body: 'Hi {{name' } } } }, 'variants.en.push.body'],
    ['x_v1', { ...SHIPPED, extra: 1 }, 'extra'],
  ];
  for (const [id, body, field] of cases) {
    const r = await call(srv.url, 'PUT', `${BASE}/${id}`, srv.admin, body);
    t.equal(r.status, 400, `${id} ${field}`);
    t.equal(r.body['code'], 'invalid_field');
    t.equal(r.body['field'], field);
  }
  const json = await call(srv.url, 'PUT', `${BASE}/x_v1`, srv.admin, '{"default_locale": ');
  t.equal(json.status, 400);
  t.equal(json.body['code'], 'invalid_json');
  t.equal((await call(srv.url, 'GET', `${BASE}/x_v1`, srv.admin)).status, 404, 'nothing was created');
  t.equal((await call(srv.url, 'GET', `${BASE}/not-an-id`, srv.admin)).body['field'], 'template_id');
});

t.test('list: (name, version) order, cursor pages, name filter', async (t) => {
  const def = { default_locale: 'en', variants: { en: { in_app: { body: 'x' } } } };
  for (const id of ['zeta_v10', 'zeta_v2', 'zeta_v1', 'alpha_v1']) {
    t.equal((await call(srv.url, 'PUT', `${BASE}/${id}`, srv.admin, def)).status, 201, id);
  }
  const ids: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const r = await call(srv.url, 'GET', `${BASE}?limit=2${cursor ? `&cursor=${cursor}` : ''}`, srv.admin);
    t.equal(r.status, 200);
    const page = r.body['templates'] as { template_id: string }[];
    t.ok(page.length <= 2);
    ids.push(...page.map((p) => p.template_id));
    cursor = r.body['next_cursor'] as string | undefined;
    pages++;
  } while (cursor && pages < 10);
  // social_digest_v1 is the notifier's own (migration 128: the default catalogue's digest template).
  t.same(
    ids,
    ['alpha_v1', 'order_shipped_v1', 'otp_v1', 'otp_v2', 'social_digest_v1', 'zeta_v1', 'zeta_v2', 'zeta_v10'],
    'versions in numeric order',
  );
  t.equal(pages, 4);

  const zeta = await call(srv.url, 'GET', `${BASE}?name=zeta`, srv.admin);
  t.same(
    (zeta.body['templates'] as { template_id: string }[]).map((x) => x.template_id),
    ['zeta_v1', 'zeta_v2', 'zeta_v10'],
  );
  t.notOk('next_cursor' in zeta.body, 'no cursor on the last page');
  t.match((zeta.body['templates'] as unknown[])[0], { name: 'zeta', version: 1, locales: ['en'], channels: ['in_app'], used: false });

  const bad: [string, string][] = [
    ['limit=0', 'limit'],
    ['limit=201', 'limit'],
    ['limit=x', 'limit'],
    ['cursor=garbage', 'cursor'],
    ['name=Bad%20Name', 'name'],
  ];
  for (const [q, field] of bad) {
    const r = await call(srv.url, 'GET', `${BASE}?${q}`, srv.admin);
    t.equal(r.status, 400, q);
    t.equal(r.body['field'], field, q);
  }
});

t.test('preview: what each channel would send', async (t) => {
  const path = `${BASE}/order_shipped_v1/render`;
  const data = { order_id: '42', name: '<b>Ann</b>', body: 'é'.repeat(300) };
  const push = await call(srv.url, 'POST', path, srv.admin, { channel: 'push', locale: 'fr_CA', template_data: data });
  t.equal(push.status, 200);
  t.equal(push.body['locale'], 'fr');
  t.equal(push.body['title'], 'Commande 42 expédiée');
  t.equal(push.body['body'], 'é'.repeat(177) + '…');
  const email = await call(srv.url, 'POST', path, srv.admin, { channel: 'email', template_data: data });
  t.same(email.body, {
    template_id: 'order_shipped_v1',
    locale: 'en',
    channel: 'email',
    subject: 'Your order 42',
    body: 'Hi <b>Ann</b>, it is on its way.',
    text: 'Hi <b>Ann</b>, it is on its way.',
    html: '<p>Hi &lt;b&gt;Ann&lt;/b&gt;, it is on its way.</p>',
  });
  const sms = await call(srv.url, 'POST', path, srv.admin, { channel: 'sms', template_data: data });
  t.match(sms.body, { body: 'Order 42 shipped', segments: 1, encoding: 'gsm7' });

  const missing = await call(srv.url, 'POST', path, srv.admin, { channel: 'sms', locale: 'fr', template_data: {} });
  t.equal(missing.status, 422);
  t.match(missing.body, { code: 'template_render_failed', reason: 'missing_variable', variable: 'order_id', locale: 'fr', channel: 'sms' });
  const inApp = await call(srv.url, 'POST', path, srv.admin, { channel: 'in_app', template_data: data });
  t.match(inApp.body, { status: 422, reason: 'channel_missing' });
  t.equal((await call(srv.url, 'POST', `${BASE}/nope_v1/render`, srv.admin, { channel: 'push' })).status, 404);
  const badChannel = await call(srv.url, 'POST', path, srv.admin, { channel: 'fax' });
  t.match(badChannel.body, { status: 400, field: 'channel' });
  const badData = await call(srv.url, 'POST', path, srv.admin, { channel: 'push', template_data: { n: 1 } });
  t.match(badData.body, { status: 400, field: 'template_data.n' });

  // A digest template previews with items (notifier/templates/syntax.ts, `{{#items}}`).
  const digest = `${BASE}/likes_digest_v1`;
  const put = await call(srv.url, 'PUT', digest, srv.admin, {
    default_locale: 'en',
    variants: { en: { push: { body: '{{count}} new: {{#items}}{{actor}} {{/items}}' } } },
  });
  t.equal(put.status, 201);
  const preview = await call(srv.url, 'POST', `${digest}/render`, srv.admin, {
    channel: 'push',
    items: [{ actor: 'Ann' }, { actor: 'Bob' }],
    count: 5,
  });
  t.match(preview.body, { body: '5 new: Ann Bob ' });
  const noItems = await call(srv.url, 'POST', `${digest}/render`, srv.admin, { channel: 'push', template_data: { count: '2' } });
  t.match(noItems.body, { status: 422, reason: 'missing_variable', variable: 'items' }, 'without items a digest template cannot render');
  const badItem = await call(srv.url, 'POST', `${digest}/render`, srv.admin, { channel: 'push', items: [{ actor: 1 }] });
  t.match(badItem.body, { status: 400, field: 'items[0].actor' });
  const badCount = await call(srv.url, 'POST', `${digest}/render`, srv.admin, { channel: 'push', items: [{ actor: 'A' }], count: 0 });
  t.match(badCount.body, { status: 400, field: 'count' });
  t.equal((await call(srv.url, 'POST', path, srv.user('u1'), { channel: 'push' })).status, 403);
});
