/**
 * The sidecar's working set (issue 25): a control plane over a large quotas table, lookups of
 * keys a sidecar does not hold, and one sidecar serving keys spread wider than its cache.
 *
 * Loads `--rows` key records into a fresh database on DATABASE_URL (default the local
 * postgres://postgres@127.0.0.1:5432/postgres; dropped at the end). The schema is the control
 * plane's own (its migrations, applied by a first start); the load then takes the bulk path: the
 * table's indexes (primary key included) are dropped, the table set UNLOGGED, the rows generated
 * server-side (INSERT … SELECT generate_series, SHA-256 in SQL: no client round trips, no text to
 * parse as COPY would have) in chunks, and the indexes rebuilt from their own definitions by one
 * sort each. Inserting 20M random SHA-256 keys into a B-tree that is already built (the first
 * version of this bench) is a random write per row into an index far larger than shared_buffers
 * and did not finish in 13 minutes. UNLOGGED changes durability only: columns, constraints,
 * indexes and the plans the control plane's queries get are the same.
 *
 * The control plane runs in a child process of its own, so its RSS, heap and CPU are its own;
 * PostgreSQL's CPU is read from /proc for the backends of the bench database (the machine's
 * PostgreSQL on the same host). It measures Lookup batches of 100 random existing keys over gRPC,
 * sequential (latency) and 8 in flight (throughput). Then a sidecar starts in this process
 * (LIMITER_QUOTA_CACHE_MAX = `--cache`, LIMITER_TRUST_PROXY on so a request can name its client
 * address) for start-to-first-admit, the decision latency of a first-seen key and of a held one
 * (sequential requests, so the time is the sidecar's plus one lookup), and two random-key floods,
 * 32 requests in flight: from one address (the per-address unknown-key budget, 100 a minute,
 * applies) and from a new address every request (the budget never trips: every key reaches the
 * control plane), with what reaches the control plane and its CPU while the flood runs.
 *
 * Run: `npx tsc -b && node --expose-gc dist/bench/quota-working-set.js [--rows 1000000]
 * [--cache 20000] [--sample 2000] [--no-write]`. Writes its section of bench/RESULTS.md.
 *
 * More (bench/RESULTS.md, "Quota working set (issue 25)", second run):
 * - `--db bench_NAME`: keep the database (loaded once, reused by later runs while it holds the
 *   `--rows` keys; drop it by hand when done); `--load-only` stops after the load.
 * - `--pin`: the Lookup, PostgreSQL-alone and first-seen latencies again with this process (the
 *   client, and the in-process sidecar) on core 0 and the control plane and the database's
 *   backends on core 1.
 * - `--traffic N [--duration S] [--connections C]`: one sidecar in a process of its own under wrk
 *   drawing every request's key uniformly from N keys (needs `--rows` ≥ N + 20,000: probe keys
 *   beyond them), sampled over the run (RSS, heap, records held, evictions, lookups/s, the CPU of
 *   every process), with probes of a first-seen key, a held key and the upstream directly.
 * - `--replica DIR --db bench_NAME`: another checkout's compiled build (the full replica before
 *   issue 25, `git worktree add` + `npx tsc -b` there) over the kept database: its control plane's
 *   and sidecar's start and memory holding the whole table, or how they fail.
 */
import { randomBytes, createHash } from 'node:crypto';
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { getHeapStatistics } from 'node:v8';
import { createServer } from 'node:http';
import { readFileSync, writeFileSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import pg from 'pg';
import { LookupRequestSchema, QuotaSyncService } from '../proto/gen/quota/v1/quota_pb.js';
import { loadConfig } from '../shared/config.js';
import { grpcClientConstructor, unaryCall } from '../shared/grpc.js';
import { createLogger } from '../shared/log.js';
import { startControlPlane } from '../limiter/control-plane/app.js';
import { controlPlaneConfig } from '../limiter/control-plane/config.js';
import { startSidecar } from '../limiter/sidecar.js';
import { limiterConfig } from '../limiter/config.js';
import { replaceSection } from './lib/report.js';
import { parseWrk } from './lib/load.js';
import { cpuSeconds, freePort, pinProcess, spawnPinned, stopAll, waitForPort } from './lib/processes.js';
import { LOOKUP_QUOTAS } from '../limiter/control-plane/store-sql.js';

const SERVE_FLAG = 'serve-control-plane';
const SIDECAR_FLAG = 'serve-sidecar';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    cache: { type: 'string', default: '20000' },
    sample: { type: 'string', default: '2000' },
    'no-write': { type: 'boolean', default: false },
    db: { type: 'string' },
    'load-only': { type: 'boolean', default: false },
    pin: { type: 'boolean', default: false },
    traffic: { type: 'string', default: '0' },
    duration: { type: 'string', default: '120' },
    connections: { type: 'string', default: '64' },
    replica: { type: 'string' },
    [SERVE_FLAG]: { type: 'string' },
    [SIDECAR_FLAG]: { type: 'string' },
    build: { type: 'string' },
  },
});
const rows = Number(values.rows);
const cacheMax = Number(values.cache);
const sample = Number(values.sample);

const keyName = (i: number): string => `bench_key_${i}`;
const subjectOf = (key: string): string => 'key:' + createHash('sha256').update(key, 'utf8').digest('hex');
const mb = (b: number): string => (b / 1024 / 1024).toFixed(0);
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const ms = (x: number): string => x.toFixed(2);
const sec = (from: number): number => (performance.now() - from) / 1000;
const load1 = (): string => loadavg()[0]!.toFixed(1);

// ── the control plane and the sidecar, each in a child process ─────────────

interface Usage {
  cpuUs: number;
  rss: number;
  heapUsed: number;
  /** ArrayBuffers (the in-process counter table's typed arrays), outside the V8 heap. */
  arrayBuffers: number;
  maxRss: number;
}
/** A sidecar's figures: its process's usage and its working set's counts. */
interface SidecarUsage extends Usage {
  held: number;
  evictions: number;
  found: number;
  unknown: number;
  failed: number;
  batches: number;
}
type ChildMessage =
  | { type: 'ready'; port: number; adminPort?: number; startMs: number }
  | { type: 'failed'; error: string }
  | ({ type: 'usage' } & SidecarUsage);

/** CPU first, then (`gc`, when exposed) a full GC, so the heap figure is live data, not garbage. */
function usage(gc = true): Usage {
  const c = process.cpuUsage();
  if (gc) global.gc?.();
  const m = process.memoryUsage();
  return {
    cpuUs: c.user + c.system,
    rss: m.rss,
    heapUsed: m.heapUsed,
    arrayBuffers: m.arrayBuffers,
    maxRss: process.resourceUsage().maxRSS * 1024,
  };
}

