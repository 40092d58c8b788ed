/**
 * The orders API on the identity service. Every route needs a bearer access token; roles and
 * ownership are decided by identity/authz/permissions.ts (customer: own orders; support:
 * read any, refund; admin: read any, modify, delete). Another customer's order or list is 404, not
 * 403. A read through read_any_order (support, admin) needs `?reason=` and writes one audit record
 * in the same transaction (identity/authz/audit.ts), successful or not.
 *
 * | route | does |
 * |---|---|
 * | `POST /checkout` | places an order for the caller: OrderPlaced, PaymentProcessed, InventoryReserved (201); with `"pay": false` OrderPlaced only |
 * | `POST /checkout/{id}/pay` | pays an order placed unpaid: PaymentProcessed, InventoryReserved (its customer) |
 * | `GET /order/{id}` | the order from the read model (possibly stale); `?consistent=true` from the write model |
 * | `GET /orders` | the caller's orders (read model); `?user_id=` names the customer (support and admin must) |
 * | `GET /orders/{id}/payment-method` | the card as its last four digits only |
 * | `POST /orders/{id}/cancel` | OrderCancelled (cancel_own_order; modify_any_order) |
 * | `POST /orders/{id}/refund` | OrderRefunded (refund_order) |
 * | `PATCH /orders/{id}` | OrderModified (modify_any_order) |
 * | `DELETE /orders/{id}` | OrderDeleted (delete_any_order; delete_own_order while placed, unpaid and below the configured total) |
 *
 * `POST /order/{id}/cancel`, `/order/{id}/refund`, `/order/{id}/modify` and `DELETE /order/{id}`
 * are the earlier paths of the same commands, kept as aliases.
 *
 * Staleness: `GET /order/{id}` and `GET /orders` read the projected `order_search` model, which
 * lags the event log by the projection lag (milliseconds when healthy; see
 * identity_projection_lag_seconds), so an order just placed may be missing for a moment (404) and a
 * status may be one step behind. The answer says which it is in `X-Consistency: eventual`. A caller
 * that must see its own write asks with `?consistent=true` (the event store, `X-Consistency:
 * strong`, with an ETag of the stream version). Commands accept `If-Match` with that ETag; a
 * mismatch is 409 `concurrency_conflict`, as is losing a race with another writer.
 *
 * Order ids are the server's (identity/domain/order-id.ts): a checkout's `idempotency_key` (or its
 * earlier name `order_id`) is scoped to the caller, so no answer depends on whether another
 * customer has an order of some id, and the caller's own repeat is 409 `order_already_exists`
 * naming the first order.
 *
 * Card data: the checkout takes a provider token plus last four digits (or a card number, which is
 * tokenised at once and dropped); only the token (in the event store) and the last four digits (in
 * answers) are ever kept, and no response or log line carries a card number.
 */
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions, type Reply, type RequestContext } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { auditedRead } from '../authz/audit.js';
import { authorizeList, authorizeOrder, hasPermission, type AuthzPolicy, type Decision, type OrderAction } from '../authz/permissions.js';
import { randomCardToken, type CardTokenizer } from '../domain/card.js';
import { NotPermitted, OrderNotFound } from '../domain/errors.js';
import type { OrderState } from '../domain/order.js';
import type { Orders } from '../domain/orders.js';
import { isValidId } from '../domain/user.js';
import type { Loaded } from '../events/aggregate-repository.js';
import { ReadModels } from '../events/read-models.js';
import type { BearerAuth, Caller } from './orders-auth.js';
import {
  parseCancel,
  parseCheckout,
  parseFlag,
  parseIfMatch,
  parseLimit,
  parseModify,
  parsePay,
  parseReason,
  parseRefund,
  type CheckoutPayment,
} from './orders-input.js';

export interface OrdersHttpDeps {
  orders: Orders;
  readModels: ReadModels;
  auth: BearerAuth;
  log: Logger;
  /** For reads through read_any_order, which run in a transaction with their audit record. */
  pool: pg.Pool;
  clock: Clock;
  policy: AuthzPolicy;
  /** Default: random opaque tokens (no payment provider is wired in yet). */
  tokenizeCard?: CardTokenizer;
}

/** The order as the write model has it (`?consistent=true`, command answers). */
export function orderView(loaded: Loaded<OrderState>): Record<string, unknown> {
  const s = loaded.state;
  return {
    order_id: s.orderId,
    customer_id: s.customerId,
    status: s.status,
    date: s.placedAt,
    total: s.total,
    items: s.items,
    card_last4: s.cardLast4 || null,
    version: loaded.version,
    ...(s.deleted ? { deleted: true } : {}),
  };
}

