/**
 * The notifier benchmark (README, "Benchmarks"). Starts what it measures as separate processes (the
 * notifier from dist/, the sandbox providers, the sidecar), against a fresh database on
 * DATABASE_URL (default the local postgres://postgres@127.0.0.1:5432/postgres; dropped at the end):
 *
 *   (a) ingestion, direct: autocannon POSTs to the notifier (workers off, so only the API runs);
 *   (b) ingestion through the sidecar (an API key with an unlimited quota);
 *   (c) end-to-end delivery: notifications accepted beforehand, then a notifier with workers
 *       drains them to the sandbox, every provider answering after 50 ms; sends/s from the first
 *       to the last message the sandbox accepted;
 *   (d) transactional latency, from the 202 to the provider receiving the push, at a fixed rate,
 *       while 100,000 low-tier notifications drain through the same notifier;
 *   (e) the ceiling: raw pg-boss send, and fetch + complete, on the same machine and database;
 *   (p) the policies (issue 13), off and on side by side in one run (`--policies off,on`, in that
 *       order): ingestion as in (a), and delivery as in (c) at the tuned settings but at `normal`
 *       (where caps and quiet hours apply) on push and e-mail, then at `high` on push, e-mail and
 *       SMS as (c) (no caps there; quiet hours with NOTIFIER_QUIET_HOURS_TIERS=normal,high when
 *       on). "on" runs the notifier with a
 *       catalogue (NOTIFIER_NOTIFICATION_TYPES) whose `bench_policy` type takes `bench.*` and caps
 *       push and e-mail far above what the run sends, and its recipients have a time zone and
 *       preferences (in-app off for the type, quiet hours that do not cover the run), so every
 *       send is checked and counted and none is held; "off" is the same traffic with the default
 *       catalogue to recipients without preferences.
 *
 *   npx tsc -b && node dist/bench/notifier.js [--duration 10] [--connections 50]
 *     [--deliveries 3000] [--low 100000] [--tx-rate 20] [--tx-seconds 15] [--raw 10000]
 *     [--policy-deliveries 10000] [--policies off,on] [--scenario a,b,c,d,e] [--profile]
 *     [--wait-load 1.0] [--build <checkout>] [--json <file>] [--no-write]
 *
 *   node dist/bench/notifier.js --compare <older checkout, built> [--rounds 3] [--wait-load 1.0] [--resume]
 *
 * `--build` starts the notifier, sandbox and sidecar of another built checkout (an older commit),
 * with this script's traffic. `--compare` runs builds against each other, alternating: per round
 * the older checkout's own script (a, c), this one (a, c), this script against the older build
 * (p, off only: it knows no catalogue nor preferences), this one (p, off and on, the order swapped
 * every other round); each run starts once the 1-minute load average is below `--wait-load` (at
 * most 10 minutes' wait). It writes the "## Notifier policies (issue 13)" section.
 *
 * Short runs: the machine is shared. A plain run writes the "## Notifier (issue 7)" section of
 * bench/RESULTS.md (not with (p), nor with `--build`).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, totalmem } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import PgBoss from 'pg-boss';
import { parseQuietWindow, quietHoursRelease } from '../notifier/policy/quiet-hours.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import { LatencyHistogram } from './lib/latency-histogram.js';
import { freePort, postgresCpu, procCpu, spawnPinned, stopAll, waitForHttp, type Started } from './lib/processes.js';
import { replaceSection } from './lib/report.js';

const { values: argv } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    deliveries: { type: 'string', default: '3000' },
    low: { type: 'string', default: '100000' },
    'tx-rate': { type: 'string', default: '20' },
    'tx-seconds': { type: 'string', default: '15' },
    raw: { type: 'string', default: '10000' },
    scenario: { type: 'string', default: 'a,b,c,d,e' },
    'no-write': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    // normal at 160 too since issue 13: (p) delivers at normal.
    concurrency: { type: 'string', default: 'transactional=32,high=160,normal=160,low=16' },
    'smtp-pool': { type: 'string', default: '128' },
    'pool-max': { type: 'string', default: '10' },
    'policy-deliveries': { type: 'string', default: '10000' },
    policies: { type: 'string', default: 'off,on' },
    'wait-load': { type: 'string', default: '' },
    build: { type: 'string', default: PROJECT_ROOT },
    json: { type: 'string', default: '' },
    compare: { type: 'string', default: '' },
    rounds: { type: 'string', default: '3' },
    resume: { type: 'boolean', default: false },
  },
});
const DURATION = Number(argv.duration);
const CONNECTIONS = Number(argv.connections);
const DELIVERIES = Number(argv.deliveries);
const LOW = Number(argv.low);
const TX_RATE = Number(argv['tx-rate']);
const TX_SECONDS = Number(argv['tx-seconds']);
const RAW = Number(argv.raw);
const RUN = new Set(argv.scenario.split(',').map((s) => s.trim()));
const POLICY_DELIVERIES = Number(argv['policy-deliveries']);
const POLICIES = argv.policies.split(',').map((s) => s.trim());
if (POLICIES.some((v) => v !== 'off' && v !== 'on')) throw new Error('--policies: a list of off and on');
const WAIT_LOAD = argv['wait-load'] === '' ? undefined : Number(argv['wait-load']);
/** The checkout whose dist/ is started (this one unless --build). */
const BUILD = resolve(argv.build);
const ROUNDS = Number(argv.rounds);

const SCRATCH = join(PROJECT_ROOT, 'bench/.scratch/notifier');
mkdirSync(SCRATCH, { recursive: true });
const SECRET = randomBytes(24).toString('hex');
const API_KEY = randomBytes(16).toString('hex');
const SERVICE = { 'x-subject': 'key:' + 'c'.repeat(64), 'x-subject-role': 'service', 'x-subject-secret': SECRET };
const ADMIN = { ...SERVICE, 'x-subject': 'user:bench', 'x-subject-role': 'admin' };
const USERS = 50;

/**
 * (p)'s catalogue: `bench_policy` takes every `bench.*` event, with caps on push and e-mail that
 * the run cannot reach (the parser's largest limit), so every send is counted and none capped.
 */
const POLICY_TYPES = JSON.stringify({
  bench_policy: {
    events: ['bench.*'],
    channels: ['push', 'email'],
    caps: { push: { limit: 100_000, window: '1h' }, email: { limit: 100_000, window: '1h' } },
  },
  security_alerts: { events: ['security.*', 'auth.*', 'account.*'], channels: ['push', 'email'], mandatory: true },
  general: { events: ['*'], channels: ['push'] },
});
const POLICY_ENV = { NOTIFIER_NOTIFICATION_TYPES: POLICY_TYPES };
/** (p)'s recipients with policies on: p0…p49, in this zone. */
const POLICY_ZONE = 'America/New_York';