/**
 * What the child runs: this tree's control plane and sidecar, or (`--build DIR`, with `--replica`)
 * those of another checkout's compiled `dist/` (the full-replica build before issue 25), imported
 * from there with the same call shapes.
 */
async function modules(build: string | undefined) {
  const own = { startControlPlane, controlPlaneConfig, startSidecar, limiterConfig, loadConfig };
  if (build === undefined) return own;
  const at = (p: string): Promise<Record<string, unknown>> => import(pathToFileURL(join(build, 'dist', p)).href);
  const [app, cpc, sc, lc, cfg] = await Promise.all([
    at('limiter/control-plane/app.js'),
    at('limiter/control-plane/config.js'),
    at('limiter/sidecar.js'),
    at('limiter/config.js'),
    at('shared/config.js'),
  ]);
  return {
    startControlPlane: app.startControlPlane as typeof startControlPlane,
    controlPlaneConfig: cpc.controlPlaneConfig as typeof controlPlaneConfig,
    startSidecar: sc.startSidecar as typeof startSidecar,
    limiterConfig: lc.limiterConfig as typeof limiterConfig,
    loadConfig: cfg.loadConfig as typeof loadConfig,
  };
}

/** Answers the parent's 'usage' (no GC: a sample during load) and 'usage-gc' messages, and 'close'. */
function serveUsage(extra: () => Omit<SidecarUsage, keyof Usage>, close: () => Promise<void>): void {
  process.on('message', (m: string) => {
    if (m === 'usage' || m === 'usage-gc') process.send!({ type: 'usage', ...usage(m === 'usage-gc'), ...extra() } satisfies ChildMessage);
    else if (m === 'close') void close().then(() => process.exit(0));
  });
}

async function childFailed(err: unknown): Promise<never> {
  const error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  await new Promise<void>((r) => process.send!({ type: 'failed', error } satisfies ChildMessage, () => r()));
  process.exit(1);
}

async function serveControlPlane(dbUrl: string): Promise<void> {
  const m = await modules(values.build);
  const t0 = performance.now();
  const cp = await m
    .startControlPlane(
      m.loadConfig(m.controlPlaneConfig, { DATABASE_URL: dbUrl, CONTROL_PLANE_HTTP_PORT: '0', CONTROL_PLANE_GRPC_PORT: '0' }),
      createLogger({ service: 'control-plane', level: 'silent' }),
    )
    .catch(childFailed);
  const startMs = performance.now() - t0;
  serveUsage(
    () => ({ held: 0, evictions: 0, found: 0, unknown: 0, failed: 0, batches: 0 }),
    () => cp.close(),
  );
  process.send!({ type: 'ready', port: cp.grpcPort, startMs } satisfies ChildMessage);
}

async function serveSidecar(envJson: string): Promise<void> {
  const m = await modules(values.build);
  const t0 = performance.now();
  const sc = await m
    .startSidecar(
      m.loadConfig(m.limiterConfig, JSON.parse(envJson) as Record<string, string>),
      createLogger({ service: 'limiter', level: 'silent' }),
    )
    .catch(childFailed);
  const startMs = performance.now() - t0;
  // The replica build's cache has no `held`: every record it holds is a key's (or a plan's).
  const cache = sc.quotas as { held?: number; size: number; evictions?: number };
  serveUsage(
    () => ({
      held: cache.held ?? cache.size,
      evictions: cache.evictions ?? 0,
      found: sc.lookup?.counts.found ?? 0,
      unknown: sc.lookup?.counts.unknown ?? 0,
      failed: sc.lookup?.counts.failed ?? 0,
      batches: sc.lookup?.counts.batches ?? 0,
    }),
    () => sc.close(1000),
  );
  process.send!({ type: 'ready', port: sc.port, adminPort: sc.adminPort, startMs } satisfies ChildMessage);
}

interface Forked {
  child: ChildProcess;
  port: number;
  /** The child's own time in its start function, ms. */
  startMs: number;
  usage: (gc?: boolean) => Promise<SidecarUsage>;
  close: () => Promise<void>;
  /** The last lines the child wrote to stderr (why it died, when it did). */
  stderrTail: () => string;
}

/**
 * This file again in a child process (`flag arg`, and `--build` when given): its port once it
 * serves, its CPU and memory on demand. Node's heap defaults unless `execArgv` says otherwise.
 */
async function forkRole(flag: string, arg: string, build?: string): Promise<Forked> {
  const args = [`--${flag}`, arg, ...(build ? ['--build', build] : [])];
  const child = fork(fileURLToPath(import.meta.url), args, { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const waiting: ((u: SidecarUsage) => void)[] = [];
  const ready = await new Promise<{ port: number; startMs: number }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      reject(new Error(`${flag} exited (${code ?? signal}) before serving: ${stderr.trim().split('\n').slice(-6).join(' | ')}`)),
    );
    child.on('message', (m: ChildMessage) => {
      if (m.type === 'ready') resolve(m);
      else if (m.type === 'failed') reject(new Error(`${flag} failed: ${m.error}`));
      else if (m.type === 'usage') waiting.shift()?.(m);
    });
  });
  child.removeAllListeners('exit');
  return {
    child,
    port: ready.port,
    startMs: ready.startMs,
    stderrTail: () => stderr.trim().split('\n').slice(-6).join(' / '),
    usage: (gc = true) =>
      new Promise<SidecarUsage>((resolve) => {
        waiting.push(resolve);
        child.send(gc ? 'usage-gc' : 'usage');
      }),
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.send('close');
      await exited;
    },
  };
}

/** The control plane in its own process (this tree's, or `build`'s). */
const forkControlPlane = (dbUrl: string, build?: string): Promise<Forked> => forkRole(SERVE_FLAG, dbUrl, build);

// ── PostgreSQL ──────────────────────────────────────────────────────────────

async function adminQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(url: string, sql: string): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(sql)).rows;
  } finally {
    await c.end();
  }
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** CPU seconds (user + system) of the backends serving database `db`, by pid, from /proc. */
async function backendCpu(adminUrl: string, db: string): Promise<Map<number, number>> {
  const pids = await adminQuery<{ pid: number }>(adminUrl, `SELECT pid FROM pg_stat_activity WHERE datname = '${db}'`);
  const out = new Map<number, number>();
  for (const { pid } of pids) {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
      out.set(pid, (Number(fields[11]) + Number(fields[12])) / 100); // utime, stime in clock ticks (100/s)
    } catch {
      // gone, or another host's: not counted
    }
  }
  return out;
}
const cpuSince = (before: Map<number, number>, after: Map<number, number>): number => {
  let s = 0;
  for (const [pid, t] of after) s += t - (before.get(pid) ?? 0);
  return s;
};

interface Load {
  insertSec: number;
  indexSec: number;
  vacuumSec: number;
  heap: number;
  idx: number;
}

