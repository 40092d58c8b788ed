// @tier: pure
/**
 * The payload check (identity/events/payload-check.ts), one fixture per failure mode with its exact
 * reason, and what it lets through: missing, null and unknown fields, unknown event types.
 */
import t from 'tap';
import { EVENT_CATALOG, type EventCatalog } from '../../../identity/events/catalog.js';
import { NOT_AN_OBJECT, payloadProblem } from '../../../identity/events/payload-check.js';

const check = (type: string, data: Record<string, unknown>, malformed?: true) =>
  payloadProblem({ type, data, ...(malformed ? { malformed } : {}) });

t.test('refused, naming the field', async (t) => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['OrderPlaced', { total: '12.50' }, 'the stored payload does not fit OrderPlaced: total: must be a number'],
    ['OrderPlaced', { items: { sku: 'A' } }, 'the stored payload does not fit OrderPlaced: items: must be an array'],
    ['OrderPlaced', { items: [1] }, 'the stored payload does not fit OrderPlaced: items[0]: must be an object'],
    [
      'OrderPlaced',
      { items: [{ sku: 'A', quantity: -1 }] },
      'the stored payload does not fit OrderPlaced: items[0].quantity: must be an integer from 0 to 4294967295',
    ],
    ['OrderPlaced', { items: [{ sku: 7 }] }, 'the stored payload does not fit OrderPlaced: items[0].sku: must be a string'],
    ['OrderShipped', { tracking_number: 123 }, 'the stored payload does not fit OrderShipped: tracking_number: must be a string'],
    ['UserRegistered', { name: ['Ada'] }, 'the stored payload does not fit UserRegistered: name: must be a string'],
    ['UserEmailUpdated', { timestamp: 'yesterday' }, 'the stored payload does not fit UserEmailUpdated: timestamp: must be a number'],
    ['PaymentProcessed', { amount: true }, 'the stored payload does not fit PaymentProcessed: amount: must be a number'],
  ];
  for (const [type, data, reason] of cases) t.equal(check(type, data), reason, `${type} ${JSON.stringify(data)}`);
  t.equal(check('OrderPlaced', {}, true), NOT_AN_OBJECT, 'a payload stored as null or an array');
  t.equal(NOT_AN_OBJECT, 'the stored payload is not a JSON object');
});

t.test('passed: missing fields, null fields, fields the contract does not know, types the catalogue does not know', async (t) => {
  t.equal(check('OrderPlaced', {}), undefined);
  t.equal(check('OrderPlaced', { order_id: 'o', total: null, items: null }), undefined);
  t.equal(check('OrderPlaced', { order_id: 'o', gift_wrap: true, items: [{ sku: 'A', engraving: 'x' }] }), undefined);
  t.equal(check('SomethingFromTheFuture', { total: 'anything' }), undefined);
  t.equal(
    check('OrderPlaced', { order_id: 'o', customer_id: 'c', items: [{ sku: 'A', quantity: 2, price: 1.5 }], total: 3, ts: 1.5 }),
    undefined,
    'a complete payload',
  );
});

t.test('judged against the catalogue it is given', async (t) => {
  const other: EventCatalog = { ...EVENT_CATALOG, OrderPlaced: EVENT_CATALOG.OrderShipped };
  t.equal(
    payloadProblem({ type: 'OrderPlaced', data: { tracking_number: 1 } }, other),
    'the stored payload does not fit OrderPlaced: tracking_number: must be a string',
  );
});
