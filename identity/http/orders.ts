/**
 * The orders API on the identity service. Every route needs a bearer access token; roles and
 * ownership follow seed 002 (customer: own orders; support: read any, refund; admin: read any,
 * modify, delete).
 *
 * | route | does |
 * |---|---|
 * | `POST /checkout` | places an order for the caller: OrderPlaced, PaymentProcessed, InventoryReserved (201) |
 * | `GET /order/{id}` | the order from the read model (possibly stale); `?consistent=true` from the write model |
 * | `GET /orders` | the caller's orders (read model); support and admin name a customer with `?user_id=` |
 * | `GET /orders/{id}/payment-method` | the card as its last four digits only |
 * | `POST /order/{id}/cancel` | OrderCancelled (its customer or an admin) |
 * | `POST /order/{id}/refund` | OrderRefunded (support) |
 * | `POST /order/{id}/modify` | OrderModified (admin) |
 * | `DELETE /order/{id}` | OrderDeleted (admin; its customer while placed and below the configured total) |
 *
 * Staleness: `GET /order/{id}` and `GET /orders` read the projected `order_search` model, which
 * lags the event log by the projection lag (milliseconds when healthy; see
 * identity_projection_lag_seconds), so an order just placed may be missing for a moment (404) and a
 * status may be one step behind. The answer says which it is in `X-Consistency: eventual`. A caller
 * that must see its own write asks with `?consistent=true` (the event store, `X-Consistency:
 * strong`, with an ETag of the stream version). Commands accept `If-Match` with that ETag; a
 * mismatch is 409 `concurrency_conflict`, as is losing a race with another writer.
 *
 * Card data: the checkout takes a provider token plus last four digits (or a card number, which is
 * tokenised at once and dropped); only the token (in the event store) and the last four digits (in
 * answers) are ever kept, and no response or log line carries a card number.
 */
import type { Logger } from '../../shared/log.js';
import { hashSubject } from '../../shared/log.js';
import { PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions, type Reply, type RequestContext } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { canReadAnyOrder, type Actor } from '../domain/actor.js';
import { randomCardToken, type CardTokenizer } from '../domain/card.js';
import { NotPermitted, OrderNotFound } from '../domain/errors.js';
import type { OrderState } from '../domain/order.js';
import type { Orders } from '../domain/orders.js';
import { isValidId } from '../domain/user.js';
import type { Loaded } from '../events/aggregate-repository.js';
import type { ReadModels } from '../events/read-models.js';
import type { BearerAuth, Caller } from './orders-auth.js';
import { parseCancel, parseCheckout, parseFlag, parseIfMatch, parseLimit, parseModify, parseReason, parseRefund } from './orders-input.js';

export interface OrdersHttpDeps {
  orders: Orders;
  readModels: ReadModels;
  auth: BearerAuth;
  log: Logger;
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
  /** Reads of any order by support are audit-logged (seed 002); admins' too, for the same reason. */
  const audit = (actor: Actor, id: string, what: string): void => {
    if (actor.role !== 'customer')
      deps.log.info({ audit: what, actor: hashSubject(actor.id), role: actor.role, order_id: id }, 'order accessed by staff');
  };
  const readable = (actor: Actor): void => {
    if (actor.role !== 'customer' && !canReadAnyOrder(actor))
      throw new NotPermitted('reading orders needs read_own_order or read_any_order');
  };

