/**
 * The order command handlers: checkout, the lifecycle (ship, deliver) and the permissioned commands
 * (cancel, refund, modify, delete). Each loads the Order aggregate, decides with the pure decider
 * (order.ts) and appends at the loaded version; a concurrent writer means a reload and a second
 * decision, unless the caller pinned the version (If-Match), when the conflict is the answer.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import type { JsonRecord } from '../../shared/proto-json.js';
import { AggregateRepository, type Loaded, type Saved } from '../events/aggregate-repository.js';
import type { OrderItemData } from '../events/event-data.js';
import { ConcurrencyError } from '../events/errors.js';
import type { EventStore } from '../events/event-store.js';
import type { Actor } from './actor.js';
import { OrderNotFound } from './errors.js';
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

export interface CheckoutInput {
  /** Default: a fresh UUID. A caller-chosen id makes a retried checkout safe (the second gets 409). */
  orderId?: string;
  customerId: string;
  items: readonly OrderItemData[];
  /** The card as the payment provider's token plus its last four digits; never a card number. */
  payment: { cardToken: string; cardLast4: string };
}

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
   * Places an order and records its payment and inventory reservation: OrderPlaced,
   * PaymentProcessed (the total, on the tokenised card) and InventoryReserved, in one append. The
   * order is then `processing`.
   *
   * @throws PlatformError `invalid_field` naming the field, OrderAlreadyExists
   */
  async checkout(input: CheckoutInput, opts: { metadata?: JsonRecord } = {}): Promise<Saved<OrderState> & { orderId: string }> {
    const orderId = input.orderId ?? this.newId();
    const items = checkItems(input.items);
    const commands: OrderCommand[] = [
      { type: 'PlaceOrder', orderId, customerId: input.customerId, items },
      { type: 'ProcessPayment', amount: orderTotal(items), cardLast4: input.payment.cardLast4, cardToken: input.payment.cardToken },
      { type: 'ReserveInventory' },
    ];
    const saved = await this.repo.execute(orderId, (loaded) => decideAll(this.decide, commands, loaded.state, this.deps.clock.now()), opts);
    return { ...saved, orderId };
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

  /** OrderDeleted: admin; or its customer while placed and below the policy's total. */
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
