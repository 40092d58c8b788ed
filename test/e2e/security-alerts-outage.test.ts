/**
 * The notifier down for a while (README, "Security alerts"): identity keeps working, alerts pile up
 * in its outbox and nothing is lost; when the notifier is back, but before the templates are
 * there, rows wait (422 unknown_template is retried, not parked); once shipped, each alert arrives
 * exactly once. A row sent but not marked (a relay that died after the 202) is sent again with the
 * same idempotency key, the outbox id, and the notifier answers the original 202: still one e-mail.
 * The relay calls the notifier directly with the service-caller headers the notifier tests use.
 */
import t from 'tap';
import { useTestDatabase } from '../harness/db.js';
import { freePort } from '../harness/ports.js';
import { waitFor } from '../harness/wait.js';
import { setCredentials } from '../../identity/oauth/index.js';
import { shipTemplates } from '../../identity/notify/templates.js';
import { SERVICE_HEADERS, mails, outboxOf, signup, useIdentity, useNotifier, useSandbox, waitProfile } from '../identity/notify/helpers.js';

const EMAIL = 'grace.outage@example.com';

t.test('notifier down: alerts pile up, nothing is lost, each arrives exactly once when it is back', async (t) => {
  const db = await useTestDatabase(t, 'e2e_alerts_outage', { poolMax: 4 });
  const sandbox = await useSandbox(t);
  const notifierPort = await freePort();
  const { url: identityUrl } = await useIdentity(
    t,
    db,
    `http://127.0.0.1:${notifierPort}`,
    {},
    { notifierAuth: async () => SERVICE_HEADERS },
  );

  const userId = await signup(identityUrl, EMAIL, 'correct horse battery staple', 'Grace');
  for (const password of ['first new passphrase', 'second new passphrase']) {
    await setCredentials(db.pool, { userId, email: EMAIL, password, role: 'customer', name: 'Grace' });
  }
  // Nothing answers: every row is tried, again and again, and stays pending.
  const piled = await waitFor(
    async () => {
      const rows = await outboxOf(db.pool, userId);
      const { rows: p } = await db.pool.query<{ attempts: number }>('SELECT attempts FROM notifier_profile_sync WHERE user_id = $1', [
        userId,
      ]);
      return rows.length === 3 && (p[0]?.attempts ?? 0) >= 3 ? rows : undefined;
    },
    { timeoutMs: 15_000, what: 'the profile sync to fail three times with three rows queued' },
  );
  // The welcome is written by a projector after the signup's event, the alerts by the credential
  // changes themselves: the welcome's row may come before or after the first alert's, so the rows
  // are compared welcome first, whatever their order.
  const welcomeFirst = [...piled].sort((a, b) => Number(b.kind === 'welcome') - Number(a.kind === 'welcome'));
  t.same(
    welcomeFirst.map((r) => [r.kind, r.sent_at, r.parked_at]),
    [
      ['welcome', null, null],
      ['security_alert', null, null],
      ['security_alert', null, null],
    ],
    'a welcome and two alerts pending, none parked',
  );
  t.same(
    welcomeFirst.map((r) => (r.payload as { alert?: string }).alert ?? null),
    [null, 'PasswordChanged', 'PasswordChanged'],
  );

  const metrics = async (): Promise<string> => (await fetch(`${identityUrl}/metrics`)).text();
  const during = await metrics();
  t.match(during, /identity_notify_outbox_rows\{state="pending"[^}]*\} 3/, 'the metrics show the rows waiting');
  t.match(during, /identity_notify_outbox_rows\{state="parked"[^}]*\} 0/);
  t.match(during, /identity_notify_relay_total\{what="profile",outcome="retry"[^}]*\} [1-9]/, 'and the failed calls');

  // The notifier comes back, without the templates yet: the profile syncs, the rows wait.
  const notifier = await useNotifier(t, db, sandbox, notifierPort);
  await waitProfile(notifier.url, userId, (p) => p.email === EMAIL, 'the profile after the outage');
  const waiting = await waitFor(
    async () => {
      const rows = await outboxOf(db.pool, userId);
      return /unknown_template/.test(String(rows[0]?.last_error)) ? rows : undefined;
    },
    { timeoutMs: 15_000, what: 'the welcome to be refused for its missing template' },
  );
  t.ok(
    waiting.every((r) => r.sent_at === null && r.parked_at === null),
    'a missing template is retried, not parked',
  );

  await shipTemplates(notifier.url, SERVICE_HEADERS);
  const sent = await waitFor(
    async () => {
      const rows = await outboxOf(db.pool, userId);
      return rows.every((r) => r.sent_at !== null) ? rows : undefined;
    },
    { timeoutMs: 15_000, what: 'every row to be sent' },
  );
  t.ok(
    sent.every((r) => r.parked_at === null),
    'none parked',
  );
  await waitFor(() => mails(sandbox, EMAIL, /password was changed/).length >= 2 && mails(sandbox, EMAIL, /^Welcome/).length >= 1, {
    timeoutMs: 15_000,
    what: 'the e-mails',
  });

  t.match(await metrics(), /identity_notify_outbox_rows\{state="pending"[^}]*\} 0/, 'nothing waiting any more');

  // A relay that died after the 202 and before marking the row: the row goes out again.
  const first = sent.find((r) => r.kind === 'security_alert')!;
  const attemptsBefore = Number(first.attempts);
  await db.pool.query('UPDATE notification_outbox SET sent_at = NULL WHERE id = $1', [first.id]);
  await waitFor(
    async () => {
      const rows = await outboxOf(db.pool, userId);
      const r = rows.find((x) => x.id === first.id);
      return r && r.sent_at !== null && Number(r.attempts) > attemptsBefore;
    },
    { timeoutMs: 15_000, what: 'the row to be sent again' },
  );
  // Give the notifier the time any second notification would take to reach the sandbox: wait for
  // a later send to arrive after it, then count.
  await setCredentials(db.pool, { userId, email: EMAIL, password: 'third new passphrase', role: 'customer', name: 'Grace' });
  await waitFor(() => mails(sandbox, EMAIL, /password was changed/).length >= 3, { timeoutMs: 15_000, what: 'a later alert' });

  t.equal(mails(sandbox, EMAIL, /password was changed/).length, 3, 'three password changes, three alert e-mails: none twice');
  t.equal(mails(sandbox, EMAIL, /^Welcome/).length, 1, 'one welcome');
  const { rows } = await db.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM notifications WHERE recipient_id = $1 AND notification_type = 'security_alerts'`,
    [userId],
  );
  t.equal(Number(rows[0]!.n), 3, 'the notifier created one notification per alert');
});