  route(
    app,
    'post',
    '/checkout',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      if (caller.actor.role !== 'customer') throw new NotPermitted('checkout places an order for a customer; this token is not a customer');
      const input = parseCheckout(jsonBody(ctx));
      const payment =
        input.payment.kind === 'token'
          ? { cardToken: input.payment.cardToken, cardLast4: input.payment.cardLast4 }
          : { cardToken: await tokenize(input.payment.cardNumber), cardLast4: input.payment.cardNumber.slice(-4) };
      const saved = await deps.orders.checkout(
        { orderId: input.orderId, customerId: caller.actor.id, items: input.items, payment },
        { metadata: metadata(caller) },
      );
      return written(201, saved, { location: `/order/${encodeURIComponent(saved.orderId)}` });
    },
    edge,
  );

  route(
    app,
    'get',
    '/order/:id',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      readable(caller.actor);
      const id = orderId(ctx);
      const consistent = parseFlag(ctx.query, 'consistent');
      if (consistent) {
        const loaded = await deps.orders.get(id);
        if (caller.actor.role === 'customer' && loaded.state.customerId !== caller.actor.id) throw new OrderNotFound(id);
        audit(caller.actor, id, 'order_read');
        return written(200, loaded);
      }
      const doc = await deps.readModels.order(id);
      if (!doc || (caller.actor.role === 'customer' && doc.customer_id !== caller.actor.id)) throw new OrderNotFound(id);
      audit(caller.actor, id, 'order_read');
      return { body: doc, headers: { 'x-consistency': 'eventual' } };
    },
    edge,
  );

  route(
    app,
    'get',
    '/orders',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      readable(caller.actor);
      const requested = ctx.query.get('user_id') ?? undefined;
      let customer: string;
      if (caller.actor.role === 'customer') {
        if (requested !== undefined && requested !== caller.actor.id) throw new NotPermitted('a customer may list only their own orders');
        customer = caller.actor.id;
      } else {
        if (requested === undefined || !isValidId(requested))
          throw new PlatformError('invalid_field', { field: 'user_id', detail: 'user_id: is required' });
        customer = requested;
        audit(caller.actor, `customer:${hashSubject(customer)}`, 'orders_listed');
      }
      const docs = await deps.readModels.ordersOf(customer, parseLimit(ctx.query));
      return {
        body: docs.map((d) => ({ order_id: d.order_id, total: d.total, status: d.status })),
        headers: { 'x-consistency': 'eventual' },
      };
    },
    edge,
  );

  route(
    app,
    'get',
    '/orders/:id/payment-method',
    async (ctx) => {
      const caller = await deps.auth.authenticate(ctx);
      readable(caller.actor);
      const id = orderId(ctx);
      const loaded = await deps.orders.get(id);
      if (caller.actor.role === 'customer' && loaded.state.customerId !== caller.actor.id) throw new OrderNotFound(id);
      audit(caller.actor, id, 'payment_method_read');
      const last4 = loaded.state.cardLast4;
      return { body: { order_id: id, card_last4: last4 || null, masked: last4 ? `•••• •••• •••• ${last4}` : null } };
    },
    edge,
  );

  const command = (
    method: 'post' | 'del',
    pattern: string,
    run: (id: string, caller: Caller, ctx: RequestContext, expectedVersion: number | undefined) => Promise<Loaded<OrderState>>,
  ): void =>
    route(
      app,
      method,
      pattern,
      async (ctx) => {
        const caller = await deps.auth.authenticate(ctx);
        const id = orderId(ctx);
        const expectedVersion = parseIfMatch(ctx.headers['if-match']);
        return written(200, await run(id, caller, ctx, expectedVersion));
      },
      edge,
    );

  command('post', '/order/:id/cancel', (id, caller, ctx, expectedVersion) =>
    deps.orders.cancel(id, caller.actor, parseCancel(body(ctx)).reason, { expectedVersion, metadata: metadata(caller) }),
  );
  command('post', '/order/:id/refund', (id, caller, ctx, expectedVersion) =>
    deps.orders.refund(id, caller.actor, parseRefund(body(ctx)), { expectedVersion, metadata: metadata(caller) }),
  );
  command('post', '/order/:id/modify', (id, caller, ctx, expectedVersion) =>
    deps.orders.modify(id, caller.actor, parseModify(body(ctx)), { expectedVersion, metadata: metadata(caller) }),
  );
  command('del', '/order/:id', (id, caller, ctx, expectedVersion) =>
    deps.orders.delete(id, caller.actor, parseReason({ reason: ctx.query.get('reason') ?? undefined }), {
      expectedVersion,
      metadata: metadata(caller),
    }),
  );
}
