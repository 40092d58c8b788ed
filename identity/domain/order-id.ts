/**
 * Order ids are minted by the server, never chosen by a caller: a caller-chosen id lives in one
 * namespace shared by every customer, so a clash would tell one customer that another's order
 * exists. A retried checkout is made safe by an idempotency key instead, which is scoped to the
 * customer: the order id is derived from (customer, key), so the same key from the same customer
 * names the same order, and the same key from another customer names a different one.
 */
import { createHash } from 'node:crypto';

/**
 * The order id for `customerId`'s idempotency key `key`: a UUID-shaped digest (version 8, the
 * RFC 9562 custom version) of the pair. `attempt` > 0 gives the next candidate, for the one case
 * where the id is already taken by another customer's order (only an order whose caller chose its
 * id before ids were minted can hold one).
 */
export function orderIdForKey(customerId: string, key: string, attempt = 0): string {
  const h = createHash('sha256');
  // Length-prefixed, so no (customer, key) pair can be spelt as another.
  h.update(`order-id\0${customerId.length}:${customerId}\0${key.length}:${key}\0${attempt}`);
  const b = h.digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = b.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
