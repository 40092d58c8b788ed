// @tier: pure
import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import type { Actor } from '../../../identity/domain/actor.js';
import {
  InvalidEmail,
  InvalidOrderTransition,
  NotPermitted,
  OrderAlreadyExists,
  OrderNotFound,
  UserAlreadyExists,
  UserNotFound,
} from '../../../identity/domain/errors.js';
import {
  createOrderDecider,
  decideAll,
  evolveOrder,
  INITIAL_ORDER,
  type OrderCommand,
  type OrderState,
} from '../../../identity/domain/order.js';
import { decideUser, evolveUser, INITIAL_USER, type UserState } from '../../../identity/domain/user.js';
import type { DomainEvent } from '../../../identity/events/event-data.js';

const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
const { decide } = createOrderDecider({ selfDeleteMaxTotal: 100 });
const alice: Actor = { id: 'alice', role: 'customer' };
const bob: Actor = { id: 'bob', role: 'customer' };
const support: Actor = { id: 'sam', role: 'support' };
const admin: Actor = { id: 'ann', role: 'admin' };
const items = [{ sku: 'BOOK-1', quantity: 2, price: 12.5 }];

function run(state: OrderState, ...commands: OrderCommand[]): OrderState {
  return decideAll(decide, commands, state, clock.now()).reduce<OrderState>((s, e) => evolveOrder(s, e), state);
}

const place = (total = 25, customerId = 'alice'): OrderCommand => ({
  type: 'PlaceOrder',
  orderId: 'o-1',
  customerId,
  items: [{ sku: 'X', quantity: 1, price: total }],
});
const pay: OrderCommand = { type: 'ProcessPayment', amount: 25, cardLast4: '4242', cardToken: 'tok_1' };
const reserve: OrderCommand = { type: 'ReserveInventory' };
const placed = run(INITIAL_ORDER, place());
const processing = run(placed, pay, reserve);
const shipped = run(processing, { type: 'ShipOrder', trackingNumber: '1Z' });
const delivered = run(shipped, { type: 'DeliverOrder' });

t.test('checkout: placed, then processing once payment and reservation are both recorded, in either order', async (t) => {
  const events = decideAll(
    decide,
    [{ type: 'PlaceOrder', orderId: 'o-9', customerId: 'alice', items }, pay, reserve],
    INITIAL_ORDER,
    clock.now(),
  );
  t.same(
    events.map((e) => e.type),
    ['OrderPlaced', 'PaymentProcessed', 'InventoryReserved'],
  );
  const first = events[0]!;
  t.same(
    first.data,
    { order_id: 'o-9', customer_id: 'alice', items, total: 25, ts: clock.now() / 1000 },
    'timestamps are epoch seconds from the clock',
  );
  t.equal(placed.status, 'placed');
  t.equal(run(placed, pay).status, 'placed', 'payment alone is not processing');
  t.equal(run(placed, reserve).status, 'placed', 'reservation alone is not processing');
  t.equal(run(placed, reserve, pay).status, 'processing');
  t.equal(processing.status, 'processing');
  t.equal(processing.cardLast4, '4242');
  t.equal(shipped.status, 'shipped');
  t.equal(delivered.status, 'delivered');
  t.throws(() => run(placed, place()), OrderAlreadyExists);
});

t.test('invalid transitions are typed errors', async (t) => {
  const ship: OrderCommand = { type: 'ShipOrder', trackingNumber: '1Z' };
  t.throws(() => decide(ship, placed, clock.now()), InvalidOrderTransition, 'ship needs processing');
  t.throws(() => decide({ type: 'DeliverOrder' }, processing, clock.now()), InvalidOrderTransition, 'deliver needs shipped');
  t.throws(() => decide(pay, processing, clock.now()), InvalidOrderTransition, 'paid twice');
  t.throws(() => decide(reserve, processing, clock.now()), InvalidOrderTransition, 'reserved twice');
  t.throws(
    () => decide({ type: 'CancelOrder', actor: alice, reason: '' }, shipped, clock.now()),
    InvalidOrderTransition,
    'cancel after shipping',
  );
  const err = (() => {
    try {
      decide(ship, placed, clock.now());
    } catch (e) {
      return e as InvalidOrderTransition;
    }
  })();
  t.equal(err?.code, 'invalid_order_transition');
  t.equal(err?.from, 'placed');
  t.throws(() => decide(ship, INITIAL_ORDER, clock.now()), OrderNotFound, 'a command on no order');
});

