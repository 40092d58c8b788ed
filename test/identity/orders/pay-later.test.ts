/**
 * Regression: `/checkout` appended placed, paid and reserved in one go, so `delete_own_order`
 * ("only while placed") could never apply to an order placed through the API. A checkout with
 * `"pay": false` now places the order only; its customer may delete it while it is unpaid, pays it
 * with `POST /checkout/{id}/pay`, and may not delete it once paid.
 */
import t from 'tap';
import { waitFor } from '../../harness/wait.js';
import { startOrdersApi } from './helpers.js';

const api = await startOrdersApi(t, 'identity_orders_pay_later');
const alice = api.token('alice', 'customer');
const bob = api.token('bob', 'customer');
const support = api.token('sam', 'support');
const admin = api.token('ann', 'admin');

const items = [{ sku: 'BOOK-1', quantity: 2, price: 12.5 }];
const card = { card_token: 'tok_visa_1', card_last4: '4242' };
const eventCount = async (): Promise<number> =>
  Number((await api.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);

async function placeUnpaid(body: Record<string, unknown> = {}): Promise<string> {
  const r = await api.call('POST', '/checkout', { token: alice, body: { items, pay: false, ...body } });
  if (r.status !== 201) throw new Error(`checkout: ${r.status} ${r.text}`);
  return String(r.json?.order_id);
}

t.test('"pay": false places the order only: 201, placed, version 1, no card', async (t) => {
  const r = await api.call('POST', '/checkout', { token: alice, body: { items, pay: false } });
  t.equal(r.status, 201);
  const id = String(r.json?.order_id);
  t.match(r.json, { customer_id: 'alice', status: 'placed', total: 25, card_last4: null, version: 1 });
  t.equal(r.headers.get('location'), `/order/${id}`);
  t.equal(r.headers.get('etag'), '"1"');
  t.same(await api.events(id), ['OrderPlaced']);
});

t.test('placed and unpaid: its customer deletes it (delete_own_order), and it is gone', async (t) => {
  const id = await placeUnpaid();
  const deleted = await api.call('DELETE', `/orders/${id}?reason=changed%20my%20mind`, { token: alice });
  t.equal(deleted.status, 200);
  t.match(deleted.json, { order_id: id, deleted: true, version: 2 });
  t.same(await api.events(id), ['OrderPlaced', 'OrderDeleted']);
  const strong = await api.call('GET', `/order/${id}?consistent=true`, { token: alice });
  t.equal(strong.status, 404);
  t.equal(strong.json?.code, 'order_not_found');
  await waitFor(async () => (await api.call('GET', `/order/${id}?reason=ticket-1`, { token: admin })).status === 404, {
    what: 'the deleted order to leave the read model',
  });
  const again = await api.call('POST', `/checkout/${id}/pay`, { token: alice, body: { payment: card } });
  t.equal(again.status, 404, 'a deleted order cannot be paid');
});

t.test('only its customer pays it; once paid, delete_own_order refuses with 403 and nothing is written', async (t) => {
  const id = await placeUnpaid();
  const before = await eventCount();
  const otherCustomer = await api.call('POST', `/checkout/${id}/pay`, { token: bob, body: { payment: card } });
  const unknown = await api.call('POST', '/checkout/no-such-order/pay', { token: bob, body: { payment: card } });
  t.equal(otherCustomer.status, 404, "another customer's order is 404");
  // The same problem document but for the id it names (in `detail` and `instance`).
  const shape = (j: Record<string, unknown> | undefined) => ({ ...j, detail: undefined, instance: undefined });
  t.same(shape(otherCustomer.json), shape(unknown.json), 'as an order that does not exist');
  t.equal(otherCustomer.json?.code, 'order_not_found');
  t.equal((await api.call('POST', `/checkout/${id}/pay`, { token: support, body: { payment: card } })).status, 403, 'support: 403');
  t.equal((await api.call('POST', `/checkout/${id}/pay`, { token: admin, body: { payment: card } })).status, 403, 'admin: 403');
  t.equal((await api.call('POST', `/checkout/${id}/pay`, { body: { payment: card } })).status, 401, 'no token: 401');
  t.equal((await api.call('POST', `/checkout/${id}/pay`, { token: alice, body: {} })).json?.field, 'payment');
  const stale = await api.call('POST', `/checkout/${id}/pay`, { token: alice, body: { payment: card }, headers: { 'if-match': '"7"' } });
  t.equal(stale.status, 409);
  t.equal(stale.json?.code, 'concurrency_conflict');
  t.equal(await eventCount(), before, 'nothing written by a refused payment');

  const paid = await api.call('POST', `/checkout/${id}/pay`, {
    token: alice,
    body: { payment: { card_number: '4242 4242 4242 4242' } },
    headers: { 'if-match': '"1"' },
  });
  t.equal(paid.status, 200);
  t.match(paid.json, { order_id: id, status: 'processing', card_last4: '4242', version: 3 });
  t.equal(paid.headers.get('etag'), '"3"');
  t.same(await api.events(id), ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved']);
  const payment = await api.pool.query<{ data: Record<string, unknown> }>(
    `SELECT data FROM events WHERE stream_id = $1 AND event_type = 'PaymentProcessed'`,
    [`order-${id}`],
  );
  t.match(payment.rows[0]?.data, { amount: 25, card_last4: '4242', card_token: /^tok_/ });

  const twice = await api.call('POST', `/checkout/${id}/pay`, { token: alice, body: { payment: card } });
  t.equal(twice.status, 409);
  t.equal(twice.json?.code, 'invalid_order_transition');

  const afterPay = await eventCount();
  const refused = await api.call('DELETE', `/orders/${id}?reason=r`, { token: alice });
  t.equal(refused.status, 403);
  t.equal(refused.json?.code, 'forbidden');
  t.equal(await eventCount(), afterPay, 'nothing written');
  t.equal((await api.call('DELETE', `/orders/${id}?reason=fraud`, { token: admin })).status, 200, 'an admin still may');
});

t.test('the other rules hold for an unpaid order: the total limit, cancelling, paying a cancelled order', async (t) => {
  const big = await placeUnpaid({ items: [{ sku: 'TV', quantity: 1, price: 500 }] });
  const tooBig = await api.call('DELETE', `/orders/${big}?reason=r`, { token: alice });
  t.equal(tooBig.status, 403, 'not below IDENTITY_ORDER_SELF_DELETE_MAX_TOTAL');
  t.same(await api.events(big), ['OrderPlaced']);
  t.equal((await api.call('DELETE', `/orders/${big}?reason=r`, { token: bob })).status, 404, "another customer's: 404");

  const cancelled = await api.call('POST', `/orders/${big}/cancel`, { token: alice, body: { reason: 'r' } });
  t.equal(cancelled.json?.status, 'cancelled');
  const pay = await api.call('POST', `/checkout/${big}/pay`, { token: alice, body: { payment: card } });
  t.equal(pay.status, 409);
  t.equal(pay.json?.code, 'invalid_order_transition');

  // An admin's modification while unpaid: the payment is for the new total.
  const modified = await placeUnpaid();
  t.equal(
    (await api.call('PATCH', `/orders/${modified}`, { token: admin, body: { items: [{ sku: 'PEN', quantity: 3, price: 2 }] } })).status,
    200,
  );
  t.match((await api.call('POST', `/checkout/${modified}/pay`, { token: alice, body: { payment: card } })).json, { total: 6 });
  const amount = await api.pool.query<{ amount: number }>(
    `SELECT (data->>'amount')::float AS amount FROM events WHERE stream_id = $1 AND event_type = 'PaymentProcessed'`,
    [`order-${modified}`],
  );
  t.equal(amount.rows[0]?.amount, 6);
});

t.test('checkout input: "pay" is a boolean, payment is required unless pay is false and refused with it', async (t) => {
  const before = await eventCount();
  const cases: [Record<string, unknown>, string][] = [
    [{ items }, 'payment'],
    [{ items, pay: true }, 'payment'],
    [{ items, pay: false, payment: card }, 'payment'],
    [{ items, pay: 'no' }, 'pay'],
  ];
  for (const [body, field] of cases) {
    const r = await api.call('POST', '/checkout', { token: alice, body });
    t.equal(r.status, 400, `${JSON.stringify(body.pay)}: 400`);
    t.equal(r.json?.field, field, `names ${field}`);
  }
  t.equal(await eventCount(), before, 'nothing written');
  const paidNow = await api.call('POST', '/checkout', { token: alice, body: { items, pay: true, payment: card } });
  t.match(paidNow.json, { status: 'processing', version: 3 }, '"pay": true is the default');
});
