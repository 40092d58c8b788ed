import t from 'tap';
import { Agent, fetch } from 'undici';
import { loadConfig } from '../../../shared/config.js';
import { migrate } from '../../../shared/migrate.js';
import { migrationsDir } from '../../../shared/paths.js';
import { startIdentity } from '../../../identity/app.js';
import { identityConfig } from '../../../identity/config.js';
import { useTestDatabase } from '../../harness/db.js';
import { testEnv } from '../../harness/services.js';
import { accessClaims, generateTestKey, jwksOf, sign, startJwksServer, TEST_AUDIENCE, TEST_ISSUER } from '../../harness/tokens.js';
import { waitFor } from '../../harness/wait.js';
import { captureLogger } from '../events/helpers.js';

const CARD = '4242 4242 4242 4242';
const CARD_DIGITS = CARD.replace(/ /g, '');

const db = await useTestDatabase(t, 'identity_orders_http', { poolMax: 4 });
const key = await generateTestKey('ES256');
const jwks = await startJwksServer(jwksOf(key));
t.teardown(() => jwks.close());
const { log, lines } = captureLogger();
const identity = await startIdentity(
  loadConfig(
    identityConfig,
    testEnv({
      DATABASE_URL: db.url,
      IDENTITY_JWKS_URL: jwks.url,
      JWT_ISSUER: TEST_ISSUER,
      JWT_AUDIENCE: TEST_AUDIENCE,
      IDENTITY_PROJECTION_POLL_INTERVAL: '50ms',
      SHUTDOWN_GRACE: '1s',
    }),
  ),
  log,
);
t.teardown(() => identity.close());
const base = `http://127.0.0.1:${identity.port}`;
// Our own keep-alive pool, closed at teardown, so no idle connection keeps the process alive.
const agent = new Agent();
t.teardown(() => agent.close());

const token = (sub: string, role: string): string => sign(accessClaims({ nowMs: Date.now() }, { sub, user_id: sub, role }), { key });
const alice = token('alice', 'customer');
const bob = token('bob', 'customer');
const support = token('sam', 'support');
const admin = token('ann', 'admin');

/** Every response body seen, to check that none carries a card number. */
const bodies: string[] = [];

async function call(
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(base + path, { method, headers, body, dispatcher: agent });
  const text = await res.text();
  bodies.push(text);
  return { status: res.status, headers: res.headers, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined, text };
}

async function eventCount(): Promise<number> {
  return Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
}

const items = [{ sku: 'BOOK-1', quantity: 2, price: 12.5 }];
const checkoutBody = (extra: Record<string, unknown> = {}) => ({
  items,
  payment: { card_token: 'tok_visa_1', card_last4: '4242' },
  ...extra,
});

t.test('no token is 401 credentials_required; a bad one 401 invalid_token; a support token cannot check out', async (t) => {
  const before = await eventCount();
  const none = await call('POST', '/checkout', { body: checkoutBody() });
  t.equal(none.status, 401);
  t.equal(none.json?.code, 'credentials_required');
  t.equal(none.headers.get('www-authenticate'), 'Bearer');
  const forged = await call('GET', '/order/x', { token: `${alice.slice(0, -4)}AAAA` });
  t.equal(forged.status, 401);
  t.equal(forged.json?.code, 'invalid_token');
  const basic = await call('GET', '/orders', { headers: { authorization: 'Basic YTpi' } });
  t.equal(basic.status, 401);
  const wrongRole = await call('POST', '/checkout', { token: support, body: checkoutBody() });
  t.equal(wrongRole.status, 403);
  const unknownRole = await call('GET', '/orders', { token: token('x', 'pirate') });
  t.equal(unknownRole.status, 403);
  t.equal(await eventCount(), before, 'nothing written');
});

