/**
 * The order command handlers: checkout, payment of an order placed unpaid, the lifecycle (ship,
 * deliver) and the permissioned commands (cancel, refund, modify, delete). Each loads the Order aggregate, decides with the pure decider
 * (order.ts) and appends at the loaded version; a concurrent writer means a reload and a second
 * decision, unless the caller pinned the version (If-Match), when the conflict is the answer.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import type { JsonRecord } from '../../shared/proto-json.js';
import { AggregateRepository, type Loaded, type Saved } from '../events/aggregate-repository.js';
import type { OrderEvent, OrderItemData } from '../events/event-data.js';
import { ConcurrencyError } from '../events/errors.js';
import type { EventStore } from '../events/event-store.js';
import type { Actor } from './actor.js';
import { OrderAlreadyExists, OrderNotFound } from './errors.js';
import { orderIdForKey } from './order-id.js';
import {
  checkItems,
  createOrderDecider,
  decideAll,
  orderAggregate,
  orderTotal,
  type OrderCommand,
  type OrderPolicy,
  type OrderState,
} from './order.js';

export interface OrdersDeps {
  store: EventStore;
  clock: Clock;
  log: Logger;
  policy: OrderPolicy;
  /** Take a snapshot every this many events of a stream (IDENTITY_SNAPSHOT_EVERY). */
  snapshotEvery: number;
  /** New order ids; default random UUIDs. */
  newId?: () => string;
}

export interface OrderCommandOptions {
  /** Decide only against this stream version (If-Match); a different one is a ConcurrencyError. */
  expectedVersion?: number;
  metadata?: JsonRecord;
}

/** The card as the payment provider's token plus its last four digits; never a card number. */
export interface PaymentInput {
  cardToken: string;
  cardLast4: string;
}

export interface CheckoutInput {
  /**
   * The exact order id, for trusted callers only (imports, tests): a clash with any order, whoever
   * its customer, is OrderAlreadyExists. Never pass a caller's value here; use `idempotencyKey`.
   */
  orderId?: string;
  /**
   * Makes a retried checkout safe: the order id is derived from (customer, key), so the second
   * checkout with the same key by the same customer gets OrderAlreadyExists naming the first
   * order, while another customer's equal key is a different order. Without it (and without
   * `orderId`) the id is fresh.
   */
  idempotencyKey?: string;
  /** The request field the key came in, named by OrderAlreadyExists. Default `idempotency_key`. */
  keyField?: string;
  customerId: string;
  items: readonly OrderItemData[];
  /** Left out: the order is only placed (status `placed`), to be paid later with `pay`. */
  payment?: PaymentInput;
}

/** Candidates tried when a minted id is taken by another customer's order (only legacy ids can be). */
const MINT_ATTEMPTS = 4;

/** Thrown inside a checkout's decision when the candidate id belongs to another customer. */
class IdTaken extends Error {}

export class Orders {
  readonly repo: AggregateRepository<OrderState>;
  private readonly decide: ReturnType<typeof createOrderDecider>['decide'];
  private readonly newId: () => string;

  constructor(private readonly deps: OrdersDeps) {
    this.repo = new AggregateRepository(deps.store, orderAggregate, { snapshotEvery: deps.snapshotEvery, log: deps.log });
    this.decide = createOrderDecider(deps.policy).decide;
    this.newId = deps.newId ?? randomUUID;
  }

  /**
   * Places an order and, with a payment, records the payment and the inventory reservation:
   * OrderPlaced, PaymentProcessed (the total, on the tokenised card) and InventoryReserved, in one
   * append, after which the order is `processing`. Without a payment only OrderPlaced: the order is
   * `placed` (its customer may still delete it) until `pay`.
   *
   * The id is minted here (see CheckoutInput), so no answer depends on another customer's orders.
   *
   * @throws PlatformError `invalid_field` naming the field, OrderAlreadyExists (the caller's own)
   */
  async checkout(input: CheckoutInput, opts: { metadata?: JsonRecord } = {}): Promise<Saved<OrderState> & { orderId: string }> {
    const items = checkItems(input.items);
    const { customerId, payment } = input;
    const commands = (orderId: string): OrderCommand[] => [
      { type: 'PlaceOrder', orderId, customerId, items },
      ...(payment
        ? ([
            { type: 'ProcessPayment', amount: orderTotal(items), cardLast4: payment.cardLast4, cardToken: payment.cardToken },
            { type: 'ReserveInventory' },
          ] as const)
        : []),
    ];
    const place = (orderId: string, decide: (state: OrderState) => OrderEvent[]) =>
      this.repo.execute(orderId, (loaded) => decide(loaded.state), opts).then((saved) => ({ ...saved, orderId }));
    const now = (): number => this.deps.clock.now();

    if (input.orderId !== undefined) {
      const orderId = input.orderId;
      return place(orderId, (state) => decideAll(this.decide, commands(orderId), state, now()));
    }
    const key = input.idempotencyKey;
    for (let attempt = 0; attempt < MINT_ATTEMPTS; attempt++) {
      const orderId = key === undefined ? this.newId() : orderIdForKey(customerId, key, attempt);
      try {
        return await place(orderId, (state) => {
          // Another customer's order at this id must not change the answer: take the next candidate.
          if (state.exists && state.customerId !== customerId) throw new IdTaken();
          if (state.exists) throw new OrderAlreadyExists(orderId, input.keyField ?? 'idempotency_key');
          return decideAll(this.decide, commands(orderId), state, now());
        });
      } catch (err) {
        if (!(err instanceof IdTaken)) throw err;
      }
    }
    throw new Error(`no free order id after ${MINT_ATTEMPTS} candidates`);
  }