/**
 * The bulk load into the control plane's own table: its indexes dropped (their definitions kept),
 * the table UNLOGGED, the rows generated in PostgreSQL, the indexes rebuilt by a sort each.
 */
async function loadRows(dbUrl: string, n: number): Promise<Load> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    await c.query(`SET maintenance_work_mem = '512MB'`); // this session only: the index sorts
    const indexes = await c.query<{ name: string; def: string; con: string | null; condef: string | null }>(
      `SELECT i.relname AS name, pg_get_indexdef(i.oid) AS def, con.conname AS con, pg_get_constraintdef(con.oid) AS condef
       FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
       LEFT JOIN pg_constraint con ON con.conindid = i.oid AND con.conrelid = x.indrelid
       WHERE x.indrelid = 'quotas'::regclass`,
    );
    for (const ix of indexes.rows) await c.query(ix.con ? `ALTER TABLE quotas DROP CONSTRAINT ${ix.con}` : `DROP INDEX ${ix.name}`);
    await c.query('ALTER TABLE quotas SET UNLOGGED');
    let t0 = performance.now();
    await c.query(`INSERT INTO quotas (subject_id, algorithm, rate, burst, interval_ms, cost, fail_mode, shadow, plan, routes, version, updated_at)
      VALUES ('plan:free', 'token_bucket', 10, 20, 1000, 1, NULL, false, 'free', '[]'::jsonb, 0, now())`);
    const chunk = 2_000_000;
    for (let from = 0; from < n; from += chunk) {
      await c.query(
        `INSERT INTO quotas (subject_id, algorithm, rate, burst, interval_ms, cost, fail_mode, shadow, plan, routes, version, updated_at)
         SELECT 'key:' || encode(sha256(convert_to('bench_key_' || i, 'UTF8')), 'hex'), NULL, 0, 0, 0, 0, NULL, false, 'free',
           '[]'::jsonb, 0, now()
         FROM generate_series($1::bigint, $2::bigint) AS i`,
        [from, Math.min(n, from + chunk) - 1],
      );
      console.error(`loaded ${Math.min(n, from + chunk).toLocaleString('en')} rows, ${sec(t0).toFixed(0)} s`);
    }
    const insertSec = sec(t0);
    t0 = performance.now();
    for (const ix of indexes.rows) await c.query(ix.con ? `ALTER TABLE quotas ADD CONSTRAINT ${ix.con} ${ix.condef!}` : ix.def);
    const indexSec = sec(t0);
    console.error(`indexes built, ${indexSec.toFixed(0)} s`);
    t0 = performance.now();
    await c.query('VACUUM ANALYZE quotas');
    const vacuumSec = sec(t0);
    const size = await c.query<{ heap: string; idx: string }>(
      `SELECT pg_table_size('quotas')::text AS heap, pg_indexes_size('quotas')::text AS idx`,
    );
    return { insertSec, indexSec, vacuumSec, heap: Number(size.rows[0]!.heap), idx: Number(size.rows[0]!.idx) };
  } finally {
    await c.end();
  }
}

/**
 * Whether a kept database holds the bench's first `n` keys (its last one, `bench_key_<n-1>`, is
 * there: the load goes in order), and how many key records it holds (the planner's estimate).
 */
async function keyRecords(dbUrl: string, n: number): Promise<{ has: boolean; estimate: number }> {
  if ((await adminQuery(dbUrl, `SELECT to_regclass('quotas') AS t`))[0]?.t === null) return { has: false, estimate: 0 };
  const r = await adminQuery<{ has: boolean; estimate: number }>(
    dbUrl,
    `SELECT EXISTS (SELECT 1 FROM quotas WHERE subject_id = 'key:' || encode(sha256(convert_to('bench_key_${n - 1}', 'UTF8')), 'hex')) AS has,
       (SELECT reltuples::float8 FROM pg_class WHERE oid = 'quotas'::regclass) AS estimate`,
  );
  return { has: r[0]!.has, estimate: Math.max(0, r[0]!.estimate) };
}

async function tableSize(dbUrl: string): Promise<{ heap: number; idx: number }> {
  const r = await adminQuery<{ heap: string; idx: string }>(
    dbUrl,
    `SELECT pg_table_size('quotas')::text AS heap, pg_indexes_size('quotas')::text AS idx`,
  );
  return { heap: Number(r[0]!.heap), idx: Number(r[0]!.idx) };
}

const pctCore = (x: number): string => `${(x * 100).toFixed(0)} %`;

// ── --traffic: one sidecar, its own process, under traffic over many distinct keys ──────────

/** Machine-wide busy CPU seconds (all cores) from /proc/stat. */
function machineBusySec(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = f;
  return (user + nice + system + irq + softirq + steal) / 100;
}

interface Sample {
  t: number;
  sc: SidecarUsage;
  cpCpuUs: number;
  pgSec: number;
  wrkSec: number;
  upSec: number;
  benchUs: number;
  machineSec: number;
  load: string;
}

/**
 * One sidecar (`LIMITER_QUOTA_CACHE_MAX=--cache`, in a child process of its own so its RSS and heap
 * are its own) under wrk drawing every request's API key uniformly from the first `distinct` keys
 * (a Lua script: `bench_key_<random>`), 1 thread, `connections` keep-alive connections, as fast as
 * the machine allows, for `durationSec`. Sampled every tenth of the run: its RSS and heap (no GC),
 * records held, evictions, lookups, and the CPU of every process involved. Meanwhile a probe here
 * sends sequential requests (about 30/s each): a first-seen key (from keys beyond `distinct`,
 * never drawn), a held key (50 kept warm), and the upstream directly (the baseline "added" is
 * taken against). After the run: the heap after a full GC, and the same probes with no traffic.
 */
