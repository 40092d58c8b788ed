/**
 * Issue 24, item 4, as it was reported: with nothing fixed, `POST /auth/admin/dead-letters/redrive
 * {}` answered `{"redriven":7,"failed":1}` for events stored as JSON `null` and `[1,2]`, and wrote
 * `data: [1,2]` into the order timeline. Through the running identity service: the answer counts
 * every one as failed, the dead letters stay open with attempts raised, the read models stay
 * empty of them, and the answer is the one the OpenAPI document describes.
 */
import t from 'tap';
import { startTestIdentity } from '../accounts/helpers.js';
import { fetchDocument, record, responseValidator } from '../../openapi/helpers.js';
import { waitFor } from '../../harness/wait.js';

const id = await startTestIdentity(t, 'identity_redrive_http');

t.test('re-drive with nothing fixed answers failed, keeps the dead letters open and writes nothing', async (t) => {
  const valid = responseValidator(await fetchDocument(t, id.base));
  await id.signup('ann@example.test', 'correct horse battery', 'admin');
  const admin = await id.login('ann@example.test', 'correct horse battery');
  const insert = (stream: string, json: string) =>
    id.pool.query(
      `INSERT INTO events (stream_id, stream_version, event_type, schema_version, event_id, data)
       VALUES ($1, 1, 'OrderPlaced', 1, gen_random_uuid(), $2::jsonb)`,
      [stream, json],
    );
  await insert('order-null', 'null');
  await insert('order-array', '[1, 2]');
  await insert('order-strtotal', '{"order_id": "strtotal", "customer_id": "c1", "items": [], "total": "12.50", "ts": 1}');
  // Three projectors read OrderPlaced: order_search, order_timeline, warehouse_queue.
  const open = await waitFor(
    async () => {
      const r = await id.call('GET', '/auth/admin/dead-letters', { token: admin });
      const list = r.json as unknown as { id: number; attempts: number; error: string }[];
      return list.length === 9 && list;
    },
    { what: 'the three bad events to be dead-lettered by their three projectors' },
  );
  t.ok(
    open.every((l) => l.attempts === 1),
    'dead-lettered at once',
  );

  const r = await record(id.base, 'POST', '/auth/admin/dead-letters/redrive', { headers: { authorization: `Bearer ${admin}` }, body: {} });
  t.equal(r.status, 200);
  t.same(r.body, { redriven: 0, failed: 9, remaining: 9 });
  valid(t, 'POST', '/auth/admin/dead-letters/redrive', r);

  const after = (await id.call('GET', '/auth/admin/dead-letters', { token: admin })).json as unknown as {
    id: number;
    attempts: number;
    error: string;
  }[];
  t.same(
    after.map((l) => [l.id, l.attempts]),
    open.map((l) => [l.id, 2]),
    'still open, attempts raised',
  );
  t.same(
    after.map((l) => l.error).sort(),
    [
      ...Array<string>(6).fill('the stored payload is not a JSON object'),
      ...Array<string>(3).fill('the stored payload does not fit OrderPlaced: total: must be a number'),
    ].sort(),
  );
  const { rows } = await id.pool.query(
    `SELECT 'timeline' FROM order_timeline WHERE order_id = ANY ($1)
     UNION ALL SELECT 'search' FROM order_search WHERE order_id = ANY ($1)
     UNION ALL SELECT 'warehouse' FROM warehouse_queue WHERE order_id = ANY ($1)`,
    [['null', 'array', 'strtotal']],
  );
  t.same(rows, [], 'nothing in any read model');
});
