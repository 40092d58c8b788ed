/**
 * Validation of the orders API's request bodies and headers. Every refusal is 400 naming the field
 * (`items[1].quantity`, `payment.card_last4`); no message ever repeats a submitted value, so a card
 * number sent by mistake is never echoed.
 */
import { invalidField } from '../../shared/errors.js';
import { cardDigits, looksLikeCardNumber, luhnValid } from '../domain/card.js';
import { isValidId } from '../domain/user.js';
import { MAX_ITEMS } from '../domain/order.js';
import type { OrderItemData } from '../events/event-data.js';

export type CheckoutPayment = { kind: 'token'; cardToken: string; cardLast4: string } | { kind: 'number'; cardNumber: string };

export interface CheckoutBody {
  /** The idempotency key (`idempotency_key`, or the deprecated `order_id`); never the order's id. */
  idempotencyKey?: string;
  /** The field the key came in. */
  keyField?: 'idempotency_key' | 'order_id';
  items: OrderItemData[];
  /** Absent when the body says `"pay": false`: the order is placed, to be paid later. */
  payment?: CheckoutPayment;
}

function onlyFields(obj: Record<string, unknown>, allowed: readonly string[], prefix = ''): void {
  for (const key of Object.keys(obj)) if (!allowed.includes(key)) throw invalidField(`${prefix}${key}`, 'is not a field of this request');
}

function object(v: unknown, field: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalidField(field, 'must be an object');
  return v as Record<string, unknown>;
}

function optionalString(v: unknown, field: string, max: number): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length > max) throw invalidField(field, `must be a string of at most ${max} characters`);
  return v;
}

/** Order lines: shape only here; the domain checks values (checkItems). */
export function parseItems(v: unknown, field = 'items'): OrderItemData[] {
  if (!Array.isArray(v) || v.length === 0 || v.length > MAX_ITEMS) throw invalidField(field, `must be a list of 1 to ${MAX_ITEMS} items`);
  return v.map((raw, i) => {
    const item = object(raw, `${field}[${i}]`);
    onlyFields(item, ['sku', 'quantity', 'price'], `${field}[${i}].`);
    for (const k of ['sku', 'quantity', 'price']) if (item[k] === undefined) throw invalidField(`${field}[${i}].${k}`, 'is required');
    return item as unknown as OrderItemData;
  });
}

/**
 * POST /checkout: `{ idempotency_key?, items: [{sku, quantity, price}], payment: {card_token, card_last4} | {card_number} }`,
 * or `{ idempotency_key?, items, "pay": false }` to place the order without paying it yet.
 * `order_id` is the earlier name of `idempotency_key` (the order's id is always the server's).
 */
export function parseCheckout(body: Record<string, unknown>): CheckoutBody {
  onlyFields(body, ['idempotency_key', 'order_id', 'items', 'payment', 'pay']);
  if (body.idempotency_key !== undefined && body.order_id !== undefined) {
    throw invalidField('idempotency_key', 'give idempotency_key or its earlier name order_id, not both');
  }
  const keyField = body.order_id !== undefined ? 'order_id' : body.idempotency_key !== undefined ? 'idempotency_key' : undefined;
  const idempotencyKey = keyField === undefined ? undefined : optionalString(body[keyField], keyField, 128);
  if (keyField !== undefined && idempotencyKey !== undefined && !isValidId(idempotencyKey)) {
    throw invalidField(keyField, 'must be 1 to 128 letters, digits or . _ : -');
  }
  const items = parseItems(body.items);
  if (body.pay !== undefined && typeof body.pay !== 'boolean') throw invalidField('pay', 'must be true or false');
  if (body.pay === false) {
    if (body.payment !== undefined)
      throw invalidField('payment', 'must be left out when pay is false (pay later with POST /checkout/{id}/pay)');
    return { idempotencyKey, keyField: idempotencyKey === undefined ? undefined : keyField, items };
  }
  if (body.payment === undefined) throw invalidField('payment', 'is required (or "pay": false, to place the order and pay it later)');
  return { idempotencyKey, keyField: idempotencyKey === undefined ? undefined : keyField, items, payment: parsePayment(body.payment) };
}