async function trafficRun(o: {
  cp: Forked;
  grpcUrl: string;
  adminUrl: string;
  dbName: string;
  dir: string;
  distinct: number;
  durationSec: number;
  connections: number;
}): Promise<string[]> {
  const lines: string[] = [];
  if (rows < o.distinct + 20_000)
    throw new Error(`--traffic ${o.distinct} needs --rows ≥ ${o.distinct + 20_000} (probe keys beyond the drawn ones)`);
  const here = dirname(fileURLToPath(import.meta.url));
  const upPort = await freePort();
  const up = spawnPinned('upstream', process.execPath, [join(here, 'upstream.js'), String(upPort), 'uws'], {
    cpu: undefined,
    logFile: join(o.dir, 'upstream.log'),
  });
  let sc: Forked | undefined;
  try {
    await waitForPort(up, upPort, join(o.dir, 'upstream.log'));
    const env = {
      LIMITER_PORT: '0',
      LIMITER_ADMIN_PORT: '0',
      LIMITER_CONTROL_PLANE_URL: o.grpcUrl,
      LIMITER_ROUTES: `/v1=http://127.0.0.1:${upPort}`,
      LIMITER_QUOTA_CACHE_MAX: String(cacheMax),
      LIMITER_SNAPSHOT_FILE: join(o.dir, 'traffic-snap.json'),
    };
    const t0 = performance.now();
    sc = await forkRole(SIDECAR_FLAG, JSON.stringify(env));
    const forkToServing = performance.now() - t0;
    const url = `http://127.0.0.1:${sc.port}/v1/x`;
    const direct = `http://127.0.0.1:${upPort}/v1/x`;
    const get = async (target: string, key?: string): Promise<number> => {
      const s = performance.now();
      const r = await fetch(target, key ? { headers: { 'x-api-key': key } } : {});
      await r.arrayBuffer();
      // A refusal (a lookup past LIMITER_LOOKUP_TIMEOUT on a loaded machine: the unknown-key 429)
      // is counted, not timed.
      return r.status === 200 ? performance.now() - s : -r.status;
    };
    const probeKey = (i: number): string => keyName(o.distinct + i);
    if ((await get(url, probeKey(0))) < 0) throw new Error('the first request was refused');
    const startToAdmit = performance.now() - t0;
    const atStart = await sc.usage(true);
    for (let i = 0; i < 50; i++) await get(url, probeKey(i)); // the held set
    let fresh = 50;
    const probes = async (until: () => boolean, pauseMs: number) => {
      const r = { firstSeen: [] as number[], held: [] as number[], direct: [] as number[], refused: { firstSeen: 0, held: 0 } };
      const put = (xs: number[], t: number, kind?: 'firstSeen' | 'held'): void => {
        if (t >= 0) xs.push(t);
        else if (kind) r.refused[kind]++;
      };
      for (let i = 0; !until(); i++) {
        put(r.firstSeen, await get(url, probeKey(fresh++)), 'firstSeen');
        put(r.held, await get(url, probeKey(i % 50)), 'held');
        put(r.direct, await get(direct));
        if (pauseMs > 0) await new Promise((res) => setTimeout(res, pauseMs));
      }
      return r;
    };

    const script = join(o.dir, 'wrk-keys.lua');
    writeFileSync(
      script,
      `-- bench/quota-working-set.ts --traffic: every request's key drawn uniformly from ${o.distinct} keys.
local n = ${o.distinct}
math.randomseed(os.time())
request = function()
  wrk.headers["x-api-key"] = "bench_key_" .. math.random(0, n - 1)
  return wrk.format("GET", "/v1/x")
end
`,
    );
    const pg0 = await backendCpu(o.adminUrl, o.dbName);
    const sample = async (t: number, wrkPid: number | undefined): Promise<Sample> => {
      const [s, c] = await Promise.all([sc!.usage(false), o.cp.usage(false)]);
      const pgNow = cpuSince(pg0, await backendCpu(o.adminUrl, o.dbName));
      const b = process.cpuUsage();
      return {
        t,
        sc: s,
        cpCpuUs: c.cpuUs,
        pgSec: pgNow,
        wrkSec: wrkPid ? cpuSeconds(wrkPid) : 0,
        upSec: cpuSeconds(up.child.pid!),
        benchUs: b.user + b.system,
        machineSec: machineBusySec(),
        load: load1(),
      };
    };
    const samples: Sample[] = [await sample(0, undefined)];
    const wrkLog = join(o.dir, 'wrk-traffic.log');
    const w0 = performance.now();
    const wrk = spawnPinned(
      'wrk',
      'wrk',
      ['-t1', `-c${o.connections}`, `-d${o.durationSec}s`, '--latency', '--timeout', '10s', '-s', script, url],
      { cpu: undefined, logFile: wrkLog },
    );
    let done = false;
    void wrk.exited.then(() => (done = true));
    const every = (o.durationSec * 1000) / 10;
    const sampler = (async () => {
      for (let k = 1; k <= 10 && !done; k++) {
        await new Promise((res) => setTimeout(res, w0 + k * every - 500 - performance.now()));
        if (!done) samples.push(await sample((performance.now() - w0) / 1000, wrk.child.pid));
      }
    })();
    const underLoad = await probes(() => done, 20);
    await sampler;
    const code = await wrk.exited;
    await wrk.stop();
    const w = parseWrk(readFileSync(wrkLog, 'utf8'));
    if (code !== 0) throw new Error(`wrk exited ${code}`);
    const afterGc = await sc.usage(true);
    let idleCount = 0;
    const idle = await probes(() => idleCount++ >= 1000, 0);
    const end = await sc.usage(true);

    // Report.
    const last = samples[samples.length - 1]!;
    const first = samples[0]!;
    const span = last.t - first.t;
    const rate = (a: number, b: number): number => (b - a) / span;
    const share = (x: number): string => `${((x / span) * 100).toFixed(0)} %`;
    const ours =
      (last.sc.cpuUs - first.sc.cpuUs) / 1e6 +
      (last.cpCpuUs - first.cpCpuUs) / 1e6 +
      (last.pgSec - first.pgSec) +
      (last.wrkSec - first.wrkSec) +
      (last.upSec - first.upSec) +
      (last.benchUs - first.benchUs) / 1e6;
    const machineCpu = last.machineSec - first.machineSec;
    const lookups = (s: Sample): number => s.sc.found + s.sc.unknown;
    const added = (xs: number[], base: number[], p: number): string => ms(pct(xs, p) - pct(base, p));
    const trio = (xs: number[]): string => `${ms(pct(xs, 50))} / ${ms(pct(xs, 99))} / ${ms(pct(xs, 100))}`;
    const fmt = (n: number): string => Math.round(n).toLocaleString('en');
    lines.push('');
    lines.push(
      `**One sidecar under traffic over ${fmt(o.distinct)} distinct keys** (\`--traffic ${o.distinct} --duration ${o.durationSec} --connections ${o.connections}\`): the sidecar in a child process of its own, \`LIMITER_QUOTA_CACHE_MAX=${cacheMax}\`, in-process counters (\`LIMITER_COUNTER_MAX_KEYS\` at its default), \`LIMITER_SNAPSHOT_FILE\` set; wrk (1 thread, ${o.connections} connections, keep-alive) drawing each request's key uniformly from \`bench_key_0\` … \`bench_key_${o.distinct - 1}\` as fast as the machine allows; the uWS upstream (bench/upstream.ts) in its own process; nothing pinned.`,
    );
    lines.push('');
    lines.push('| measure | value |');
    lines.push('|---|---:|');
    lines.push(
      `| sidecar start: fork to serving / to the first admitted request (a lookup included) | ${ms(forkToServing)} ms (its startSidecar ${ms(sc.startMs)} ms) / ${ms(startToAdmit)} ms |`,
    );
    lines.push(
      `| traffic (wrk) | ${fmt(w.rps)} req/s for ${o.durationSec} s, ${fmt(w.responses)} responses, ${fmt(w.non2xx)} non-2xx, ${fmt(w.errors)} socket errors; round trip p50 ${ms(w.p50Ms)} ms, p99 ${ms(w.p99Ms)} ms (first-seen and held keys mixed, at saturation) |`,
    );
    lines.push(
      `| at the control plane | ${fmt(rate(lookups(first), lookups(last)))} keys looked up/s in ${fmt(rate(first.sc.batches, last.sc.batches))} Lookup calls/s (${((lookups(last) - lookups(first)) / Math.max(1, last.sc.batches - first.sc.batches)).toFixed(1)} keys a call); control plane ${share((last.cpCpuUs - first.cpCpuUs) / 1e6)} of a core, PostgreSQL ${share(last.pgSec - first.pgSec)} |`,
    );
    lines.push(
      `| the 2 cores during the run (CPU ÷ wall, ${span.toFixed(0)} s) | sidecar ${share((last.sc.cpuUs - first.sc.cpuUs) / 1e6)}, wrk ${share(last.wrkSec - first.wrkSec)}, upstream ${share(last.upSec - first.upSec)}, control plane ${share((last.cpCpuUs - first.cpCpuUs) / 1e6)}, PostgreSQL ${share(last.pgSec - first.pgSec)}, probe and bench ${share((last.benchUs - first.benchUs) / 1e6)}; the whole machine ${share(machineCpu)} of 200 %, so the other sessions' work ${share(Math.max(0, machineCpu - ours))}; load average ${first.load} → ${last.load} |`,
    );
    lines.push(
      `| sidecar at the end (the probes after the traffic included): records held, evictions, key lookups | ${fmt(end.held)} held, ${fmt(end.evictions)} evictions, ${fmt(end.found)} found / ${fmt(end.unknown)} unknown / ${fmt(end.failed)} failed (past LIMITER_LOOKUP_TIMEOUT, 1 s: those requests got the unknown-key 429) in ${fmt(end.batches)} calls |`,
    );
    lines.push(
      `| sidecar memory after its first request (after GC) | RSS ${mb(atStart.rss)} MB, heap ${mb(atStart.heapUsed)} MB, ArrayBuffers ${mb(atStart.arrayBuffers)} MB |`,
    );
    lines.push(
      `| sidecar memory at the end of the traffic (after GC) | RSS ${mb(afterGc.rss)} MB, heap ${mb(afterGc.heapUsed)} MB, ArrayBuffers (the counter table) ${mb(afterGc.arrayBuffers)} MB; peak RSS ${mb(afterGc.maxRss)} MB |`,
    );
    lines.push(
      `| heap per held record (heap after GC, end − start, ÷ records held) | ${fmt((afterGc.heapUsed - atStart.heapUsed) / Math.max(1, afterGc.held))} B (${fmt(afterGc.held)} held) |`,
    );
    lines.push(
      `| probe under the traffic, round trip p50 / p99 / max: first-seen key; held key; upstream direct (${underLoad.direct.length} each; refused: ${underLoad.refused.firstSeen} first-seen, ${underLoad.refused.held} held) | ${trio(underLoad.firstSeen)} ms; ${trio(underLoad.held)} ms; ${trio(underLoad.direct)} ms |`,
    );
    lines.push(
      `| added by the sidecar under the traffic (sidecar − direct, at p50 / p99): first-seen; held | ${added(underLoad.firstSeen, underLoad.direct, 50)} / ${added(underLoad.firstSeen, underLoad.direct, 99)} ms; ${added(underLoad.held, underLoad.direct, 50)} / ${added(underLoad.held, underLoad.direct, 99)} ms |`,
    );
    lines.push(
      `| probe after the traffic (cache full, no traffic), p50 / p99 / max: first-seen; held; direct (1,000 each; refused: ${idle.refused.firstSeen} first-seen, ${idle.refused.held} held) | ${trio(idle.firstSeen)} ms; ${trio(idle.held)} ms; ${trio(idle.direct)} ms; load ${load1()} |`,
    );
    lines.push(
      `| added by the sidecar with no traffic (sidecar − direct, at p50 / p99): first-seen; held | ${added(idle.firstSeen, idle.direct, 50)} / ${added(idle.firstSeen, idle.direct, 99)} ms; ${added(idle.held, idle.direct, 50)} / ${added(idle.held, idle.direct, 99)} ms |`,
    );
    lines.push('');
    lines.push('Over the run (sampled every tenth of it; heap without GC):');
    lines.push('');
    lines.push(
      '| s | sidecar RSS | heap used | records held | evictions | keys looked up/s | sidecar CPU | control plane CPU | PostgreSQL CPU | load |',
    );
    lines.push('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (let i = 0; i < samples.length; i++) {
      const s = samples[i]!;
      const p = samples[i - 1];
      const dt = p ? s.t - p.t : 1;
      const c = (x: number): string => (p ? `${((x / dt) * 100).toFixed(0)} %` : '—');
      lines.push(
        `| ${s.t.toFixed(0)} | ${mb(s.sc.rss)} MB | ${mb(s.sc.heapUsed)} MB | ${fmt(s.sc.held)} | ${fmt(s.sc.evictions)} | ${p ? fmt((lookups(s) - lookups(p)) / dt) : '—'} | ${c(p ? (s.sc.cpuUs - p.sc.cpuUs) / 1e6 : 0)} | ${c(p ? (s.cpCpuUs - p.cpCpuUs) / 1e6 : 0)} | ${c(p ? s.pgSec - p.pgSec : 0)} | ${s.load} |`,
      );
    }
    return lines;
  } finally {
    await sc?.close().catch(() => undefined);
    await stopAll();
  }
}