const etag = (version: number): string => `"${version}"`;

export function registerOrderRoutes(app: TemplatedApp, edge: EdgeOptions, deps: OrdersHttpDeps): void {
  const tokenize = deps.tokenizeCard ?? randomCardToken;
  /** The card as token and last four digits; a card number is tokenised here and dropped. */
  const card = async (payment: CheckoutPayment): Promise<{ cardToken: string; cardLast4: string }> =>
    payment.kind === 'token'
      ? { cardToken: payment.cardToken, cardLast4: payment.cardLast4 }
      : { cardToken: await tokenize(payment.cardNumber), cardLast4: payment.cardNumber.slice(-4) };

  const metadata = (caller: Caller): Record<string, unknown> => ({ actor_id: caller.actor.id, actor_role: caller.actor.role });
  const body = (ctx: RequestContext): Record<string, unknown> => (ctx.body.length === 0 ? {} : jsonBody(ctx));
  const orderId = (ctx: RequestContext): string => {
    const id = ctx.params[0] ?? '';
    if (!isValidId(id)) throw new OrderNotFound(id.slice(0, 128));
    return id;
  };
  const written = (status: number, loaded: Loaded<OrderState>, extra: Record<string, string> = {}): Reply => ({
    status,
    body: orderView(loaded),
    headers: { etag: etag(loaded.version), 'x-consistency': 'strong', ...extra },
  });
  const enforce = (decision: Decision, id: string): void => {
    if (decision.allow) return;
    if (decision.status === 404) throw new OrderNotFound(id);
    throw new NotPermitted(decision.detail);
  };
  const check = (action: OrderAction, caller: Caller, state: OrderState): void =>
    enforce(
      authorizeOrder(action, caller.actor, { customerId: state.customerId, status: state.status, total: state.total }, deps.policy),
      state.orderId,
    );
  /** The load of the write model, on `client` when inside an audited read. */
  const load = async (id: string, client?: pg.PoolClient): Promise<Loaded<OrderState>> => {
    const loaded = await deps.orders.repo.load(id, client ? { client } : {});
    if (!loaded.state.exists || loaded.state.deleted) throw new OrderNotFound(id);
    return loaded;
  };
  /**
   * A read: a caller holding read_any_order must give `?reason=`, and the read runs in one
   * transaction with its audit record; anyone else reads straight from the pool.
   */
  const read = async <T>(
    ctx: RequestContext,
    caller: Caller,
    action: string,
    subject: string,
    fn: (client?: pg.PoolClient) => Promise<T>,
  ): Promise<T> => {
    if (!hasPermission(caller.actor.role, 'read_any_order')) return fn();
    const reason = (ctx.query.get('reason') ?? '').trim();
    if (reason === '' || reason.length > 500) throw invalidField('reason', 'a read of any order needs a reason of 1 to 500 characters');
    return auditedRead(deps.pool, { clock: deps.clock, log: deps.log }, { actor: caller.actor, action, subject, reason }, fn);
  };

  route(
    app,
    'post',
    '/checkout',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      if (caller.actor.role !== 'customer') throw new NotPermitted('checkout places an order for a customer; this token is not a customer');
      const input = parseCheckout(jsonBody(ctx));
      const payment = input.payment && (await card(input.payment));
      // Never `orderId`: the caller's key only ever names the caller's own orders.
      const saved = await deps.orders.checkout(
        { idempotencyKey: input.idempotencyKey, keyField: input.keyField, customerId: caller.actor.id, items: input.items, payment },
        { metadata: metadata(caller) },
      );
      return written(201, saved, { location: `/order/${encodeURIComponent(saved.orderId)}` });
    },
    edge,
  );

  route(
    app,
    'post',
    '/checkout/:id/pay',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      const id = orderId(ctx);
      const expectedVersion = parseIfMatch(ctx.headers['if-match']);
      const input = parsePay(body(ctx));
      // Another customer's order is 404 (as any read of it); staff may see it but not pay it.
      check('read', caller, (await load(id)).state);
      if (caller.actor.role !== 'customer') throw new NotPermitted('paying an order is for its customer');
      const saved = await deps.orders.pay(id, caller.actor, await card(input.payment), { expectedVersion, metadata: metadata(caller) });
      return written(200, saved);
    },
    edge,
  );

  route(
    app,
    'get',
    '/order/:id',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      const id = orderId(ctx);
      const consistent = parseFlag(ctx.query, 'consistent');
      return read(ctx, caller, 'order_read', `order:${id}`, async (client) => {
        if (consistent) {
          const loaded = await load(id, client);
          check('read', caller, loaded.state);
          return written(200, loaded);
        }
        // ReadModels only calls query(), which a PoolClient has too: the audited read shares the transaction.
        const models = client ? new ReadModels(client as unknown as pg.Pool) : deps.readModels;
        const doc = await models.order(id);
        if (!doc) throw new OrderNotFound(id);
        enforce(
          authorizeOrder('read', caller.actor, { customerId: doc.customer_id, status: doc.status, total: doc.total }, deps.policy),
          id,
        );
        return { body: doc, headers: { 'x-consistency': 'eventual' } };
      });
    },
    edge,
  );

  route(
    app,
    'get',
    '/orders',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      const requested = ctx.query.get('user_id') ?? undefined;
      if (requested === undefined && hasPermission(caller.actor.role, 'read_any_order'))
        throw new PlatformError('invalid_field', { field: 'user_id', detail: 'user_id: is required' });
      const customer = requested ?? caller.actor.id;
      const decision = authorizeList(caller.actor, customer);
      // Another customer's list is 404, as their order would be: existence is not revealed.
      if (!decision.allow) throw new PlatformError('not_found', { detail: 'no such customer' });
      if (!isValidId(customer)) throw invalidField('user_id', 'is not a valid user id');
      const limit = parseLimit(ctx.query);
      return read(ctx, caller, 'orders_listed', `customer:${customer}`, async (client) => {
        const models = client ? new ReadModels(client as unknown as pg.Pool) : deps.readModels;
        const docs = await models.ordersOf(customer, limit);
        return {
          body: docs.map((d) => ({ order_id: d.order_id, total: d.total, status: d.status })),
          headers: { 'x-consistency': 'eventual' },
        };
      });
    },
    edge,
  );

  route(
    app,
    'get',
    '/orders/:id/payment-method',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      const id = orderId(ctx);
      return read(ctx, caller, 'payment_method_read', `order:${id}`, async (client) => {
        const loaded = await load(id, client);
        check('read_payment_method', caller, loaded.state);
        const last4 = loaded.state.cardLast4;
        return { body: { order_id: id, card_last4: last4 || null, masked: last4 ? `•••• •••• •••• ${last4}` : null } };
      });
    },
    edge,
  );

  const command = (
    method: 'post' | 'patch' | 'del',
    patterns: readonly string[],
    action: OrderAction,
    run: (id: string, caller: Caller, ctx: RequestContext, expectedVersion: number | undefined) => Promise<Loaded<OrderState>>,
  ): void => {
    for (const pattern of patterns)
      route(
        app,
        method,
        pattern,
        async (ctx) => {
          const caller = await deps.auth.authenticate(ctx);
          const id = orderId(ctx);
          const expectedVersion = parseIfMatch(ctx.headers['if-match']);
          // The rules decide here on the current state; the decider checks them again inside the append.
          check(action, caller, (await load(id)).state);
          return written(200, await run(id, caller, ctx, expectedVersion));
        },
        edge,
      );
  };

  command('post', ['/orders/:id/cancel', '/order/:id/cancel'], 'cancel', (id, caller, ctx, expectedVersion) =>
    deps.orders.cancel(id, caller.actor, parseCancel(body(ctx)).reason, { expectedVersion, metadata: metadata(caller) }),
  );
  command('post', ['/orders/:id/refund', '/order/:id/refund'], 'refund', (id, caller, ctx, expectedVersion) =>
    deps.orders.refund(id, caller.actor, parseRefund(body(ctx)), { expectedVersion, metadata: metadata(caller) }),
  );
  const modify: Parameters<typeof command>[3] = (id, caller, ctx, expectedVersion) =>
    deps.orders.modify(id, caller.actor, parseModify(body(ctx)), { expectedVersion, metadata: metadata(caller) });
  command('patch', ['/orders/:id'], 'modify', modify);
  command('post', ['/order/:id/modify'], 'modify', modify);
  command('del', ['/orders/:id', '/order/:id'], 'delete', (id, caller, ctx, expectedVersion) =>
    deps.orders.delete(id, caller.actor, parseReason({ reason: ctx.query.get('reason') ?? undefined }), {
      expectedVersion,
      metadata: metadata(caller),
    }),
  );
}
