/**
 * The provider ramp end to end (issue 15 item 6): two push providers played by one sandbox (the
 * old at its root, the new under /providers/fcm-v2), weights changed through the operator API,
 * traffic counted per provider at the sandbox; the new provider failing over to the old; shadow
 * copies as FCM dry runs that reach no device; a change heard by a second replica.
 */
import t from 'tap';
import { startSandbox, type Sandbox } from '../../../sandbox/app.js';
import { onNewProvider } from '../../../notifier/ramp/choice.js';
import type { TestContext } from '../../harness/db.js';
import { waitFor } from '../../harness/wait.js';
import { addDevice, createTemplate, putProfile, request, startCore, type Core, type Json } from '../core/helpers.js';

const NEW = 'fcm-v2';

async function rig(t: TestContext, label: string, env: Record<string, string> = {}): Promise<{ core: Core; sandbox: Sandbox }> {
  const sandbox = await startSandbox();
  t.teardown(() => sandbox.close(1000));
  const core = await startCore(t, label, {
    env: {
      FCM_URL: sandbox.url,
      FCM_RAMP_URL: `${sandbox.url}/providers/${NEW}`,
      FCM_RAMP_NAME: NEW,
      SMS_URL: sandbox.url,
      SMTP_URL: sandbox.smtpUrl,
      PROVIDER_COSTS: `fcm=0.001,${NEW}=0.0005`,
      ...env,
    },
  });
  await createTemplate(core, 'code_v1');
  return { core, sandbox };
}

async function setRamp(core: Core, body: Record<string, unknown>): Promise<Json> {
  const r = await core.api('PUT', '/api/v1/admin/providers/push', body, core.admin);
  if (r.status !== 200) throw new Error(`PUT ramp: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The value of a metric series in Prometheus text: the line of `name` carrying every given label (others allowed). */
function metric(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

let users = 0;
/** Sends `n` pushes to `n` new users with one device each; waits until each is sent; returns their delivery ids. */
async function sendPushes(core: Core, n: number, priority = 'normal'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const user = `ramp-u${++users}`;
    await putProfile(core, user, { locale: 'en' });
    await addDevice(core, user, `tok-${user}`);
    const r = await core.notify(request({ recipient_id: user, channels: ['push'], priority }));
    if (r.status !== 202) throw new Error(`notify: ${r.status} ${JSON.stringify(r.body)}`);
    ids.push(r.body.notification_id);
  }
  const deliveries: string[] = [];
  for (const id of ids) {
    await core.waitStatus(id, (s) => s.channels.push === 'sent', 15_000);
    const { rows } = await core.db.pool.query<{ id: string }>("SELECT id FROM deliveries WHERE notification_id = $1 AND channel = 'push'", [
      id,
    ]);
    deliveries.push(rows[0]!.id);
  }
  return deliveries;
}

async function providersOf(core: Core, deliveryIds: readonly string[]): Promise<Map<string, string>> {
  const { rows } = await core.db.pool.query<{ id: string; provider: string }>('SELECT id, provider FROM deliveries WHERE id = ANY($1)', [
    deliveryIds,
  ]);
  return new Map(rows.map((r) => [r.id, r.provider]));
}

function counted(sandbox: Sandbox, provider: string, ids: readonly string[]): number {
  const set = new Set(ids);
  return sandbox.messages({ channel: 'push', provider }).filter((m) => m.delivery_id !== undefined && set.has(m.delivery_id)).length;
}

t.test('traffic moves from the old provider to the new one as the weights change: 100/0, 50/50, 0/100', async (t) => {
  const { core, sandbox } = await rig(t, 'ramp_weights');
  const before = await core.api('GET', '/api/v1/admin/providers/push', undefined, core.admin);
  t.equal(before.status, 200);
  t.same(before.body.providers, [
    { name: 'fcm', role: 'old', weight_percent: 100 },
    { name: NEW, role: 'new', weight_percent: 0 },
  ]);
  t.equal(before.body.shadow, 'validate_only');

  await setRamp(core, { weights: { fcm: 100, [NEW]: 0 } });
  const phase1 = await sendPushes(core, 20);
  t.equal(counted(sandbox, 'primary', phase1), 20, '100/0: every push went to the old provider');
  t.equal(counted(sandbox, NEW, phase1), 0);

  const view = await setRamp(core, { weights: { fcm: 50, [NEW]: 50 } });
  t.same(
    view.providers.map((p: Json) => p.weight_percent),
    [50, 50],
  );
  const phase2 = await sendPushes(core, 40);
  const expectedNew = phase2.filter((id) => onNewProvider(id, { weight: 5000, shadow: 0 }));
  t.ok(expectedNew.length > 0 && expectedNew.length < phase2.length, 'both providers have a share of these ids');
  t.equal(counted(sandbox, NEW, phase2), expectedNew.length, '50/50: the new provider took the deliveries its weight gives it');
  t.equal(counted(sandbox, 'primary', phase2), phase2.length - expectedNew.length, 'and the old one the rest');
  const recorded = await providersOf(core, phase2);
  t.same(
    phase2.filter((id) => recorded.get(id) === NEW).sort(),
    [...expectedNew].sort(),
    'each delivery records the provider it was sent with',
  );

  await setRamp(core, { weights: { fcm: 0, [NEW]: 100 } });
  const phase3 = await sendPushes(core, 20);
  t.equal(counted(sandbox, NEW, phase3), 20, '0/100: every push went to the new provider');
  t.equal(counted(sandbox, 'primary', phase3), 0);

  const audit = await core.api('GET', '/api/v1/admin/providers/push/changes', undefined, core.admin);
  t.equal(audit.status, 200);
  t.same(
    audit.body.changes.map((c: Json) => [c.previous_weight_percent, c.weight_percent, c.changed_by]),
    [
      [50, 100, 'user:operator'],
      [0, 50, 'user:operator'],
      [0, 0, 'user:operator'],
    ],
    'every change is audited: what it was, what it became, who',
  );

  const metrics = await (await fetch(`${core.url}/metrics`)).text();
  const live = { channel: 'push', shadow: 'false' };
  t.equal(
    metric(metrics, 'provider_sends_total', { ...live, provider: NEW, result: 'sent' }),
    20 + expectedNew.length,
    'sends per provider',
  );
  t.equal(
    metric(metrics, 'provider_sends_total', { ...live, provider: 'fcm', result: 'sent' }),
    phase1.length + phase2.length - expectedNew.length,
  );
  const cost = metric(metrics, 'provider_cost_total', { ...live, provider: 'fcm' }) ?? 0;
  t.ok(Math.abs(cost - 0.001 * (phase1.length + phase2.length - expectedNew.length)) < 1e-9, `the old provider's cost: ${cost}`);
  t.ok((metric(metrics, 'provider_send_seconds_count', { ...live, provider: NEW }) ?? 0) > 0, 'latency per provider');
});

