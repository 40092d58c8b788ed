/**
 * The Order aggregate as a decider: `decide(command, state, now)` / `evolveOrder(state, event)`,
 * both pure, the clock injected as `now` (epoch ms; events carry epoch seconds).
 *
 * Status (placed → processing → shipped → delivered is the base lifecycle; the rest is our
 * decision; README, "Orders"):
 *
 * | from | event | to |
 * |---|---|---|
 * | (none) | OrderPlaced | placed |
 * | placed | PaymentProcessed and InventoryReserved both recorded (either order) | processing |
 * | processing | OrderShipped | shipped |
 * | shipped | OrderDelivered | delivered |
 * | placed, processing | OrderCancelled (its customer, or an admin) | cancelled |
 * | processing, shipped, delivered, cancelled — if paid | OrderRefunded (support) | refunded |
 * | placed, processing | OrderModified (admin): new items and total | (unchanged) |
 * | any | OrderDeleted (admin; or its customer while placed, unpaid and below the configured total) | deleted |
 *
 * PayOrder is the customer's payment of an order placed without one (`POST /checkout` with
 * `"pay": false`, then `POST /checkout/{id}/pay`): PaymentProcessed for the current total and
 * InventoryReserved together, so the order goes from placed to processing in one append. Shipping needs the payment and the reservation (processing); delivery needs shipping. Every other
 * command in a status not listed is refused with `InvalidOrderTransition`. Each status is reached
 * only from lower ones in the order placed < processing < shipped < delivered < cancelled <
 * refunded, which is what lets the read models apply events idempotently and in any order (they
 * keep the highest status seen). A deleted order answers every later command with OrderNotFound,
 * as does an order of another customer, so that existence is not revealed.
 */
import { invalidField } from '../../shared/errors.js';
import type { AggregateDefinition } from '../events/aggregate-repository.js';
import type { DomainEvent, OrderEvent, OrderItemData } from '../events/event-data.js';
import type { Actor } from './actor.js';
import { InvalidOrderTransition, NotPermitted, OrderAlreadyExists, OrderNotFound } from './errors.js';
import { isValidId } from './user.js';

export type OrderStatus = 'placed' | 'processing' | 'shipped' | 'delivered' | 'cancelled' | 'refunded';

/** Rank of each status; a status is only ever reached from a lower one. */
export const STATUS_RANK: Readonly<Record<OrderStatus, number>> = Object.freeze({
  placed: 1,
  processing: 2,
  shipped: 3,
  delivered: 4,
  cancelled: 5,
  refunded: 6,
});

export interface OrderState {
  readonly exists: boolean;
  readonly deleted: boolean;
  readonly orderId: string;
  readonly customerId: string;
  /** `none` before OrderPlaced. */
  readonly status: OrderStatus | 'none';
  readonly items: readonly OrderItemData[];
  readonly total: number;
  /** Epoch seconds. */
  readonly placedAt: number;
  readonly paid: boolean;
  readonly amountPaid: number;
  /** The only card digits kept. */
  readonly cardLast4: string;
  readonly reserved: boolean;
  readonly trackingNumber: string;
  readonly deliveredAt: number;
  readonly refundedAmount: number;
}

export const INITIAL_ORDER: OrderState = Object.freeze({
  exists: false,
  deleted: false,
  orderId: '',
  customerId: '',
  status: 'none',
  items: Object.freeze([]),
  total: 0,
  placedAt: 0,
  paid: false,
  amountPaid: 0,
  cardLast4: '',
  reserved: false,
  trackingNumber: '',
  deliveredAt: 0,
  refundedAmount: 0,
});

export type OrderCommand =
  | { readonly type: 'PlaceOrder'; readonly orderId: string; readonly customerId: string; readonly items: readonly OrderItemData[] }
  | { readonly type: 'ProcessPayment'; readonly amount: number; readonly cardLast4: string; readonly cardToken: string }
  | { readonly type: 'ReserveInventory' }
  | { readonly type: 'PayOrder'; readonly actor: Actor; readonly cardLast4: string; readonly cardToken: string }
  | { readonly type: 'ShipOrder'; readonly trackingNumber: string }
  | { readonly type: 'DeliverOrder'; readonly deliveredAt?: number }
  | { readonly type: 'CancelOrder'; readonly actor: Actor; readonly reason: string }
  | { readonly type: 'RefundOrder'; readonly actor: Actor; readonly amount?: number; readonly reason: string }
  | { readonly type: 'ModifyOrder'; readonly actor: Actor; readonly items: readonly OrderItemData[]; readonly reason: string }
  | { readonly type: 'DeleteOrder'; readonly actor: Actor; readonly reason: string };

