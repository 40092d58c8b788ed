import t from 'tap';
import fc from 'fast-check';
import { FakeClock } from '../../../shared/clock.js';
import type { Actor } from '../../../identity/domain/actor.js';
import { createOrderDecider, INITIAL_ORDER, orderAggregate, type OrderCommand, type OrderState } from '../../../identity/domain/order.js';
import { Orders } from '../../../identity/domain/orders.js';
import { decideUser, INITIAL_USER, userAggregate, type UserCommand, type UserState } from '../../../identity/domain/user.js';
import { fold, type AggregateDefinition } from '../../../identity/events/aggregate-repository.js';
import type { DomainEvent } from '../../../identity/events/event-data.js';
import { getSnapshot, snapshotDue } from '../../../identity/events/snapshots.js';
import { testLogger } from '../../harness/log.js';
import { useEventsDb } from './helpers.js';

const { decide } = createOrderDecider({ selfDeleteMaxTotal: 50 });
const actors: Actor[] = [
  { id: 'c1', role: 'customer' },
  { id: 'c2', role: 'customer' },
  { id: 's1', role: 'support' },
  { id: 'a1', role: 'admin' },
];
const item = fc.record({
  sku: fc.constantFrom('A', 'B-2', 'C.3'),
  quantity: fc.integer({ min: 1, max: 5 }),
  price: fc.integer({ min: 0, max: 9000 }).map((c) => c / 100),
});
const actor = fc.constantFrom(...actors);

