// @tier: pure
/**
 * The decider's side of paying later and of server-minted order ids: PayOrder (its customer, once,
 * from placed), delete_own_order refused once anything is paid, and the ids minted per
 * (customer, idempotency key).
 */
import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import type { Actor } from '../../../identity/domain/actor.js';
import { InvalidOrderTransition, NotPermitted, OrderNotFound } from '../../../identity/domain/errors.js';
import {
  createOrderDecider,
  decideAll,
  evolveOrder,
  INITIAL_ORDER,
  type OrderCommand,
  type OrderState,
} from '../../../identity/domain/order.js';
import { orderIdForKey } from '../../../identity/domain/order-id.js';
import { isValidId } from '../../../identity/domain/user.js';

const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
const { decide } = createOrderDecider({ selfDeleteMaxTotal: 100 });
const alice: Actor = { id: 'alice', role: 'customer' };
const bob: Actor = { id: 'bob', role: 'customer' };
const support: Actor = { id: 'sam', role: 'support' };
const admin: Actor = { id: 'ann', role: 'admin' };

function run(state: OrderState, ...commands: OrderCommand[]): OrderState {
  return decideAll(decide, commands, state, clock.now()).reduce<OrderState>((s, e) => evolveOrder(s, e), state);
}
const placed = run(INITIAL_ORDER, {
  type: 'PlaceOrder',
  orderId: 'o-1',
  customerId: 'alice',
  items: [{ sku: 'X', quantity: 2, price: 12.5 }],
});
const payOrder = (actor: Actor): OrderCommand => ({ type: 'PayOrder', actor, cardLast4: '4242', cardToken: 'tok_1' });
const del = (actor: Actor): OrderCommand => ({ type: 'DeleteOrder', actor, reason: '' });

t.test('PayOrder: its customer pays the current total; payment and reservation together make it processing', async (t) => {
  const events = decide(payOrder(alice), placed, clock.now());
  t.same(
    events.map((e) => e.type),
    ['PaymentProcessed', 'InventoryReserved'],
  );
  t.match(events[0]?.data, { order_id: 'o-1', amount: 25, card_last4: '4242', card_token: 'tok_1', ts: clock.now() / 1000 });
  const paid = run(placed, payOrder(alice));
  t.equal(paid.status, 'processing');
  t.equal(paid.amountPaid, 25);

  const modified = run(placed, { type: 'ModifyOrder', actor: admin, items: [{ sku: 'P', quantity: 3, price: 2 }], reason: '' });
  t.equal(run(modified, payOrder(alice)).amountPaid, 6, 'the total at the time of payment');

  t.throws(() => decide(payOrder(bob), placed, clock.now()), OrderNotFound, "another customer's order is not found");
  t.throws(() => decide(payOrder(support), placed, clock.now()), NotPermitted);
  t.throws(() => decide(payOrder(admin), placed, clock.now()), NotPermitted);
  t.throws(() => decide(payOrder(alice), paid, clock.now()), InvalidOrderTransition, 'paid once');
  const paymentOnly = run(placed, { type: 'ProcessPayment', amount: 25, cardLast4: '4242', cardToken: 'tok_1' });
  t.throws(() => decide(payOrder(alice), paymentOnly, clock.now()), InvalidOrderTransition, 'a payment already recorded');
  const cancelled = run(placed, { type: 'CancelOrder', actor: alice, reason: '' });
  t.throws(() => decide(payOrder(alice), cancelled, clock.now()), InvalidOrderTransition, 'not placed');
  t.throws(() => decide(payOrder(alice), run(placed, del(alice)), clock.now()), OrderNotFound, 'deleted');
  t.throws(() => decide(payOrder(alice), INITIAL_ORDER, clock.now()), OrderNotFound, 'never placed');
});

t.test('delete_own_order: while placed and unpaid; refused once a payment is recorded, even before the reservation', async (t) => {
  t.equal(run(placed, del(alice)).deleted, true, 'placed and unpaid');
  const paymentOnly = run(placed, { type: 'ProcessPayment', amount: 25, cardLast4: '4242', cardToken: 'tok_1' });
  t.equal(paymentOnly.status, 'placed', 'still placed: the reservation is missing');
  t.throws(() => decide(del(alice), paymentOnly, clock.now()), NotPermitted, 'but paid');
  t.throws(() => decide(del(alice), run(placed, payOrder(alice)), clock.now()), NotPermitted, 'processing');
  const reservedOnly = run(placed, { type: 'ReserveInventory' });
  t.equal(run(reservedOnly, del(alice)).deleted, true, 'a reservation alone takes no money');
  t.equal(run(paymentOnly, del(admin)).deleted, true, 'an admin still may');
});

t.test('order ids minted per (customer, idempotency key)', async (t) => {
  const id = orderIdForKey('alice', 'k-1');
  t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a version-8 UUID');
  t.ok(isValidId(id), 'a valid order id');
  t.equal(orderIdForKey('alice', 'k-1'), id, 'the same key of the same customer: the same order');
  t.not(orderIdForKey('bob', 'k-1'), id, "another customer's equal key: another order");
  t.not(orderIdForKey('alice', 'k-2'), id);
  t.not(orderIdForKey('alice', 'k-1', 1), id, 'the next candidate differs');
  t.not(orderIdForKey('a:b', 'c'), orderIdForKey('a', 'b:c'), 'no pair spelt as another');
  t.not(orderIdForKey('a', 'b'), orderIdForKey('a\0', 'b'));
  const seen = new Set<string>();
  for (let c = 0; c < 50; c++) for (let k = 0; k < 50; k++) seen.add(orderIdForKey(`c${c}`, `k${k}`));
  t.equal(seen.size, 2500, 'distinct over many pairs');
});