/** The attribute rules that are configuration rather than code. */
export interface OrderPolicy {
  /** A customer may delete their own order while it is placed and its total is below this. */
  readonly selfDeleteMaxTotal: number;
}

export const MAX_ITEMS = 100;
const SKU_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_QUANTITY = 10_000;
const MAX_PRICE = 10_000_000;
const MAX_TEXT = 500;

/** Money is a float in the order's currency (proto/identity/v1); totals are rounded to cents. */
export function roundMoney(n: number): number {
  return Math.round(n * 100) / 100;
}

export function orderTotal(items: readonly OrderItemData[]): number {
  return roundMoney(items.reduce((sum, i) => sum + i.quantity * i.price, 0));
}

/** Checks order lines; errors name the field (`items[2].quantity`). */
export function checkItems(items: readonly OrderItemData[], field = 'items'): OrderItemData[] {
  if (!Array.isArray(items) || items.length === 0 || items.length > MAX_ITEMS) {
    throw invalidField(field, `must be a list of 1 to ${MAX_ITEMS} items`);
  }
  return items.map((item, i) => {
    const at = `${field}[${i}]`;
    if (typeof item !== 'object' || item === null) throw invalidField(at, 'must be an object');
    if (typeof item.sku !== 'string' || !SKU_RE.test(item.sku)) throw invalidField(`${at}.sku`, 'must be 1 to 64 letters, digits or . _ -');
    if (!Number.isInteger(item.quantity) || item.quantity < 1 || item.quantity > MAX_QUANTITY) {
      throw invalidField(`${at}.quantity`, `must be an integer from 1 to ${MAX_QUANTITY}`);
    }
    if (typeof item.price !== 'number' || !Number.isFinite(item.price) || item.price < 0 || item.price > MAX_PRICE) {
      throw invalidField(`${at}.price`, `must be a number from 0 to ${MAX_PRICE}`);
    }
    return { sku: item.sku, quantity: item.quantity, price: roundMoney(item.price) };
  });
}

function text(v: string, field: string, max = MAX_TEXT): string {
  if (typeof v !== 'string' || v.length > max) throw invalidField(field, `must be a string of at most ${max} characters`);
  return v.trim();
}

/** A customer sees only their own orders; a deleted order is gone for everyone. */
function visible(state: OrderState, actor: Actor | undefined, orderId: string): void {
  if (!state.exists || state.deleted) throw new OrderNotFound(orderId);
  if (actor && actor.role === 'customer' && actor.id !== state.customerId) throw new OrderNotFound(orderId);
}

function requireStatus(state: OrderState, command: string, allowed: readonly OrderStatus[]): void {
  if (!allowed.includes(state.status as OrderStatus)) throw new InvalidOrderTransition(command, state.status);
}