t.test('the new provider failing: after its retries a delivery goes to the old provider, whatever its tier', async (t) => {
  const { core, sandbox } = await rig(t, 'ramp_failover');
  sandbox.setFaults({ channel: 'push', provider: NEW, error_rate: 1, error: 'UNAVAILABLE' });
  await setRamp(core, { weights: { fcm: 0, [NEW]: 100 } });
  const [normal] = await sendPushes(core, 1, 'normal');
  const [transactional] = await sendPushes(core, 1, 'transactional');
  const recorded = await providersOf(core, [normal!, transactional!]);
  t.equal(recorded.get(normal!), 'fcm', 'the normal push was sent by the old provider');
  t.equal(recorded.get(transactional!), 'fcm', 'so was the transactional one');
  t.equal(counted(sandbox, 'primary', [normal!, transactional!]), 2);
  const attempts = (id: string): number => sandbox.core.store.delivery(id).reduce((n, c) => n + (c.provider === NEW ? c.requests : 0), 0);
  t.equal(attempts(normal!), 3, 'the normal push used its retries on the new provider first (1 + a schedule of 2)');
  t.equal(attempts(transactional!), 1, 'a transactional push went to the old provider at once');
  const { rows } = await core.db.pool.query(
    "SELECT count(*)::int AS n FROM deliveries WHERE channel <> 'push' AND notification_id IN (SELECT notification_id FROM deliveries WHERE id = ANY($1))",
    [[normal, transactional]],
  );
  t.equal(rows[0].n, 0, 'no other channel was needed');
});

t.test('shadow copies: an FCM dry run to the new provider that reaches no device and changes no delivery', async (t) => {
  const { core, sandbox } = await rig(t, 'ramp_shadow');
  await setRamp(core, { weights: { fcm: 100, [NEW]: 0 }, shadow_percent: 100 });
  const ids = await sendPushes(core, 10);
  const validated = async (): Promise<number> => {
    const text = await (await fetch(`${sandbox.url}/metrics`)).text();
    return metric(text, 'sandbox_requests_total', { channel: 'push', provider: NEW, outcome: 'validated' }) ?? 0;
  };
  await waitFor(async () => (await validated()) === 10, { what: 'ten dry runs at the new provider', timeoutMs: 10_000 });
  t.equal(sandbox.messages({ channel: 'push', provider: NEW }).length, 0, 'the new provider stored and displayed nothing');
  t.equal(counted(sandbox, 'primary', ids), 10, 'the old provider sent each push once');
  const recorded = await providersOf(core, ids);
  t.same([...new Set(recorded.values())], ['fcm'], 'every delivery records the old provider');
  const shadow = { channel: 'push', provider: NEW, shadow: 'true' };
  const metrics = await waitFor(async () => {
    const text = await (await fetch(`${core.url}/metrics`)).text();
    return metric(text, 'provider_sends_total', { ...shadow, result: 'sent' }) === 10 ? text : undefined;
  });
  t.equal(metric(metrics, 'provider_cost_total', shadow), undefined, 'a dry run costs nothing');
});