  /**
   * Pays an order placed without a payment: PaymentProcessed (the current total) and
   * InventoryReserved in one append; the order is then `processing`. Its customer only.
   *
   * @throws OrderNotFound (also another customer's order), NotPermitted, InvalidOrderTransition (already paid, or not placed)
   */
  pay(orderId: string, actor: Actor, payment: PaymentInput, opts: OrderCommandOptions = {}): Promise<Saved<OrderState>> {
    return this.run(orderId, { type: 'PayOrder', actor, ...payment }, opts);
  }

  /** OrderCancelled: its customer or an admin, while placed or processing. */
  cancel(orderId: string, actor: Actor, reason: string, opts: OrderCommandOptions = {}): Promise<Saved<OrderState>> {
    return this.run(orderId, { type: 'CancelOrder', actor, reason }, opts);
  }

  /** OrderRefunded: support; `amount` defaults to the amount paid. */
  refund(
    orderId: string,
    actor: Actor,
    input: { amount?: number; reason: string },
    opts: OrderCommandOptions = {},
  ): Promise<Saved<OrderState>> {
    return this.run(orderId, { type: 'RefundOrder', actor, ...input }, opts);
  }

  /** OrderModified: admin, while placed or processing; new items and total. */
  modify(
    orderId: string,
    actor: Actor,
    input: { items: readonly OrderItemData[]; reason: string },
    opts: OrderCommandOptions = {},
  ): Promise<Saved<OrderState>> {
    return this.run(orderId, { type: 'ModifyOrder', actor, ...input }, opts);
  }

  /** OrderDeleted: admin; or its customer while placed, unpaid and below the policy's total. */
  delete(orderId: string, actor: Actor, reason: string, opts: OrderCommandOptions = {}): Promise<Saved<OrderState>> {
    return this.run(orderId, { type: 'DeleteOrder', actor, reason }, opts);
  }

  /** OrderShipped (from processing), by the fulfilment side. */
  ship(orderId: string, trackingNumber: string, opts: OrderCommandOptions = {}): Promise<Saved<OrderState>> {
    return this.run(orderId, { type: 'ShipOrder', trackingNumber }, opts);
  }

  /** OrderDelivered (from shipped); `deliveredAt` epoch seconds, default now. */
  deliver(orderId: string, deliveredAt?: number, opts: OrderCommandOptions = {}): Promise<Saved<OrderState>> {
    return this.run(orderId, { type: 'DeliverOrder', deliveredAt }, opts);
  }

  /** The order from the write model (snapshot + later events): always current. */
  async get(orderId: string): Promise<Loaded<OrderState>> {
    const loaded = await this.repo.load(orderId);
    if (!loaded.state.exists || loaded.state.deleted) throw new OrderNotFound(orderId);
    return loaded;
  }

  private run(orderId: string, command: OrderCommand, opts: OrderCommandOptions): Promise<Saved<OrderState>> {
    const actor = 'actor' in command ? command.actor : undefined;
    return this.repo.execute(
      orderId,
      (loaded) => {
        const s = loaded.state;
        // Visibility before the version check: a pinned version must not reveal another customer's order.
        if (!s.exists || s.deleted || (actor?.role === 'customer' && actor.id !== s.customerId)) throw new OrderNotFound(orderId);
        if (opts.expectedVersion !== undefined && loaded.version !== opts.expectedVersion) {
          throw new ConcurrencyError(orderAggregate.streamId(orderId), opts.expectedVersion, loaded.version);
        }
        return this.decide(command, s, this.deps.clock.now());
      },
      { metadata: opts.metadata, retries: opts.expectedVersion === undefined ? 3 : 0 },
    );
  }
}
