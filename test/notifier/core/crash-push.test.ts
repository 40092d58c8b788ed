// @alone
/**
 * SIGKILL of the notifier process (`node dist/notifier/main.js`, built by `npx tsc -b`) three times
 * under a push load, each time restarted, then reconciled against the sandbox's FCM and its model
 * of what each device shows (sandbox/display.ts):
 *
 * - nothing lost: every notification that got its 202 is stored, routed and sent to every device;
 * - no duplicate visible to the recipient: a send repeated after a kill carries the same replace
 *   identifiers (the delivery id as `apns-collapse-id`, Android and web push `tag`), so on iOS,
 *   Android and web devices alike the second copy replaces the first;
 * - duplicates at the provider are counted and come only from the sends in flight at a kill (left
 *   `sending` by it). The process killed had claimed at most the push queue's NOTIFIER_CONCURRENCY
 *   of them (its claims since it started: rows still `sending` from the kill before are counted
 *   where they began), and each is repeated at most once per device of its user, so the copies are
 *   at most the sum over the kills of in-flight × devices per user.
 *
 * Each notification also goes by e-mail, measured beside: SMTP repeats too, under the same
 * Message-ID, and the mailbox model counts every copy as visible (most clients list both).
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import { startSandbox } from '../../../sandbox/app.js';
import type { DevicePlatform } from '../../../sandbox/display.js';
import { PLAIN_NODE, plainNodeArgs } from '../../harness/child.js';
import { useTestDatabase } from '../../harness/db.js';
import { freePort } from '../../harness/ports.js';
import { waitFor } from '../../harness/wait.js';
import { SERVICE_SECRET } from './helpers.js';
import { sourceUrl } from '../../harness/source.js';

const ROOT = resolve(fileURLToPath(sourceUrl(import.meta.url)), '../../../..');
const MAIN = join(ROOT, 'dist/notifier/main.js');
const USERS = 40;
const KILLS = 3;
/** Sends in flight on the one push queue of this load (`high`). */
const CONCURRENCY = 16;
const MAX_DEVICES = 2;
const PLATFORMS: readonly DevicePlatform[] = ['ios', 'android', 'web'];