t.test('cancel: its customer or an admin, while placed or processing', async (t) => {
  t.equal(run(placed, { type: 'CancelOrder', actor: alice, reason: 'oops' }).status, 'cancelled');
  t.equal(run(processing, { type: 'CancelOrder', actor: admin, reason: '' }).status, 'cancelled');
  t.throws(
    () => decide({ type: 'CancelOrder', actor: bob, reason: '' }, placed, clock.now()),
    OrderNotFound,
    "another customer's order is not found",
  );
  t.throws(() => decide({ type: 'CancelOrder', actor: support, reason: '' }, placed, clock.now()), NotPermitted);
  t.throws(() => decide({ type: 'CancelOrder', actor: alice, reason: '' }, delivered, clock.now()), InvalidOrderTransition);
});

t.test('refund: support only, of a paid order, up to the amount paid', async (t) => {
  const refunded = run(delivered, { type: 'RefundOrder', actor: support, reason: 'broken' });
  t.equal(refunded.status, 'refunded');
  t.equal(refunded.refundedAmount, 25);
  t.equal(
    run(run(processing, { type: 'CancelOrder', actor: alice, reason: '' }), { type: 'RefundOrder', actor: support, reason: '' }).status,
    'refunded',
  );
  t.throws(() => decide({ type: 'RefundOrder', actor: admin, reason: '' }, delivered, clock.now()), NotPermitted);
  t.throws(() => decide({ type: 'RefundOrder', actor: alice, reason: '' }, delivered, clock.now()), NotPermitted);
  t.throws(() => decide({ type: 'RefundOrder', actor: support, reason: '' }, placed, clock.now()), InvalidOrderTransition, 'nothing paid');
  t.throws(() => decide({ type: 'RefundOrder', actor: support, reason: '', amount: 26 }, delivered, clock.now()), {
    code: 'invalid_field',
    field: 'amount',
  });
  t.throws(
    () => decide({ type: 'RefundOrder', actor: support, reason: '' }, refunded, clock.now()),
    InvalidOrderTransition,
    'refunded once',
  );
});

t.test('modify: admin, while placed or processing; new items and total', async (t) => {
  const modified = run(processing, { type: 'ModifyOrder', actor: admin, items: [{ sku: 'PEN', quantity: 3, price: 1.1 }], reason: 'swap' });
  t.equal(modified.total, 3.3);
  t.equal(modified.status, 'processing', 'status unchanged');
  t.throws(() => decide({ type: 'ModifyOrder', actor: support, items, reason: '' }, placed, clock.now()), NotPermitted);
  t.throws(() => decide({ type: 'ModifyOrder', actor: alice, items, reason: '' }, placed, clock.now()), NotPermitted);
  t.throws(() => decide({ type: 'ModifyOrder', actor: admin, items, reason: '' }, shipped, clock.now()), InvalidOrderTransition);
  t.throws(
    () => decide({ type: 'ModifyOrder', actor: admin, items: [{ sku: 'X', quantity: 0, price: 1 }], reason: '' }, placed, clock.now()),
    {
      code: 'invalid_field',
      field: 'items[0].quantity',
    },
  );
});

t.test('delete: admin always; its customer only while placed and below the configured total', async (t) => {
  const gone = run(placed, { type: 'DeleteOrder', actor: alice, reason: '' });
  t.equal(gone.deleted, true);
  t.throws(
    () => decide({ type: 'DeleteOrder', actor: alice, reason: '' }, run(INITIAL_ORDER, place(100)), clock.now()),
    NotPermitted,
    'not below the limit',
  );
  t.ok(
    createOrderDecider({ selfDeleteMaxTotal: 101 }).decide(
      { type: 'DeleteOrder', actor: alice, reason: '' },
      run(INITIAL_ORDER, place(100)),
      clock.now(),
    ),
    'the limit is configuration',
  );
  t.throws(() => decide({ type: 'DeleteOrder', actor: alice, reason: '' }, processing, clock.now()), NotPermitted, 'not placed any more');
  t.throws(() => decide({ type: 'DeleteOrder', actor: bob, reason: '' }, placed, clock.now()), OrderNotFound);
  t.throws(() => decide({ type: 'DeleteOrder', actor: support, reason: '' }, placed, clock.now()), NotPermitted);
  t.equal(run(delivered, { type: 'DeleteOrder', actor: admin, reason: '' }).deleted, true);
  t.throws(
    () => decide({ type: 'CancelOrder', actor: alice, reason: '' }, gone, clock.now()),
    OrderNotFound,
    'a deleted order answers nothing',
  );
  t.throws(() => decide({ type: 'DeleteOrder', actor: admin, reason: '' }, gone, clock.now()), OrderNotFound);
});