t.test('bad input is 400 naming the field, and writes nothing', async (t) => {
  const before = await eventCount();
  const cases: [unknown, string][] = [
    [{ payment: { card_token: 'tok', card_last4: '4242' } }, 'items'],
    [{ items: [], payment: { card_token: 'tok', card_last4: '4242' } }, 'items'],
    [{ items: [{ sku: 'A', quantity: 0, price: 1 }], payment: { card_token: 'tok', card_last4: '4242' } }, 'items[0].quantity'],
    [{ items: [{ sku: 'A', quantity: 1 }], payment: { card_token: 'tok', card_last4: '4242' } }, 'items[0].price'],
    [{ items, payment: { card_token: 'tok', card_last4: '42' } }, 'payment.card_last4'],
    [{ items }, 'payment'],
    [{ items, payment: { card_token: 'tok', card_last4: '4242' }, coupon: 'FREE' }, 'coupon'],
    [{ items, payment: { card_number: '4242 4242 4242 4241' } }, 'payment.card_number'],
    [{ items, payment: { card_token: CARD_DIGITS, card_last4: '4242' } }, 'payment.card_token'],
    [{ items, payment: { card_number: CARD, card_token: 'tok', card_last4: '4242' } }, 'payment'],
    [{ items, order_id: 'has spaces', payment: { card_token: 'tok', card_last4: '4242' } }, 'order_id'],
  ];
  for (const [body, field] of cases) {
    const r = await call('POST', '/checkout', { token: alice, body });
    t.equal(r.status, 400, `${field}: 400`);
    t.equal(r.json?.field, field, `names ${field}`);
    t.equal(r.headers.get('content-type'), 'application/problem+json');
  }
  const notJson = await call('POST', '/checkout', { token: alice, raw: '{"items": [' });
  t.equal(notJson.status, 400);
  t.equal(notJson.json?.code, 'invalid_json');
  t.equal(await eventCount(), before, 'nothing written');
});

let orderId = '';

t.test('checkout places an order: three events, 201, the card as token and last four digits only', async (t) => {
  const r = await call('POST', '/checkout', { token: alice, body: checkoutBody() });
  t.equal(r.status, 201);
  orderId = String(r.json?.order_id);
  t.match(r.json, { customer_id: 'alice', status: 'processing', total: 25, items, card_last4: '4242', version: 3 });
  t.equal(r.headers.get('location'), `/order/${orderId}`);
  t.equal(r.headers.get('etag'), '"3"');
  t.notOk(r.text.includes('tok_visa_1'), 'the token is not echoed');
  const { rows } = await db.pool.query<{ event_type: string; data: Record<string, unknown>; metadata: Record<string, unknown> }>(
    'SELECT event_type, data, metadata FROM events WHERE stream_id = $1 ORDER BY stream_version',
    [`order-${orderId}`],
  );
  t.same(
    rows.map((e) => e.event_type),
    ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved'],
  );
  t.match(rows[1]?.data, { amount: 25, card_last4: '4242', card_token: 'tok_visa_1' });
  t.match(rows[0]?.metadata, { actor_id: 'alice', actor_role: 'customer' });
});

t.test('a card number is tokenised at once: stored as a token, never stored, answered or logged', async (t) => {
  const r = await call('POST', '/checkout', { token: alice, body: { items, payment: { card_number: CARD } } });
  t.equal(r.status, 201);
  t.equal(r.json?.card_last4, '4242');
  const { rows } = await db.pool.query<{ data: string }>(`SELECT data::text AS data FROM events WHERE event_type = 'PaymentProcessed'`);
  for (const row of rows) {
    t.notOk(row.data.includes(CARD_DIGITS), 'no card number in the event store');
    t.notOk(row.data.includes(CARD), 'no card number in the event store (spaced)');
  }
  t.match(JSON.parse(rows[rows.length - 1]!.data), { card_token: /^tok_/ });
});

t.test('GET /order/{id}: eventual from the read model, strong with ?consistent=true; owners only, staff any', async (t) => {
  const strong = await call('GET', `/order/${orderId}?consistent=true`, { token: alice });
  t.equal(strong.status, 200);
  t.equal(strong.headers.get('x-consistency'), 'strong');
  t.equal(strong.headers.get('etag'), '"3"');
  t.match(strong.json, { order_id: orderId, status: 'processing', card_last4: '4242' });

  const eventual = await waitFor(
    async () => {
      const r = await call('GET', `/order/${orderId}`, { token: alice });
      return r.status === 200 ? r : undefined;
    },
    { what: 'the order in the read model' },
  );
  t.equal(eventual.headers.get('x-consistency'), 'eventual');
  t.same(Object.keys(eventual.json!).sort(), ['customer_id', 'date', 'order_id', 'status', 'total']);
  t.match(eventual.json, { order_id: orderId, customer_id: 'alice', status: 'processing', total: 25 });

  for (const consistent of ['', '?consistent=true']) {
    const other = await call('GET', `/order/${orderId}${consistent}`, { token: bob });
    t.equal(other.status, 404, `another customer's order is 404 ${consistent}`);
    t.equal(other.json?.code, 'order_not_found');
  }
  const unknown = await call('GET', '/order/no-such-order', { token: alice });
  t.equal(unknown.status, 404);
  t.equal((await call('GET', `/order/${orderId}?consistent=maybe`, { token: alice })).json?.field, 'consistent');

  const staff = await call('GET', `/order/${orderId}?reason=ticket-1`, { token: support });
  t.equal(staff.status, 200, 'support reads any order');
  t.equal((await call('GET', `/order/${orderId}?consistent=true&reason=ticket-1`, { token: admin })).status, 200, 'admin reads any order');
  t.ok(
    lines.some((l) => l.includes('"audit":"order_read"') && l.includes('"role":"support"') && !l.includes('"sam"')),
    'a support read is audit-logged, with the actor hashed',
  );
});