/** Builds the decider for a policy. */
export function createOrderDecider(policy: OrderPolicy): {
  decide(command: OrderCommand, state: OrderState, now: number): OrderEvent[];
  evolve: typeof evolveOrder;
} {
  function decide(command: OrderCommand, state: OrderState, now: number): OrderEvent[] {
    const ts = now / 1000;
    const id = state.orderId;
    switch (command.type) {
      case 'PlaceOrder': {
        if (!isValidId(command.orderId)) throw invalidField('order_id', 'must be 1 to 128 letters, digits or . _ : -');
        if (state.exists) throw new OrderAlreadyExists(command.orderId);
        if (!isValidId(command.customerId)) throw invalidField('customer_id', 'is not a valid user id');
        const items = checkItems(command.items);
        return [
          {
            type: 'OrderPlaced',
            data: { order_id: command.orderId, customer_id: command.customerId, items, total: orderTotal(items), ts },
          },
        ];
      }
      case 'ProcessPayment': {
        visible(state, undefined, id);
        if (state.paid) throw new InvalidOrderTransition('ProcessPayment', state.status, 'the order is already paid');
        requireStatus(state, 'ProcessPayment', ['placed']);
        if (!Number.isFinite(command.amount) || command.amount <= 0) throw invalidField('amount', 'must be a positive number');
        if (!/^\d{4}$/.test(command.cardLast4)) throw invalidField('payment.card_last4', 'must be exactly four digits');
        if (command.cardToken.length === 0 || command.cardToken.length > 256) {
          throw invalidField('payment.card_token', 'must be 1 to 256 characters');
        }
        return [
          {
            type: 'PaymentProcessed',
            data: { order_id: id, amount: roundMoney(command.amount), ts, card_last4: command.cardLast4, card_token: command.cardToken },
          },
        ];
      }
      case 'ReserveInventory': {
        visible(state, undefined, id);
        if (state.reserved) throw new InvalidOrderTransition('ReserveInventory', state.status, 'the inventory is already reserved');
        requireStatus(state, 'ReserveInventory', ['placed']);
        return [{ type: 'InventoryReserved', data: { order_id: id, items: [...state.items], ts } }];
      }
      case 'PayOrder': {
        visible(state, command.actor, id);
        if (command.actor.role !== 'customer') throw new NotPermitted('paying an order is for its customer');
        if (state.paid) throw new InvalidOrderTransition('PayOrder', state.status, 'the order is already paid');
        requireStatus(state, 'PayOrder', ['placed']);
        const pay: OrderCommand = {
          type: 'ProcessPayment',
          amount: state.total,
          cardLast4: command.cardLast4,
          cardToken: command.cardToken,
        };
        return decideAll(decide, [pay, { type: 'ReserveInventory' }], state, now);
      }
      case 'ShipOrder': {
        visible(state, undefined, id);
        requireStatus(state, 'ShipOrder', ['processing']);
        const tracking = text(command.trackingNumber, 'tracking_number', 64);
        if (tracking === '') throw invalidField('tracking_number', 'must not be empty');
        return [{ type: 'OrderShipped', data: { order_id: id, tracking_number: tracking, ts } }];
      }
      case 'DeliverOrder': {
        visible(state, undefined, id);
        requireStatus(state, 'DeliverOrder', ['shipped']);
        const at = command.deliveredAt ?? ts;
        if (!Number.isFinite(at) || at <= 0) throw invalidField('delivered_at', 'must be epoch seconds');
        return [{ type: 'OrderDelivered', data: { order_id: id, delivered_at: at, ts } }];
      }
      case 'CancelOrder': {
        visible(state, command.actor, id);
        if (command.actor.role !== 'customer' && command.actor.role !== 'admin') {
          throw new NotPermitted('cancelling an order needs cancel_own_order (its customer) or an admin');
        }
        requireStatus(state, 'CancelOrder', ['placed', 'processing']);
        return [{ type: 'OrderCancelled', data: { order_id: id, actor_id: command.actor.id, reason: text(command.reason, 'reason'), ts } }];
      }
      case 'RefundOrder': {
        visible(state, command.actor, id);
        if (command.actor.role !== 'support') throw new NotPermitted('refunding an order needs refund_order (support)');
        if (!state.paid) throw new InvalidOrderTransition('RefundOrder', state.status, 'the order has no payment to refund');
        requireStatus(state, 'RefundOrder', ['processing', 'shipped', 'delivered', 'cancelled']);
        const amount = command.amount === undefined ? state.amountPaid : roundMoney(command.amount);
        if (!Number.isFinite(amount) || amount <= 0 || amount > state.amountPaid) {
          throw invalidField('amount', `must be more than 0 and at most the amount paid (${state.amountPaid})`);
        }
        return [
          { type: 'OrderRefunded', data: { order_id: id, actor_id: command.actor.id, amount, reason: text(command.reason, 'reason'), ts } },
        ];
      }
      case 'ModifyOrder': {
        visible(state, command.actor, id);
        if (command.actor.role !== 'admin') throw new NotPermitted('modifying an order needs modify_any_order (admin)');
        requireStatus(state, 'ModifyOrder', ['placed', 'processing']);
        const items = checkItems(command.items);
        return [
          {
            type: 'OrderModified',
            data: { order_id: id, actor_id: command.actor.id, items, total: orderTotal(items), reason: text(command.reason, 'reason'), ts },
          },
        ];
      }
      case 'DeleteOrder': {
        visible(state, command.actor, id);
        if (command.actor.role === 'customer') {
          // delete_own_order, refined by attributes: still placed, nothing paid, and a small total.
          if (state.status !== 'placed' || state.paid || !(state.total < policy.selfDeleteMaxTotal)) {
            throw new NotPermitted(
              `a customer may delete only their own order while it is placed and unpaid and its total is below ${policy.selfDeleteMaxTotal}`,
            );
          }
        } else if (command.actor.role !== 'admin') {
          throw new NotPermitted('deleting an order needs delete_any_order (admin)');
        }
        return [{ type: 'OrderDeleted', data: { order_id: id, actor_id: command.actor.id, reason: text(command.reason, 'reason'), ts } }];
      }
    }
  }
  return { decide, evolve: evolveOrder };
}