// ── --replica DIR: the full-replica build (before issue 25) over a kept database ────────────

/**
 * The control plane and one sidecar of another checkout's build (`DIR/dist`, compiled there), over
 * the kept database `--db` as it is: the control plane of that build reads every row into a Map
 * before it serves, and the sidecar receives them all in its first (full) snapshot, so
 * `LIMITER_QUOTA_CACHE_MAX` is set above the table's size (its default of 1,000,000 evicted keys,
 * which then looked unknown). Node's heap defaults in both. Reports what each takes to start and
 * to hold the table, or how it failed.
 */
async function replicaMain(build: string): Promise<void> {
  const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = values.db;
  if (dbName === undefined || !/^bench_[a-z0-9_]+$/.test(dbName)) throw new Error('--replica needs --db bench_… (a kept, loaded database)');
  const dbUrl = withDatabase(adminUrl, dbName);
  const n = Number((await adminQuery<{ n: string }>(dbUrl, `SELECT count(*)::text AS n FROM quotas WHERE subject_id LIKE 'key:%'`))[0]!.n);
  const commit = spawnSync('git', ['-C', build, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
  const dir = mkdtempSync(join(tmpdir(), 'bench-ws-replica-'));
  const upstream = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  const say = (l: string): void => console.log(l);
  const heapLimit = getHeapStatistics().heap_size_limit;
  const load0 = load1();
  let cp: Forked | undefined;
  let sc: Forked | undefined;
  say(
    `Full-replica build ${commit} (\`node --expose-gc dist/bench/quota-working-set.js --replica ${build} --db ${dbName}\`), ${n.toLocaleString('en')} key records, Node ${process.version} heap defaults (heap limit ${mb(heapLimit)} MB), load ${load0} at the start:`,
  );
  say('');
  say('| measure | value |');
  say('|---|---:|');
  try {
    let t0 = performance.now();
    try {
      cp = await forkControlPlane(dbUrl, build);
    } catch (err) {
      say(
        `| control plane (reads every row into a Map before serving) | **failed** after ${sec(t0).toFixed(1)} s: ${(err as Error).message.replace(/\|/g, '/')} |`,
      );
      return;
    }
    const cpReady = performance.now() - t0;
    const cpUse = await cp.usage(true);
    say(
      `| control plane: fork to serving / its start function | ${(cpReady / 1000).toFixed(1)} s / ${(cp.startMs / 1000).toFixed(1)} s; load ${load1()} |`,
    );
    say(
      `| control plane holding them (after GC) | RSS ${mb(cpUse.rss)} MB, heap ${mb(cpUse.heapUsed)} MB, peak RSS ${mb(cpUse.maxRss)} MB |`,
    );
    const env = {
      LIMITER_PORT: '0',
      LIMITER_ADMIN_PORT: '0',
      LIMITER_CONTROL_PLANE_URL: `127.0.0.1:${cp.port}`,
      LIMITER_ROUTES: `/v1=${upstreamUrl}`,
      LIMITER_QUOTA_CACHE_MAX: String(n + 1000),
      LIMITER_SNAPSHOT_FILE: join(dir, 'snap.json'),
    };
    t0 = performance.now();
    try {
      sc = await forkRole(SIDECAR_FLAG, JSON.stringify(env), build);
    } catch (err) {
      say(`| sidecar | **failed** after ${sec(t0).toFixed(1)} s: ${(err as Error).message.replace(/\|/g, '/')} |`);
      return;
    }
    const scReady = performance.now() - t0;
    // The last key loaded: admitted once the sidecar holds the whole snapshot.
    const key = keyName(n - 1);
    let status = 0;
    while (status !== 200 && sec(t0) < 900) {
      try {
        const r = await fetch(`http://127.0.0.1:${sc.port}/v1/x`, { headers: { 'x-api-key': key } });
        await r.arrayBuffer();
        status = r.status;
      } catch {
        if (sc.child.exitCode !== null || sc.child.signalCode !== null) {
          say(
            `| sidecar | **died** ${sec(t0).toFixed(1)} s after its fork (${sc.child.exitCode ?? sc.child.signalCode}): ${sc.stderrTail().replace(/\|/g, '/')} |`,
          );
          return;
        }
      }
      if (status !== 200) await new Promise((res) => setTimeout(res, 50));
    }
    const toAdmit = performance.now() - t0;
    const scUse = await sc.usage(true);
    say(
      `| sidecar: fork to serving (its start function) / to admitting the table's last key | ${(scReady / 1000).toFixed(1)} s (${(sc.startMs / 1000).toFixed(1)} s) / ${status === 200 ? `${(toAdmit / 1000).toFixed(1)} s` : `not within 900 s (${status})`}; load ${load1()} |`,
    );
    say(
      `| sidecar holding them (after GC) | ${scUse.held.toLocaleString('en')} records; RSS ${mb(scUse.rss)} MB, heap ${mb(scUse.heapUsed)} MB (${(scUse.heapUsed / Math.max(1, scUse.held)).toFixed(0)} B a record), peak RSS ${mb(scUse.maxRss)} MB |`,
    );
    const snap = join(dir, 'snap.json');
    if (existsSync(snap)) say(`| its snapshot file | ${mb(statSync(snap).size)} MB |`);
  } finally {
    await sc?.close().catch(() => undefined);
    await cp?.close().catch(() => undefined);
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
    say('');
    say(`Load ${load1()} at the end.`);
  }
}

// ── the run ─────────────────────────────────────────────────────────────────

async function main(): Promise<void> {
  const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  // --db NAME: a kept bench database (bench_… only), loaded once and reused by later runs.
  const kept = values.db;
  if (kept !== undefined && !/^bench_[a-z0-9_]+$/.test(kept)) throw new Error(`--db must be named bench_…: ${kept}`);
  const dbName = kept ?? `bench_ws_${randomBytes(4).toString('hex')}`;
  const exists = (await adminQuery(adminUrl, `SELECT 1 FROM pg_database WHERE datname = '${dbName}'`)).length > 0;
  if (!exists) await adminQuery(adminUrl, `CREATE DATABASE ${dbName}`);
  const dbUrl = withDatabase(adminUrl, dbName);
  const silent = (service: string) => createLogger({ service, level: 'silent' });
  const dir = mkdtempSync(join(tmpdir(), 'bench-ws-'));
  const upstream = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  const out: string[] = [];
  const say = (line: string): void => {
    out.push(line);
    console.log(line);
  };
  let cpChild: ChildProcess | undefined;
  const load0 = loadavg()[0]!;
  try {
    // The schema comes with the first control plane; the rows go in before the measured one starts.
    // A kept database already holding the rows is reused as it is (no load figures then).
    const prior = exists ? await keyRecords(dbUrl, rows) : { has: false, estimate: 0 };
    let loaded: Load | undefined;
    if (prior.has) console.error(`${dbName}: ≈ ${prior.estimate.toLocaleString('en')} key records already loaded, reused`);
    else {
      if (prior.estimate > 0) throw new Error(`${dbName} holds fewer than --rows ${rows} key records: drop it first`);
      const first = await startControlPlane(
        loadConfig(controlPlaneConfig, { DATABASE_URL: dbUrl, CONTROL_PLANE_HTTP_PORT: '0', CONTROL_PLANE_GRPC_PORT: '0' }),
        silent('control-plane'),
      );
      await first.close();
      loaded = await loadRows(dbUrl, rows);
    }
    if (values['load-only']) return;

    let t0 = performance.now();
    const cp = await forkControlPlane(dbUrl);
    cpChild = cp.child;
    const cpStartMs = performance.now() - t0;
    const cpAfterStart = await cp.usage();
    const grpcUrl = `127.0.0.1:${cp.port}`;

    // Lookup batches of 100 random existing keys: sequential (latency), then 8 in flight (rate).
    const Sync = grpcClientConstructor(QuotaSyncService);
    const client = new Sync(grpcUrl, grpc.credentials.createInsecure());
    const batch = async (): Promise<number> => {
      const ids = Array.from({ length: 100 }, () => subjectOf(keyName(Math.floor(Math.random() * rows))));
      const s = performance.now();
      const r = await unaryCall(client, 'lookup', create(LookupRequestSchema, { subjectIds: ids }));
      const took = performance.now() - s;
      if (r.unknownSubjectIds.length > 0 || r.quotas.length !== new Set(ids).size)
        throw new Error(`lookup found ${r.quotas.length} of 100`);
      return took;
    };
    const phase = async <T>(run: () => Promise<T>) => {
      const u0 = await cp.usage();
      const pg0 = await backendCpu(adminUrl, dbName);
      const w0 = performance.now();
      const result = await run();
      const wall = sec(w0);
      const pgCpu = cpuSince(pg0, await backendCpu(adminUrl, dbName));
      const u1 = await cp.usage();
      return { result, wall, cpCpu: (u1.cpuUs - u0.cpuUs) / 1e6 / wall, pgCpu: pgCpu / wall, after: u1 };
    };
    const seq300 = async (): Promise<number[]> => {
      const lat: number[] = [];
      for (let b = 0; b < 300; b++) lat.push(await batch());
      return lat;
    };
    const seq = await phase(seq300);
    const seqLoad = load1();
    // PostgreSQL alone: the control plane's own lookup query, 100 random keys, from a pg client here.
    const sqlClient = new pg.Client({ connectionString: dbUrl });
    await sqlClient.connect();
    const randomIds = (): string[] => Array.from({ length: 100 }, () => subjectOf(keyName(Math.floor(Math.random() * rows))));
    const sql300 = async (): Promise<number[]> => {
      const lat: number[] = [];
      for (let b = 0; b < 300; b++) {
        const ids = randomIds();
        const s = performance.now();
        await sqlClient.query(LOOKUP_QUOTAS, [ids]);
        lat.push(performance.now() - s);
      }
      return lat;
    };
    const sqlSeq = { lat: await sql300(), load: load1() };
    // What one batch reads: shared_buffers hits against blocks read in (from the OS page cache here).
    const explained = { hit: 0, read: 0, execMs: [] as number[] };
    for (let i = 0; i < 30; i++) {
      const r = await sqlClient.query<{ 'QUERY PLAN': [{ Plan: Record<string, number>; 'Execution Time': number }] }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${LOOKUP_QUOTAS}`,
        [randomIds()],
      );
      const top = r.rows[0]!['QUERY PLAN'][0];
      explained.hit += top.Plan['Shared Hit Blocks'] ?? 0;
      explained.read += top.Plan['Shared Read Blocks'] ?? 0;
      explained.execMs.push(top['Execution Time']);
    }
    // --pin: the client (and later the in-process sidecar) on core 0, the control plane and the
    // bench database's PostgreSQL backends on core 1; the same measures again.
    const pinAll = async (client: string, server: string): Promise<void> => {
      pinProcess(process.pid, client);
      pinProcess(cp.child.pid!, server);
      for (const pid of (await backendCpu(adminUrl, dbName)).keys()) pinProcess(pid, server);
    };
    let pinned: { seq: Awaited<ReturnType<typeof phase<number[]>>>; seqLoad: string; sql: number[]; sqlLoad: string } | undefined;
    if (values.pin) {
      await batch(); // the control plane's pool has its connection before the backends are pinned
      await pinAll('0', '1');
      const pSeq = await phase(seq300);
      const seqLoad = load1();
      const sql = await sql300();
      pinned = { seq: pSeq, seqLoad, sql, sqlLoad: load1() };
      await pinAll('0,1', '0,1');
    }
    const par = await phase(async () => {
      let n = 0;
      const until = performance.now() + 15_000;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (performance.now() < until) {
            await batch();
            n++;
          }
        }),
      );
      return n;
    });
    client.close();

    // One sidecar.
    t0 = performance.now();
    const sc = await startSidecar(
      loadConfig(limiterConfig, {
        LIMITER_PORT: '0',
        LIMITER_ADMIN_PORT: '0',
        LIMITER_CONTROL_PLANE_URL: grpcUrl,
        LIMITER_ROUTES: `/v1=${upstreamUrl}`,
        LIMITER_QUOTA_CACHE_MAX: String(cacheMax),
        LIMITER_SNAPSHOT_FILE: join(dir, 'snap.json'),
        LIMITER_UNKNOWN_KEY_BUDGET: '100',
        LIMITER_TRUST_PROXY: 'true',
        REDIS_URL: undefined,
      }),
      silent('limiter'),
    );
    const url = `http://127.0.0.1:${sc.port}`;
    const firstRes = await fetch(`${url}/v1/x`, { headers: { 'x-api-key': keyName(1) } });
    await firstRes.arrayBuffer();
    const startToAdmitMs = performance.now() - t0;
    if (firstRes.status !== 200) throw new Error(`first request: ${firstRes.status}`);

    const timed = async (key: string, headers: Record<string, string> = {}): Promise<number> => {
      const s = performance.now();
      const r = await fetch(`${url}/v1/x`, { headers: { 'x-api-key': key, ...headers } });
      await r.arrayBuffer();
      return performance.now() - s;
    };
    const firstSeen: number[] = [];
    const held: number[] = [];
    const keys = Array.from({ length: sample }, (_, i) => keyName(10 + Math.floor((i / sample) * (rows - 20))));
    for (const k of keys) firstSeen.push(await timed(k));
    for (const k of keys) held.push(await timed(k));
    const seenLoad = load1();
    let seenPinned: { firstSeen: number[]; held: number[]; load: string } | undefined;
    if (values.pin) {
      await pinAll('0', '1');
      const again = keys.map((_, i) => keyName(15 + Math.floor((i / sample) * (rows - 20))));
      const f: number[] = [];
      const h: number[] = [];
      for (const k of again) f.push(await timed(k));
      for (const k of again) h.push(await timed(k));
      seenPinned = { firstSeen: f, held: h, load: load1() };
      await pinAll('0,1', '0,1');
    }

    // Random-key floods, 32 in flight: one address (the budget applies), then a new address each.
    const flood = async (requests: number, address: (i: number) => string) => {
      const c0 = { ...sc.lookup!.counts };
      let next = 0;
      const p = await phase(() =>
        Promise.all(
          Array.from({ length: 32 }, async () => {
            for (let i = next++; i < requests; i = next++)
              await timed(`bench_random_${randomBytes(8).toString('hex')}`, { 'x-forwarded-for': address(i) });
          }),
        ),
      );
      const c1 = sc.lookup!.counts;
      return { ...p, requests, unknown: c1.unknown - c0.unknown, budget: c1.budget - c0.budget, batches: c1.batches - c0.batches };
    };
    const oneAddress = await flood(2000, () => '198.51.100.7');
    const manyAddresses = await flood(5000, (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    await sc.close(1000);
    await sqlClient.end();
    const cpEnd = await cp.usage();

    const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${load0.toFixed(1)} at the start and ${loadavg()[0]!.toFixed(1)} at the end, Node ${process.version}`;
    const floodRow = (name: string, f: typeof oneAddress): string =>
      `| random-key flood, ${f.requests.toLocaleString('en')} random keys, 32 in flight, ${name} | ${Math.round(f.requests / f.wall).toLocaleString('en')} req/s; ${f.unknown.toLocaleString('en')} keys looked up in ${f.batches.toLocaleString('en')} calls, ${f.budget.toLocaleString('en')} refused without a lookup; control plane ${pctCore(f.cpCpu)} of a core, PostgreSQL ${pctCore(f.pgCpu)} |`;
    say(
      `Date ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ${machine}; PostgreSQL 127.0.0.1:5432 as found (shared_buffers 128 MB). Command: \`node --expose-gc dist/bench/quota-working-set.js ${process.argv.slice(2).join(' ')}\`. Control plane in a child process; sidecar and client in the bench process.`,
    );
    say('');
    say('| measure | value |');
    say('|---|---:|');
    if (loaded)
      say(
        `| rows loaded (indexes dropped, table UNLOGGED, INSERT … SELECT generate_series in 2M chunks; then the indexes rebuilt; VACUUM ANALYZE) | ${rows.toLocaleString('en')}: insert ${loaded.insertSec.toFixed(0)} s, indexes ${loaded.indexSec.toFixed(0)} s, vacuum ${loaded.vacuumSec.toFixed(0)} s |`,
      );
    else say(`| rows | ${rows.toLocaleString('en')} key records, loaded by an earlier run into the kept database \`${dbName}\` |`);
    const size = await tableSize(dbUrl);
    say(`| quotas table heap + indexes | ${mb(size.heap)} MB + ${mb(size.idx)} MB |`);
    say(`| control plane process start to serving (fork, migrations checked, plans + change log) | ${ms(cpStartMs)} ms |`);
    say(
      `| control plane RSS / heap after start (after GC) | ${mb(cpAfterStart.rss)} MB / ${mb(cpAfterStart.heapUsed)} MB; at the end ${mb(cpEnd.rss)} MB / ${mb(cpEnd.heapUsed)} MB, peak RSS ${mb(cpEnd.maxRss)} MB |`,
    );
    say(
      `| Lookup, batch of 100 random existing keys, one at a time, p50 / p99 (300 batches) | ${ms(pct(seq.result, 50))} / ${ms(pct(seq.result, 99))} ms; ${Math.round((300 * 100) / seq.wall).toLocaleString('en')} keys/s; control plane ${pctCore(seq.cpCpu)} of a core, PostgreSQL ${pctCore(seq.pgCpu)} |`,
    );
    const pcts = (xs: number[]): string => `${ms(pct(xs, 50))} / ${ms(pct(xs, 99))} / ${ms(pct(xs, 100))}`;
    say(`| the same batches, p50 / p99 / max; load average after | ${pcts(seq.result)} ms; load ${seqLoad} |`);
    say(
      `| PostgreSQL alone: the control plane's lookup query for 100 random keys from a pg client, p50 / p99 / max (300) | ${pcts(sqlSeq.lat)} ms; load ${sqlSeq.load} |`,
    );
    say(
      `| EXPLAIN (ANALYZE, BUFFERS) of 30 such queries: blocks per batch found in shared_buffers / read in; execution time p50 / max | ${(explained.hit / 30).toFixed(0)} / ${(explained.read / 30).toFixed(0)}; ${ms(pct(explained.execMs, 50))} / ${ms(pct(explained.execMs, 100))} ms |`,
    );
    if (pinned) {
      say(
        `| pinned (client on core 0; control plane and the bench database's PostgreSQL backends on core 1): Lookup batch of 100, p50 / p99 / max (300) | ${pcts(pinned.seq.result)} ms; control plane ${pctCore(pinned.seq.cpCpu)} of a core, PostgreSQL ${pctCore(pinned.seq.pgCpu)}; load ${pinned.seqLoad} |`,
      );
      say(`| pinned: PostgreSQL alone, p50 / p99 / max (300) | ${pcts(pinned.sql)} ms; load ${pinned.sqlLoad} |`);
    }
    say(
      `| Lookup, batches of 100, 8 in flight for 15 s | ${Math.round((par.result * 100) / par.wall).toLocaleString('en')} keys/s (${par.result.toLocaleString('en')} batches); control plane ${pctCore(par.cpCpu)} of a core, PostgreSQL ${pctCore(par.pgCpu)} |`,
    );
    say(`| sidecar start to first admitted request (a lookup included) | ${ms(startToAdmitMs)} ms |`);
    say(`| request round trip, first-seen key, p50 / p99 (${sample}) | ${ms(pct(firstSeen, 50))} / ${ms(pct(firstSeen, 99))} ms |`);
    say(`| request round trip, held key, p50 / p99 (${sample}) | ${ms(pct(held, 50))} / ${ms(pct(held, 99))} ms; load ${seenLoad} |`);
    if (seenPinned) {
      say(
        `| pinned (client and sidecar on core 0, control plane and PostgreSQL on core 1): first-seen key, p50 / p99 / max (${sample}) | ${pcts(seenPinned.firstSeen)} ms |`,
      );
      say(`| pinned: held key, p50 / p99 / max (${sample}) | ${pcts(seenPinned.held)} ms; load ${seenPinned.load} |`);
    }
    say(floodRow('one address (budget 100/min)', oneAddress));
    say(floodRow('a new address each (the budget never trips)', manyAddresses));
    // The table so far is printed before the traffic run (which may fail on a loaded machine).
    const traffic = Number(values.traffic);
    const trafficLines =
      traffic > 0
        ? await trafficRun({
            cp,
            grpcUrl,
            adminUrl,
            dbName,
            dir,
            distinct: traffic,
            durationSec: Number(values.duration),
            connections: Number(values.connections),
          })
        : [];
    for (const l of trafficLines) say(l);
    cp.child.send('close');
    await new Promise((r) => cp.child.once('exit', r));
    cpChild = undefined;
    if (!values['no-write']) {
      const path = 'bench/RESULTS.md';
      const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Benchmark results\n';
      writeFileSync(path, replaceSection(text, '## Quota working set (issue 25)', out.join('\n')));
    }
  } finally {
    cpChild?.kill();
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
    if (kept === undefined) await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
  }
}

// Last, so every module-level constant above is initialised before either role runs.
if (values[SERVE_FLAG]) await serveControlPlane(values[SERVE_FLAG]);
else if (values[SIDECAR_FLAG]) await serveSidecar(values[SIDECAR_FLAG]);
else if (values.replica) await replicaMain(values.replica);
else await main();