t.test('a change through one replica applies on another at once (NOTIFY), without waiting for the poll', async (t) => {
  const { core } = await rig(t, 'ramp_replicas', { NOTIFIER_RAMP_POLL: '1h' });
  const sandbox2 = await startSandbox();
  t.teardown(() => sandbox2.close(1000));
  const other = await startCore(t, 'ramp_replicas_b', {
    db: core.db,
    env: { FCM_URL: sandbox2.url, FCM_RAMP_URL: `${sandbox2.url}/providers/${NEW}`, FCM_RAMP_NAME: NEW, NOTIFIER_RAMP_POLL: '1h' },
  });
  await setRamp(core, { weights: { fcm: 95, [NEW]: 5 }, shadow_percent: 2.5 });
  const seen = await waitFor(
    async () => {
      const r = await other.api('GET', '/api/v1/admin/providers/push', undefined, other.admin);
      return r.body.providers?.[1]?.weight_percent === 5 ? r.body : undefined;
    },
    { what: 'the other replica to apply the weights' },
  );
  t.equal(seen.shadow_percent, 2.5);
  t.equal(seen.updated_by, 'user:operator');
});

t.test('the operator API: roles, validation, channels without a new provider or test recipients', async (t) => {
  const sandbox = await startSandbox();
  t.teardown(() => sandbox.close(1000));
  const core = await startCore(t, 'ramp_api', {
    env: { FCM_URL: sandbox.url, SMS_URL: sandbox.url, SMS_RAMP_URL: `${sandbox.url}/providers/sms-b`, SMS_RAMP_NAME: 'sms-b' },
  });
  const put = (channel: string, body: unknown, headers = core.admin) =>
    core.api('PUT', `/api/v1/admin/providers/${channel}`, body, headers);
  t.equal((await put('sms', { shadow_percent: 0 }, core.user('u1'))).status, 403, 'operators only');
  t.equal((await core.api('GET', '/api/v1/admin/providers', undefined, core.user('u1'))).status, 403);
  const bad = async (channel: string, body: unknown, status: number, code: string, field?: string): Promise<void> => {
    const r = await put(channel, body);
    t.equal(r.status, status, `${JSON.stringify(body)} → ${status}`);
    t.equal(r.body.code, code);
    if (field !== undefined) t.equal(r.body.field, field);
  };
  await bad('sms', { weights: { twilio: 60, 'sms-b': 30 } }, 400, 'invalid_field', 'weights');
  await bad('sms', { weights: { twilio: 50, other: 50 } }, 400, 'invalid_field', 'weights');
  await bad('sms', { weights: { twilio: 99.995, 'sms-b': 0.005 } }, 400, 'invalid_field', 'weights.twilio');
  await bad('sms', { shadow_percent: 101 }, 400, 'invalid_field', 'shadow_percent');
  await bad('sms', {}, 400, 'invalid_field', 'weights');
  await bad('sms', { shadow_percent: 5 }, 409, 'ramp_test_recipients_missing');
  await bad('push', { weights: { fcm: 90, 'fcm-ramp': 10 } }, 409, 'provider_ramp_not_configured');
  t.equal((await put('in_app', { shadow_percent: 0 })).status, 404);
  const ok = await put('sms', { weights: { twilio: 99.5, 'sms-b': 0.5 } });
  t.equal(ok.status, 200);
  t.same(ok.body.providers, [
    { name: 'twilio', role: 'old', weight_percent: 99.5 },
    { name: 'sms-b', role: 'new', weight_percent: 0.5 },
  ]);
  t.equal(ok.body.shadow, null, 'no SMS shadow without test recipients');
  const all = await core.api('GET', '/api/v1/admin/providers', undefined, core.admin);
  t.same(
    all.body.channels.map((c: Json) => [c.channel, c.providers.length]),
    [
      ['push', 1],
      ['email', 1],
      ['sms', 2],
    ],
  );
});

