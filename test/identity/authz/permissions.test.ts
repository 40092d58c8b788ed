// @tier: pure
import t from 'tap';
import { authorizeList, authorizeOrder, hasPermission, ROLE_PERMISSIONS, type OrderAction } from '../../../identity/authz/permissions.js';
import type { Role } from '../../../identity/domain/actor.js';
import { afterFailure, blockedForMs } from '../../../identity/accounts/throttle-window.js';
import { checkPassword } from '../../../identity/accounts/password-policy.js';

const policy = { selfDeleteMaxTotal: 100 };
const order = (extra: Partial<{ status: string; total: number }> = {}) => ({
  customerId: 'alice',
  status: 'processing',
  total: 25,
  ...extra,
});
const outcome = (action: OrderAction, id: string, role: Role, o = order()): number | string => {
  const d = authorizeOrder(action, { id, role }, o, policy);
  return d.allow ? d.via : d.status;
};

t.test("the role table is the seed's, plus delete_own_order for customers", async (t) => {
  t.same(ROLE_PERMISSIONS, {
    customer: ['read_own_order', 'cancel_own_order', 'read_own_orders', 'read_own_profile', 'delete_own_order'],
    support: ['read_any_order', 'refund_order'],
    admin: ['read_any_order', 'modify_any_order', 'delete_any_order'],
    service: [],
  });
  t.ok(hasPermission('support', 'refund_order'));
  t.notOk(hasPermission('admin', 'refund_order'));
});

t.test('decisions: owner, other customer (404), support, admin', async (t) => {
  const table: [OrderAction, [number | string, number | string, number | string, number | string]][] = [
    ['read', ['read_own_order', 404, 'read_any_order', 'read_any_order']],
    ['read_payment_method', ['read_own_order', 404, 'read_any_order', 'read_any_order']],
    ['cancel', ['cancel_own_order', 404, 403, 'modify_any_order']],
    ['refund', [403, 404, 'refund_order', 403]],
    ['modify', [403, 404, 403, 'modify_any_order']],
    ['delete', [403, 404, 403, 'delete_any_order']],
  ];
  for (const [action, [owner, other, support, admin]] of table) {
    t.equal(outcome(action, 'alice', 'customer'), owner, `${action}: owner`);
    t.equal(outcome(action, 'bob', 'customer'), other, `${action}: another customer`);
    t.equal(outcome(action, 'sam', 'support'), support, `${action}: support`);
    t.equal(outcome(action, 'ann', 'admin'), admin, `${action}: admin`);
    t.equal(outcome(action, 'svc', 'service'), 404, `${action}: service role`);
  }
});

t.test('delete_own_order: only while placed and below the configured total', async (t) => {
  t.equal(outcome('delete', 'alice', 'customer', order({ status: 'placed', total: 99.99 })), 'delete_own_order');
  t.equal(outcome('delete', 'alice', 'customer', order({ status: 'placed', total: 100 })), 403, 'at the limit');
  t.equal(outcome('delete', 'alice', 'customer', order({ status: 'processing', total: 1 })), 403, 'not placed');
  t.equal(outcome('delete', 'bob', 'customer', order({ status: 'placed', total: 1 })), 404, "never another's");
});

t.test('reads through read_any_order are the audited ones', async (t) => {
  const d = authorizeOrder('read', { id: 'sam', role: 'support' }, order(), policy);
  t.ok(d.allow && d.audited);
  const own = authorizeOrder('read', { id: 'alice', role: 'customer' }, order(), policy);
  t.ok(own.allow && !own.audited);
  t.match(authorizeList({ id: 'alice', role: 'customer' }, 'alice'), { allow: true, via: 'read_own_orders', audited: false });
  t.match(authorizeList({ id: 'bob', role: 'customer' }, 'alice'), { allow: false, status: 404 });
  t.match(authorizeList({ id: 'sam', role: 'support' }, 'alice'), { allow: true, audited: true });
});

t.test('throttle windows: fixed, opened by the first failure', async (t) => {
  let w = afterFailure(undefined, 1000, 5000);
  t.same(w, { failures: 1, startMs: 5000 });
  w = afterFailure(w, 1000, 5500);
  w = afterFailure(w, 1000, 5900);
  t.same(w, { failures: 3, startMs: 5000 });
  t.equal(blockedForMs(w, 3, 1000, 5900), 100);
  t.equal(blockedForMs(w, 4, 1000, 5900), 0, 'below the limit');
  t.equal(blockedForMs(w, 3, 1000, 6000), 0, 'the window has closed');
  t.same(afterFailure(w, 1000, 6000), { failures: 1, startMs: 6000 }, 'a closed window starts over');
  t.equal(blockedForMs(undefined, 1, 1000, 0), 0);
});

t.test('password policy: 12 to 256 code points', async (t) => {
  t.equal(checkPassword('x'.repeat(12)), 'x'.repeat(12));
  t.equal(checkPassword('😀'.repeat(12)), '😀'.repeat(12), 'code points, not UTF-16 units');
  t.throws(() => checkPassword('x'.repeat(11)), { code: 'invalid_field', field: 'password' });
  t.throws(() => checkPassword('x'.repeat(257)), { code: 'invalid_field', field: 'password' });
  t.throws(() => checkPassword(undefined), { code: 'invalid_field', field: 'password' });
});