/** Quiet hours in `zone` from 3 h to 5 h after now on its wall clock: evaluated on every send, holding none during a run. */
function quietHoursAwayFromNow(nowMs: number, zone: string): { start: string; end: string } {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(
    new Date(nowMs),
  );
  const at = (type: string): number => Number(parts.find((p) => p.type === type)?.value);
  const local = at('hour') * 60 + at('minute');
  const hhmm = (min: number): string => {
    const m = ((min % 1440) + 1440) % 1440;
    return `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
  };
  const w = { start: hhmm(local + 180), end: hhmm(local + 300) };
  const parsed = parseQuietWindow(w.start, w.end);
  // The notifier's own judgement: outside now and for the next two hours.
  for (const t of [nowMs, nowMs + 7_200_000]) {
    if (!parsed || quietHoursRelease(t, zone, parsed) !== undefined) throw new Error(`quiet hours ${w.start}–${w.end} cover the run`);
  }
  return w;
}

/** Waits (every 10 s, at most 10 minutes) until the 1-minute load average is below `limit`; the load when it goes on. */
async function waitForQuiet(limit: number | undefined, what: string): Promise<number> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const load = loadavg()[0]!;
    if (limit === undefined || load < limit) return load;
    if (Date.now() >= deadline) {
      process.stderr.write(`load ${load.toFixed(2)} still ≥ ${limit} after 10 minutes: ${what} goes on (recorded)\n`);
      return load;
    }
    process.stderr.write(`waiting for the load (${load.toFixed(2)}) to fall below ${limit} before ${what}\n`);
    await sleep(10_000);
  }
}

/** CPU seconds (user + system) of the processes that do the work, read from /proc. */
interface Cpu {
  notifier: number;
  postgres: number;
  sandbox: number;
}

const cpuDelta = (a: Cpu, b: Cpu): Cpu => ({
  notifier: b.notifier - a.notifier,
  postgres: b.postgres - a.postgres,
  sandbox: b.sandbox - a.sandbox,
});

interface AutocannonResult {
  requests: { average: number; total: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
type Autocannon = (
  opts: Record<string, unknown>,
  cb: (err: Error | null, r: AutocannonResult) => void,
) => { on(e: 'response', fn: (c: unknown, s: number, b: number, ms: number) => void): void };
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

interface Ingest {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  errors: number;
  non202: number;
  /** (p): CPU over the measured window. */
  cpu?: Cpu;
  /** (p): the 1-minute load average before and after. */
  load?: [number, number];
}

function postLoad(url: string, headers: Record<string, string>, recipients = 'u'): Promise<Ingest> {
  const hist = new LatencyHistogram();
  let non202 = 0;
  let i = 0;
  return new Promise((resolve, reject) => {
    const inst = autocannon(
      {
        url,
        method: 'POST',
        connections: CONNECTIONS,
        duration: DURATION,
        timeout: 10,
        headers: { 'content-type': 'application/json', ...headers },
        // Distinct recipients, no idempotency key: every request is a new notification.
        setupClient: (client: { setBody(b: string): void; on(e: string, f: () => void): void }) => {
          const next = (): void =>
            client.setBody(
              JSON.stringify({
                event_type: 'bench.ingest',
                recipient_id: `${recipients}${i++ % USERS}`,
                template_id: 'bench_v1',
                template_data: { code: '123456' },
                priority: 'normal',
                channels: ['push'],
              }),
            );
          next();
          client.on('response', next);
        },
      },
      (err, r) => {
        if (err) return reject(err);
        resolve({
          rps: r.requests.average,
          p50: hist.percentile(50),
          p99: hist.percentile(99),
          total: r.requests.total,
          errors: r.errors + r.timeouts,
          non202,
        });
      },
    );
    inst.on('response', (_c, status, _b, ms) => {
      hist.record(ms);
      if (status !== 202) non202++;
    });
  });
}

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers = SERVICE,
): Promise<{ status: number; body: unknown }> {
  const r = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined };
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

interface DeliveryRun {
  rate: number;
  delivered: number;
  expected: number;
  perChannel: string[];
  duplicates: number;
  /** Of those, second entries the recipient would see (the sandbox's display model): a repeated push replaces the first. */
  visible?: number;
  /** CPU from the first to the last send the sandbox saw, and the sends in that window (the rate's). */
  cpu?: Cpu;
  windowSends?: number;
  /** (p) with policies on: sends counted against a cap, held, suppressed. */
  policy?: { counted: number; held: number; suppressed: number };
  load?: [number, number];
}

/** What a run measured, by key: ingestion `a`, `p-off`, `p-on`; delivery `c-default`, `c-tuned`, `p-off`, `p-on`, `ph-off`, `ph-on`. */
interface Figures {
  ingest: Record<string, Ingest>;
  delivery: Record<string, DeliveryRun>;
  /** (p): the quiet hours the recipients had. */
  quietHours?: string;
}

const f0 = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en') : 'n/a');

async function main(): Promise<void> {
  // (p) alone waits before each of its measurements instead.
  if (!(RUN.has('p') && RUN.size === 1)) await waitForQuiet(WAIT_LOAD, 'the run');
  const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `bench_notifier_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const u = new URL(adminUrl);
  u.pathname = `/${dbName}`;
  const dbUrl = u.toString();
  const loadBefore = loadavg()[0]!;
  const pool = new pg.Pool({ connectionString: dbUrl, max: 20 });
  pool.on('error', () => {});
  const lines: string[] = [];
  const say = (s: string): void => {
    process.stdout.write(s + '\n');
    lines.push(s);
  };

  const notifierPort = await freePort();
  const base = `http://127.0.0.1:${notifierPort}`;
  const sandboxPort = await freePort();
  const smtpPort = await freePort();
  const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
  const sandbox = spawnPinned('sandbox', process.execPath, [join(BUILD, 'dist/sandbox/main.js')], {
    cpu: undefined,
    logFile: join(SCRATCH, 'sandbox.log'),
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      SANDBOX_PORT: String(sandboxPort),
      SANDBOX_SMTP_PORT: String(smtpPort),
      SANDBOX_MAX_MESSAGES: '300000',
      SANDBOX_FAULTS: JSON.stringify(['push', 'email', 'sms'].map((channel) => ({ channel, latency_ms: 50 }))),
    },
  });
  await waitForHttp(sandbox, `${sandboxUrl}/readyz`, join(SCRATCH, 'sandbox.log'));

  const notifierEnv = (workers: boolean, extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
    ...process.env,
    LOG_LEVEL: 'warn',
    DATABASE_URL: dbUrl,
    NOTIFIER_PORT: String(notifierPort),
    SERVICE_SECRET: SECRET,
    NOTIFIER_WORKERS: String(workers),
    NOTIFIER_TRACKING_SECRET: SECRET,
    FCM_URL: sandboxUrl,
    SMS_URL: sandboxUrl,
    SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
    PROVIDER_CONNECTIONS: '64',
    ...extra,
  });
  let n = 0;
  const startNotifier = async (workers: boolean, extra: Record<string, string> = {}): Promise<Started> => {
    const log = join(SCRATCH, `notifier-${++n}.log`);
    // --profile: the notifiers with workers run under --cpu-prof (profiles in bench/.scratch/notifier).
    const prof = argv.profile && workers ? ['--cpu-prof', '--cpu-prof-dir', SCRATCH] : [];
    const p = spawnPinned(`notifier-${n}`, process.execPath, [...prof, join(BUILD, 'dist/notifier/main.js')], {
      cpu: undefined,
      logFile: log,
      env: notifierEnv(workers, extra),
    });
    await waitForHttp(p, `${base}/readyz`, log, 200);
    // The profile files are named after the pid: which run each is.
    if (prof.length > 0)
      process.stderr.write(`profiling notifier-${n}, pid ${p.child.pid}, policies ${extra.NOTIFIER_NOTIFICATION_TYPES ? 'on' : 'off'}\n`);
    return p;
  };
  const cpuNow = (notifier: Started): Cpu => ({
    notifier: procCpu(notifier.child.pid),
    postgres: postgresCpu(),
    sandbox: procCpu(sandbox.child.pid),
  });
  const figures: Figures = { ingest: {}, delivery: {} };
  // CASCADE: later migrations added tables that reference these (the bench empties them too).
  const purge = async (): Promise<void> => {
    await pool.query('TRUNCATE notifications, idempotency_keys, deliveries, dead_letters, inbox_items CASCADE');
    await pool.query('DELETE FROM pgboss.job');
    await fetch(`${sandboxUrl}/sandbox/messages`, { method: 'DELETE' });
  };

  try {
    // ── setup: template, profiles, devices ──────────────────────────────────
    let api = await startNotifier(false);
    const variant = {
      push: { title: 'Code', body: 'Your code is {{code}}' },
      email: { subject: 'Code', text: 'Your code is {{code}}' },
      sms: { body: 'Code {{code}}' },
      in_app: { body: 'Code {{code}}' },
    };
    const put = await call(base, 'PUT', '/api/v1/admin/templates/bench_v1', { default_locale: 'en', variants: { en: variant } }, ADMIN);
    if (put.status !== 201) throw new Error(`template: ${put.status} ${JSON.stringify(put.body)}`);
    for (let i = 0; i < USERS; i++) {
      await call(base, 'PUT', `/api/v1/users/u${i}/profile`, {
        email: `u${i}@example.test`,
        phone: `+1415555${String(i).padStart(4, '0')}`,
      });
      await call(base, 'POST', `/api/v1/users/u${i}/devices`, { token: `token-${i}`, platform: 'android' });
    }
    await call(base, 'PUT', '/api/v1/users/tx/profile', { phone: '+14155559999' });
    await call(base, 'POST', '/api/v1/users/tx/devices', { token: 'token-tx', platform: 'ios' });

    // ── (a) ingestion, direct ───────────────────────────────────────────────
    let direct: Ingest | undefined;
    if (RUN.has('a')) {
      await postLoad(`${base}/api/v1/notifications`, SERVICE); // warm-up, discarded
      direct = await postLoad(`${base}/api/v1/notifications`, SERVICE);
      figures.ingest['a'] = direct;
    }

    // ── (b) ingestion through the sidecar ───────────────────────────────────
    let viaSidecar: Ingest | undefined;
    if (RUN.has('b')) {
      const sidecarPort = await freePort();
      const sidecarAdmin = await freePort();
      const quotaFile = join(SCRATCH, 'quotas.json');
      const keySubject = 'key:' + createHash('sha256').update(API_KEY).digest('hex');
      writeFileSync(
        quotaFile,
        JSON.stringify({
          version: 1,
          issued_at: Math.floor(Date.now() / 1000),
          quotas: [{ subject_id: keySubject, algorithm: 'token_bucket', rate: 10_000_000, burst: 10_000_000, interval_ms: 1000 }],
        }),
      );
      const sidecar = spawnPinned('sidecar', process.execPath, [join(BUILD, 'dist/limiter/main.js')], {
        cpu: undefined,
        logFile: join(SCRATCH, 'sidecar.log'),
        env: {
          ...process.env,
          LOG_LEVEL: 'warn',
          LIMITER_PORT: String(sidecarPort),
          LIMITER_ADMIN_PORT: String(sidecarAdmin),
          NOTIFIER_URL: base,
          SERVICE_SECRET: SECRET,
          LIMITER_QUOTA_FILE: quotaFile,
          LIMITER_SNAPSHOT_FILE: join(SCRATCH, 'snapshot.json'),
          LIMITER_DECISION_SAMPLE_RATE: '0',
        },
      });
      await waitForHttp(sidecar, `http://127.0.0.1:${sidecarAdmin}/readyz`, join(SCRATCH, 'sidecar.log'));
      viaSidecar = await postLoad(`http://127.0.0.1:${sidecarPort}/api/v1/notifications`, { 'x-api-key': API_KEY });
      await sidecar.stop();
    }

    // ── (e) raw pg-boss ─────────────────────────────────────────────────────
    let rawSendRate = NaN;
    let rawFetchRate = NaN;
    let rawBatchRate = NaN;
    if (RUN.has('e')) {
      const boss = new PgBoss({ connectionString: dbUrl, max: 20, supervise: false, schedule: false, migrate: false });
      boss.on('error', () => {});
      await boss.start();
      await boss.createQueue('bench-raw');
      const rawStart = Date.now();
      let sent = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (sent < RAW) {
            sent++;
            await boss.send('bench-raw', { i: sent });
          }
        }),
      );
      rawSendRate = RAW / ((Date.now() - rawStart) / 1000);
      const fetchStart = Date.now();
      let done = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (;;) {
            const jobs = await boss.fetch('bench-raw', { batchSize: 1 });
            if (jobs.length === 0) return;
            await boss.complete('bench-raw', jobs[0]!.id);
            done++;
          }
        }),
      );
      rawFetchRate = done / ((Date.now() - fetchStart) / 1000);
      // The same in batches of 50 (one fetch and one complete per batch), 4 in flight: the ceiling
      // for a worker that batches its queue round trips, as ours do.
      for (let off = 0; off < RAW; off += 1000) {
        await boss.insert(Array.from({ length: Math.min(1000, RAW - off) }, (_, i) => ({ name: 'bench-raw', data: { i: off + i } })));
      }
      const batchStart = Date.now();
      let batchDone = 0;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          for (;;) {
            const jobs = await boss.fetch('bench-raw', { batchSize: 50 });
            if (jobs.length === 0) return;
            await boss.complete(
              'bench-raw',
              jobs.map((j) => j.id),
            );
            batchDone += jobs.length;
          }
        }),
      );
      rawBatchRate = batchDone / ((Date.now() - batchStart) / 1000);
      await boss.stop({ graceful: false });
    }
    await api.stop();

    // ── (c) end-to-end delivery ─────────────────────────────────────────────
    // Twice: with the shipped defaults, then with the settings this machine needs for the target
    // (--concurrency, --smtp-pool, --pool-max).
    const concurrency = argv.concurrency;
    const tuned = { NOTIFIER_CONCURRENCY: concurrency, SMTP_POOL_SIZE: argv['smtp-pool'], DATABASE_POOL_MAX: argv['pool-max'] };
    const deliveryRuns: { label: string; run: DeliveryRun }[] = [];
    /** Accepts `count` notifications (workers off), then a notifier with workers drains them to the sandbox. */
    const deliver = async (o: {
      worker: Record<string, string>;
      api?: Record<string, string>;
      count?: number;
      priority?: 'high' | 'normal';
      channels?: string[];
      recipients?: string;
    }): Promise<DeliveryRun> => {
      const count = o.count ?? DELIVERIES;
      const channels = o.channels ?? ['push', 'email', 'sms'];
      const want = count * channels.length;
      await purge();
      api = await startNotifier(false, o.api);
      let k = 0;
      let refused: unknown;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (k < count) {
            const i = k++;
            const r = await call(base, 'POST', '/api/v1/notifications', {
              event_type: 'bench.deliver',
              recipient_id: `${o.recipients ?? 'u'}${i % USERS}`,
              template_id: 'bench_v1',
              template_data: { code: String(i) },
              priority: o.priority ?? 'high',
              channels,
            });
            if (r.status !== 202) refused ??= { status: r.status, body: r.body };
          }
        }),
      );
      await api.stop();
      if (refused !== undefined) throw new Error(`delivery: a notification was refused: ${JSON.stringify(refused)}`);
      const worker = await startNotifier(true, o.worker);
      const seen: { t: number; total: number; cpu: Cpu }[] = [];
      const deadline = Date.now() + 180_000;
      for (;;) {
        const r = (await (await fetch(`${sandboxUrl}/sandbox/messages?limit=1`)).json()) as { total: number };
        seen.push({ t: Date.now(), total: r.total, cpu: cpuNow(worker) });
        if (r.total >= want || Date.now() > deadline) break;
        await sleep(250);
      }
      const first = seen.find((s) => s.total > 0) ?? seen[0]!;
      const last = seen[seen.length - 1]!;
      await worker.stop();
      // Per channel (which one sets the pace), and any send the provider saw twice.
      const all = (await (await fetch(`${sandboxUrl}/sandbox/messages`)).json()) as {
        messages: { channel: string; received_at: number; delivery_id?: string; idempotency_key?: string; to: string }[];
      };
      const perChannel: string[] = [];
      for (const ch of ['push', 'email', 'sms']) {
        const ts = all.messages.filter((m) => m.channel === ch).map((m) => m.received_at);
        if (ts.length < 2) continue;
        const span = Math.max(...ts) - Math.min(...ts);
        perChannel.push(`${ch} ${f0(ts.length / Math.max(0.001, span))}/s`);
      }
      const keys = new Set(all.messages.map((m) => `${m.channel} ${m.idempotency_key ?? m.delivery_id ?? ''} ${m.to}`));
      const shown = (await (await fetch(`${sandboxUrl}/sandbox/display`)).json().catch(() => undefined)) as
        Record<string, { visible_duplicates: number }> | undefined;
      const visible = shown ? Object.values(shown).reduce((n, c) => n + c.visible_duplicates, 0) : undefined;
      return {
        rate: (last.total - first.total) / Math.max(0.001, (last.t - first.t) / 1000),
        delivered: last.total,
        expected: want,
        perChannel,
        duplicates: all.messages.length - keys.size,
        ...(visible !== undefined && { visible }),
        cpu: cpuDelta(first.cpu, last.cpu),
        windowSends: last.total - first.total,
      };
    };
    if (RUN.has('c')) {
      deliveryRuns.push({ label: 'shipped defaults', run: await deliver({ worker: {} }) });
      deliveryRuns.push({
        label: `\`NOTIFIER_CONCURRENCY=${concurrency}\`, \`SMTP_POOL_SIZE=${argv['smtp-pool']}\`, \`DATABASE_POOL_MAX=${argv['pool-max']}\``,
        run: await deliver({ worker: tuned }),
      });
      figures.delivery['c-default'] = deliveryRuns[0]!.run;
      figures.delivery['c-tuned'] = deliveryRuns[1]!.run;
    }

    // ── (p) the policies, off and on, side by side ──────────────────────────
    const policyRows: { label: string; ingest?: Ingest; run?: DeliveryRun }[] = [];
    if (RUN.has('p')) {
      // Recipients p0…p49 with a time zone and preferences, set through the API (which must know
      // the catalogue); u0…u49 (no preferences) are the recipients with policies off.
      let policyUsersReady = false;
      const policyUsers = async (): Promise<void> => {
        if (policyUsersReady) return;
        policyUsersReady = true;
        const quiet = quietHoursAwayFromNow(Date.now(), POLICY_ZONE);
        figures.quietHours = `${quiet.start}–${quiet.end} ${POLICY_ZONE}`;
        const setup = await startNotifier(false, POLICY_ENV);
        for (let i = 0; i < USERS; i++) {
          const prof = await call(base, 'PUT', `/api/v1/users/p${i}/profile`, {
            email: `p${i}@example.test`,
            phone: `+1415556${String(i).padStart(4, '0')}`,
            timezone: POLICY_ZONE,
          });
          if (prof.status !== 201 && prof.status !== 200) throw new Error(`profile: ${prof.status} ${JSON.stringify(prof.body)}`);
          await call(base, 'POST', `/api/v1/users/p${i}/devices`, { token: `ptoken-${i}`, platform: 'android' });
          const pref = await call(base, 'PATCH', `/api/v1/users/p${i}/preferences`, {
            bench_policy: { in_app: false },
            quiet_hours: quiet,
          });
          if (pref.status !== 200) throw new Error(`preferences: ${pref.status} ${JSON.stringify(pref.body)}`);
        }
        await setup.stop();
      };
      for (const v of POLICIES) {
        const load0 = await waitForQuiet(WAIT_LOAD, `(p) ingestion, policies ${v}`);
        if (v === 'on') await policyUsers();
        await purge();
        const ingest = await startNotifier(false, v === 'on' ? POLICY_ENV : {});
        const recipients = v === 'on' ? 'p' : 'u';
        await postLoad(`${base}/api/v1/notifications`, SERVICE, recipients); // warm-up, discarded
        const cpu0 = cpuNow(ingest);
        const m = await postLoad(`${base}/api/v1/notifications`, SERVICE, recipients);
        m.cpu = cpuDelta(cpu0, cpuNow(ingest));
        m.load = [load0, loadavg()[0]!];
        await ingest.stop();
        if (v === 'on') {
          const { rows } = await pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM notifications WHERE notification_type <> 'bench_policy'`,
          );
          if (rows[0]!.n !== 0) throw new Error(`(p) ingestion: ${rows[0]!.n} notifications not classified bench_policy`);
        }
        figures.ingest[`p-${v}`] = m;
      }
      // Two shapes: `normal` (every policy: preferences, quiet hours, caps) on push + e-mail, and
      // `high` on push + e-mail + SMS as (c) (preferences, and quiet hours with
      // NOTIFIER_QUIET_HOURS_TIERS=normal,high; caps never apply at high).
      const shapes = [
        { key: 'p', priority: 'normal' as const, channels: ['push', 'email'], env: {} as Record<string, string> },
        { key: 'ph', priority: 'high' as const, channels: ['push', 'email', 'sms'], env: { NOTIFIER_QUIET_HOURS_TIERS: 'normal,high' } },
      ];
      for (const shape of shapes) {
        for (const v of POLICIES) {
          const load0 = await waitForQuiet(WAIT_LOAD, `(${shape.key}) delivery, policies ${v}`);
          if (v === 'on') await policyUsers();
          const run = await deliver({
            api: v === 'on' ? POLICY_ENV : {},
            worker: { ...tuned, ...(v === 'on' ? { ...POLICY_ENV, ...shape.env } : {}) },
            count: POLICY_DELIVERIES,
            priority: shape.priority,
            channels: shape.channels,
            recipients: v === 'on' ? 'p' : 'u',
          });
          run.load = [load0, loadavg()[0]!];
          if (v === 'on') {
            const { rows } = await pool.query<{ counted: number; held: number; suppressed: number }>(
              `SELECT count(*) FILTER (WHERE counted_at IS NOT NULL)::int AS counted,
                      count(*) FILTER (WHERE hold_reason IS NOT NULL)::int AS held,
                      count(*) FILTER (WHERE status IN ('opted_out', 'capped'))::int AS suppressed
                 FROM deliveries`,
            );
            run.policy = rows[0]!;
          }
          figures.delivery[`${shape.key}-${v}`] = run;
        }
      }
      for (const v of POLICIES) {
        const what = v === 'on' ? 'policies on (`bench_policy`: caps, quiet hours, preferences)' : 'policies off';
        policyRows.push({ label: `(p) ingestion, \`normal\`, push, ${what}`, ingest: figures.ingest[`p-${v}`] });
      }
      for (const v of POLICIES) {
        const what = v === 'on' ? 'policies on' : 'policies off';
        policyRows.push({ label: `(p) delivery, \`normal\`, push + email, tuned, ${what}`, run: figures.delivery[`p-${v}`] });
        policyRows.push({ label: `(p) delivery, \`high\`, push + email + sms, tuned, ${what}`, run: figures.delivery[`ph-${v}`] });
      }
    }

    // ── (d) transactional latency while low drains ──────────────────────────
    const latencies: number[] = [];
    const accepted = new Map<string, number>();
    let lowRate = NaN;
    if (RUN.has('d')) {
      await purge();
      api = await startNotifier(false);
      // 100,000 accepted low-tier notifications, written the way ingestion writes them (row + routing job).
      for (let off = 0; off < LOW; off += 5000) {
        const size = Math.min(5000, LOW - off);
        const ids = Array.from({ length: size }, () => randomUUID());
        await pool.query(
          `INSERT INTO notifications (id, caller, event_type, recipient_id, template_id, template_data, priority, channels)
           SELECT id, 'bench', 'bench.low', 'u' || (row_number() OVER () % ${USERS}), 'bench_v1', '{"code":"1"}', 'low', '{push}'
             FROM unnest($1::uuid[]) AS id`,
          [ids],
        );
        await pool.query(
          `INSERT INTO pgboss.job (name, data, policy) SELECT 'notify-route-low', json_build_object('notification_id', id), 'standard' FROM unnest($1::uuid[]) AS id`,
          [ids],
        );
      }
      await api.stop();
      const drainer = await startNotifier(true, tuned);
      await sleep(3000); // the drain is in full swing
      const lowBefore = (await pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE priority = 'low' AND status = 'sent'`)).rows[0]
        .n;
      const txStart = Date.now();
      const ticks = TX_RATE * TX_SECONDS;
      const pending: Promise<void>[] = [];
      for (let i = 0; i < ticks; i++) {
        const at = txStart + (i * 1000) / TX_RATE;
        const wait = at - Date.now();
        if (wait > 0) await sleep(wait);
        pending.push(
          call(base, 'POST', '/api/v1/notifications', {
            event_type: 'auth.code',
            recipient_id: 'tx',
            template_id: 'bench_v1',
            template_data: { code: String(i) },
            priority: 'transactional',
            channels: ['push'],
          }).then((r) => {
            if (r.status === 202) accepted.set((r.body as { notification_id: string }).notification_id, Date.now());
          }),
        );
      }
      await Promise.all(pending);
      const txWindow = (Date.now() - txStart) / 1000;
      await sleep(3000);
      const lowAfter = (await pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE priority = 'low' AND status = 'sent'`)).rows[0].n;
      const msgs = (await (await fetch(`${sandboxUrl}/sandbox/messages?channel=push&to=token-tx`)).json()) as {
        messages: { received_at: number; data?: Record<string, string> }[];
      };
      for (const m of msgs.messages) {
        const t202 = accepted.get(m.data?.notification_id ?? '');
        if (t202 !== undefined) latencies.push(m.received_at * 1000 - t202);
      }
      latencies.sort((a, b) => a - b);
      await drainer.stop();
      lowRate = (lowAfter - lowBefore) / (txWindow + 3);
    }

    // ── report ──────────────────────────────────────────────────────────────
    const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
    const verdict = (ok: boolean): string => (ok ? 'met' : '**not met**');
    const deliveryOk = (run: DeliveryRun): boolean => run.rate >= 2000 && run.delivered === run.expected && run.duplicates === 0;
    const cpu = (readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m)?.[1] ?? cpus()[0]?.model ?? 'unknown').trim();
    const pgVersion = (await pool.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
    say(
      `Run ${new Date().toISOString().slice(0, 10)} on ${cpus().length} cores (${cpu}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version},`,
    );
    const busy = loadBefore >= 1;
    say(
      `PostgreSQL ${pgVersion} on the same machine; ${busy ? 'the machine was shared with other work' : 'nothing else ran'}. Every process unpinned.`,
    );
    say(`\`node dist/bench/notifier.js --duration ${DURATION} --connections ${CONNECTIONS} --deliveries ${DELIVERIES} --low ${LOW}\`.`);
    say('');
    say('| measurement | result | p50 ms | p99 ms | target | verdict |');
    say('|---|---:|---:|---:|---|---|');
    const ingestRow = (label: string, m: Ingest | undefined): void => {
      if (m)
        say(
          `| ${label} | ${f0(m.rps)} req/s | ${f1(m.p50)} | ${f1(m.p99)} | ≥ 1,500 req/s, p99 ≤ 50 ms | ${verdict(m.rps >= 1500 && m.p99 <= 50)} |`,
        );
    };
    ingestRow(`(a) ingestion, direct (${CONNECTIONS} connections, ${DURATION} s)`, direct);
    ingestRow('(b) ingestion through the sidecar', viaSidecar);
    for (const { label, run } of deliveryRuns) {
      say(
        `| (c) delivery to the sandbox, 50 ms per provider call, ${label} (${f0(run.delivered)} of ${f0(run.expected)} sends; ${run.perChannel.join(', ')}; ${run.duplicates} seen twice by a provider, ${run.visible ?? '?'} visible to a recipient) | ${f0(run.rate)} sends/s | | | ≥ 2,000 sends/s | ${verdict(deliveryOk(run))} |`,
      );
    }
    if (RUN.has('d')) {
      const p99 = quantile(latencies, 0.99);
      say(
        `| (d) transactional, 202 → provider, ${TX_RATE}/s for ${TX_SECONDS} s while ${f0(LOW)} low drain (${latencies.length} of ${accepted.size} measured) | | ${f1(quantile(latencies, 0.5))} | ${f1(p99)} | p99 ≤ 250 ms | ${verdict(p99 <= 250 && latencies.length === accepted.size)} |`,
      );
      say(`| (d) low-tier sends during that window | ${f0(lowRate)} sends/s | | | (deferred while urgent work waits) | |`);
    }
    for (const r of policyRows) {
      if (r.ingest) ingestRow(r.label, r.ingest);
      if (r.run) {
        const x = r.run;
        const policy = x.policy
          ? `; ${f0(x.policy.counted)} counted against the caps, ${x.policy.held} held, ${x.policy.suppressed} suppressed`
          : '';
        say(
          `| ${r.label} (${f0(x.delivered)} of ${f0(x.expected)} sends; ${x.perChannel.join(', ')}; ${x.duplicates} seen twice by a provider, ${x.visible ?? '?'} visible to a recipient${policy}) | ${f0(x.rate)} sends/s | | | ≥ 2,000 sends/s | ${verdict(deliveryOk(x))} |`,
        );
      }
    }
    if (RUN.has('e')) {
      say(`| (e) raw pg-boss send, 16 in flight | ${f0(rawSendRate)} jobs/s | | | ceiling | |`);
      say(`| (e) raw pg-boss fetch + complete, one job at a time, 16 in flight | ${f0(rawFetchRate)} jobs/s | | | ceiling | |`);
      say(`| (e) raw pg-boss fetch + complete, batches of 50, 4 in flight | ${f0(rawBatchRate)} jobs/s | | | ceiling | |`);
    }
    say('');
    if (policyRows.length > 0) {
      const loads = [
        ...POLICIES.map((v) => [`ingestion ${v}`, figures.ingest[`p-${v}`]?.load]),
        ...POLICIES.map((v) => [`delivery ${v}`, figures.delivery[`p-${v}`]?.load]),
        ...POLICIES.map((v) => [`delivery high ${v}`, figures.delivery[`ph-${v}`]?.load]),
      ]
        .map(([what, l]) => `${String(what)} ${Array.isArray(l) ? `${l[0].toFixed(2)} → ${l[1].toFixed(2)}` : 'n/a'}`)
        .join('; ');
      say(
        `(p): quiet hours ${figures.quietHours ?? '(not set: policies off only)'}; load (1 min) before → after each measurement: ${loads}.`,
      );
      say('');
    }
    if (direct && viaSidecar) {
      say(`Errors: direct ${direct.errors} / non-202 ${direct.non202}; sidecar ${viaSidecar.errors} / non-202 ${viaSidecar.non202}.`);
    }
    say(
      `(d) runs with the tuned settings of (c): \`NOTIFIER_CONCURRENCY=${concurrency}\`, \`SMTP_POOL_SIZE=${argv['smtp-pool']}\`, \`DATABASE_POOL_MAX=${argv['pool-max']}\`.`,
    );
    say('');
    say(
      `Load average (1 min) ${loadBefore.toFixed(1)} at the start and ${loadavg()[0]!.toFixed(1)} at the end, on ${cpus().length} cores (the end figure counts this benchmark's own processes)${busy ? ': other work was running, so the figures are lower bounds, and the ratios between rows say more than the absolute numbers' : ''}.`,
    );
    say('');
    say('What the figures say:');
    say('');
    say(
      '- Ingestion is one transaction per request: the notification row, the idempotency record when a key is given, and the routing job through pg-boss `send` on the same client, then a commit (an fsync). ' +
        `It reaches ${direct && Number.isFinite(rawSendRate) ? `${Math.round((direct.rps / rawSendRate) * 100)}% of` : 'close to'} raw pg-boss \`send\` (e), which is the same insert without the notification row: the queue write and the commit are the cost, not the HTTP edge. The sidecar adds its admission and a proxy hop.`,
    );
    const tunedRun = deliveryRuns[1]?.run;
    const defaultRun = deliveryRuns[0]?.run;
    say(
      '- Delivery batches its database round trips without giving up a guarantee: the claims of a fetched batch in one statement, the `sent` records of concurrent sends and their job completions in one transaction, routing a fetched batch in one transaction. ' +
        'What sets its rate is how many sends are in flight: at 50 ms per provider call one queue with N sends in flight cannot pass N × 20 sends/s, and e-mail is further bounded by its SMTP connections (each message is several SMTP round trips plus the 50 ms). ' +
        `${defaultRun && tunedRun ? `The shipped defaults (64 in flight per \`high\` queue, 16 SMTP connections) give ${f0(defaultRun.rate)} sends/s, with e-mail the slowest channel; 160 in flight and 128 SMTP connections give ${f0(tunedRun.rate)}. ` : ''}` +
        `${tunedRun && Number.isFinite(rawBatchRate) ? `That is ${Math.round((tunedRun.rate / rawBatchRate) * 100)}% of raw pg-boss fetch + complete in batches (e), which does nothing else. ` : ''}` +
        'A CPU profile of the worker (`--profile`) shows its busy time mostly in socket writes (PostgreSQL, provider and SMTP round trips): past these settings the two cores, shared by the notifier, the sandbox and PostgreSQL, set the rate.',
    );
    say(
      '- The transactional tier keeps its latency while the low backlog drains: its own queues and worker pools, an idle poll of 50 ms and in-process wake-ups, and `low` deferred whenever urgent work waits while callers queue for a database connection.',
    );
  } finally {
    await stopAll();
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }

  if (argv.json !== '') writeFileSync(argv.json, JSON.stringify(figures, null, 2));
  // (p) and other builds are reported by --compare, in their own section.
  if (!argv['no-write'] && !RUN.has('p') && BUILD === resolve(PROJECT_ROOT)) {
    const file = join(PROJECT_ROOT, 'bench/RESULTS.md');
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
    writeFileSync(file, replaceSection(text, '## Notifier (issue 7)', lines.join('\n')).replace(/\n*$/, '\n'));
  }
}

// ── --compare: an older build against this one, alternating ──────────────────

interface RunRecord {
  round: number;
  build: 'old' | 'new';
  what: 'a,c' | 'p';
  command: string;
  /** When it started (ISO). */
  at: string;
  load: [number, number];
  seconds: number;
  figures: Figures;
}

/** Reads the figures of (a) and (c) from the table the older script prints (its own format, the one of issue 7). */
function parseOlderTable(out: string): Figures {
  const num = (x: string): number => Number(x.replace(/,/g, ''));
  const f: Figures = { ingest: {}, delivery: {} };
  for (const line of out.split('\n')) {
    const a = /^\| \(a\) ingestion, direct[^|]*\| ([\d,]+) req\/s \| ([\d.]+|n\/a) \| ([\d.]+|n\/a) \|/.exec(line);
    if (a) f.ingest['a'] = { rps: num(a[1]!), p50: Number(a[2]), p99: Number(a[3]), total: NaN, errors: NaN, non202: NaN };
    const c =
      /^\| \(c\) delivery[^|]*?(shipped defaults|NOTIFIER_CONCURRENCY)[^|]*\(([\d,]+) of ([\d,]+) sends; ([^|]*?); (\d+) seen twice\) \| ([\d,]+) sends\/s/.exec(
        line,
      );
    if (c) {
      f.delivery[c[1] === 'shipped defaults' ? 'c-default' : 'c-tuned'] = {
        rate: num(c[6]!),
        delivered: num(c[2]!),
        expected: num(c[3]!),
        perChannel: c[4]!.split(', '),
        duplicates: Number(c[5]),
      };
    }
  }
  if (!f.ingest['a'] || !f.delivery['c-default'] || !f.delivery['c-tuned'])
    throw new Error(`the older script's table was not as expected:\n${out}`);
  return f;
}

let running: ReturnType<typeof spawn> | undefined;

/** Runs `node args`, its table echoed to stderr; its stdout. Stopped after 30 minutes. */
function runNode(args: string[]): Promise<string> {
  return new Promise((resolveRun, rejectRun) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    running = child;
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      process.stderr.write(b);
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), 30 * 60_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      running = undefined;
      if (code === 0) resolveRun(out);
      else rejectRun(new Error(`node ${args.join(' ')} ended with ${code ?? signal}`));
    });
  });
}

