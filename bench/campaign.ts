/**
 * The campaign fan-out benchmark (issue 14, item 7). Starts what it measures as separate processes
 * (the notifier from dist/, the sandbox providers), against a fresh database on DATABASE_URL
 * (default postgres://postgres@127.0.0.1:5432/postgres; dropped at the end unless --keep-db):
 *
 *   (u) upload: a list segment of --members random user ids (UUIDs, NDJSON, about 39 bytes a
 *       line) streamed through `PUT /api/v1/admin/segments/{id}/members`; then, in bulk SQL, a
 *       profile with a time zone and a push token for every member, and preferences for 10%: 5%
 *       with marketing push off, 5% with quiet hours covering now in their zone (the document
 *       shape is the one the preferences API stored for two members set through it); ANALYZE;
 *   (n) the peer, the naive fan-out (as Novu's was before its PR #5165): one queue job per recipient, pg-boss
 *       `insert` in batches into a throwaway queue on the same database, timed from the first
 *       insert to the last, with the same transactional load beside it;
 *   (q) a second peer, with --bullmq <dir> (a folder where `npm install bullmq@5` was run; not a
 *       dependency of the project): the same one job per recipient with BullMQ `addBulk` on the
 *       local Redis (Novu's queue), under a key prefix of its own, obliterated afterwards; the
 *       machine's Redis keeps nothing on disk, so this peer writes no log at all;
 *   (x) ours: one audience request (marketing, low, push), timed from the 202 to the status
 *       showing `expanded` (every member's delivery record written, policies applied); the
 *       notifier's delivery workers run throughout and a steady transactional load (--tx-rate
 *       single-recipient push sends) is measured beside it, from the request to the sandbox
 *       receiving the push; per-shard time and members from /metrics, rows, bytes of deliveries
 *       and each of its indexes, and WAL written;
 *   (e) --explain: one shard's statements again with EXPLAIN (ANALYZE, BUFFERS, WAL), rolled
 *       back, and the floor: the same 1,000 rows inserted and committed alone;
 *   (k) the kill switch: a second replica; --stops campaigns of --stop-members members (normal
 *       tier), each stopped once its sends are under way; `acknowledged_in_ms` from the answer and
 *       the call → answer time measured here; the campaign's deliveries sending or sent 1.5 s after
 *       the answer beyond those at the answer (a claim after the acknowledgements would add one);
 *       last, the big campaign, still draining.
 *
 * --wait-load L: each measurement starts once the 1-minute load average is below L (at most 10
 * minutes' wait before the run, 2 before each later measurement; the load is printed beside each
 * figure). --env K=V: extra notifier settings (repeatable). --build: the notifier and sandbox of
 * another built checkout. An interrupted run leaves its database (bench_campaign_*) behind.
 *
 *   npx tsc -b && node dist/bench/campaign.js [--members 1000000] [--tx-rate 50] [--stops 20]
 *     [--stop-members 5000] [--peer-batch 1000] [--peer-concurrency 2] [--scenario n,q,x,k]
 *     [--explain] [--profile] [--wait-load 1.5] [--env K=V]… [--bullmq <dir>] [--build <checkout>] [--keep-db] [--no-write]
 *
 * A run with the default --members and every scenario writes the "## Campaign fan-out (issue 14)"
 * section of bench/RESULTS.md.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { cpus, loadavg, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import PgBoss from 'pg-boss';
import { parseQuietWindow, quietHoursRelease } from '../notifier/policy/quiet-hours.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import { freePort, postgresCpu, procCpu, spawnPinned, stopAll, waitForHttp, type Started } from './lib/processes.js';
import { replaceSection } from './lib/report.js';
import { topSelfTime, type CpuProfile } from './lib/cpu-profile.js';

const { values: argv } = parseArgs({
  options: {
    members: { type: 'string', default: '1000000' },
    'tx-rate': { type: 'string', default: '50' },
    stops: { type: 'string', default: '20' },
    'stop-members': { type: 'string', default: '5000' },
    'peer-batch': { type: 'string', default: '1000' },
    'peer-concurrency': { type: 'string', default: '2' },
    scenario: { type: 'string', default: 'n,q,x,k' },
    explain: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'wait-load': { type: 'string', default: '' },
    env: { type: 'string', multiple: true, default: [] },
    build: { type: 'string', default: PROJECT_ROOT },
    'keep-db': { type: 'boolean', default: false },
    bullmq: { type: 'string', default: '' },
    'no-write': { type: 'boolean', default: false },
    concurrency: { type: 'string', default: 'transactional=32,high=160,normal=160,low=16' },
  },
});
const MEMBERS = Number(argv.members);
const TX_RATE = Number(argv['tx-rate']);
const STOPS = Number(argv.stops);
const STOP_MEMBERS = Number(argv['stop-members']);
const PEER_BATCH = Number(argv['peer-batch']);
const PEER_CONCURRENCY = Number(argv['peer-concurrency']);
const RUN = new Set(argv.scenario.split(',').map((s) => s.trim()));
const WAIT_LOAD = argv['wait-load'] === '' ? undefined : Number(argv['wait-load']);
const BUILD = resolve(argv.build);
/** --env K=V (repeatable): extra notifier settings. */
const EXTRA_ENV: Record<string, string> = Object.fromEntries(
  argv.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);

const SCRATCH = join(PROJECT_ROOT, 'bench/.scratch/campaign');
mkdirSync(SCRATCH, { recursive: true });
const SECRET = randomBytes(24).toString('hex');
const SERVICE = { 'x-subject': 'key:' + 'c'.repeat(64), 'x-subject-role': 'service', 'x-subject-secret': SECRET };
const ADMIN = { ...SERVICE, 'x-subject': 'user:bench', 'x-subject-role': 'admin' };
/** Members' time zones, round robin. */
const ZONES = [
  'America/New_York',
  'Europe/Paris',
  'Asia/Tokyo',
  'America/Los_Angeles',
  'Europe/London',
  'Asia/Kolkata',
  'UTC',
  'Australia/Sydney',
];
const SETUP_BATCH = 50_000;

// ── helpers ───────────────────────────────────────────────────────────────────

let waited = false;
/**
 * Waits (every 10 s) until the 1-minute load average is below `limit`: at most 10 minutes before
 * the run, 2 before each later measurement. The load when it goes on.
 */
async function waitForQuiet(limit: number | undefined, what: string): Promise<number> {
  const deadline = Date.now() + (waited ? 120_000 : 600_000);
  waited = true;
  for (;;) {
    const load = loadavg()[0]!;
    if (limit === undefined || load < limit) return load;
    if (Date.now() >= deadline) {
      process.stderr.write(`load ${load.toFixed(2)} still ≥ ${limit}: ${what} goes on (recorded)\n`);
      return load;
    }
    process.stderr.write(`waiting for the load (${load.toFixed(2)}) to fall below ${limit} before ${what}\n`);
    await sleep(10_000);
  }
}

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;
/** The fields of the notifier's answers this bench reads. */
interface Answer {
  notification_id?: string;
  size?: number;
  campaign?: { state?: string; sent?: number };
  acknowledged_in_ms?: number;
  acknowledged?: boolean;
  replicas?: unknown[];
}

