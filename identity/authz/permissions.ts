/**
 * The permission model of the orders API (README, "Roles and what they may do"), pure: the role → permission
 * table, ownership and the attribute rules, decided from the caller and the order's facts. The
 * HTTP edge (identity/http/orders.ts) asks here before every read and command; the order decider
 * (identity/domain/order.ts) checks the same rules again inside the append, so a status that
 * changes between the two cannot slip through.
 *
 * | role | permissions |
 * |---|---|
 * | customer | read_own_order, cancel_own_order, read_own_orders, read_own_profile, delete_own_order (attribute rule) |
 * | support | read_any_order, refund_order |
 * | admin | read_any_order, modify_any_order, delete_any_order |
 *
 * Decisions beyond the plain role table, written down here and in the README:
 * - `delete_own_order` is the customer's, and holds only while the order is `placed` and its total
 *   is below IDENTITY_ORDER_SELF_DELETE_MAX_TOTAL.
 * - Cancelling someone else's order is a modification: `modify_any_order` (admin) allows it.
 * - An order the caller may not even read (another customer's, for a customer) is 404, never 403,
 *   so its existence is not revealed; an order the caller can read but not change is 403.
 * - A read through `read_any_order` is audited and needs a stated reason.
 */
import type { Actor, Role } from '../domain/actor.js';

export type Permission =
  | 'read_own_order'
  | 'cancel_own_order'
  | 'read_own_orders'
  | 'read_own_profile'
  | 'delete_own_order'
  | 'read_any_order'
  | 'refund_order'
  | 'modify_any_order'
  | 'delete_any_order';

/** The role → permission table. `service` (another service of the platform) holds none here. */
export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = Object.freeze({
  customer: ['read_own_order', 'cancel_own_order', 'read_own_orders', 'read_own_profile', 'delete_own_order'],
  support: ['read_any_order', 'refund_order'],
  admin: ['read_any_order', 'modify_any_order', 'delete_any_order'],
  service: [],
});

export function hasPermission(role: Role, permission: Permission): boolean {
  return ROLE_PERMISSIONS[role].includes(permission);
}

/** What the rules need to know about an order. */
export interface OrderFacts {
  readonly customerId: string;
  readonly status: string;
  readonly total: number;
}

export interface AuthzPolicy {
  /** delete_own_order holds only below this total (IDENTITY_ORDER_SELF_DELETE_MAX_TOTAL). */
  readonly selfDeleteMaxTotal: number;
}

export type OrderAction = 'read' | 'read_payment_method' | 'cancel' | 'refund' | 'modify' | 'delete';

export type Decision =
  | { readonly allow: true; readonly via: Permission; readonly audited: boolean }
  | { readonly allow: false; readonly status: 403 | 404; readonly detail: string };

const allow = (via: Permission): Decision => ({ allow: true, via, audited: via === 'read_any_order' });
const hidden: Decision = { allow: false, status: 404, detail: 'no such order' };
const refuse = (detail: string): Decision => ({ allow: false, status: 403, detail });

/** May `actor` do `action` on this order? */
export function authorizeOrder(action: OrderAction, actor: Actor, order: OrderFacts, policy: AuthzPolicy): Decision {
  const own = actor.id === order.customerId;
  const can = (p: Permission): boolean => hasPermission(actor.role, p);
  const canSee = (own && can('read_own_order')) || can('read_any_order');
  switch (action) {
    case 'read':
    case 'read_payment_method':
      if (own && can('read_own_order')) return allow('read_own_order');
      if (can('read_any_order')) return allow('read_any_order');
      return hidden;
    case 'cancel':
      if (own && can('cancel_own_order')) return allow('cancel_own_order');
      if (can('modify_any_order')) return allow('modify_any_order');
      return canSee ? refuse('cancelling an order needs cancel_own_order (its customer) or modify_any_order') : hidden;
    case 'refund':
      if (can('refund_order')) return allow('refund_order');
      return canSee ? refuse('refunding an order needs refund_order (support)') : hidden;
    case 'modify':
      if (can('modify_any_order')) return allow('modify_any_order');
      return canSee ? refuse('modifying an order needs modify_any_order (admin)') : hidden;
    case 'delete':
      if (can('delete_any_order')) return allow('delete_any_order');
      if (own && can('delete_own_order')) {
        if (order.status === 'placed' && order.total < policy.selfDeleteMaxTotal) return allow('delete_own_order');
        return refuse(`a customer may delete their own order only while it is placed and its total is below ${policy.selfDeleteMaxTotal}`);
      }
      return canSee ? refuse('deleting an order needs delete_any_order (admin)') : hidden;
  }
}

/** May `actor` list the orders of `customerId` (`GET /orders?user_id=`)? Another customer's list is 404. */
export function authorizeList(actor: Actor, customerId: string): Decision {
  if (actor.id === customerId && hasPermission(actor.role, 'read_own_orders')) return allow('read_own_orders');
  if (hasPermission(actor.role, 'read_any_order')) return allow('read_any_order');
  return hidden;
}

/** The informative `scope` of a token issued to a role (`<action>:<resource>`); decisions use the role. */
export function scopeOfRole(role: Role): string {
  const scopes: Record<Role, string> = {
    customer: 'read:orders write:orders read:profile',
    support: 'read:orders refund:orders',
    admin: 'read:orders write:orders delete:orders',
    service: '',
  };
  return scopes[role];
}
