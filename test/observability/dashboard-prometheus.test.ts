/**
 * Every query of docs/grafana/edge-platform.json returns samples when Prometheus evaluates it
 * against the platform's services after a mixed workload: Debian's `prometheus` (installed by
 * .ci/run) scrapes the sidecar, the control plane, the notifier and identity every second; once
 * every target has been scraped twice after the workload, each panel's expression (Grafana's
 * `$__rate_interval` and `$__range` replaced by fixed windows) goes through /api/v1/query. A
 * non-empty vector counts, zeros and NaN (a quantile over no new observations) included: the panel
 * draws something, where an empty vector is a panel that never shows data (a metric registered
 * but never produced, a label that never occurs, a filter that removes everything).
 *
 * dashboard.test.ts checks the metric names against each service's /metrics; this one checks that
 * the queries, as written, find series.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { useTestDatabase } from '../harness/db.js';
import { testRedisUrl } from '../harness/env.js';
import { freePort } from '../harness/ports.js';
import { useService, useSidecar } from '../harness/services.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { ADMIN_TOKEN, useControlPlane } from '../control-plane/helpers.js';
import { SERVICE_SECRET } from '../limiter/fixtures/sidecar.js';
import { addDevice, createTemplate, putProfile, request, settled } from '../notifier/core/helpers.js';
import { feedbackRig } from '../notifier/feedback/helpers.js';
import { loadDashboard, queries } from './dashboard.js';

const PROMETHEUS = '/usr/bin/prometheus';
const SCRAPE_S = 1;
// Grafana's $__rate_interval is at least four scrape intervals; a window this long holds every
// series' samples since the workload began, so a counter that appeared then has a rate (0 or more).
const RATE_WINDOW = '10m';
const RANGE = '1h';
const IDENTITY_ADMIN = 'dashboard-identity-admin-token-0123456789';
const JSON_TYPE = { 'content-type': 'application/json' };
// A catalogue with a digesting type (a 1 s window, so one flushes during the test).
const TYPES = JSON.stringify({
  social_activity: { events: ['social.*'], channels: ['push'], digest: { window: '1s', template: 'social_digest_v1' } },
  security_alerts: { events: ['auth.*', 'security.*'], channels: ['push', 'email', 'sms', 'in_app'], mandatory: true },
  general: { events: ['*'], channels: ['push', 'email', 'sms', 'in_app'] },
});

interface PromResult {
  status: string;
  data?: { resultType: string; result: unknown[] };
  error?: string;
}

t.test('every dashboard query returns samples after a mixed workload', async (t) => {
  if (!existsSync(PROMETHEUS)) {
    t.fail(`${PROMETHEUS} is not installed (apt-get install prometheus; .ci/run does)`);
    return;
  }

  // ── the services, as in production ──
  const up = await startUpstream();
  t.teardown(() => up.close());
  const cpDb = await useTestDatabase(t, 'dashprom-cp');
  const cp = await useControlPlane(t, cpDb.url);
  const sidecar = await useSidecar(t, {
    LIMITER_CONTROL_PLANE_URL: cp.grpc,
    LIMITER_ROUTES: `/v1=${up.url}`,
    SIDECAR_ID: 'dashboard-prometheus',
    SERVICE_SECRET,
    REDIS_URL: testRedisUrl(),
    LIMITER_DECISION_SAMPLE_RATE: '1',
  });
  // A second sidecar whose Redis is gone: its decisions fall back to the quotas' fail modes.
  const deadRedis = await freePort();
  const stranded = await useSidecar(t, {
    LIMITER_CONTROL_PLANE_URL: cp.grpc,
    LIMITER_ROUTES: `/v1=${up.url}`,
    SIDECAR_ID: 'dashboard-prometheus-no-redis',
    SERVICE_SECRET,
    REDIS_URL: `redis://127.0.0.1:${deadRedis}`,
  });
  // The notifier with its real channels against the providers' sandbox, which posts the
  // providers' feedback (Twilio status callbacks, SES events through SNS) back to it.
  const rig = await feedbackRig(t, 'dashprom_notifier', { core: { env: { NOTIFIER_NOTIFICATION_TYPES: TYPES } } });
  const core = rig.core;
  const notifier = { url: core.url };
  const identityDb = await useTestDatabase(t, 'dashprom-identity');
  const identity = await useService(t, 'identity', {
    DATABASE_URL: identityDb.url,
    IDENTITY_ADMIN_TOKEN: IDENTITY_ADMIN,
    IDENTITY_NOTIFY_URL: core.url,
    IDENTITY_NOTIFY_POLL_INTERVAL: '50ms',
  });

  // ── Prometheus scraping them ──
  const dir = mkdtempSync(join(tmpdir(), 'dashprom-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const target = (url: string): string => new URL(url).host;
  const jobs: Record<string, string> = {
    limiter: target(sidecar.adminUrl),
    'limiter-no-redis': target(stranded.adminUrl),
    'control-plane': target(cp.http),
    notifier: target(notifier.url),
    identity: target(identity.url),
  };
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global:',
      `  scrape_interval: ${SCRAPE_S}s`,
      `  scrape_timeout: ${SCRAPE_S}s`,
      'scrape_configs:',
      ...Object.entries(jobs).flatMap(([job, host]) => [`  - job_name: ${job}`, '    static_configs:', `      - targets: ['${host}']`]),
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const prom = spawn(
    PROMETHEUS,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let promLog = '';
  prom.stderr.on('data', (c: Buffer) => void (promLog = (promLog + c.toString()).slice(-4000)));
  t.teardown(async () => {
    if (prom.exitCode === null) {
      prom.kill('SIGTERM');
      await new Promise((done) => prom.once('exit', done));
    }
  });
  const api = `http://127.0.0.1:${port}/api/v1`;
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/-/ready`).catch(() => undefined))?.ok, {
    timeoutMs: 60_000,
    what: `prometheus to be ready: ${promLog}`,
  });

  // ── the workload ──
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const key = `sk_dash_${'a'.repeat(24)}`;
  const put = await fetch(`${cp.http}/internal/quotas/${key}`, {
    method: 'PUT',
    headers: admin,
    body: JSON.stringify({ algorithm: 'token_bucket', rate: 1, burst: 3, unit: 'minute', plan: 'dash' }),
  });
  t.ok(put.status === 201 || put.status === 200, `a quota through the control plane (${put.status}: ${await put.text()})`);
  await fetch(`${cp.http}/internal/quotas`, { headers: admin }).then((r) => r.text());
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await fetch(`${sidecar.url}/v1/orders`, { headers: { 'x-api-key': key } })).status);
  statuses.push((await fetch(`${sidecar.url}/v1/orders`, { headers: { 'x-api-key': 'sk_unknown_key_000000000000' } })).status);
  t.ok(statuses.includes(200) && statuses.includes(429), `admitted and denied through the sidecar (${statuses.join(' ')})`);

  // 20 more decisions on a roomy quota (remaining_tokens samples 1 in 16), and the stranded
  // sidecar's, which trip its counter-store circuit.
  const roomy = `sk_dash_${'b'.repeat(24)}`;
  await fetch(`${cp.http}/internal/quotas/${roomy}`, {
    method: 'PUT',
    headers: admin,
    body: JSON.stringify({ algorithm: 'token_bucket', rate: 1000, burst: 1000, unit: 'minute', plan: 'roomy' }),
  }).then((r) => r.text());
  for (let i = 0; i < 20; i++) await (await fetch(`${sidecar.url}/v1/orders`, { headers: { 'x-api-key': roomy } })).text();
  const strandedStatuses: number[] = [];
  for (let i = 0; i < 20; i++)
    strandedStatuses.push((await fetch(`${stranded.url}/v1/orders`, { headers: { 'x-api-key': roomy } })).status);
  t.comment(`without Redis: ${strandedStatuses.join(' ')}`);
  // Live traffic until the queries are done: the hot-key gauges report the last complete 10 s
  // window (limiter/hot-keys.ts), so a sidecar idle since the burst above shows no hot keys by
  // the time a slow machine has run the notifier's and identity's workload, as in production.
  let trickling = true;
  const trickle = (async () => {
    while (trickling) {
      await fetch(`${sidecar.url}/v1/orders`, { headers: { 'x-api-key': roomy } })
        .then((r) => r.text())
        .catch(() => undefined);
      await new Promise((tick) => setTimeout(tick, 50));
    }
  })();
  t.teardown(async () => {
    trickling = false;
    await trickle;
  });

  // Notifications on every channel, one to a suppressed address, one that bounces (SES's mailbox
  // simulator), two that fold into a digest, and an idempotent repeat.
  await putProfile(core, 'u1', { email: 'ada@example.test', phone: '+15550100001' });
  await addDevice(core, 'u1', 'tok-1');
  const sent = await core.notify(request({ channels: ['push', 'email', 'sms', 'in_app'], idempotency_key: 'dash-1' }));
  t.equal(sent.status, 202, 'a notification on every channel');
  await core.notify(request({ channels: ['push', 'email', 'sms', 'in_app'], idempotency_key: 'dash-1' }));
  const suppressed = await core.api('POST', '/api/v1/admin/suppressions', { address: 'bob@example.test' }, core.admin);
  t.equal(suppressed.status, 201, 'an address suppressed');
  await putProfile(core, 'u2', { email: 'bob@example.test' });
  const toBob = await core.notify(request({ recipient_id: 'u2', channels: ['email'], priority: 'normal' }));
  t.equal(toBob.status, 202, 'an e-mail to the suppressed address');
  const id = (sent.body as { notification_id: string }).notification_id;
  await core.waitStatus(id, settled, 30_000);
  await core.waitStatus((toBob.body as { notification_id: string }).notification_id, settled, 30_000);
  await putProfile(core, 'u3', { email: 'bounce@simulator.amazonses.com' });
  const bounced = await core.notify(request({ recipient_id: 'u3', channels: ['email'], idempotency_key: 'dash-bounce' }));
  t.equal(bounced.status, 202, 'an e-mail that bounces');
  await createTemplate(core, 'like_v1', { en: { push: { body: '{{actor}} liked your post' } } });
  await createTemplate(core, 'social_digest_v1', { en: { push: { title: 'Latest', body: '{{count}} new' } } });
  for (const actor of ['ann', 'bob']) {
    const like = await core.notify(
      request({
        event_type: 'social.like',
        priority: 'normal',
        template_id: 'like_v1',
        template_data: { actor },
        idempotency_key: `like-${actor}`,
      }),
    );
    t.equal(like.status, 202, `a like from ${actor}`);
  }
  await waitFor(
    async () => {
      const m = await rig.metrics();
      return (
        /^digest_batch_size_count\{[^}]*\} [1-9]/m.test(m) &&
        /^email_suppressions_added_total\{[^}]*\} [1-9]/m.test(m) &&
        /^webhook_events_total\{[^}]*\} [1-9]/m.test(m)
      );
    },
    { timeoutMs: 30_000, what: 'a digest flushed, a bounce suppressed and a provider event recorded' },
  );
  // A callback with no valid signature: refused.
  const unsigned = await fetch(`${notifier.url}/api/v1/webhooks/twilio`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'MessageSid=x',
  });
  t.ok([401, 403].includes(unsigned.status), `an unsigned provider callback refused (${unsigned.status})`);

  // Identity: an account (its profile relayed to the notifier), a sign-in, a client and its token,
  // and a refused one.
  const person = { email: 'dash@example.test', password: 'correct horse battery staple', name: 'Dash' };
  const signup = await fetch(`${identity.url}/auth/signup`, { method: 'POST', headers: JSON_TYPE, body: JSON.stringify(person) });
  t.equal(signup.status, 201, 'an account');
  const logins: number[] = [];
  for (const password of [person.password, 'wrong']) {
    const r = await fetch(`${identity.url}/auth/login`, {
      method: 'POST',
      headers: JSON_TYPE,
      body: JSON.stringify({ email: person.email, password }),
    });
    logins.push(r.status);
  }
  t.same(logins, [200, 401], 'a sign-in, and a wrong password');
  const client = await fetch(`${identity.url}/auth/admin/clients`, {
    method: 'POST',
    headers: { ...JSON_TYPE, authorization: `Bearer ${IDENTITY_ADMIN}` },
    body: JSON.stringify({ client_id: 'dash', client_type: 'confidential', name: 'Dash', scope: 'read:orders' }),
  });
  const secret = ((await client.json()) as { client_secret: string }).client_secret;
  const token = await fetch(`${identity.url}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`dash:${secret}`).toString('base64')}`,
    },
    body: 'grant_type=client_credentials',
  });
  t.equal(token.status, 200, 'a client credentials token');
  const refused = await fetch(`${identity.url}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&client_id=nobody&client_secret=nothing',
  });
  t.equal(refused.status, 401, 'an unknown client refused');
  await waitFor(async () => /^identity_notify_relay_total\{/m.test(await (await fetch(`${identity.url}/metrics`)).text()), {
    what: "identity's relay to have called the notifier",
  });

  await waitFor(async () => /^ratelimit_hot_key_share\{/m.test(await (await fetch(`${sidecar.adminUrl}/metrics`)).text()), {
    timeoutMs: 30_000,
    what: 'a complete hot-key window on the sidecar',
  });

  // ── two scrapes of every target after the workload, counted in Prometheus' own storage ──
  const scrapes = async (): Promise<Map<string, number>> => {
    const body = (await (await fetch(`${api}/query?${new URLSearchParams({ query: 'count_over_time(up[10m])' })}`)).json()) as {
      data: { result: { metric: { job: string }; value: [number, string] }[] };
    };
    return new Map(body.data.result.map((r) => [r.metric.job, Number(r.value[1])]));
  };
  const before = await scrapes();
  await waitFor(
    async () => {
      const now = await scrapes();
      return Object.keys(jobs).every((job) => (now.get(job) ?? 0) >= (before.get(job) ?? 0) + 2);
    },
    { timeoutMs: 60_000, intervalMs: 200, what: 'every target to be scraped twice after the workload' },
  );
  const down = await (await fetch(`${api}/query?${new URLSearchParams({ query: 'up == 0' })}`)).json();
  t.same((down as PromResult).data?.result, [], 'every target is up');

  // ── every query ──
  const qs = queries(await loadDashboard()).filter((q) => q.expr !== '' && !q.where.startsWith('variable '));
  t.ok(qs.length > 40, `${qs.length} panel queries`);
  const evaluate = async (expr: string): Promise<string | undefined> => {
    const res = await fetch(`${api}/query?${new URLSearchParams({ query: expr })}`);
    const body = (await res.json()) as PromResult;
    if (body.status !== 'success') return `${body.error ?? res.status} (${expr})`;
    return (body.data?.result.length ?? 0) === 0 ? `no samples (${expr})` : undefined;
  };
  const empty: string[] = [];
  for (const q of qs) {
    const expr = q.expr.replaceAll('$__rate_interval', RATE_WINDOW).replaceAll('$__range', RANGE);
    const why = await evaluate(expr);
    if (why) empty.push(`${q.where}: ${why}`);
  }
  t.same(empty, [], 'every panel query returns a non-empty vector');
  // The check can fail: a label value no service writes finds nothing.
  t.match(
    await evaluate(`sum(rate(ratelimit_decisions{result="no_such_result"}[${RATE_WINDOW}]))`),
    /^no samples/,
    'an empty query is caught',
  );
});