/** POST /checkout/{id}/pay: `{ payment: {card_token, card_last4} | {card_number} }`. */
export function parsePay(body: Record<string, unknown>): { payment: CheckoutPayment } {
  onlyFields(body, ['payment']);
  if (body.payment === undefined) throw invalidField('payment', 'is required');
  return { payment: parsePayment(body.payment) };
}

/** The card: the provider's token with its last four digits, or a card number (tokenised by the caller at once). */
function parsePayment(v: unknown): CheckoutPayment {
  const p = object(v, 'payment');
  onlyFields(p, ['card_token', 'card_last4', 'card_number'], 'payment.');
  if (p.card_number !== undefined) {
    if (p.card_token !== undefined || p.card_last4 !== undefined)
      throw invalidField('payment', 'give card_number or card_token with card_last4, not both');
    const digits = typeof p.card_number === 'string' ? cardDigits(p.card_number.trim()) : undefined;
    if (digits === undefined || !luhnValid(digits)) throw invalidField('payment.card_number', 'is not a valid card number');
    return { kind: 'number', cardNumber: digits };
  }
  if (typeof p.card_token !== 'string' || !/^[A-Za-z0-9_.:-]{1,256}$/.test(p.card_token)) {
    throw invalidField('payment.card_token', "must be the payment provider's token (1 to 256 letters, digits or _ . : -)");
  }
  if (looksLikeCardNumber(p.card_token)) throw invalidField('payment.card_token', 'must be a token, never a card number');
  if (typeof p.card_last4 !== 'string' || !/^\d{4}$/.test(p.card_last4))
    throw invalidField('payment.card_last4', 'must be exactly four digits');
  return { kind: 'token', cardToken: p.card_token, cardLast4: p.card_last4 };
}

/** An optional free-text reason. */
export function parseReason(body: Record<string, unknown>): string {
  return optionalString(body.reason, 'reason', 500) ?? '';
}

export function parseRefund(body: Record<string, unknown>): { amount?: number; reason: string } {
  onlyFields(body, ['amount', 'reason']);
  if (body.amount !== undefined && (typeof body.amount !== 'number' || !Number.isFinite(body.amount) || body.amount <= 0)) {
    throw invalidField('amount', 'must be a positive number');
  }
  return { amount: body.amount, reason: parseReason(body) };
}

export function parseModify(body: Record<string, unknown>): { items: OrderItemData[]; reason: string } {
  onlyFields(body, ['items', 'reason']);
  return { items: parseItems(body.items), reason: parseReason(body) };
}

export function parseCancel(body: Record<string, unknown>): { reason: string } {
  onlyFields(body, ['reason']);
  return { reason: parseReason(body) };
}

/** `If-Match: "3"` (or `W/"3"`, or `3`): the stream version the command was decided on. */
export function parseIfMatch(header: string | undefined): number | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  const m = /^(?:W\/)?"?(\d{1,9})"?$/.exec(header.trim());
  if (!m) throw invalidField('If-Match', 'must be the ETag of the order, e.g. "3"');
  return Number(m[1]);
}

/** A boolean query flag: absent, true/false or 1/0. */
export function parseFlag(query: URLSearchParams, name: string): boolean {
  const v = query.get(name);
  if (v === null || v === '' || v === 'false' || v === '0') return false;
  if (v === 'true' || v === '1') return true;
  throw invalidField(name, 'must be true or false');
}

export function parseLimit(query: URLSearchParams, max = 200, fallback = 50): number {
  const v = query.get('limit');
  if (v === null || v === '') return fallback;
  if (!/^\d{1,4}$/.test(v) || Number(v) < 1 || Number(v) > max) throw invalidField('limit', `must be an integer from 1 to ${max}`);
  return Number(v);
}
