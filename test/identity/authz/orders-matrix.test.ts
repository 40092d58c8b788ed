import t from 'tap';
import { startTestIdentity } from '../accounts/helpers.js';
import { waitFor } from '../../harness/wait.js';

const CARD = '4242424242424242';
const PASSWORD = 'matrix password 0123';
const id = await startTestIdentity(t, 'identity_authz_matrix');
const aliceId = await id.signup('alice@example.com', PASSWORD);
await id.signup('bob@example.com', PASSWORD);
await id.signup('sam@example.com', PASSWORD, 'support');
await id.signup('ann@example.com', PASSWORD, 'admin');
const tokens: Record<string, string | undefined> = {
  owner: await id.login('alice@example.com', PASSWORD),
  other: await id.login('bob@example.com', PASSWORD),
  support: await id.login('sam@example.com', PASSWORD),
  admin: await id.login('ann@example.com', PASSWORD),
  none: undefined,
};
type Who = keyof typeof tokens;
const WHO: Who[] = ['owner', 'other', 'support', 'admin', 'none'];
const staff = (who: Who): boolean => who === 'support' || who === 'admin';

const items = [{ sku: 'BOOK-1', quantity: 2, price: 12.5 }];
/** A fresh order of alice's, paid with a card number (tokenised at once): processing, total 25. */
async function newOrder(): Promise<string> {
  const r = await id.call('POST', '/checkout', { token: tokens.owner, body: { items, payment: { card_number: CARD } } });
  if (r.status !== 201) throw new Error(`checkout: ${r.status} ${r.text}`);
  return String(r.json?.order_id);
}
const auditRows = async (): Promise<
  { actor_id: string; actor_role: string; action: string; subject: string; reason: string; outcome: string }[]
> => (await id.pool.query('SELECT actor_id, actor_role, action, subject, reason, outcome FROM order_access_audit ORDER BY audit_id')).rows;

const base = await newOrder();
await waitFor(async () => (await id.call('GET', `/order/${base}`, { token: tokens.owner })).status === 200, {
  what: 'the order in the read model',
});

// [method, path, body, expected status for owner, other customer, support, admin, no token]
type Row = [string, (id: string) => string, unknown, [number, number, number, number, number]];
const READS: Row[] = [
  ['GET', (o) => `/order/${o}`, undefined, [200, 404, 200, 200, 401]],
  ['GET', (o) => `/order/${o}?consistent=true`, undefined, [200, 404, 200, 200, 401]],
  ['GET', () => `/orders?user_id=${aliceId}`, undefined, [200, 404, 200, 200, 401]],
  ['GET', (o) => `/orders/${o}/payment-method`, undefined, [200, 404, 200, 200, 401]],
];
const reason = { reason: 'needs a reason' };
const COMMANDS: Row[] = [
  ['POST', (o) => `/orders/${o}/cancel`, reason, [200, 404, 403, 200, 401]],
  ['POST', (o) => `/orders/${o}/refund`, reason, [403, 404, 200, 403, 401]],
  ['PATCH', (o) => `/orders/${o}`, { items: [{ sku: 'PEN', quantity: 1, price: 2 }], reason: 'r' }, [403, 404, 403, 200, 401]],
  // the owner's order is processing, so delete_own_order's attribute rule refuses it
  ['DELETE', (o) => `/orders/${o}?reason=r`, undefined, [403, 404, 403, 200, 401]],
  // the earlier paths, kept as aliases
  ['POST', (o) => `/order/${o}/cancel`, reason, [200, 404, 403, 200, 401]],
  ['POST', (o) => `/order/${o}/refund`, reason, [403, 404, 200, 403, 401]],
  ['POST', (o) => `/order/${o}/modify`, { items: [{ sku: 'PEN', quantity: 1, price: 2 }], reason: 'r' }, [403, 404, 403, 200, 401]],
  ['DELETE', (o) => `/order/${o}?reason=r`, undefined, [403, 404, 403, 200, 401]],
];