const str = (v: unknown, fallback = ''): string => (typeof v === 'string' ? v : fallback);
const num = (v: unknown, fallback = 0): number => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);
const items = (v: unknown, fallback: readonly OrderItemData[]): readonly OrderItemData[] =>
  Array.isArray(v)
    ? v
        .filter((i): i is Record<string, unknown> => typeof i === 'object' && i !== null)
        .map((i) => ({ sku: str(i.sku), quantity: num(i.quantity), price: num(i.price) }))
    : fallback;

function advance(state: OrderState, to: OrderStatus): OrderStatus | 'none' {
  if (state.status === 'none') return to;
  return STATUS_RANK[to] > STATUS_RANK[state.status] ? to : state.status;
}

/** Folds one event into the state; tolerant of missing fields; other types leave it unchanged. */
export function evolveOrder(state: OrderState, event: DomainEvent): OrderState {
  const d = event.data as unknown as Record<string, unknown>;
  switch (event.type) {
    case 'OrderPlaced':
      return {
        ...state,
        exists: true,
        orderId: str(d.order_id, state.orderId),
        customerId: str(d.customer_id),
        status: advance(state, 'placed'),
        items: items(d.items, []),
        total: num(d.total),
        placedAt: num(d.ts),
      };
    case 'PaymentProcessed': {
      const s = { ...state, paid: true, amountPaid: num(d.amount), cardLast4: str(d.card_last4) };
      return s.reserved && s.status === 'placed' ? { ...s, status: 'processing' } : s;
    }
    case 'InventoryReserved': {
      const s = { ...state, reserved: true };
      return s.paid && s.status === 'placed' ? { ...s, status: 'processing' } : s;
    }
    case 'OrderShipped':
      return { ...state, status: advance(state, 'shipped'), trackingNumber: str(d.tracking_number) };
    case 'OrderDelivered':
      return { ...state, status: advance(state, 'delivered'), deliveredAt: num(d.delivered_at) };
    case 'OrderCancelled':
      return { ...state, status: advance(state, 'cancelled') };
    case 'OrderRefunded':
      return { ...state, status: advance(state, 'refunded'), refundedAmount: roundMoney(state.refundedAmount + num(d.amount)) };
    case 'OrderModified':
      return { ...state, items: items(d.items, state.items), total: num(d.total, state.total) };
    case 'OrderDeleted':
      return { ...state, deleted: true };
    default:
      return state;
  }
}

/** Decides several commands in a row, each against the state the previous ones produced. */
export function decideAll(
  decide: (command: OrderCommand, state: OrderState, now: number) => OrderEvent[],
  commands: readonly OrderCommand[],
  state: OrderState,
  now: number,
): OrderEvent[] {
  const out: OrderEvent[] = [];
  let s = state;
  for (const c of commands) {
    for (const e of decide(c, s, now)) {
      out.push(e);
      s = evolveOrder(s, e);
    }
  }
  return out;
}

/** The Order aggregate for the repository: streams `order-<id>`, snapshot format 1. */
export const orderAggregate: AggregateDefinition<OrderState> = {
  kind: 'order',
  streamId: (id) => `order-${id}`,
  initial: () => INITIAL_ORDER,
  evolve: evolveOrder,
  snapshotFormat: 1,
  toSnapshot: (s) => ({ ...s, items: s.items.map((i) => ({ ...i })) }),
  fromSnapshot: (j) => ({
    exists: j.exists === true,
    deleted: j.deleted === true,
    orderId: str(j.orderId),
    customerId: str(j.customerId),
    status: (typeof j.status === 'string' && (j.status === 'none' || j.status in STATUS_RANK) ? j.status : 'none') as OrderStatus | 'none',
    items: items(j.items, []),
    total: num(j.total),
    placedAt: num(j.placedAt),
    paid: j.paid === true,
    amountPaid: num(j.amountPaid),
    cardLast4: str(j.cardLast4),
    reserved: j.reserved === true,
    trackingNumber: str(j.trackingNumber),
    deliveredAt: num(j.deliveredAt),
    refundedAmount: num(j.refundedAmount),
  }),
};