/** CPU seconds of this database's backends now, by pid (their own time: a backend has no children). */
async function dbBackends(pool: pg.Pool): Promise<Map<number, number>> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  const out = new Map<number, number>();
  for (const r of rows) {
    try {
      const f = readFileSync(`/proc/${r.pid}/stat`, 'utf8');
      const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
      out.set(r.pid, (Number(x[11]) + Number(x[12])) / CLK_TCK);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
/** CPU seconds this database's backends used between two readings (a backend that exited in between is not counted). */
function dbCpuDelta(a: Map<number, number>, b: Map<number, number>): number {
  let total = 0;
  for (const [pid, v] of b) total += v - (a.get(pid) ?? 0);
  return total;
}

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers = SERVICE,
): Promise<{ status: number; body: Answer }> {
  const r = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let parsed: Answer = {};
  try {
    parsed = text ? (JSON.parse(text) as Answer) : {};
  } catch {
    // not JSON
  }
  return { status: r.status, body: parsed };
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
const f0 = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en') : 'n/a');
const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
const mb = (b: number): string => (b / 2 ** 20).toFixed(1);

/** Streams `ids` as NDJSON to the segment upload; the answer, the bytes sent and the seconds taken. */
function uploadSegment(
  base: string,
  segment: string,
  ids: readonly string[],
): Promise<{ status: number; body: string; bytes: number; seconds: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let bytes = 0;
    const req = httpRequest(`${base}/api/v1/admin/segments/${segment}/members`, {
      method: 'PUT',
      headers: { 'content-type': 'application/x-ndjson', ...ADMIN },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString('utf8'),
          bytes,
          seconds: (performance.now() - t0) / 1000,
        }),
      );
    });
    // 64 KiB pieces, generated as the socket drains: the body is never held whole here either.
    let i = 0;
    const pump = (): void => {
      while (i < ids.length) {
        let piece = '';
        while (i < ids.length && piece.length < 65_536) piece += `"${ids[i++]}"\n`;
        bytes += Buffer.byteLength(piece);
        if (!req.write(piece)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

/** Messages the sandbox has accepted so far. */
async function sandboxTotal(sandboxUrl: string): Promise<number> {
  const r = (await (await fetch(`${sandboxUrl}/sandbox/messages?limit=1`)).json()) as { total: number };
  return r.total;
}

/** Local wall-clock "HH:MM" in `zone` at `ms`. */
function wallClock(ms: number, zone: string): number {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(
    new Date(ms),
  );
  const at = (type: string): number => Number(parts.find((p) => p.type === type)?.value);
  return at('hour') * 60 + at('minute');
}
const hhmm = (min: number): string => {
  const m = ((min % 1440) + 1440) % 1440;
  return `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
};
/** Quiet hours in `zone` from 2 h before to 2 h after now, checked with the notifier's own judgement. */
function quietHoursCoveringNow(nowMs: number, zone: string): { start: string; end: string } {
  const local = wallClock(nowMs, zone);
  const w = { start: hhmm(local - 120), end: hhmm(local + 120) };
  const parsed = parseQuietWindow(w.start, w.end);
  for (const t of [nowMs, nowMs + 3_600_000]) {
    if (!parsed || quietHoursRelease(t, zone, parsed) === undefined)
      throw new Error(`quiet hours ${w.start}–${w.end} ${zone} do not cover the run`);
  }
  return w;
}

interface Histogram {
  buckets: { le: number; n: number }[];
  sum: number;
  count: number;
}
function parseMetrics(text: string): { shard: Histogram; recipients: number } {
  const shard: Histogram = { buckets: [], sum: 0, count: 0 };
  let recipients = 0;
  for (const line of text.split('\n')) {
    let m = /^fanout_shard_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} ([0-9.e+-]+)$/.exec(line);
    if (m) shard.buckets.push({ le: m[1] === '+Inf' ? Infinity : Number(m[1]), n: Number(m[2]) });
    m = /^fanout_shard_seconds_sum(?:\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m) shard.sum = Number(m[1]);
    m = /^fanout_shard_seconds_count(?:\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m) shard.count = Number(m[1]);
    m = /^fanout_recipients_total(?:\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m) recipients = Number(m[1]);
  }
  return { shard, recipients };
}
/** The upper bound of the bucket holding quantile q (a histogram tells no more). */
function bucketQuantile(h: Histogram, q: number): number {
  const want = q * h.count;
  for (const b of h.buckets) if (b.n >= want) return b.le;
  return Infinity;
}

interface Sizes {
  table: number;
  toast: number;
  indexes: Record<string, number>;
  wal: string;
}
async function sizes(pool: pg.Pool): Promise<Sizes> {
  const t = await pool.query<{ table: string; toast: string; wal: string }>(
    `SELECT pg_relation_size('deliveries')::text AS table,
            (pg_total_relation_size('deliveries') - pg_relation_size('deliveries') - pg_indexes_size('deliveries'))::text AS toast,
            pg_current_wal_lsn()::text AS wal`,
  );
  const i = await pool.query<{ name: string; size: string }>(
    `SELECT c.relname AS name, pg_relation_size(c.oid)::text AS size FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
      WHERE x.indrelid = 'deliveries'::regclass ORDER BY c.relname`,
  );
  return {
    table: Number(t.rows[0]!.table),
    toast: Number(t.rows[0]!.toast),
    indexes: Object.fromEntries(i.rows.map((r) => [r.name, Number(r.size)])),
    wal: t.rows[0]!.wal,
  };
}

/** A steady open-loop load of transactional single-recipient push sends; latencies read from the sandbox afterwards. */
class TxLoad {
  readonly sent: { id: string; tReq: number; t202: number }[] = [];
  refused = 0;
  #stop = false;
  #done: Promise<void> | undefined;
  constructor(
    private readonly base: string,
    private readonly rate: number,
  ) {}
  start(): void {
    const pending: Promise<void>[] = [];
    const t0 = Date.now();
    this.#done = (async () => {
      for (let i = 0; !this.#stop; i++) {
        const at = t0 + (i * 1000) / this.rate;
        const wait = at - Date.now();
        if (wait > 0) await sleep(wait);
        const tReq = Date.now();
        pending.push(
          call(this.base, 'POST', '/api/v1/notifications', {
            event_type: 'auth.code',
            recipient_id: 'tx',
            template_id: 'bench_v1',
            template_data: { code: String(i) },
            priority: 'transactional',
            channels: ['push'],
          }).then(
            (r) => {
              if (r.status === 202) this.sent.push({ id: r.body.notification_id!, tReq, t202: Date.now() });
              else this.refused++;
            },
            () => {
              this.refused++;
            },
          ),
        );
      }
      await Promise.all(pending);
    })();
  }
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
  }
}

interface TxFigures {
  n: number;
  measured: number;
  refused: number;
  p50: number;
  p99: number;
  max: number;
  p99From202: number;
}
/** Request → provider latencies of the sends requested within [from, to]. */
async function txFigures(sandboxUrl: string, load: TxLoad, from: number, to: number): Promise<TxFigures> {
  const msgs = (await (await fetch(`${sandboxUrl}/sandbox/messages?channel=push&to=token-tx`)).json()) as {
    messages: { received_at: number; data?: Record<string, string> }[];
  };
  const got = new Map<string, number>();
  for (const m of msgs.messages) if (m.data?.notification_id) got.set(m.data.notification_id, m.received_at * 1000);
  const inWindow = load.sent.filter((s) => s.tReq >= from && s.tReq <= to);
  const lat: number[] = [];
  const lat202: number[] = [];
  for (const s of inWindow) {
    const at = got.get(s.id);
    if (at === undefined) continue;
    lat.push(at - s.tReq);
    lat202.push(at - s.t202);
  }
  lat.sort((a, b) => a - b);
  lat202.sort((a, b) => a - b);
  return {
    n: inWindow.length,
    measured: lat.length,
    refused: load.refused,
    p50: quantile(lat, 0.5),
    p99: quantile(lat, 0.99),
    max: lat[lat.length - 1] ?? NaN,
    p99From202: quantile(lat202, 0.99),
  };
}

// ── the run ───────────────────────────────────────────────────────────────────

interface Figures {
  upload?: { seconds: number; bytes: number; members: number; tableBytes: number };
  setupSeconds?: number;
  bull?: {
    seconds: number;
    jobs: number;
    tx: TxFigures;
    load: [number, number];
    redisBytes: number;
    version: string;
    cpu: { redis: number; bench: number };
  };
  peer?: {
    seconds: number;
    jobs: number;
    tx: TxFigures;
    load: [number, number];
    jobBytes: number;
    walBytes: number;
    cpu: { postgres: number; db: number; bench: number };
  };
  ours?: {
    seconds: number;
    dbSeconds: number;
    firstStatusSeconds: number;
    shards: number;
    rows: Record<string, number>;
    distinctMembers: number;
    before: Sizes;
    after: Sizes;
    walBytes: number;
    metrics: ReturnType<typeof parseMetrics>;
    tx: TxFigures;
    load: [number, number];
    cpu: { notifier: number; postgres: number; db: number; sandbox: number };
    sentDuring: number;
  };
  explain?: string[];
  kill?: {
    refusals: number;
    claimedAfter: number;
    acked: number[];
    measured: number[];
    replicas: number;
    allAcked: boolean;
    late: number;
    big?: { acked: number; measured: number };
    load: [number, number];
  };
  profile?: string[];
}

async function main(): Promise<void> {
  const load0 = await waitForQuiet(WAIT_LOAD, 'the run');
  const started = new Date();
  const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `bench_campaign_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const u = new URL(adminUrl);
  u.pathname = `/${dbName}`;
  const dbUrl = u.toString();
  const pool = new pg.Pool({ connectionString: dbUrl, max: 6 });
  pool.on('error', () => {});
  const fig: Figures = {};
  const log = (s: string): void =>
    void process.stderr.write(`[${new Date().toISOString().slice(11, 19)} load ${loadavg()[0]!.toFixed(2)}] ${s}\n`);

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
      SANDBOX_MAX_MESSAGES: '2000000',
      SANDBOX_FAULTS: JSON.stringify(['push', 'email', 'sms'].map((channel) => ({ channel, latency_ms: 50 }))),
    },
  });
  await waitForHttp(sandbox, `${sandboxUrl}/readyz`, join(SCRATCH, 'sandbox.log'));

  const notifierEnv: Record<string, string> = {
    LOG_LEVEL: 'info',
    DATABASE_URL: dbUrl,
    SERVICE_SECRET: SECRET,
    NOTIFIER_WORKERS: 'true',
    NOTIFIER_TRACKING_SECRET: SECRET,
    FCM_URL: sandboxUrl,
    SMS_URL: sandboxUrl,
    SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
    PROVIDER_CONNECTIONS: '64',
    NOTIFIER_CONCURRENCY: argv.concurrency,
    SMTP_POOL_SIZE: '128',
    DATABASE_POOL_MAX: '10',
    // The bench times the expansion, not an operator's approval.
    NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD: String(Math.max(2 * MEMBERS, 100_000)),
    ...EXTRA_ENV,
  };
  let n = 0;
  const startNotifier = async (): Promise<{ p: Started; base: string }> => {
    const port = await freePort();
    const logFile = join(SCRATCH, `notifier-${++n}.log`);
    const prof = argv.profile && n === 1 ? ['--cpu-prof', '--cpu-prof-dir', SCRATCH] : [];
    const p = spawnPinned(`notifier-${n}`, process.execPath, [...prof, join(BUILD, 'dist/notifier/main.js')], {
      cpu: undefined,
      logFile,
      env: { ...process.env, ...notifierEnv, NOTIFIER_PORT: String(port) },
    });
    await waitForHttp(p, `http://127.0.0.1:${port}/readyz`, logFile, 200);
    return { p, base: `http://127.0.0.1:${port}` };
  };

  try {
    const a = await startNotifier();
    const base = a.base;
    const variant = {
      push: { title: 'Spring', body: 'Spring sale {{code}}' },
      email: { subject: 'Code', text: 'Your code is {{code}}' },
      in_app: { body: '{{code}}' },
    };
    const put = await call(base, 'PUT', '/api/v1/admin/templates/bench_v1', { default_locale: 'en', variants: { en: variant } }, ADMIN);
    if (put.status !== 201 && put.status !== 200) throw new Error(`template: ${put.status} ${JSON.stringify(put.body)}`);
    await call(base, 'PUT', '/api/v1/users/tx/profile', { phone: '+14155559999' });
    await call(base, 'POST', '/api/v1/users/tx/devices', { token: 'token-tx', platform: 'ios' });

    // ── (u) the segment, uploaded through the API; profiles, tokens, preferences in bulk ──
    log(`generating ${f0(MEMBERS)} member ids`);
    const ids = Array.from({ length: MEMBERS }, () => randomUUID());
    log('uploading the segment');
    const up = await uploadSegment(base, 'bench', ids);
    if (up.status !== 201 && up.status !== 200) throw new Error(`segment upload: ${up.status} ${up.body}`);
    const upBody = JSON.parse(up.body) as { size: number };
    if (upBody.size !== MEMBERS) throw new Error(`segment upload: size ${upBody.size}, want ${MEMBERS}`);
    const segBytes = Number((await pool.query<{ n: string }>(`SELECT pg_total_relation_size('segment_members')::text AS n`)).rows[0]!.n);
    fig.upload = { seconds: up.seconds, bytes: up.bytes, members: upBody.size, tableBytes: segBytes };
    log(`uploaded ${mb(up.bytes)} MB in ${f1(up.seconds)} s`);

    // Two members' preferences through the API: the stored documents are the shape the bulk rows copy.
    const now = Date.now();
    const zoneOf = (i: number): string => ZONES[i % ZONES.length]!;
    const quiet = new Map(ZONES.map((z) => [z, quietHoursCoveringNow(now, z)]));
    const setupT0 = performance.now();
    for (let off = 0; off < MEMBERS; off += SETUP_BATCH) {
      const slice = ids.slice(off, off + SETUP_BATCH);
      const zones = slice.map((_, k) => zoneOf(off + k));
      await pool.query(
        `INSERT INTO user_profiles (user_id, email, locale, timezone)
         SELECT u, u || '@example.test', 'en', z FROM unnest($1::text[], $2::text[]) AS m (u, z)`,
        [slice, zones],
      );
      await pool.query(
        `INSERT INTO device_tokens (token, user_id, platform) SELECT 'tok-' || u, u, 'android' FROM unnest($1::text[]) AS u`,
        [slice],
      );
    }
    const offApi = await call(base, 'PATCH', `/api/v1/users/${ids[1]}/preferences`, { marketing: { push: false } });
    const quietApi = await call(base, 'PATCH', `/api/v1/users/${ids[2]}/preferences`, { quiet_hours: quiet.get(zoneOf(2)) });
    if (offApi.status !== 200 || quietApi.status !== 200) throw new Error(`preferences: ${offApi.status} ${quietApi.status}`);
    const stored = await pool.query<{ user_id: string; prefs: unknown }>(
      'SELECT user_id, prefs FROM user_preferences WHERE user_id = ANY($1)',
      [[ids[1], ids[2]]],
    );
    const docOff = stored.rows.find((r) => r.user_id === ids[1])!.prefs;
    const docQuiet = stored.rows.find((r) => r.user_id === ids[2])!.prefs as { quiet_hours: unknown };
    if (JSON.stringify(docOff) !== JSON.stringify({ types: { marketing: { push: false } } }))
      throw new Error(`stored preferences: ${JSON.stringify(docOff)}`);
    const q = docQuiet.quiet_hours as { start?: string; end?: string } | undefined;
    const want = quiet.get(zoneOf(2))!;
    if (q?.start !== want.start || q.end !== want.end) throw new Error(`stored quiet hours: ${JSON.stringify(docQuiet)}`);
    // 5% marketing push off (i % 20 == 1), 5% quiet hours now (i % 20 == 2), the two above among them.
    const prefUsers: string[] = [];
    const prefDocs: string[] = [];
    for (let i = 0; i < MEMBERS; i++) {
      if (i === 1 || i === 2) continue;
      if (i % 20 === 1) {
        prefUsers.push(ids[i]!);
        prefDocs.push(JSON.stringify(docOff));
      } else if (i % 20 === 2) {
        prefUsers.push(ids[i]!);
        prefDocs.push(JSON.stringify({ types: {}, quiet_hours: quiet.get(zoneOf(i)) }));
      }
    }
    for (let off = 0; off < prefUsers.length; off += SETUP_BATCH) {
      await pool.query(`INSERT INTO user_preferences (user_id, prefs) SELECT u, p::jsonb FROM unnest($1::text[], $2::text[]) AS m (u, p)`, [
        prefUsers.slice(off, off + SETUP_BATCH),
        prefDocs.slice(off, off + SETUP_BATCH),
      ]);
    }
    // autovacuum may be off (it is on the bench machine): statistics as a running system would have them.
    await pool.query('ANALYZE');
    fig.setupSeconds = (performance.now() - setupT0) / 1000;
    log(`profiles, tokens and preferences in ${f1(fig.setupSeconds)} s`);

    const cpuNow = (): { notifier: number; postgres: number; sandbox: number } => ({
      notifier: procCpu(a.p.child.pid),
      postgres: postgresCpu(),
      sandbox: procCpu(sandbox.child.pid),
    });

    // ── (n) the peer: one pg-boss job per recipient ──
    if (RUN.has('n')) {
      await pool.query('CHECKPOINT');
      const l0 = await waitForQuiet(WAIT_LOAD, 'the peer');
      const boss = new PgBoss({ connectionString: dbUrl, max: PEER_CONCURRENCY + 1, supervise: false, schedule: false, migrate: false });
      boss.on('error', () => {});
      await boss.start();
      const queue = 'bench-naive-fanout';
      await boss.createQueue(queue);
      const notificationId = randomUUID();
      const tx = new TxLoad(base, TX_RATE);
      if (TX_RATE > 0) tx.start();
      await sleep(2000);
      const wal0 = (await pool.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
      const pg0 = postgresCpu();
      const db0 = await dbBackends(pool);
      const b0 = process.cpuUsage();
      const t0 = Date.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: PEER_CONCURRENCY }, async () => {
          while (next < MEMBERS) {
            const from = next;
            next += PEER_BATCH;
            const slice = ids.slice(from, from + PEER_BATCH);
            // What a per-subscriber job carries in such a system: who, for which notification, which template.
            await boss.insert(
              slice.map((sub) => ({
                name: queue,
                data: {
                  notification_id: notificationId,
                  subscriber_id: sub,
                  template_id: 'bench_v1',
                  channels: ['push'],
                  campaign_id: 'peer',
                },
              })),
            );
          }
        }),
      );
      const t1 = Date.now();
      const bu = process.cpuUsage(b0);
      const pgCpu = postgresCpu() - pg0;
      const dbCpu = dbCpuDelta(db0, await dbBackends(pool));
      await sleep(1000);
      await tx.stop();
      const walBytes = Number(
        (await pool.query<{ n: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::text AS n', [wal0])).rows[0]!.n,
      );
      const jobBytes = Number(
        (
          await pool.query<{ n: string }>(
            `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text AS n FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'pgboss.job'::regclass`,
          )
        ).rows[0]!.n,
      );
      const count = Number(
        (await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM pgboss.job WHERE name = $1`, [queue])).rows[0]!.n,
      );
      fig.peer = {
        seconds: (t1 - t0) / 1000,
        jobs: count,
        tx: await txFigures(sandboxUrl, tx, t0, t1),
        load: [l0, loadavg()[0]!],
        jobBytes,
        walBytes,
        cpu: { postgres: pgCpu, db: dbCpu, bench: (bu.user + bu.system) / 1e6 },
      };
      // delete_queue refuses while its partition holds jobs.
      const part = (await pool.query<{ p: string }>('SELECT partition_name AS p FROM pgboss.queue WHERE name = $1', [queue])).rows[0]!.p;
      await pool.query(`TRUNCATE pgboss.${pg.escapeIdentifier(part)}`);
      await boss.deleteQueue(queue);
      await boss.stop({ graceful: false });
      log(`peer: ${f0(count)} jobs in ${f1((t1 - t0) / 1000)} s`);
      await pool.query('CHECKPOINT');
    }

    // ── (q) the second peer: BullMQ addBulk, one job per recipient ──
    if (RUN.has('q') && argv.bullmq) {
      const req = createRequire(join(resolve(argv.bullmq), 'node_modules/'));
      const { Queue } = req('bullmq') as {
        Queue: new (
          name: string,
          o: { connection: { host: string; port: number }; prefix: string },
        ) => {
          addBulk(jobs: { name: string; data: unknown }[]): Promise<unknown>;
          count(): Promise<number>;
          obliterate(o: { force: boolean }): Promise<void>;
          close(): Promise<void>;
        };
      };
      const version = (req('bullmq/package.json') as { version: string }).version;
      const prefix = `bench-campaign-${randomBytes(4).toString('hex')}`;
      const queues = Array.from(
        { length: PEER_CONCURRENCY },
        () => new Queue('naive-fanout', { connection: { host: '127.0.0.1', port: 6379 }, prefix }),
      );
      const redisPid = Number(spawnSync('pidof', ['redis-server'], { encoding: 'utf8' }).stdout.trim().split(/\s+/)[0]) || undefined;
      const mem = (): number =>
        Number(/used_memory:(\d+)/.exec(spawnSync('redis-cli', ['info', 'memory'], { encoding: 'utf8' }).stdout)?.[1] ?? NaN);
      const l0 = await waitForQuiet(WAIT_LOAD, 'the BullMQ peer');
      const tx = new TxLoad(base, TX_RATE);
      if (TX_RATE > 0) tx.start();
      await sleep(2000);
      const mem0 = mem();
      const r0 = procCpu(redisPid);
      const b0 = process.cpuUsage();
      const notificationId = randomUUID();
      const t0 = Date.now();
      let next = 0;
      await Promise.all(
        queues.map(async (q) => {
          while (next < MEMBERS) {
            const from = next;
            next += PEER_BATCH;
            await q.addBulk(
              ids.slice(from, from + PEER_BATCH).map((sub) => ({
                name: 'send',
                data: {
                  notification_id: notificationId,
                  subscriber_id: sub,
                  template_id: 'bench_v1',
                  channels: ['push'],
                  campaign_id: 'peer',
                },
              })),
            );
          }
        }),
      );
      const t1 = Date.now();
      const bu = process.cpuUsage(b0);
      const redisCpu = procCpu(redisPid) - r0;
      const redisBytes = mem() - mem0;
      await sleep(1000);
      await tx.stop();
      const count = await queues[0]!.count();
      fig.bull = {
        seconds: (t1 - t0) / 1000,
        jobs: count,
        tx: await txFigures(sandboxUrl, tx, t0, t1),
        load: [l0, loadavg()[0]!],
        redisBytes,
        version,
        cpu: { redis: redisCpu, bench: (bu.user + bu.system) / 1e6 },
      };
      await queues[0]!.obliterate({ force: true });
      for (const q of queues) await q.close();
      log(`BullMQ peer: ${f0(count)} jobs in ${f1((t1 - t0) / 1000)} s`);
    }

    // ── (x) ours: one audience request, 202 → expanded ──
    let bigId: string | undefined;
    if (RUN.has('x')) {
      const l0 = await waitForQuiet(WAIT_LOAD, 'the expansion');
      const before = await sizes(pool);
      const tx = new TxLoad(base, TX_RATE);
      if (TX_RATE > 0) tx.start();
      await sleep(2000);
      const cpu0 = cpuNow();
      const db0 = await dbBackends(pool);
      const sent0 = await sandboxTotal(sandboxUrl);
      const t0 = Date.now();
      const r = await call(base, 'POST', '/api/v1/notifications', {
        event_type: 'marketing.spring',
        template_id: 'bench_v1',
        template_data: { code: 'SPRING' },
        priority: 'low',
        channels: ['push'],
        campaign_id: 'spring',
        audience: { segment: 'bench' },
      });
      const t202 = Date.now();
      if (r.status !== 202) throw new Error(`audience request: ${r.status} ${JSON.stringify(r.body)}`);
      const id = r.body.notification_id as string;
      bigId = id;
      let firstStatus = NaN;
      let last: Answer = {};
      for (;;) {
        const s = await call(base, 'GET', `/api/v1/notifications/${id}/status`);
        if (s.status === 200 && Number.isNaN(firstStatus) && s.body.campaign?.state === 'expanding')
          firstStatus = (Date.now() - t202) / 1000;
        last = s.body;
        if (s.body.campaign?.state === 'expanded') break;
        if (Date.now() - t202 > 1_200_000) throw new Error(`not expanded after 20 minutes: ${JSON.stringify(s.body)}`);
        await sleep(100);
      }
      const t1 = Date.now();
      const cpu1 = cpuNow();
      const dbCpu = dbCpuDelta(db0, await dbBackends(pool));
      const sent1 = await sandboxTotal(sandboxUrl);
      await sleep(1500);
      await tx.stop();
      const load1 = loadavg()[0]!;
      const metrics = parseMetrics(await (await fetch(`${base}/metrics`)).text());
      const after = await sizes(pool);
      const walBytes = Number(
        (await pool.query<{ n: string }>('SELECT pg_wal_lsn_diff($2, $1)::text AS n', [before.wal, after.wal])).rows[0]!.n,
      );
      const db = await pool.query<{ s: number; shards: number }>(
        `SELECT extract(epoch FROM f.expanded_at - n.created_at)::float8 AS s, f.shards FROM campaign_fanouts f JOIN notifications n ON n.id = f.notification_id
          WHERE f.notification_id = $1`,
        [id],
      );
      const rows = await pool.query<{ k: string; n: number }>(
        `SELECT CASE WHEN hold_reason IS NOT NULL THEN status || ' (held: ' || hold_reason || ')' ELSE status END AS k, count(*)::int AS n
           FROM deliveries WHERE notification_id = $1 GROUP BY 1 ORDER BY 1`,
        [id],
      );
      const distinct = await pool.query<{ n: number; total: number }>(
        'SELECT count(DISTINCT recipient_id)::int AS n, count(*)::int AS total FROM deliveries WHERE notification_id = $1',
        [id],
      );
      if (distinct.rows[0]!.n !== MEMBERS || distinct.rows[0]!.total !== MEMBERS) {
        throw new Error(
          `expansion: ${distinct.rows[0]!.total} deliveries for ${distinct.rows[0]!.n} members, want ${MEMBERS} each: ${JSON.stringify(last)}`,
        );
      }
      fig.ours = {
        seconds: (t1 - t202) / 1000,
        dbSeconds: db.rows[0]!.s,
        firstStatusSeconds: firstStatus,
        shards: db.rows[0]!.shards,
        rows: Object.fromEntries(rows.rows.map((x) => [x.k, x.n])),
        distinctMembers: distinct.rows[0]!.n,
        before,
        after,
        walBytes,
        metrics,
        tx: await txFigures(sandboxUrl, tx, t0, t1),
        load: [l0, load1],
        cpu: {
          notifier: cpu1.notifier - cpu0.notifier,
          postgres: cpu1.postgres - cpu0.postgres,
          db: dbCpu,
          sandbox: cpu1.sandbox - cpu0.sandbox,
        },
        sentDuring: sent1 - sent0,
      };
      log(`expanded ${f0(MEMBERS)} in ${f1((t1 - t202) / 1000)} s`);

      // ── (e) one shard's statements, explained ──
      if (argv.explain) fig.explain = await explainShard(pool, id, Math.floor(db.rows[0]!.shards / 2));
    }

    // ── (k) the kill switch, two replicas ──
    if (RUN.has('k')) {
      const b = await startNotifier();
      const l0 = await waitForQuiet(WAIT_LOAD, 'the kill switch');
      const upk = await uploadSegment(base, 'ks', ids.slice(0, STOP_MEMBERS));
      if (upk.status !== 201 && upk.status !== 200) throw new Error(`segment ks: ${upk.status} ${upk.body}`);
      await sleep(1000);
      const acked: number[] = [];
      const measured: number[] = [];
      let allAcked = true;
      let replicas = 0;
      let late = 0;
      let refusals = 0;
      let claimedAfter = 0;
      for (let i = 0; i < STOPS; i++) {
        const body = {
          event_type: 'marketing.flash',
          template_id: 'bench_v1',
          template_data: { code: String(i) },
          priority: 'normal',
          channels: ['push'],
          campaign_id: `ks-${i}`,
          audience: { segment: 'ks' },
        };
        let r = await call(base, 'POST', '/api/v1/notifications', body);
        // A 503 (no database connection within the pool's wait) is retried, and counted.
        for (let k = 0; r.status === 503 && k < 5; k++) {
          refusals++;
          await sleep(1000);
          r = await call(base, 'POST', '/api/v1/notifications', body);
        }
        if (r.status !== 202) throw new Error(`ks-${i}: ${r.status} ${JSON.stringify(r.body)}`);
        const id = r.body.notification_id as string;
        // Draining: expanded at least in part and sends under way.
        const until = Date.now() + 60_000;
        for (;;) {
          const s = await call(base, 'GET', `/api/v1/notifications/${id}/status`);
          if ((s.body.campaign?.sent ?? 0) > 0) break;
          if (Date.now() > until) throw new Error(`ks-${i}: no send within 60 s: ${JSON.stringify(s.body)}`);
          await sleep(50);
        }
        await sleep(200);
        const c0 = performance.now();
        const stop = await call(base, 'POST', `/api/v1/admin/campaigns/ks-${i}/stop`, { reason: 'bench' }, ADMIN);
        const c1 = performance.now();
        const tAnswer = Date.now();
        if (stop.status !== 200) throw new Error(`stop ks-${i}: ${stop.status} ${JSON.stringify(stop.body)}`);
        acked.push(stop.body.acknowledged_in_ms ?? NaN);
        measured.push(c1 - c0);
        allAcked &&= stop.body.acknowledged === true;
        replicas = stop.body.replicas?.length ?? 0;
        // Claims after every replica acknowledged: the campaign's deliveries sending or sent now, and 1.5 s later (a
        // delivery in flight at the stop only moves on to sent or cancelled; a new claim would add one).
        const inFlight = `SELECT count(*)::int AS n FROM deliveries WHERE notification_id = $1 AND status IN ('sending', 'sent')`;
        const before = (await pool.query<{ n: number }>(inFlight, [id])).rows[0]!.n;
        await sleep(1500);
        claimedAfter += Math.max(0, (await pool.query<{ n: number }>(inFlight, [id])).rows[0]!.n - before);
        // Sends the provider received for this campaign more than 200 ms after the answer (a send already with the provider may finish).
        const msgs = (await (await fetch(`${sandboxUrl}/sandbox/messages?channel=push`)).json()) as {
          messages: { received_at: number; data?: Record<string, string> }[];
        };
        late += msgs.messages.filter((m) => m.data?.notification_id === id && m.received_at * 1000 > tAnswer + 200).length;
      }
      let big: { acked: number; measured: number } | undefined;
      if (bigId) {
        const c0 = performance.now();
        const stop = await call(base, 'POST', '/api/v1/admin/campaigns/spring/stop', { reason: 'bench' }, ADMIN);
        const c1 = performance.now();
        if (stop.status === 200) big = { acked: stop.body.acknowledged_in_ms ?? NaN, measured: c1 - c0 };
      }
      fig.kill = { acked, measured, replicas, allAcked, late, refusals, claimedAfter, big, load: [l0, loadavg()[0]!] };
      log(`kill switch: ${STOPS} stops`);
      await b.p.stop();
    }
    await a.p.stop();
    if (argv.profile) fig.profile = profileSummary();
  } finally {
    await stopAll();
    await pool.end();
    if (!argv['keep-db']) await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    else process.stderr.write(`kept database ${dbName}\n`);
    await admin.end();
  }
  report(fig, started, load0);
}

/**
 * One shard's statements again (fanout.ts #shard, with the member rows of `shard`), each under
 * EXPLAIN (ANALYZE, BUFFERS, WAL) in a transaction rolled back; then the same INSERT committed
 * (under a shard number no fan-out uses), its commit timed, and deleted again.
 */
async function explainShard(pool: pg.Pool, id: string, shard: number): Promise<string[]> {
  const out: string[] = [];
  const c = await pool.connect();
  try {
    const s = (
      await c.query<{ first_user: string; next_user: string | null; segment_id: string; segment_version: number }>(
        `SELECT s.first_user, s.next_user, f.segment_id, f.segment_version FROM campaign_shards s JOIN campaign_fanouts f USING (notification_id)
          WHERE s.notification_id = $1 AND s.shard = $2`,
        [id, shard],
      )
    ).rows[0]!;
    const statements: { what: string; sql: string; params: unknown[] }[] = [];
    const memberSql = `SELECT user_id FROM segment_members WHERE segment_id = $1 AND version = $2 AND user_id COLLATE "C" >= $3${
      s.next_user ? ' AND user_id COLLATE "C" < $4' : ''
    } ORDER BY user_id COLLATE "C"`;
    const memberParams = [s.segment_id, s.segment_version, s.first_user, ...(s.next_user ? [s.next_user] : [])];
    const members = (await c.query<{ user_id: string }>(memberSql, memberParams)).rows.map((r) => r.user_id);
    statements.push({ what: 'members (keyset range)', sql: memberSql, params: memberParams });
    // memberFacts (fanout.ts): preferences, time zone and the capped channels' counts in one statement.
    statements.push({
      what: 'member facts (preferences, time zone, cap counts)',
      sql: `SELECT u.user_id, p.prefs, pr.timezone,
              (SELECT json_object_agg(c.channel, c.n) FROM (
                 SELECT d.channel, count(*) AS n
                   FROM deliveries d JOIN unnest($3::text[], $4::float8[]) AS w (channel, window_ms) ON w.channel = d.channel
                  WHERE d.recipient_id = u.user_id AND d.notification_type = $2 AND d.counted_at IS NOT NULL
                    AND d.counted_at > now() - make_interval(secs => w.window_ms / 1000)
                  GROUP BY d.channel) c) AS caps
         FROM unnest($1::text[]) AS u (user_id)
         LEFT JOIN user_preferences p ON p.user_id = u.user_id
         LEFT JOIN user_profiles pr ON pr.user_id = u.user_id`,
      params: [members, 'marketing', ['push', 'email'], [3_600_000, 86_400_000]],
    });
    // ShardRows.insert: ids made time-ordered by the notifier (ordered-id.ts); the same order here in SQL.
    const insertSql = `INSERT INTO deliveries (id, notification_id, campaign_shard, channel, recipient_id, priority, template_id, status,
                               notification_type, hold_reason, next_attempt_at, last_error)
       SELECT (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || substr(replace(gen_random_uuid()::text, '-', ''), 13))::uuid,
              $1, $2, r.channel, r.recipient, 'low', 'bench_v1', r.status, 'marketing', r.hold, to_timestamp(r.next_ms / 1000), r.error
         FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::text[])
           AS r (recipient, channel, status, hold, next_ms, error)`;
    const col = <T>(v: T): T[] => members.map(() => v);
    const insertParams = (sh: number): unknown[] => [id, sh, members, col('push'), col('queued'), col(null), col(null), col(null)];
    statements.push({ what: 'INSERT deliveries (1 row per member)', sql: insertSql, params: insertParams(-1 - shard) });
    statements.push({
      what: 'counters, checkpoint and fan-out row (one statement)',
      sql: `WITH counted AS (
              INSERT INTO campaign_counts (notification_id, channel, status, n)
              SELECT $1, t.c, t.s, t.n FROM unnest($4::text[], $5::text[], $6::bigint[]) AS t (c, s, n) WHERE t.n <> 0
            ), checkpoint AS (
              UPDATE campaign_shards SET state = 'done', members = $3, done_at = now() WHERE notification_id = $1 AND shard = $2
            )
            UPDATE campaign_fanouts SET shards_done = shards_done, updated_at = now() WHERE notification_id = $1
            RETURNING shards_done, shards`,
      params: [
        id,
        shard,
        members.length,
        ['', 'push', 'push'],
        ['members', 'queued', 'opted_out'],
        [members.length, members.length - 50, 50],
      ],
    });
    out.push(
      `Shard ${shard} of the fan-out, ${members.length} members; each statement under EXPLAIN (ANALYZE, BUFFERS, WAL), rolled back:`,
    );
    out.push('');
    await c.query('BEGIN');
    for (const st of statements) {
      const t0 = performance.now();
      const plan = await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, WAL) ${st.sql}`, st.params);
      const ms = performance.now() - t0;
      out.push(`${st.what}: ${f1(ms)} ms round trip`);
      out.push('```');
      for (const r of plan.rows) out.push(r['QUERY PLAN'].replace(/'\{[^}]{100,}\}'/g, `'{…${members.length} ids}'`));
      out.push('```');
    }
    await c.query('ROLLBACK');
    // The floor: the INSERT alone, committed (an fsync), three times.
    const times: string[] = [];
    for (let k = 0; k < 3; k++) {
      await c.query('BEGIN');
      const t0 = performance.now();
      await c.query(insertSql, insertParams(-1_000_000 - k));
      const t1 = performance.now();
      await c.query('COMMIT');
      const t2 = performance.now();
      times.push(`insert ${f1(t1 - t0)} ms + commit ${f1(t2 - t1)} ms`);
    }
    await c.query('DELETE FROM deliveries WHERE notification_id = $1 AND campaign_shard <= -1000000', [id]);
    out.push(`The same INSERT alone, committed, three times: ${times.join('; ')}.`);
  } finally {
    c.release();
  }
  return out;
}

