// @alone
/**
 * The notifier as its own process (`node dist/notifier/main.js`, built by `npx tsc -b`), killed
 * with SIGKILL in the middle of a load, restarted, and reconciled against the sandbox providers:
 *
 * - every notification that got its 202 is in the database and reaches a final state (here, with
 *   healthy providers: sent) after the restart, or is still queued; none is lost;
 * - no in-app item twice (the inbox write is idempotent on the delivery id);
 * - on push, e-mail and SMS (FCM v1, SMTP and Twilio's Messages API take no idempotency key and
 *   cannot be asked about ours) a duplicate at the provider only comes from a send that was in the
 *   crash window (left `sending` by the kill) or an attempt that timed out, which is what the
 *   README documents ("What a crash can still duplicate").
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import { startSandbox } from '../../../sandbox/app.js';
import { PLAIN_NODE, plainNodeArgs } from '../../harness/child.js';
import { useTestDatabase } from '../../harness/db.js';
import { freePort } from '../../harness/ports.js';
import { waitFor } from '../../harness/wait.js';
import { SERVICE_SECRET, request } from './helpers.js';
import { sourceUrl } from '../../harness/source.js';

const ROOT = resolve(fileURLToPath(sourceUrl(import.meta.url)), '../../../..');
const MAIN = join(ROOT, 'dist/notifier/main.js');

t.test(
  'SIGKILL mid-load: nothing accepted is lost; duplicates at a provider only from the sends a kill or a timeout left open',
  async (t) => {
    try {
      statSync(MAIN);
    } catch {
      t.fail(`${MAIN} does not exist: run \`npx tsc -b\` first (npm test does)`);
      return;
    }
    const sandbox = await startSandbox({
      faults: [
        { channel: 'push', latency_ms: 20 },
        { channel: 'email', latency_ms: 20 },
        { channel: 'sms', latency_ms: 20 },
      ],
    });
    t.teardown(() => sandbox.close(1000));
    const db = await useTestDatabase(t, 'core_crash');
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
      NOTIFIER_SEND_TIMEOUT: '1s',
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

    const service = { 'x-subject': 'key:' + 'b'.repeat(64), 'x-subject-role': 'service', 'x-subject-secret': SERVICE_SECRET };
    const admin = { ...service, 'x-subject': 'user:ops', 'x-subject-role': 'admin' };
    const call = async (method: string, path: string, body: unknown, headers: Record<string, string> = service): Promise<Response> =>
      fetch(base + path, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const variant = {
      push: { title: 'Hi {{name}}', body: 'Code {{code}}' },
      email: { subject: 'Code', text: 'Code {{code}}' },
      sms: { body: 'Code {{code}}' },
      in_app: { body: 'Code {{code}}' },
    };
    t.equal((await call('PUT', '/api/v1/admin/templates/code_v1', { default_locale: 'en', variants: { en: variant } }, admin)).status, 201);
    for (let u = 0; u < 10; u++) {
      t.equal((await call('PUT', `/api/v1/users/u${u}/profile`, { email: `u${u}@example.test`, phone: `+1415555010${u}` })).status, 201);
      await call('POST', `/api/v1/users/u${u}/devices`, { token: `tok-${u}`, platform: 'ios' });
    }

    const shapes = [
      { channels: ['sms'], priority: 'transactional' },
      { channels: ['in_app'], priority: 'high' },
      { channels: ['push', 'email'], priority: 'high' },
      { channels: ['sms', 'in_app'], priority: 'high' },
    ];
    const accepted: string[] = [];
    let next = 0;
    const send = async (total: number): Promise<void> => {
      const worker = async (): Promise<void> => {
        while (next < total) {
          const i = next++;
          const r = await call(
            'POST',
            '/api/v1/notifications',
            request({ recipient_id: `u${i % 10}`, idempotency_key: `n-${i}`, ...shapes[i % 4] }),
          ).catch(() => undefined);
          if (r?.status === 202) accepted.push(((await r.json()) as { notification_id: string }).notification_id);
          else if (r === undefined) return; // the process is gone
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
    };

    // Load; kill it while sends are in flight.
    const load = send(400);
    await waitFor(() => sandbox.messages().length >= 60, { timeoutMs: 15_000, what: 'sends to be under way' });
    child.kill('SIGKILL');
    await once(child, 'exit');
    await load;
    const beforeKill = accepted.length;
    t.ok(beforeKill >= 60 && next < 400, `killed mid-load (${beforeKill} accepted before the kill)`);
    const inWindow = new Set(
      (await db.pool.query<{ id: string }>(`SELECT id FROM deliveries WHERE status = 'sending'`)).rows.map((r) => r.id),
    );

    // Restart and finish the load.
    child = await start();
    next = Math.max(next, beforeKill);
    await send(next + 80);
    t.ok(accepted.length > beforeKill, 'more accepted after the restart');

    // Routed first: a notification whose routing job the killed process held has no delivery yet,
    // and is routed again only once that job expires, which on a slow machine can come after every
    // existing delivery finished.
    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ unrouted: number; busy: number }>(
          `SELECT (SELECT count(*)::int FROM notifications WHERE id = ANY($1) AND routed_at IS NULL) AS unrouted,
                  (SELECT count(*)::int FROM deliveries WHERE status IN ('queued', 'sending')) AS busy`,
          [accepted],
        );
        return rows[0]!.unrouted === 0 && rows[0]!.busy === 0;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: 'every accepted notification routed and every delivery finished' },
    );
    const { rows } = await db.pool.query<{ id: string; statuses: string[]; routed: boolean }>(
      `SELECT n.id, array_agg(d.status) FILTER (WHERE d.id IS NOT NULL) AS statuses, n.routed_at IS NOT NULL AS routed
       FROM notifications n LEFT JOIN deliveries d ON d.notification_id = n.id WHERE n.id = ANY($1) GROUP BY n.id`,
      [accepted],
    );
    t.equal(rows.length, accepted.length, `all ${accepted.length} acknowledged notifications are stored`);
    const unfinished = rows.filter((r) => !r.routed || !r.statuses?.every((s) => s === 'sent'));
    t.same(unfinished, [], 'every one was routed and sent on every channel');

    const dups = sandbox.core.store.duplicates();
    const inboxDups = await db.pool.query(`SELECT delivery_id FROM inbox_items GROUP BY delivery_id HAVING count(*) > 1`);
    t.equal(inboxDups.rowCount, 0, 'no in-app item twice');
    // An attempt that timed out is the same window without a crash (the provider may have taken it):
    // a delivery tried more than once may be at the provider twice; one tried once and not caught by
    // a kill never is.
    const retried = new Set((await db.pool.query<{ id: string }>(`SELECT id FROM deliveries WHERE attempts > 1`)).rows.map((r) => r.id));
    const mayRepeat = (id: string): boolean => inWindow.has(id) || retried.has(id);
    t.same(
      dups.filter((d) => !mayRepeat(d.delivery_id)),
      [],
      `duplicates only from the crash window or a timed-out attempt (${dups.length}; ${inWindow.size} in flight at the kill, ${retried.size} retried)`,
    );
    const smsDeliveries = (await db.pool.query<{ id: string }>(`SELECT id FROM deliveries WHERE channel = 'sms'`)).rows;
    const smsSent = sandbox.messages({ channel: 'sms' }).length;
    const smsMayRepeat = smsDeliveries.filter((d) => mayRepeat(d.id)).length;
    t.ok(
      smsSent >= smsDeliveries.length && smsSent - smsDeliveries.length <= smsMayRepeat,
      `every SMS delivery reached the provider; extra copies (${smsSent - smsDeliveries.length}) at most the SMS sends that could repeat (${smsMayRepeat})`,
    );

    child.kill('SIGTERM');
    await once(child, 'exit');
  },
);