t.test('GET /orders and the payment method', async (t) => {
  const mine = await waitFor(async () => {
    const r = await call('GET', '/orders', { token: alice });
    return Array.isArray(r.json) && r.json.length === 2 ? r : undefined;
  });
  t.same(Object.keys((mine.json as unknown as Record<string, unknown>[])[0]!).sort(), ['order_id', 'status', 'total']);
  t.equal((await call('GET', '/orders?user_id=alice', { token: bob })).status, 404, "another customer's list is 404");
  t.same((await call('GET', '/orders', { token: bob })).json, []);
  t.equal((await call('GET', '/orders', { token: support })).json?.field, 'user_id');
  t.equal(((await call('GET', '/orders?user_id=alice&reason=ticket-1', { token: support })).json as unknown as unknown[]).length, 2);
  const pm = await call('GET', `/orders/${orderId}/payment-method`, { token: alice });
  t.same(pm.json, { order_id: orderId, card_last4: '4242', masked: '•••• •••• •••• 4242' });
  t.equal((await call('GET', `/orders/${orderId}/payment-method`, { token: bob })).status, 404);
});

t.test('commands: roles, If-Match, 409 on a conflict with nothing written, invalid transitions', async (t) => {
  t.equal((await call('POST', `/order/${orderId}/cancel`, { token: bob, body: {} })).status, 404, "another customer's order");
  t.equal((await call('POST', `/order/${orderId}/refund`, { token: alice, body: {} })).status, 403, 'customers cannot refund');
  const before = await eventCount();
  const stale = await call('POST', `/order/${orderId}/cancel`, { token: alice, body: { reason: 'x' }, headers: { 'if-match': '"2"' } });
  t.equal(stale.status, 409);
  t.match(stale.json, { code: 'concurrency_conflict', retryable: true });
  t.equal(await eventCount(), before, 'nothing written');
  t.equal(
    (await call('POST', `/order/${orderId}/cancel`, { token: alice, body: {}, headers: { 'if-match': 'nope' } })).json?.field,
    'If-Match',
  );

  // Two cancels decided on the same version: one wins, the other is told to retry.
  const race = await Promise.all([
    call('POST', `/order/${orderId}/cancel`, { token: alice, body: { reason: 'a' }, headers: { 'if-match': '"3"' } }),
    call('POST', `/order/${orderId}/cancel`, { token: admin, body: { reason: 'b' }, headers: { 'if-match': '"3"' } }),
  ]);
  t.same(race.map((r) => r.status).sort(), [200, 409]);
  t.equal(race.find((r) => r.status === 200)?.json?.status, 'cancelled');
  t.equal(race.find((r) => r.status === 409)?.json?.code, 'concurrency_conflict');

  const again = await call('POST', `/order/${orderId}/cancel`, { token: alice, body: {} });
  t.equal(again.status, 409);
  t.equal(again.json?.code, 'invalid_order_transition');
  const refund = await call('POST', `/order/${orderId}/refund`, { token: support, body: { reason: 'cancelled after payment' } });
  t.equal(refund.status, 200);
  t.equal(refund.json?.status, 'refunded');
  t.equal((await call('POST', `/order/${orderId}/refund`, { token: support, body: { amount: -1 } })).json?.field, 'amount');
});