t.test('an SMS shadow copy goes to a test number, never the user, and a transactional SMS has none', async (t) => {
  const TEST_PHONE = '+15550000001';
  const sandbox = await startSandbox();
  t.teardown(() => sandbox.close(1000));
  const core = await startCore(t, 'ramp_sms_shadow', {
    env: {
      FCM_URL: sandbox.url,
      SMS_URL: sandbox.url,
      SMS_RAMP_URL: `${sandbox.url}/providers/sms-b`,
      SMS_RAMP_NAME: 'sms-b',
      NOTIFIER_RAMP_TEST_PHONES: TEST_PHONE,
      SMTP_URL: sandbox.smtpUrl,
    },
  });
  await createTemplate(core, 'code_v1');
  const r = await core.api('PUT', '/api/v1/admin/providers/sms', { weights: { twilio: 100, 'sms-b': 0 }, shadow_percent: 100 }, core.admin);
  t.equal(r.status, 200);
  t.equal(r.body.shadow, 'test_recipients');
  const send = async (user: string, priority: string): Promise<string> => {
    await putProfile(core, user, { locale: 'en', phone: `+1555123${String(++users).padStart(4, '0')}` });
    const n = await core.notify(request({ recipient_id: user, channels: ['sms'], priority }));
    t.equal(n.status, 202);
    await core.waitStatus(n.body.notification_id, (s) => s.channels.sms === 'sent');
    const { rows } = await core.db.pool.query<{ id: string; provider: string }>(
      "SELECT id, provider FROM deliveries WHERE notification_id = $1 AND channel = 'sms'",
      [n.body.notification_id],
    );
    t.equal(rows[0]!.provider, 'twilio', 'the delivery records the old provider');
    return rows[0]!.id;
  };
  const transactional = await send('sms-t', 'transactional');
  const high = [await send('sms-h1', 'high'), await send('sms-h2', 'high')];
  const shadows = await waitFor(() => {
    const m = sandbox.messages({ channel: 'sms', provider: 'sms-b' });
    return m.length >= 2 ? m : undefined;
  });
  t.same(
    shadows.map((m) => m.to),
    [TEST_PHONE, TEST_PHONE],
    'each shadow copy went to the test number',
  );
  t.same(shadows.map((m) => m.delivery_id).sort(), high.map((id) => `${id}.shadow`).sort(), 'one per high delivery, under its own id');
  t.equal(sandbox.messages({ channel: 'sms', delivery_id: `${transactional}.shadow` }).length, 0, 'no copy of a transactional SMS');
  for (const id of [transactional, ...high]) {
    t.equal(sandbox.messages({ channel: 'sms', provider: 'primary', delivery_id: id }).length, 1, 'the user got one SMS');
  }
});

t.test('an e-mail shadow copy goes to a test address, without the open pixel', async (t) => {
  const TEST_EMAIL = 'ramp-test@test.example';
  const sandbox = await startSandbox();
  t.teardown(() => sandbox.close(1000));
  // The sandbox has one SMTP provider: both point at it, and the copies are told apart by address.
  const core = await startCore(t, 'ramp_email_shadow', {
    env: {
      FCM_URL: sandbox.url,
      SMS_URL: sandbox.url,
      SMTP_URL: sandbox.smtpUrl,
      SMTP_RAMP_URL: sandbox.smtpUrl,
      SMTP_RAMP_NAME: 'smtp-b',
      NOTIFIER_RAMP_TEST_EMAILS: TEST_EMAIL,
    },
  });
  await createTemplate(core, 'code_v1');
  const r = await core.api('PUT', '/api/v1/admin/providers/email', { shadow_percent: 100 }, core.admin);
  t.equal(r.status, 200);
  await putProfile(core, 'mail-u1', { locale: 'en', email: 'mail-u1@example.test' });
  const n = await core.notify(request({ recipient_id: 'mail-u1', channels: ['email'], priority: 'high' }));
  await core.waitStatus(n.body.notification_id, (s) => s.channels.email === 'sent');
  const { rows } = await core.db.pool.query<{ id: string; provider: string }>(
    "SELECT id, provider FROM deliveries WHERE notification_id = $1 AND channel = 'email'",
    [n.body.notification_id],
  );
  t.equal(rows[0]!.provider, 'smtp');
  const [copy] = await waitFor(() => {
    const m = sandbox.messages({ channel: 'email', to: TEST_EMAIL });
    return m.length > 0 ? m : undefined;
  });
  const [original] = sandbox.messages({ channel: 'email', to: 'mail-u1@example.test' });
  t.equal(copy!.delivery_id, `${rows[0]!.id}.shadow`);
  t.equal(copy!.subject, original!.subject, 'the same content');
  t.match(original!.html, /<img src="[^"]+"/, "the user's copy has the open pixel");
  t.notMatch(copy!.html, /<img/, 'the shadow copy has none');
});
