/**
 * Regression: `/checkout` with another customer's order id answered 409 `order_already_exists`,
 * telling the caller that the order exists. Order ids are now the server's; the request's
 * `idempotency_key` (or its earlier name `order_id`) is scoped to the caller, so another
 * customer's id or key is answered exactly as a never-used one, and only the caller's own repeat
 * is a 409.
 */
import t from 'tap';
import { orderIdForKey } from '../../../identity/domain/order-id.js';
import { startOrdersApi, type Answer } from './helpers.js';

const api = await startOrdersApi(t, 'identity_checkout_ids');
const alice = api.token('alice', 'customer');
const bob = api.token('bob', 'customer');

const items = [{ sku: 'BOOK-1', quantity: 2, price: 12.5 }];
const checkout = (token: string, extra: Record<string, unknown>) =>
  api.call('POST', '/checkout', { token, body: { items, payment: { card_token: 'tok_visa_1', card_last4: '4242' }, ...extra } });

const eventCount = async (): Promise<number> =>
  Number((await api.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);

/** Everything a caller can observe of an answer, except the order id it names (and where that shows). */
function observable(a: Answer): Record<string, unknown> {
  const body = { ...a.json };
  const id = body.order_id;
  delete body.order_id;
  delete body.date; // the placing time, which differs between any two orders
  const headers = [...a.headers.entries()]
    .filter(([name]) => !['date', 'content-length'].includes(name))
    .map(([name, value]) => [name, typeof id === 'string' ? value.replace(id, '<id>') : value]);
  return { status: a.status, body, headers: Object.fromEntries(headers), idType: typeof id };
}

t.test("another customer's order id or key answers as a never-used one; their order is untouched", async (t) => {
  const first = await checkout(alice, { order_id: 'alice-order-1' });
  t.equal(first.status, 201);
  const aliceOrder = String(first.json?.order_id);
  const keyed = await checkout(alice, { idempotency_key: 'alice-key-1' });
  t.equal(keyed.status, 201);
  const aliceKeyed = String(keyed.json?.order_id);
  const aliceBefore = await api.call('GET', `/order/${aliceOrder}?consistent=true`, { token: alice });

  let fresh = 0;
  const never = () => `never-used-${++fresh}`;
  // Each probe of bob's beside a never-used value in the same field, to compare answers.
  const probes: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ["alice's order_id", { order_id: 'alice-order-1' }, { order_id: never() }],
    ["alice's order's id, as order_id", { order_id: aliceOrder }, { order_id: never() }],
    ["alice's idempotency_key", { idempotency_key: 'alice-key-1' }, { idempotency_key: never() }],
    ["alice's keyed order's id, as idempotency_key", { idempotency_key: aliceKeyed }, { idempotency_key: never() }],
  ];
  for (const [what, clash, unused] of probes) {
    const a = await checkout(bob, clash);
    const b = await checkout(bob, unused);
    t.same(observable(a), observable(b), `${what}: the same status, headers and body as a never-used value`);
    t.equal(a.status, 201, `${what}: placed`);
    t.equal(a.json?.code, undefined, `${what}: no error code`);
    t.match(a.json, { customer_id: 'bob', status: 'processing' }, `${what}: bob's own new order`);
    t.not(a.json?.order_id, aliceOrder, `${what}: not alice's order`);
    t.not(a.json?.order_id, aliceKeyed, `${what}: not alice's keyed order`);
  }

  const aliceAfter = await api.call('GET', `/order/${aliceOrder}?consistent=true`, { token: alice });
  t.same(aliceAfter.json, aliceBefore.json, "alice's order is untouched");
  t.same(await api.events(aliceOrder), ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved']);
  t.same(await api.events(aliceKeyed), ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved']);
});

t.test("the caller's own repeat is 409 order_already_exists naming the first order, with nothing written", async (t) => {
  for (const field of ['idempotency_key', 'order_id']) {
    const first = await checkout(bob, { [field]: `bob-retry-${field}` });
    t.equal(first.status, 201);
    const before = await eventCount();
    const again = await checkout(bob, { [field]: `bob-retry-${field}` });
    t.equal(again.status, 409, `${field}: 409`);
    t.match(again.json, { code: 'order_already_exists', field, order_id: first.json?.order_id }, `${field}: names the first order`);
    t.equal(await eventCount(), before, `${field}: nothing written`);
  }

  // Two at once with one key: one order, the other told which.
  const race = await Promise.all([checkout(bob, { idempotency_key: 'bob-race' }), checkout(bob, { idempotency_key: 'bob-race' })]);
  t.same(race.map((r) => r.status).sort(), [201, 409]);
  const placed = race.find((r) => r.status === 201)!;
  t.equal(race.find((r) => r.status === 409)?.json?.order_id, placed.json?.order_id);
  t.same(await api.events(String(placed.json?.order_id)), ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved']);

  const both = await checkout(bob, { idempotency_key: 'k', order_id: 'k' });
  t.equal(both.status, 400);
  t.equal(both.json?.field, 'idempotency_key');
  t.equal((await checkout(bob, { idempotency_key: 'has spaces' })).json?.field, 'idempotency_key');
});

t.test("a minted id held by another customer's order (an id chosen before ids were minted) is passed over", async (t) => {
  // alice's order placed, the way a client could before, at the id bob's key would mint first.
  const legacy = orderIdForKey('bob', 'bob-key-legacy');
  await api.identity.events.orders.checkout({
    orderId: legacy,
    customerId: 'alice',
    items,
    payment: { cardToken: 'tok_1', cardLast4: '4242' },
  });
  const a = await checkout(bob, { idempotency_key: 'bob-key-legacy' });
  const b = await checkout(bob, { idempotency_key: 'bob-key-unused' });
  t.same(observable(a), observable(b), 'answered as a never-used key');
  t.equal(a.json?.order_id, orderIdForKey('bob', 'bob-key-legacy', 1), 'the next candidate');
  const again = await checkout(bob, { idempotency_key: 'bob-key-legacy' });
  t.match(again.json, { code: 'order_already_exists', order_id: a.json?.order_id }, "bob's repeat still finds bob's order");
  t.same(await api.events(legacy), ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved'], "alice's order untouched");
});

t.test('without a key every checkout is a new order with a fresh id', async (t) => {
  const a = await checkout(alice, {});
  const b = await checkout(alice, {});
  t.equal(a.status, 201);
  t.equal(b.status, 201);
  t.not(a.json?.order_id, b.json?.order_id);
  t.match(String(a.json?.order_id), /^[0-9a-f-]{36}$/);
});