t.test('SIGKILL under a push load, three times: none lost, no duplicate on any device, provider duplicates bounded', async (t) => {
  try {
    statSync(MAIN);
  } catch {
    t.fail(`${MAIN} does not exist: run \`npx tsc -b\` first (npm test does)`);
    return;
  }
  // User u has (u % 2) + 1 devices, their platforms in turn.
  const devices = new Map<string, { token: string; platform: DevicePlatform }[]>();
  let n = 0;
  for (let u = 0; u < USERS; u++) {
    devices.set(
      `u${u}`,
      Array.from({ length: (u % MAX_DEVICES) + 1 }, (_, i) => ({ token: `tok-${u}-${i}`, platform: PLATFORMS[n++ % PLATFORMS.length]! })),
    );
  }
  const sandbox = await startSandbox({
    faults: [
      { channel: 'push', latency_ms: 40 },
      { channel: 'email', latency_ms: 40 },
    ],
    devices: Object.fromEntries([...devices.values()].flat().map((d) => [d.token, d.platform])),
  });
  t.teardown(() => sandbox.close(1000));
  const db = await useTestDatabase(t, 'core_crash_push');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    LOG_LEVEL: 'warn',
    DATABASE_URL: db.url,
    DATABASE_POOL_MAX: '8',
    NOTIFIER_PORT: String(port),
    SERVICE_SECRET,
    FCM_URL: sandbox.url,
    SMS_URL: sandbox.url,
    SMTP_URL: sandbox.smtpUrl,
    NOTIFIER_CONCURRENCY: `transactional=8,high=${CONCURRENCY},normal=8,low=8`,
    // 2 s: a send timing out under the restart's burst (then retried: a duplicate that is no crash's) stays unlikely.
    NOTIFIER_SEND_TIMEOUT: '2s',
    NOTIFIER_JOB_EXPIRE: '2s',
    NOTIFIER_QUEUE_MAINTENANCE: '1s',
    NOTIFIER_RETRY_SCHEDULE: '200ms,500ms,1s',
    NOTIFIER_IDLE_POLL: 'transactional=20ms,high=20ms,normal=50ms,low=50ms',
    NOTIFIER_TRACKING_SECRET: 'tracking-secret-for-tests-0123',
  };
  let child: ChildProcess | undefined;
  let output = '';
  const start = async (): Promise<ChildProcess> => {
    const p = spawn(PLAIN_NODE, plainNodeArgs([MAIN]), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    p.stdout.on('data', (c: Buffer) => (output = (output + c.toString()).slice(-8000)));
    p.stderr.on('data', (c: Buffer) => (output = (output + c.toString()).slice(-8000)));
    await waitFor(async () => (await fetch(`${base}/readyz`)).ok, {
      timeoutMs: 20_000,
      what: `the notifier to be ready; output: ${output}`,
    });
    return p;
  };
  t.teardown(() => {
    child?.kill('SIGKILL');
  });
  child = await start();

  const service = { 'x-subject': 'key:' + 'c'.repeat(64), 'x-subject-role': 'service', 'x-subject-secret': SERVICE_SECRET };
  const admin = { ...service, 'x-subject': 'user:ops', 'x-subject-role': 'admin' };
  const call = (method: string, path: string, body: unknown, headers: Record<string, string> = service): Promise<Response> =>
    fetch(base + path, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const variant = { push: { title: 'Order {{code}}', body: 'Shipped' }, email: { subject: 'Order {{code}}', text: 'Shipped' } };
  t.equal((await call('PUT', '/api/v1/admin/templates/ship_v1', { default_locale: 'en', variants: { en: variant } }, admin)).status, 201);
  const registered: number[] = [];
  for (const [user, list] of devices) {
    for (const d of list) registered.push((await call('POST', `/api/v1/users/${user}/devices`, d)).status);
    registered.push((await call('PUT', `/api/v1/users/${user}/profile`, { email: `${user}@example.test` })).status);
  }
  t.ok(
    registered.every((s) => s === 201),
    `${registered.length - USERS} devices and ${USERS} profiles registered`,
  );

  const accepted: string[] = [];
  let next = 0;
  let stop = Infinity;
  const load = async (): Promise<void> => {
    const worker = async (): Promise<void> => {
      while (next < stop) {
        const i = next++;
        const r = await call('POST', '/api/v1/notifications', {
          event_type: 'order.shipped',
          recipient_id: `u${i % USERS}`,
          template_id: 'ship_v1',
          template_data: { code: String(i) },
          priority: 'high',
          channels: ['push', 'email'],
          idempotency_key: `p-${i}`,
        }).catch(() => undefined);
        if (r?.status === 202) accepted.push(((await r.json()) as { notification_id: string }).notification_id);
        else if (r === undefined) return; // the process is gone
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
  };

  const inFlight: Set<string>[] = [];
  const emailInFlight: Set<string>[] = [];
  // When the process about to be killed started, by the database's clock (claims carry `sending_since`).
  let startedAt = (await db.pool.query<{ now: Date }>('SELECT now()')).rows[0]!.now;
  for (let k = 0; k < KILLS; k++) {
    const before = sandbox.messages({ channel: 'push' }).length;
    const running = load();
    await waitFor(() => sandbox.messages({ channel: 'push' }).length >= before + 200, {
      timeoutMs: 15_000,
      what: `pushes to be under way before kill ${k + 1}`,
    });
    child.kill('SIGKILL');
    await once(child, 'exit');
    await running;
    const sending = await db.pool.query<{ id: string; channel: string }>(
      `SELECT id, channel FROM deliveries WHERE status = 'sending' AND sending_since >= $1`,
      [startedAt],
    );
    inFlight.push(new Set(sending.rows.filter((r) => r.channel === 'push').map((r) => r.id)));
    emailInFlight.push(new Set(sending.rows.filter((r) => r.channel === 'email').map((r) => r.id)));
    startedAt = (await db.pool.query<{ now: Date }>('SELECT now()')).rows[0]!.now;
    child = await start();
  }
  // The last stretch runs to its end.
  stop = next + 60;
  await load();

  await waitFor(
    async () => (await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE status IN ('queued', 'sending')`)).rows[0].n === 0,
    { timeoutMs: 30_000, intervalMs: 200, what: 'every delivery to finish' },
  );
  const { rows } = await db.pool.query<{ id: string; recipient_id: string; statuses: string[] | null; routed: boolean }>(
    `SELECT n.id, n.recipient_id, array_agg(d.status) FILTER (WHERE d.id IS NOT NULL) AS statuses, n.routed_at IS NOT NULL AS routed
       FROM notifications n LEFT JOIN deliveries d ON d.notification_id = n.id WHERE n.id = ANY($1) GROUP BY n.id`,
    [accepted],
  );
  t.equal(rows.length, accepted.length, `all ${accepted.length} acknowledged notifications are stored`);
  t.same(
    rows.filter((r) => !r.routed || !r.statuses?.every((s) => s === 'sent')),
    [],
    'every one was routed and sent',
  );
  // Each delivery reached every device of its user.
  const pushIds = await db.pool.query<{ id: string; recipient_id: string }>(
    `SELECT id, recipient_id FROM deliveries WHERE channel = 'push'`,
  );
  const missing = pushIds.rows.filter((d) =>
    devices.get(d.recipient_id)!.some((dev) => sandbox.messages({ channel: 'push', delivery_id: d.id, to: dev.token }).length === 0),
  );
  t.same(missing, [], `every one of ${pushIds.rowCount} push deliveries reached every device of its user: none lost`);

  const shown = (await (await fetch(`${sandbox.url}/sandbox/display`)).json()) as {
    push: Record<string, number>;
    email: Record<string, number>;
  };
  t.equal(shown.push.visible_duplicates, 0, 'no duplicate visible on any device (iOS, Android, web)');

  const dups = sandbox.core.store.duplicates().filter((d) => d.channel === 'push');
  const copies = dups.reduce((s, d) => s + d.accepted - 1, 0);
  t.equal(shown.push.provider_duplicates, copies);
  t.equal(shown.push.replaced, copies, 'each extra copy replaced its first on the device');
  const window = new Set(inFlight.flatMap((s) => [...s]));
  t.same(
    dups.filter((d) => !window.has(d.delivery_id)),
    [],
    'duplicates at the provider come only from sends in flight at a kill',
  );
  inFlight.forEach((s, k) => {
    t.ok(s.size <= CONCURRENCY, `kill ${k + 1}: ${s.size} push sends in flight, at most the queue's concurrency (${CONCURRENCY})`);
  });
  const bound = inFlight.reduce((n, s) => n + s.size, 0) * MAX_DEVICES;
  t.ok(copies <= bound, `${copies} copies at the provider, at most in-flight × devices per user summed over the kills (${bound})`);

  // E-mail: each copy under its delivery's one Message-ID. Besides the sends in flight at a kill,
  // an SMTP send that timed out under the restart's burst may still be delivered by the pool and
  // then retried (email-smtp.ts): those are counted apart, not asserted away.
  const mailDups = sandbox.core.store.duplicates().filter((d) => d.channel === 'email');
  const mailWindow = new Set(emailInFlight.flatMap((s) => [...s]));
  const mailOutside = mailDups.filter((d) => !mailWindow.has(d.delivery_id)).length;
  const mailIds = new Map<string, Set<string>>();
  for (const m of sandbox.messages({ channel: 'email' })) {
    const ids = mailIds.get(m.delivery_id!) ?? new Set<string>();
    ids.add(m.message_id!);
    mailIds.set(m.delivery_id!, ids);
  }
  t.ok(
    [...mailIds.values()].every((ids) => ids.size === 1),
    'every copy of an e-mail delivery carries the same Message-ID',
  );
  t.equal(shown.email.visible_duplicates, shown.email.provider_duplicates, 'the mailbox model lists every e-mail copy (conservative)');
  t.comment(
    `measured e-mail: in flight at the kills ${emailInFlight.map((s) => s.size).join('/')}; duplicates at the provider ` +
      `${shown.email.provider_duplicates} (${mailOutside} of them not in flight at a kill: a timed-out send delivered late), ` +
      `each a second entry in a mailbox under the first's Message-ID`,
  );
  t.comment(
    `measured: ${accepted.length} notifications, ${pushIds.rowCount} push deliveries, ${shown.push.arrived} pushes accepted by FCM; ` +
      `in flight at the kills ${inFlight.map((s) => s.size).join('/')}; duplicates at the provider ${copies} ` +
      `(${dups.length} delivery × device pairs), visible on a device ${shown.push.visible_duplicates}`,
  );

  child.kill('SIGTERM');
  await once(child, 'exit');
});