const orderCommand: fc.Arbitrary<OrderCommand> = fc.oneof(
  fc.record({
    type: fc.constant('PlaceOrder' as const),
    orderId: fc.constant('o-1'),
    customerId: fc.constantFrom('c1', 'c2'),
    items: fc.array(item, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({
    type: fc.constant('ProcessPayment' as const),
    amount: fc.integer({ min: 1, max: 9000 }).map((c) => c / 100),
    cardLast4: fc.constant('4242'),
    cardToken: fc.constant('tok'),
  }),
  fc.constant({ type: 'ReserveInventory' as const }),
  fc.record({ type: fc.constant('ShipOrder' as const), trackingNumber: fc.constant('1Z') }),
  fc.constant({ type: 'DeliverOrder' as const }),
  fc.record({ type: fc.constant('CancelOrder' as const), actor, reason: fc.constant('r') }),
  fc.record({ type: fc.constant('RefundOrder' as const), actor, reason: fc.constant('r') }),
  fc.record({
    type: fc.constant('ModifyOrder' as const),
    actor,
    items: fc.array(item, { minLength: 1, maxLength: 3 }),
    reason: fc.constant('m'),
  }),
  fc.record({ type: fc.constant('DeleteOrder' as const), actor, reason: fc.constant('d') }),
);

const userCommand: fc.Arbitrary<UserCommand> = fc.oneof(
  fc.record({
    type: fc.constant('RegisterUser' as const),
    userId: fc.constant('u1'),
    email: fc.constantFrom('a@x.io', 'B@Y.io'),
    name: fc.constantFrom('Ada', 'Bob'),
  }),
  fc.record({
    type: fc.constant('ChangeEmail' as const),
    newEmail: fc.constantFrom('a@x.io', 'c@z.io', 'd@w.io'),
    reason: fc.constant('r'),
    triggeredBy: fc.constant('u1'),
  }),
  fc.record({ type: fc.constant('ChangeProfilePic' as const), picUrl: fc.constantFrom('https://p/1.png', 'https://p/2.png') }),
  fc.record({ type: fc.constant('FollowUser' as const), followedUserId: fc.constantFrom('u2', 'u3', 'u4', 'u5') }),
);

/** The events a command sequence produces (refused commands produce none), with the clock ticking. */
function history<S, C>(
  def: AggregateDefinition<S>,
  decideFn: (c: C, s: S, now: number) => DomainEvent[],
  commands: readonly C[],
): DomainEvent[] {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const events: DomainEvent[] = [];
  let state = def.initial();
  for (const c of commands) {
    clock.advance(1500);
    let decided: DomainEvent[] = [];
    try {
      decided = decideFn(c, state, clock.now());
    } catch {
      continue;
    }
    for (const e of decided) {
      events.push(e);
      state = def.evolve(state, e);
    }
  }
  return events;
}

function snapshotThenRest<S>(def: AggregateDefinition<S>, events: readonly DomainEvent[], k: number): S {
  const head = fold(def, def.initial(), events.slice(0, k));
  // Through JSON, as the snapshots table stores it.
  const restored = def.fromSnapshot(JSON.parse(JSON.stringify(def.toSnapshot(head))) as Record<string, unknown>);
  return fold(def, restored, events.slice(k));
}

t.test('property: a snapshot at any point plus the later events equals a full replay (orders)', async (t) => {
  fc.assert(
    fc.property(fc.array(orderCommand, { maxLength: 40 }), fc.nat(), (commands, at) => {
      const events = history<OrderState, OrderCommand>(orderAggregate, decide, commands);
      const k = events.length === 0 ? 0 : at % (events.length + 1);
      const full = fold(orderAggregate, INITIAL_ORDER, events);
      t.same(snapshotThenRest(orderAggregate, events, k), full);
      return true;
    }),
    { numRuns: 300 },
  );
});

t.test('property: a snapshot at any point plus the later events equals a full replay (users)', async (t) => {
  fc.assert(
    fc.property(fc.array(userCommand, { maxLength: 40 }), fc.nat(), (commands, at) => {
      const events = history<UserState, UserCommand>(userAggregate, decideUser, commands);
      const k = events.length === 0 ? 0 : at % (events.length + 1);
      t.same(snapshotThenRest(userAggregate, events, k), fold(userAggregate, INITIAL_USER, events));
      return true;
    }),
    { numRuns: 300 },
  );
});

t.test('snapshotDue: when a stream crosses a multiple of N', async (t) => {
  t.equal(snapshotDue(99, 100, 100), true);
  t.equal(snapshotDue(98, 101, 100), true);
  t.equal(snapshotDue(100, 101, 100), false);
  t.equal(snapshotDue(0, 3, 100), false);
  t.equal(snapshotDue(0, 500, 0), false, '0 turns snapshots off');
});

t.test('property, against PostgreSQL: loading via the snapshot equals loading the whole stream', async (t) => {
  const { store } = await useEventsDb(t, 'events_snapshots');
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(orderCommand, { minLength: 5, maxLength: 30 }), async (every, commands) => {
      const orderId = `snap-${run++}`;
      const clock = new FakeClock(Date.UTC(2026, 0, 1));
      const orders = new Orders({ store, clock, log: testLogger(), policy: { selfDeleteMaxTotal: 50 }, snapshotEvery: every });
      for (const c of commands) {
        clock.advance(1000);
        const cmd = c.type === 'PlaceOrder' ? { ...c, orderId } : c;
        await orders.repo.execute(orderId, (loaded) => decide(cmd, loaded.state, clock.now())).catch(() => undefined);
      }
      const viaSnapshot = await orders.repo.load(orderId);
      const full = await orders.repo.load(orderId, { snapshots: false });
      t.same(viaSnapshot.state, full.state, 'same state');
      t.equal(viaSnapshot.version, full.version, 'same version');
      const snap = await getSnapshot(store.pool, orderAggregate.streamId(orderId));
      if (full.version >= every) {
        t.ok(snap, 'a snapshot was taken');
        t.equal(snap!.version, Math.floor(full.version / every) * every, 'at the last multiple of N');
        t.equal(viaSnapshot.snapshotVersion, snap!.version, 'loading started from it');
      } else {
        t.notOk(snap, 'no snapshot below N events');
      }
      return true;
    }),
    { numRuns: 25 },
  );
});