t.test('the role × route matrix over every orders route', async (t) => {
  for (const [method, path, body, expected] of READS) {
    for (const [i, who] of WHO.entries()) {
      let p = path(base);
      if (staff(who)) p += `${p.includes('?') ? '&' : '?'}reason=ticket-42`;
      const before = (await auditRows()).length;
      const r = await id.call(method, p, { token: tokens[who], body });
      t.equal(r.status, expected[i], `${method} ${path(':id')} as ${who}: ${expected[i]}`);
      t.equal((await auditRows()).length - before, staff(who) ? 1 : 0, `${method} ${path(':id')} as ${who}: audit records`);
    }
  }
  for (const [method, path, body, expected] of COMMANDS) {
    for (const [i, who] of WHO.entries()) {
      const order = await newOrder(); // each cell on a fresh order, so an allowed command cannot mask the next
      const r = await id.call(method, path(order), { token: tokens[who], body });
      t.equal(r.status, expected[i], `${method} ${path(':id')} as ${who}: ${expected[i]}`);
      if (r.status >= 400) t.equal(r.headers.get('content-type'), 'application/problem+json');
      const events = await id.pool.query<{ n: string }>('SELECT count(*) AS n FROM events WHERE stream_id = $1', [`order-${order}`]);
      t.equal(Number(events.rows[0]!.n), r.status === 200 ? 4 : 3, `${method} ${path(':id')} as ${who}: written only when allowed`);
    }
  }
});

t.test("a customer listing another's orders gets 404, not 403; staff must name the customer", async (t) => {
  const r = await id.call('GET', `/orders?user_id=${aliceId}`, { token: tokens.other });
  t.equal(r.status, 404);
  t.equal((await id.call('GET', '/orders?reason=x', { token: tokens.support })).json?.field, 'user_id');
  const mine = await id.call('GET', '/orders', { token: tokens.owner });
  t.ok(Array.isArray(mine.json));
});

t.test('support reads: a reason is required; each read, found or not, writes one audit record', async (t) => {
  const before = (await auditRows()).length;
  const noReason = await id.call('GET', `/order/${base}`, { token: tokens.support });
  t.equal(noReason.status, 400);
  t.equal(noReason.json?.field, 'reason');
  t.equal((await auditRows()).length, before, 'refused before any read: nothing read, nothing recorded');

  const missing = await id.call('GET', '/order/no-such-order?reason=customer%20call%2017', { token: tokens.support });
  t.equal(missing.status, 404);
  const pm = await id.call('GET', `/orders/${base}/payment-method?reason=chargeback`, { token: tokens.support });
  t.equal(pm.status, 200);
  t.same(pm.json, { order_id: base, card_last4: '4242', masked: '•••• •••• •••• 4242' });
  const rows = (await auditRows()).slice(before);
  t.equal(rows.length, 2);
  t.match(rows[0], {
    actor_role: 'support',
    action: 'order_read',
    subject: 'order:no-such-order',
    reason: 'customer call 17',
    outcome: 'order_not_found',
  });
  t.match(rows[1], { actor_role: 'support', action: 'payment_method_read', subject: `order:${base}`, reason: 'chargeback', outcome: 'ok' });
  const at = await id.pool.query<{ fresh: boolean }>("SELECT max(at) > now() - interval '1 minute' AS fresh FROM order_access_audit");
  t.ok(at.rows[0]?.fresh, 'with the time of the read');
  t.ok(
    id.lines.some((l) => l.includes('"audit":"order_read"') && l.includes('"role":"support"') && !l.includes('sam@')),
    'a log line too, with the actor hashed',
  );
});

t.test('no full card number in any response body or log line', async (t) => {
  t.ok(id.bodies.length > 50 && id.lines.length > 0, 'bodies and log lines were captured');
  const spaced = CARD.replace(/(\d{4})(?=\d)/g, '$1 ');
  const leaks = [...id.bodies, ...id.lines].filter(
    (s) =>
      s.includes(CARD) ||
      s.includes(spaced) ||
      // Any 13-19 digit run, after taking out timestamps and UUIDs (an order id such as
      // 27592057-4330-4293-… is digits and dashes too).
      /\b(?:\d[ -]?){13,19}\b/.test(
        s
          .replace(/"(?:time|at|date|exp|iat)":[\d.]+/g, '')
          .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, 'uuid'),
      ),
  );
  t.same(leaks, [], 'none');
});