t.test('modify and delete: admin; a customer deletes only a small placed order; a deleted order is gone', async (t) => {
  const placed = await call('POST', '/checkout', { token: bob, body: checkoutBody({ idempotency_key: 'bob-order-1' }) });
  t.equal(placed.status, 201);
  // The order's id is the server's; the key only makes the repeat safe.
  const bobOrder = String(placed.json?.order_id);
  t.not(bobOrder, 'bob-order-1');
  const dup = await call('POST', '/checkout', { token: bob, body: checkoutBody({ idempotency_key: 'bob-order-1' }) });
  t.equal(dup.status, 409);
  t.equal(dup.json?.code, 'order_already_exists');
  t.equal(dup.json?.order_id, bobOrder);
  t.equal((await call('POST', `/order/${bobOrder}/modify`, { token: bob, body: { items } })).status, 403);
  const modified = await call('POST', `/order/${bobOrder}/modify`, {
    token: admin,
    body: { items: [{ sku: 'PEN', quantity: 1, price: 2 }], reason: 'r' },
  });
  t.match(modified.json, { total: 2, status: 'processing' });
  t.equal((await call('DELETE', `/order/${bobOrder}`, { token: bob })).status, 403, 'not placed any more');
  const deleted = await call('DELETE', `/order/${bobOrder}?reason=fraud`, { token: admin });
  t.equal(deleted.status, 200);
  t.equal(deleted.json?.deleted, true);
  t.equal((await call('GET', `/order/${bobOrder}?consistent=true`, { token: bob })).status, 404);
  await waitFor(async () => (await call('GET', `/order/${bobOrder}?reason=ticket-1`, { token: admin })).status === 404, {
    what: 'the order to leave the read model',
  });
  const timeline = await waitFor(
    async () => {
      const entries = await identity.events.readModels.timeline(bobOrder);
      return entries.length === 5 ? entries : undefined;
    },
    { what: 'the timeline to take the OrderDeleted' },
  );
  t.same(
    timeline.map((e) => e.event_type),
    ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved', 'OrderModified', 'OrderDeleted'],
    "the deleted order's timeline keeps every event",
  );
});

t.test('operator endpoints for projections: admin only', async (t) => {
  t.equal((await call('GET', '/auth/admin/projections', { token: alice })).status, 403);
  const list = await call('GET', '/auth/admin/projections', { token: admin });
  t.equal(list.status, 200);
  t.same(
    (list.json as unknown as { projector: string }[]).map((p) => p.projector),
    ['order_search', 'order_timeline', 'user_card', 'user_search', 'warehouse_queue', 'welcome_notification'],
  );
  t.same((await call('GET', '/auth/admin/dead-letters', { token: admin })).json, []);
  t.equal((await call('GET', '/auth/admin/dead-letters?projector=nope', { token: admin })).json?.field, 'projector');
  t.same((await call('POST', '/auth/admin/dead-letters/redrive', { token: admin, body: {} })).json, {
    redriven: 0,
    failed: 0,
    remaining: 0,
  });
  const rebuild = await call('POST', '/auth/admin/projections/order_search/rebuild', { token: admin });
  t.equal(rebuild.status, 202);
  t.same(rebuild.json, { projector: 'order_search', generation: 2 });
  await waitFor(
    async () => {
      const r = await call('GET', '/auth/admin/projections', { token: admin });
      return (
        (r.json as unknown as { projector: string; liveGeneration: number }[]).find((p) => p.projector === 'order_search')
          ?.liveGeneration === 2
      );
    },
    { what: 'the rebuilt generation to go live' },
  );
  t.equal((await call('GET', '/auth/admin/projections/nope/rebuild', { token: admin })).status, 405);
  const metrics = await fetch(`${base}/metrics`, { dispatcher: agent }).then((r) => r.text());
  t.match(metrics, /identity_projection_lag_seconds\{projector="order_search"/);
  t.match(metrics, /identity_events_appended_total\{type="OrderPlaced"/);
});

t.test('no card number in any response or log line', async (t) => {
  t.ok(lines.length > 0, 'logs were captured');
  for (const text of [...bodies, ...lines]) {
    t.notOk(text.includes(CARD_DIGITS) || text.includes(CARD), 'no card number');
    if (text.includes(CARD_DIGITS) || text.includes(CARD)) t.comment(text);
  }
});

t.test('the service applies its migrations and serves /readyz once the projections exist', async (t) => {
  await migrate(db.pool, { service: 'identity', dir: migrationsDir('identity') });
  const ready = (await fetch(`${base}/readyz`, { dispatcher: agent }).then((r) => r.json())) as { checks: Record<string, string> };
  t.same(ready.checks, { postgres: 'ok', projections: 'ok', 'signing-keys': 'ok' });
});
