// @alone
/**
 * A flood of 10,000 provider callbacks at once is absorbed without blocking sends: every one is
 * answered 200 and stored exactly once (none lost, none doubled), the deliveries they name move,
 * and notifications sent while the flood is being written still go out and reach `delivered`.
 * The writer batches events into a few transactions on one connection (feedback/writer.ts), so the
 * delivery workers keep the rest of the pool. Throughput figures are in bench/RESULTS.md
 * (bench/webhooks.ts), not asserted here.
 */
import t from 'tap';
import { createHmac } from 'node:crypto';
import { Agent, fetch as ufetch } from 'undici';
import { waitFor } from '../../harness/wait.js';
import { feedbackRig, series, SMS_TOKEN } from './helpers.js';

const FLOOD = 10_000;

t.test('10,000 callbacks at once: all stored once, their deliveries moved, and sends still complete', async (t) => {
  const rig = await feedbackRig(t, 'feedback_flood');
  // The sandbox's own callbacks come late, so the flood's are the first word on each message: the
  // longest delay it takes (10 min; its waits end when it closes), for a minute was not enough on
  // a loaded machine (the sandbox's 20 `delivered` arrived during the flood: 10,020 events stored).
  rig.sandbox.setFaults({ channel: 'sms', callback_delay_ms: 600_000 }, { channel: 'email', callback_delay_ms: 100 });
  await rig.user('u-fl', 'flood@example.com', '+15550006666');
  // Twenty SMS already sent: the flood carries their `delivered`.
  const sent: string[] = [];
  for (let i = 0; i < 20; i++) sent.push(await rig.send('u-fl', ['sms']));
  await waitFor(
    async () => (await rig.core.db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'sent'`)).rows[0].n === 20,
    {
      timeoutMs: 15_000,
      what: 'twenty SMS sent',
    },
  );
  const { rows } = await rig.core.db.pool.query<{ provider_message_id: string }>(
    `SELECT provider_message_id FROM deliveries WHERE channel = 'sms'`,
  );
  const sids = rows.map((r) => r.provider_message_id);

  const publicUrl = 'http://edge.test/api/v1/webhooks/twilio';
  const bodies: { body: string; signature: string }[] = [];
  for (let i = 0; i < FLOOD; i++) {
    // The first 20 are our messages' `delivered`; the rest are other messages (unknown to us).
    const sid = i < sids.length ? sids[i]! : `SMflood${i.toString().padStart(6, '0')}`;
    const params: [string, string][] = [
      ['MessageSid', sid],
      ['MessageStatus', 'delivered'],
      ['To', '+15550006666'],
    ];
    const data =
      publicUrl +
      [...params]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => k + v)
        .join('');
    bodies.push({ body: new URLSearchParams(params).toString(), signature: createHmac('sha1', SMS_TOKEN).update(data).digest('base64') });
  }
  const agent = new Agent({ connections: 256 });
  t.teardown(() => agent.close());
  const url = `${rig.core.url}/api/v1/webhooks/twilio`;
  const flood = Promise.all(
    bodies.map(({ body, signature }) =>
      ufetch(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
        body,
      }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      }),
    ),
  );
  // Sends made while the flood is under way.
  const during: string[] = [];
  for (let i = 0; i < 5; i++) during.push(await rig.send('u-fl', ['email']));
  const statuses = await flood;
  const counts = new Map<number, number>();
  for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1);
  t.same([...counts], [[200, FLOOD]], 'every callback answered 200');

  const stored = await rig.core.db.pool.query(
    `SELECT count(*)::int AS n, count(DISTINCT event_key)::int AS k FROM provider_events WHERE provider = 'twilio'`,
  );
  t.same(stored.rows[0], { n: FLOOD, k: FLOOD }, 'each stored exactly once');
  for (const id of sent) t.equal((await rig.core.status(id)).channels.sms, 'delivered', 'its delivery moved');
  for (const id of during) await rig.waitChannels(id, { email: 'delivered' }, 20_000);
  t.pass('the sends made during the flood completed');
  const m = await rig.metrics();
  t.equal(
    series(m, 'webhook_unknown_messages_total', { provider: 'twilio' }),
    FLOOD - sent.length,
    'the other messages counted as unknown',
  );
});