t.test('input errors name the field', async (t) => {
  t.throws(() => decide({ type: 'PlaceOrder', orderId: 'o', customerId: 'alice', items: [] }, INITIAL_ORDER, clock.now()), {
    code: 'invalid_field',
    field: 'items',
  });
  t.throws(
    () =>
      decide(
        { type: 'PlaceOrder', orderId: 'o', customerId: 'alice', items: [{ sku: '', quantity: 1, price: 1 }] },
        INITIAL_ORDER,
        clock.now(),
      ),
    { code: 'invalid_field', field: 'items[0].sku' },
  );
  t.throws(
    () =>
      decide(
        { type: 'PlaceOrder', orderId: 'o', customerId: 'alice', items: [{ sku: 'A', quantity: 1, price: -1 }] },
        INITIAL_ORDER,
        clock.now(),
      ),
    { code: 'invalid_field', field: 'items[0].price' },
  );
  t.throws(() => decide({ type: 'PlaceOrder', orderId: 'bad id', customerId: 'alice', items }, INITIAL_ORDER, clock.now()), {
    code: 'invalid_field',
    field: 'order_id',
  });
  t.throws(() => decide({ ...pay, cardLast4: '42' }, placed, clock.now()), {
    code: 'invalid_field',
    field: 'payment.card_last4',
  });
});

t.test('evolve tolerates missing fields and ignores unknown events', async (t) => {
  const s = evolveOrder(INITIAL_ORDER, { type: 'OrderPlaced', data: {} } as unknown as DomainEvent);
  t.equal(s.status, 'placed');
  t.same(s.items, []);
  t.equal(s.total, 0);
  t.same(evolveOrder(s, { type: 'Mystery', data: {} } as unknown as DomainEvent), s);
  t.same(evolveUser(INITIAL_USER, { type: 'OrderPlaced', data: {} } as unknown as DomainEvent), INITIAL_USER, 'other aggregates’ events');
});

t.test('user: register, email rules, follow, picture', async (t) => {
  const now = clock.now();
  const [registered] = decideUser({ type: 'RegisterUser', userId: 'u1', email: '  Ada@Example.COM ', name: ' Ada ' }, INITIAL_USER, now);
  t.same(registered, { type: 'UserRegistered', data: { user_id: 'u1', email: 'ada@example.com', name: 'Ada', created_at: now / 1000 } });
  const ada: UserState = evolveUser(INITIAL_USER, registered!);
  t.throws(() => decideUser({ type: 'RegisterUser', userId: 'u1', email: 'a@b.io', name: 'A' }, ada, now), UserAlreadyExists);
  for (const bad of ['', 'no-at', 'a@b', 'a b@c.io', 'a@@b.io', `${'x'.repeat(65)}@b.io`]) {
    t.throws(
      () => decideUser({ type: 'RegisterUser', userId: 'u2', email: bad, name: 'B' }, INITIAL_USER, now),
      InvalidEmail,
      `"${bad}" is invalid`,
    );
  }
  t.throws(() => decideUser({ type: 'RegisterUser', userId: 'u2', email: 'b@b.io', name: '   ' }, INITIAL_USER, now), {
    code: 'invalid_field',
    field: 'name',
  });
  t.same(
    decideUser({ type: 'ChangeEmail', newEmail: 'ADA@example.com', reason: '', triggeredBy: 'u1' }, ada, now),
    [],
    'the same address is a no-op',
  );
  const [changed] = decideUser({ type: 'ChangeEmail', newEmail: 'ada@new.io', reason: 'user_request', triggeredBy: 'u1' }, ada, now);
  t.match(changed, { type: 'UserEmailUpdated', data: { old_email: 'ada@example.com', new_email: 'ada@new.io', timestamp: now / 1000 } });
  t.throws(() => decideUser({ type: 'ChangeEmail', newEmail: 'x@y.io', reason: '', triggeredBy: 'u9' }, INITIAL_USER, now), UserNotFound);
  t.throws(() => decideUser({ type: 'FollowUser', followedUserId: 'u1' }, ada, now), { code: 'invalid_field', field: 'followed_user_id' });
  const [follow] = decideUser({ type: 'FollowUser', followedUserId: 'u2' }, ada, now);
  const following = evolveUser(ada, follow!);
  t.same(following.following, ['u2']);
  t.same(decideUser({ type: 'FollowUser', followedUserId: 'u2' }, following, now), [], 'following twice is a no-op');
  t.throws(() => decideUser({ type: 'ChangeProfilePic', picUrl: 'javascript:alert(1)' }, ada, now), {
    code: 'invalid_field',
    field: 'pic_url',
  });
  t.equal(decideUser({ type: 'ChangeProfilePic', picUrl: 'https://cdn.example.com/a.png' }, ada, now).length, 1);
});
