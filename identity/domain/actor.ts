/**
 * Who is issuing a command: a user id and the role from their access token (roles: customer,
 * support, admin; `service` for another service of the platform). Permissions follow the role
 * table of identity/authz/permissions.ts; ownership and attribute rules are checked by the
 * aggregates against their state.
 */
export type Role = 'customer' | 'support' | 'admin' | 'service';

export interface Actor {
  readonly id: string;
  readonly role: Role;
}

const ROLES: ReadonlySet<string> = new Set<Role>(['customer', 'support', 'admin', 'service']);

/** The role named by a token's `role` claim, or undefined for a role this service does not know. */
export function roleOf(claim: string): Role | undefined {
  return ROLES.has(claim) ? (claim as Role) : undefined;
}

/** support and admin hold `read_any_order`; a customer reads only their own. */
export function canReadAnyOrder(actor: Actor): boolean {
  return actor.role === 'support' || actor.role === 'admin';
}