function profileSummary(): string[] {
  const files = readdirSync(SCRATCH).filter((f) => f.endsWith('.cpuprofile'));
  const out: string[] = [];
  for (const f of files) {
    const prof = JSON.parse(readFileSync(join(SCRATCH, f), 'utf8')) as CpuProfile;
    out.push(`${f}:`);
    for (const s of topSelfTime(prof, BUILD, 20)) out.push(`  ${f0(s.selfMs)} ms ${(s.share * 100).toFixed(1)}% ${s.name}`);
  }
  return out;
}

function report(fig: Figures, started: Date, load0: number): void {
  const lines: string[] = [];
  const say = (s = ''): void => {
    lines.push(s);
    process.stdout.write(s + '\n');
  };
  const cpu = (readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m)?.[1] ?? cpus()[0]?.model ?? 'unknown').trim();
  const pgv = spawnSync('psql', ['--version'], { encoding: 'utf8' }).stdout.trim();
  const cmd = `node dist/bench/campaign.js ${process.argv.slice(2).join(' ')}`.trim();
  say(
    `Run ${started.toISOString().slice(0, 16)}Z on ${cpus().length} cores (${cpu}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${pgv.replace(/^psql /, 'server ')} on the same machine (its settings as found: see docs/capacity.md); every process unpinned. 1-minute load average ${f2(load0)} at the start.`,
  );
  say();
  say(`Command: \`${cmd}\``);
  say();
  const o = fig.ours;
  const p = fig.peer;
  if (fig.upload) {
    const u = fig.upload;
    say(
      `Upload: ${f0(u.members)} member ids (UUIDs), ${mb(u.bytes)} MB of NDJSON streamed through \`PUT /api/v1/admin/segments/bench/members\` in ${f1(u.seconds)} s (${f1(u.bytes / 2 ** 20 / u.seconds)} MB/s, ${f0(u.members / u.seconds)} ids/s); segment_members ${mb(u.tableBytes)} MB with its index. Setup in SQL: a profile (8 time zones) and a push token for every member, 5% marketing push off, 5% quiet hours covering now, then ANALYZE (${f1(fig.setupSeconds ?? NaN)} s).`,
    );
    say();
  }
  const q = fig.bull;
  if (o || p || q) {
    const peers = q ? ' peer: one BullMQ job per recipient (Redis) |' : '';
    say(`| ${f0(MEMBERS)} recipients, one audience request | ours: sharded fan-out | peer: one pg-boss job per recipient |${peers}`);
    say(q ? '|---|---:|---:|---:|' : '|---|---:|---:|');
    const row = (label: string, a: string, b: string, c = ''): void => say(`| ${label} | ${a} | ${b} |${q ? ` ${c} |` : ''}`);
    row(
      'time to expanded (ours: 202 → status `expanded`; peers: first → last insert)',
      o ? `**${f1(o.seconds)} s**` : '',
      p ? `**${f1(p.seconds)} s**` : '',
      q ? `**${f1(q.seconds)} s**` : '',
    );
    row(
      'rate',
      o ? `${f0(MEMBERS / o.seconds)} recipients/s` : '',
      p ? `${f0(p.jobs / p.seconds)} jobs/s` : '',
      q ? `${f0(q.jobs / q.seconds)} jobs/s` : '',
    );
    row(
      'what is written',
      o ? `${f0(o.distinctMembers)} delivery records, preferences, quiet hours and caps applied, durable at each shard's commit` : '',
      p ? `${f0(p.jobs)} jobs, durable (no policy applied yet)` : '',
      q ? `${f0(q.jobs)} jobs in memory: this Redis keeps nothing on disk (no policy applied yet)` : '',
    );
    const tx = (t: TxFigures | undefined): string =>
      t
        ? `p50 ${f0(t.p50)} / **p99 ${f0(t.p99)}** / max ${f0(t.max)} ms (${t.measured} of ${t.n} measured, ${t.refused} refused; p99 from the 202: ${f0(t.p99From202)} ms)`
        : '';
    row(`transactional push beside it, ${TX_RATE}/s, request → sandbox received`, tx(o?.tx), tx(p?.tx), tx(q?.tx));
    const idx = o
      ? Object.values(o.after.indexes).reduce((s, v) => s + v, 0) - Object.values(o.before.indexes).reduce((s, v) => s + v, 0)
      : 0;
    row(
      'bytes stored',
      o ? `${mb(o.after.table - o.before.table + idx)} MB (heap ${mb(o.after.table - o.before.table)} + indexes ${mb(idx)})` : '',
      p ? `${mb(p.jobBytes)} MB (job partition with indexes)` : '',
      q ? `${mb(q.redisBytes)} MB (Redis used_memory)` : '',
    );
    row(
      'WAL written (cluster-wide: other databases on the server count too)',
      o ? `${mb(o.walBytes)} MB` : '',
      p ? `${mb(p.walBytes)} MB` : '',
      q ? 'none' : '',
    );
    row(
      "CPU seconds: client (notifier / bench process) · this database's backends (Redis for BullMQ) · every PostgreSQL process on the machine",
      o ? `${f1(o.cpu.notifier)} · ${f1(o.cpu.db)} · ${f1(o.cpu.postgres)}` : '',
      p ? `${f1(p.cpu.bench)} · ${f1(p.cpu.db)} · ${f1(p.cpu.postgres)}` : '',
      q ? `${f1(q.cpu.bench)} · ${f1(q.cpu.redis)} · ` : '',
    );
    row(
      '1-minute load average, start → end',
      o ? `${f2(o.load[0])} → ${f2(o.load[1])}` : '',
      p ? `${f2(p.load[0])} → ${f2(p.load[1])}` : '',
      q ? `${f2(q.load[0])} → ${f2(q.load[1])}` : '',
    );
    say();
    if (o) {
      const h = o.metrics.shard;
      say(
        `Ours in detail: ${f0(o.shards)} shards; \`fanout_shard_seconds\` mean ${f0((h.sum / h.count) * 1000)} ms over ${f0(h.count)} shards (p50 ≤ ${f0(bucketQuantile(h, 0.5) * 1000)} ms, p99 ≤ ${f0(bucketQuantile(h, 0.99) * 1000)} ms: histogram buckets), \`fanout_recipients_total\` ${f0(o.metrics.recipients)}; in the database, request row → \`expanded_at\` ${f1(o.dbSeconds)} s; the status first showed \`expanding\` ${f2(o.firstStatusSeconds)} s after the 202. Sends during the expansion: ${f0(o.sentDuring)} (the campaign and the transactional load). CPU per 1,000 members over the expansion (the sends and the transactional load included): notifier ${f0((o.cpu.notifier / MEMBERS) * 1e6)} ms, this database's backends ${f0((o.cpu.db / MEMBERS) * 1e6)} ms.`,
      );
      say();
      say(
        `Rows: ${Object.entries(o.rows)
          .map(([k, v]) => `${k} ${f0(v)}`)
          .join(', ')}.`,
      );
      say();
      say('| deliveries relation | before MB | after MB | bytes per campaign row |');
      say('|---|---:|---:|---:|');
      const per = (a: number, b: number): string => f0((b - a) / MEMBERS);
      say(`| heap | ${mb(o.before.table)} | ${mb(o.after.table)} | ${per(o.before.table, o.after.table)} |`);
      for (const k of Object.keys(o.after.indexes)) {
        say(
          `| ${k} | ${mb(o.before.indexes[k] ?? 0)} | ${mb(o.after.indexes[k]!)} | ${per(o.before.indexes[k] ?? 0, o.after.indexes[k]!)} |`,
        );
      }
      say(`| WAL | | | ${f0(o.walBytes / MEMBERS)} |`);
      say();
      const target = o.seconds <= 60;
      const txOk = o.tx.p99 <= 250 && o.tx.measured === o.tx.n;
      say(
        `Goals: expansion ≤ 60 s: **${target ? 'met' : 'not met'}** (${f1(o.seconds)} s); transactional p99 ≤ 250 ms beside it: **${txOk ? 'met' : 'not met'}** (${f0(o.tx.p99)} ms).`,
      );
      say();
    }
    if (p) {
      say(
        `The peer: pg-boss ${'10.4.2'} \`insert\` of ${f0(p.jobs)} jobs in batches of ${f0(PEER_BATCH)}, ${PEER_CONCURRENCY} in flight, into a queue of its own (a partition) on the same database, with the notifier running idle and the same transactional load; a per-subscriber job's data is {notification_id, subscriber_id, template_id, channels, campaign_id}. It writes the queue only: the per-recipient preference, quiet-hours and cap checks are still to do when each job runs.`,
      );
      say();
    }
    if (q) {
      say(
        `The second peer: BullMQ ${q.version} \`addBulk\` of ${f0(q.jobs)} jobs in batches of ${f0(PEER_BATCH)}, ${PEER_CONCURRENCY} in flight (one \`Queue\` each), into the machine's Redis (${'no persistence'}), same job data and transactional load.`,
      );
      say();
    }
  }
  if (fig.kill) {
    const k = fig.kill;
    const a = [...k.acked].sort((x, y) => x - y);
    const m = [...k.measured].sort((x, y) => x - y);
    say(
      `Kill switch: ${k.replicas} replicas with workers; ${k.acked.length} campaigns of ${f0(STOP_MEMBERS)} members (normal tier, push), each stopped once its sends were under way, while the big campaign drained at low. Load ${f2(k.load[0])} → ${f2(k.load[1])}.`,
    );
    say();
    say('| stop | p50 ms | p99 ms | max ms | goal | verdict |');
    say('|---|---:|---:|---:|---|---|');
    say(
      `| \`acknowledged_in_ms\` (stop committed → last replica's ack) | ${f0(quantile(a, 0.5))} | ${f0(quantile(a, 0.99))} | ${f0(a[a.length - 1] ?? NaN)} | < 1,000 ms | ${(a[a.length - 1] ?? Infinity) < 1000 && k.allAcked ? 'met' : '**not met**'} |`,
    );
    say(
      `| call → answer, measured by the caller | ${f0(quantile(m, 0.5))} | ${f0(quantile(m, 0.99))} | ${f0(m[m.length - 1] ?? NaN)} | < 1,000 ms | ${(m[m.length - 1] ?? Infinity) < 1000 ? 'met' : '**not met**'} |`,
    );
    if (k.big) say(`| the ${f0(MEMBERS)} campaign, draining (one stop) | ${f0(k.big.acked)} acked / ${f0(k.big.measured)} call | | | | |`);
    say();
    say(
      `Every replica acknowledged every stop: ${k.allAcked ? 'yes' : 'no'}. Deliveries claimed after the answer (sending or sent 1.5 s later beyond those at the answer): ${k.claimedAfter}. Sends the provider received more than 200 ms after a stop's answer (possibly started before it): ${k.late}. Audience requests answered 503 and retried: ${k.refusals}.`,
    );
    say();
  }
  if (fig.explain) for (const l of fig.explain) say(l);
  if (fig.profile) for (const l of fig.profile) say(l);
  const full = MEMBERS === 1_000_000 && RUN.has('n') && RUN.has('x') && RUN.has('k') && BUILD === PROJECT_ROOT;
  if (!argv['no-write'] && full) {
    const file = join(PROJECT_ROOT, 'bench/RESULTS.md');
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
    writeFileSync(file, replaceSection(text, '## Campaign fan-out (issue 14)', lines.join('\n')).replace(/\n*$/, '\n'));
  }
  writeFileSync(join(SCRATCH, `run-${started.toISOString().replace(/[:.]/g, '-')}.md`), lines.join('\n') + '\n');
}

main().catch(async (err: unknown) => {
  console.error(err);
  await stopAll();
  process.exit(1);
});