function median(xs: number[]): number {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function gitCommit(dir: string): string {
  const r = spawnSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  const dirty = spawnSync('git', ['-C', dir, 'status', '--porcelain', '--', 'notifier', 'shared'], { encoding: 'utf8' });
  return `${r.stdout.trim() || 'unknown'}${dirty.stdout.trim() ? ' with uncommitted changes' : ''}`;
}

/** Replaces the section `heading`, or inserts it before the section that follows `after`. */
function placeSection(text: string, heading: string, body: string, after: string): string {
  const lines = text.split('\n');
  if (lines.some((l) => l.trim() === heading)) return replaceSection(text, heading, body);
  const at = lines.findIndex((l) => l.trim() === after);
  const next = at < 0 ? -1 : lines.findIndex((l, i) => i > at && /^## /.test(l));
  if (next < 0) return replaceSection(text, heading, body);
  return [...lines.slice(0, next), heading, '', body.trim(), '', ...lines.slice(next)].join('\n');
}

async function compare(olderCheckout: string): Promise<void> {
  const older = resolve(olderCheckout);
  const olderScript = join(older, 'dist/bench/notifier.js');
  const self = fileURLToPath(import.meta.url);
  for (const f of [olderScript, join(older, 'dist/notifier/main.js'), join(PROJECT_ROOT, 'dist/notifier/main.js')]) {
    if (!existsSync(f)) throw new Error(`${f} is missing: build that checkout first (npx tsc -b)`);
  }
  const limit = WAIT_LOAD ?? 1;
  const common = [
    ...['--duration', argv.duration, '--connections', argv.connections, '--deliveries', argv.deliveries],
    ...['--concurrency', argv.concurrency, '--smtp-pool', argv['smtp-pool'], '--pool-max', argv['pool-max']],
  ];
  const forP = ['--policy-deliveries', argv['policy-deliveries']];
  const shown = (args: string[]): string =>
    `node ${args.map((a) => (a.startsWith(`${PROJECT_ROOT}/`) ? relative(PROJECT_ROOT, a) : a)).join(' ')}`;
  // --resume: keep the runs an interrupted --compare finished (all of them: only the report is written).
  const recordsFile = join(SCRATCH, 'compare-records.json');
  const records: RunRecord[] = argv.resume && existsSync(recordsFile) ? (JSON.parse(readFileSync(recordsFile, 'utf8')) as RunRecord[]) : [];
  for (let round = 1; round <= ROUNDS; round++) {
    // Off first in odd rounds, on first in even ones: neither always runs on a warmer machine.
    const order = round % 2 === 1 ? 'off,on' : 'on,off';
    const plan: { build: 'old' | 'new'; what: 'a,c' | 'p'; args: string[] }[] = [
      { build: 'old', what: 'a,c', args: [olderScript, '--scenario', 'a,c', '--no-write', ...common] },
      { build: 'new', what: 'a,c', args: [self, '--scenario', 'a,c', '--no-write', ...common] },
      { build: 'old', what: 'p', args: [self, '--build', older, '--scenario', 'p', '--policies', 'off', '--no-write', ...common, ...forP] },
      { build: 'new', what: 'p', args: [self, '--scenario', 'p', '--policies', order, '--no-write', ...common, ...forP] },
    ];
    for (const step of plan) {
      if (records.some((r) => r.round === round && r.build === step.build && r.what === step.what)) continue;
      const what = `round ${round}, ${step.build} build, ${step.what}`;
      const load0 = await waitForQuiet(limit, what);
      process.stderr.write(`── ${what}: ${shown(step.args)}\n`);
      const json = join(SCRATCH, `compare-${round}-${step.build}-${step.what.replace(',', '')}.json`);
      const ours = step.args[0] === self;
      const t0 = Date.now();
      const at = new Date().toISOString();
      const out = await runNode(ours ? [...step.args, '--json', json] : step.args);
      records.push({
        round,
        build: step.build,
        what: step.what,
        command: shown(step.args),
        at,
        load: [load0, loadavg()[0]!],
        seconds: (Date.now() - t0) / 1000,
        figures: ours ? (JSON.parse(readFileSync(json, 'utf8')) as Figures) : parseOlderTable(out),
      });
      writeFileSync(recordsFile, JSON.stringify(records, null, 2));
    }
  }

  // ── report ────────────────────────────────────────────────────────────────
  const admin = new pg.Client({ connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  const pgVersion = (await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
  await admin.end();
  const cpu = (readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m)?.[1] ?? cpus()[0]?.model ?? 'unknown').trim();
  const oldCommit = gitCommit(older);
  const newCommit = gitCommit(PROJECT_ROOT);
  const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
  const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
  const change = (x: number, base: number): string =>
    Number.isFinite(x) && Number.isFinite(base) && base > 0
      ? `${x >= base ? '+' : '−'}${Math.abs((x / base - 1) * 100).toFixed(1)}%`
      : 'n/a';

  type Col = 'old' | 'off' | 'on';
  const COLS: Col[] = ['old', 'off', 'on'];
  const colName: Record<Col, string> = { old: 'old build', off: 'new, no policies', on: 'new, policies on' };
  interface RowDef {
    id: string;
    kind: 'ingest' | 'delivery';
    what: 'a,c' | 'p';
    label: string;
    keys: Partial<Record<Col, string>>;
    target: string;
  }
  const ingestTarget = '≥ 1,500 req/s, p99 ≤ 50 ms';
  const rows: RowDef[] = [
    {
      id: 'a',
      kind: 'ingest',
      what: 'a,c',
      label: `(a) ingestion, direct: \`bench.ingest\`, \`normal\`, push; ${argv.connections} connections, ${argv.duration} s`,
      keys: { old: 'a', off: 'a' },
      target: ingestTarget,
    },
    {
      id: 'c-default',
      kind: 'delivery',
      what: 'a,c',
      label: `(c) delivery, \`high\`, push + email + sms, ${f0(Number(argv.deliveries) * 3)} sends, shipped defaults`,
      keys: { old: 'c-default', off: 'c-default' },
      target: '(shipped defaults: none)',
    },
    {
      id: 'c-tuned',
      kind: 'delivery',
      what: 'a,c',
      label: `(c) delivery, \`high\`, push + email + sms, ${f0(Number(argv.deliveries) * 3)} sends, tuned`,
      keys: { old: 'c-tuned', off: 'c-tuned' },
      target: '≥ 2,000 sends/s',
    },
    {
      id: 'p-ingest',
      kind: 'ingest',
      what: 'p',
      label: '(p) ingestion as (a), in the (p) runs; policies on: the catalogue classifies every request `bench_policy`',
      keys: { old: 'p-off', off: 'p-off', on: 'p-on' },
      target: ingestTarget,
    },
    {
      id: 'p-delivery',
      kind: 'delivery',
      what: 'p',
      label: `(p) delivery, \`normal\`, push + email, ${f0(POLICY_DELIVERIES * 2)} sends, tuned; policies on: preferences, quiet hours and both caps checked on every send`,
      keys: { old: 'p-off', off: 'p-off', on: 'p-on' },
      target: '≥ 2,000 sends/s',
    },
    {
      id: 'ph-delivery',
      kind: 'delivery',
      what: 'p',
      label: `(p) delivery, \`high\`, push + email + sms as (c), ${f0(POLICY_DELIVERIES * 3)} sends, tuned; policies on: preferences and quiet hours (\`NOTIFIER_QUIET_HOURS_TIERS=normal,high\`) checked on every send; caps never apply at \`high\``,
      keys: { old: 'ph-off', off: 'ph-off', on: 'ph-on' },
      target: '≥ 2,000 sends/s',
    },
  ];
  const ingestOf = (row: RowDef, col: Col): Ingest[] => {
    const key = row.keys[col];
    if (!key) return [];
    return records
      .filter((r) => r.build === (col === 'old' ? 'old' : 'new') && r.what === row.what)
      .map((r) => r.figures.ingest[key])
      .filter((x): x is Ingest => x !== undefined);
  };
  const deliveryOf = (row: RowDef, col: Col): DeliveryRun[] => {
    const key = row.keys[col];
    if (!key) return [];
    return records
      .filter((r) => r.build === (col === 'old' ? 'old' : 'new') && r.what === row.what)
      .map((r) => r.figures.delivery[key])
      .filter((x): x is DeliveryRun => x !== undefined);
  };
  const complete = (d: DeliveryRun): boolean => d.delivered === d.expected && d.duplicates === 0;
  const med = {
    rps: (row: RowDef, col: Col): number => median(ingestOf(row, col).map((m) => m.rps)),
    p99: (row: RowDef, col: Col): number => median(ingestOf(row, col).map((m) => m.p99)),
    rate: (row: RowDef, col: Col): number => median(deliveryOf(row, col).map((d) => d.rate)),
  };
  const okOf = (row: RowDef, col: Col): boolean | undefined => {
    if (!row.keys[col] || row.id === 'c-default') return undefined;
    if (row.kind === 'ingest') return ingestOf(row, col).length > 0 ? med.rps(row, col) >= 1500 && med.p99(row, col) <= 50 : undefined;
    const runs = deliveryOf(row, col);
    return runs.length > 0 ? med.rate(row, col) >= 2000 && runs.every(complete) : undefined;
  };
  const cell = (row: RowDef, col: Col): string => {
    if (row.kind === 'ingest') {
      const ms = ingestOf(row, col);
      if (ms.length === 0) return '—';
      return `**${f0(med.rps(row, col))} req/s, p99 ${f1(med.p99(row, col))} ms** (${ms.map((m) => `${f0(m.rps)} / ${f1(m.p99)}`).join(' · ')})`;
    }
    const ds = deliveryOf(row, col);
    if (ds.length === 0) return '—';
    const runs = ds.map((d) => `${f0(d.rate)}${complete(d) ? '' : ` (${f0(d.delivered)} of ${f0(d.expected)}, ${d.duplicates} twice)`}`);
    return `**${f0(med.rate(row, col))} sends/s** (${runs.join(' · ')})`;
  };
  const verdictOf = (row: RowDef): string => {
    const parts = COLS.map((c) => [c, okOf(row, c)] as const).filter(([, ok]) => ok !== undefined);
    if (parts.length === 0) return '';
    return parts.map(([c, ok]) => `${colName[c]}: ${ok ? 'met' : '**not met**'}`).join('; ');
  };

  const lines: string[] = [];
  const say = (x: string): void => {
    lines.push(x);
  };
  const started = records[0]?.at ?? new Date().toISOString();
  const ended = new Date();
  say(
    `Run ${started.slice(0, 16)}–${ended.toISOString().slice(11, 16)}Z on ${cpus().length} cores (${cpu}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL ${pgVersion} on the same machine (fsync on), which other sessions' test suites shared; every process unpinned.`,
  );
  say(
    `Builds: **old** = ${oldCommit} (before the policies: no catalogue, no preferences, the claim one statement), **new** = ${newCommit}, both from the same \`node_modules\`. ` +
      `${ROUNDS} rounds, each: the old build's own \`dist/bench/notifier.js\` (a, c), the new one's (a, c), this script against the old build (p, off only: it knows neither catalogue nor preferences), this script on the new build (p, off and on; off first in odd rounds, on first in even ones). ` +
      `Each run started once the 1-minute load average was below ${limit} (polled every 10 s, at most 10 minutes).`,
  );
  say('');
  say(
    `Tuned settings (the target's): \`NOTIFIER_CONCURRENCY=${argv.concurrency}\`, \`SMTP_POOL_SIZE=${argv['smtp-pool']}\`, \`DATABASE_POOL_MAX=${argv['pool-max']}\`; the sandbox answers every provider call after 50 ms. ` +
      `Policies on: \`NOTIFIER_NOTIFICATION_TYPES='${POLICY_TYPES}'\`; the recipients p0…p49 have \`timezone: ${POLICY_ZONE}\` and, through \`PATCH /api/v1/users/{id}/preferences\`, \`{"bench_policy": {"in_app": false}, "quiet_hours": {start, end}}\` with a window from 3 to 5 hours after the run's local time ` +
      `(${[...new Set(records.map((r) => r.figures.quietHours).filter((q): q is string => q !== undefined))].join(', ')}): the gate reads and evaluates them on every send, holds none, and at \`normal\` the caps count every send; the \`high\` row adds \`NOTIFIER_QUIET_HOURS_TIERS=normal,high\` so quiet hours are evaluated there too. Policies off: the default catalogue (\`bench.*\` is \`general\`: no caps), recipients u0…u49 without preferences or time zone.`,
  );
  say('');
  say('Commands:');
  say('');
  say('```sh');
  say(`git worktree add --detach ${olderCheckout} ${oldCommit.split(' ')[0]} && ln -s "$PWD/node_modules" ${olderCheckout}/node_modules`);
  say(`(cd ${olderCheckout} && npx tsc -b) && npx tsc -b`);
  say(
    `node dist/bench/notifier.js --compare ${olderCheckout} --rounds ${ROUNDS} --wait-load ${limit} --deliveries ${argv.deliveries} --policy-deliveries ${argv['policy-deliveries']}`,
  );
  say(`git worktree remove --force ${olderCheckout}`);
  say("# which runs, per round (the policy order swapped in even rounds; each of this script's runs also gets --json <file>):");
  const seenCmd = new Set<string>();
  for (const r of records) {
    const c = r.command.replace(/--policies on,off/, '--policies off,on');
    if (!seenCmd.has(c)) say(c);
    seenCmd.add(c);
  }
  say('```');
  say('');
  say(`Median of ${ROUNDS} runs per cell, then each run in order (ingestion: req/s / p99 ms):`);
  say('');
  say(`| measurement | without policies (old build) | new build, no policies | new build, policies on | target | verdict |`);
  say('|---|---|---|---|---|---|');
  for (const row of rows)
    say(`| ${row.label} | ${cell(row, 'old')} | ${cell(row, 'off')} | ${cell(row, 'on')} | ${row.target} | ${verdictOf(row)} |`);
  say('');
  // CPU of the (p) measurements, from /proc: notifier, PostgreSQL (every backend), sandbox.
  const pIngest = rows.find((r) => r.id === 'p-ingest')!;
  const pDelivery = rows.find((r) => r.id === 'p-delivery')!;
  const cpuCell = (xs: (Cpu | undefined)[], per: number[], part: keyof Cpu): string => {
    const v = median(xs.map((c, i) => (c ? (c[part] / per[i]!) * 1000 : NaN)));
    return f2(v);
  };
  say(
    'CPU seconds per 1,000 requests or sends in the (p) measurements (median; read from /proc over the measured window; PostgreSQL counts every backend on the machine):',
  );
  say('');
  say('| (p) | process | old build | new, no policies | new, policies on |');
  say('|---|---|---:|---:|---:|');
  for (const part of ['notifier', 'postgres'] as const) {
    say(
      `| ingestion | ${part === 'postgres' ? 'PostgreSQL' : part} | ${COLS.map((c) => {
        const ms = ingestOf(pIngest, c);
        return ms.length
          ? cpuCell(
              ms.map((m) => m.cpu),
              ms.map((m) => m.total),
              part,
            )
          : '—';
      }).join(' | ')} |`,
    );
  }
  for (const part of ['notifier', 'postgres', 'sandbox'] as const) {
    say(
      `| delivery | ${part === 'postgres' ? 'PostgreSQL' : part} | ${COLS.map((c) => {
        const ds = deliveryOf(pDelivery, c);
        return ds.length
          ? cpuCell(
              ds.map((d) => d.cpu),
              ds.map((d) => d.windowSends ?? NaN),
              part,
            )
          : '—';
      }).join(' | ')} |`,
    );
  }
  say('');
  say("Runs (1-minute load average at the start → at the end; the end counts the bench's own processes):");
  say('');
  // `p-on` → `on`, `ph-off` → `high off`.
  const variant = (k: string): string => k.replace(/^p-/, '').replace(/^ph-/, 'high ');
  for (const r of records) {
    const inner = [
      ...Object.entries(r.figures.ingest).map(([k, m]) => (m.load ? `ingestion ${variant(k)} ${f2(m.load[0])} → ${f2(m.load[1])}` : '')),
      ...Object.entries(r.figures.delivery).map(([k, d]) =>
        d.load
          ? `delivery ${variant(k)} ${f2(d.load[0])} → ${f2(d.load[1])}${d.policy ? ` (${f0(d.policy.counted)} sends counted against the caps, ${d.policy.held} held, ${d.policy.suppressed} suppressed)` : ''}`
          : '',
      ),
    ].filter((x) => x !== '');
    say(
      `- round ${r.round}, ${r.build} build, ${r.what}: ${f2(r.load[0])} → ${f2(r.load[1])}, ${Math.round(r.seconds)} s${inner.length ? `; each measurement: ${inner.join('; ')}` : ''}`,
    );
  }
  say('');

  // What the figures say.
  const rowById = (id: string): RowDef => rows.find((r) => r.id === id)!;
  const pi = rowById('p-ingest');
  const pd = rowById('p-delivery');
  const ct = rowById('c-tuned');
  const ph = rowById('ph-delivery');
  const cpuMed = (c: Col, part: keyof Cpu): number =>
    median(deliveryOf(pd, c).map((d) => (d.cpu && d.windowSends ? (d.cpu[part] / d.windowSends) * 1000 : NaN)));
  const spread = (xs: number[]): number => (xs.length > 1 ? (Math.max(...xs) - Math.min(...xs)) / median(xs) : 0);
  const maxSpread = Math.max(
    ...rows.flatMap((row) =>
      COLS.map((c) => spread(row.kind === 'ingest' ? ingestOf(row, c).map((m) => m.rps) : deliveryOf(row, c).map((d) => d.rate))),
    ),
  );
  const late = records.filter((r) => r.load[0] >= limit).length;
  say('What the figures say:');
  say('');
  say(
    `- **Ingestion** with the policy catalogue: ${f0(med.rps(pi, 'on'))} req/s, p99 ${f1(med.p99(pi, 'on'))} ms, against ${f0(med.rps(pi, 'off'))} req/s, p99 ${f1(med.p99(pi, 'off'))} ms without in the same runs (${change(med.rps(pi, 'on'), med.rps(pi, 'off'))}), and ${f0(med.rps(pi, 'old'))} req/s on the old build. ` +
      `Ingestion only classifies the type (a map lookup) and stores it in one more column, so a difference here is the machine's, not the policies'. Target ${okOf(pi, 'on') ? 'met' : '**not met**'} with the policies on.`,
  );
  say(
    `- **Delivery** at \`normal\` with every send checked: ${f0(med.rate(pd, 'on'))} sends/s with the policies on, ${f0(med.rate(pd, 'off'))} without on the same build (${change(med.rate(pd, 'on'), med.rate(pd, 'off'))}), ${f0(med.rate(pd, 'old'))} on the old build (${change(med.rate(pd, 'on'), med.rate(pd, 'old'))}). ` +
      `Target ≥ 2,000 sends/s: ${okOf(pd, 'on') ? 'met' : '**not met**'} with the policies on${okOf(pd, 'off') === false ? ', and not met without them on the new build either' : ''}${okOf(pd, 'old') === false ? ' (nor by the old build on this machine)' : ''}. ` +
      `At \`high\` (three channels, as (c)) the user's "off" applies, so the claim takes the user locks and reads the preferences, and here quiet hours too, but never caps: ${f0(med.rate(ph, 'on'))} sends/s with the policies on, ${f0(med.rate(ph, 'off'))} without, ${f0(med.rate(ph, 'old'))} on the old build; the issue-7 runs of (c) went from ${f0(med.rate(ct, 'old'))} to ${f0(med.rate(ct, 'off'))} (${change(med.rate(ct, 'off'), med.rate(ct, 'old'))}).`,
  );
  say(
    `- **Where the check costs**: the old build claimed a fetched batch with one statement. The new one, for every non-transactional batch, runs one transaction: BEGIN, the shared advisory lock of each user in the batch, the claim, the preferences and time zones read under a savepoint with its lock and statement timeouts set and reset (7 statements), then, with caps on, the advisory lock of each (user, type, channel) key, the count over \`deliveries.counted_at\` and the \`counted_at\` update, and COMMIT: about 11 round trips without caps and 14 with, where there was 1, and with caps a second write of every claimed row (\`counted_at\`). ` +
      `Per 1,000 sends, PostgreSQL used ${f2(cpuMed('old', 'postgres'))} CPU s on the old build, ${f2(cpuMed('off', 'postgres'))} on the new one without policies and ${f2(cpuMed('on', 'postgres'))} with them; the notifier ${f2(cpuMed('old', 'notifier'))}, ${f2(cpuMed('off', 'notifier'))} and ${f2(cpuMed('on', 'notifier'))}. On two cores shared by the notifier, PostgreSQL and the sandbox, that CPU is the rate.`,
  );
  say(
    `- **Noise**: runs of the same build and measurement differed by up to ${Math.round(maxSpread * 100)}% (the spread within a cell above), so differences smaller than that say little. ${late === 0 ? `Every run started below a load of ${limit}.` : `${late} of ${records.length} runs started at a load of ${limit} or more, after the 10-minute wait: their figures are lower bounds.`}`,
  );

  const text = lines.join('\n');
  process.stdout.write(`${text}\n`);
  if (!argv['no-write']) {
    const file = join(PROJECT_ROOT, 'bench/RESULTS.md');
    const current = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
    writeFileSync(file, placeSection(current, '## Notifier policies (issue 13)', text, '## Notifier (issue 7)').replace(/\n*$/, '\n'));
  }
}

if (argv.compare !== '') {
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      running?.kill('SIGTERM');
      process.exit(130);
    });
  }
}

(argv.compare !== '' ? compare(argv.compare) : main()).catch(async (err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
