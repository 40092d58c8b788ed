/**
 * The sidecar benchmark (targets in bench/lib/report.ts `ratios`): requests/s, p50 and p99 of
 *   (a) the minimal upstream, direct;
 *   the floor: a bare uWS + undici proxy with the sidecar's header set and no decision
 *       (bench/peers/bare-proxy.ts);
 *   (b) the sidecar with an admitting quota, (c) with a denying one, and the abuse workload (10,000
 *       API keys, each offered about 10× its limit), each on the in-memory and the Redis counter
 *       store; with Redis, also admitted in approximate mode when quotas have an `accuracy` field;
 *   the baseline: the same scenarios' admitted path on a build of another commit (`--baseline`);
 *   (d) the peers: nginx `limit_req` + `proxy_pass`, one worker, admitting and denying; and the
 *       fastify 5 + @fastify/rate-limit + @fastify/reply-from gateway (bench/peers/fastify-gateway.ts)
 *       in process and on Redis, admitting, denying and under the abuse workload;
 *   and, at a fixed 5,000 requests/s, the latency direct vs through each proxy (the added p99),
 *   with the sidecar's own decision latency (`ratelimit_decision_duration_seconds`, scraped from
 *   its admin port before and after);
 * measured with autocannon and, when installed, wrk. The script starts everything it measures,
 * pinned to cores (bench/lib/processes.ts `corePlan`), stops it all after, prints a markdown
 * table with the ratios against the targets, and replaces its section of bench/RESULTS.md.
 *
 *   npx tsc -b && node dist/bench/sidecar.js [--duration 10] [--connections 50]
 *     [--store memory|redis|both] [--scenario direct,bare,admit,deny,abuse,approx,nginx,fastify,latency]
 *     [--baseline DIR] [--abuse-rps 50000] [--rate 5000] [--warmup 2] [--rounds 1] [--tools autocannon,wrk]
 *     [--upstream uws|node] [--redis-url URL] [--no-pin] [--install] [--no-write] [--profile]
 *     [--uws-peer rjweb] [--heading "## …"]
 *     [--workers N] [--server-cores LIST] [--load-cores LIST] [--upstream-cores LIST]
 *
 * `--workers N` (issue 26): the sidecar gets LIMITER_WORKERS=N (a variable the sidecar may not read
 * yet: then it runs one event loop, and the table says what was asked, not what ran), nginx
 * `worker_processes N`, the fastify gateway N node:cluster workers (FASTIFY_WORKERS). The core
 * layout flags take `taskset -c` lists ("0", "2-5", "0,2") and replace the default plan of
 * bench/lib/processes.ts `corePlan` for the role they name: the server under test, the load
 * generator (wrk, and autocannon in the bench process), the upstream and Redis. So
 * `--workers 4 --server-cores 0-3 --load-cores 4-5 --upstream-cores 6-7` runs unchanged on an
 * eight-core machine. After the figures the script prints the issue's table (N cores | nginx
 * admitted | sidecar in-process admitted | sidecar on one Redis, exact | approximate).
 *
 * `--baseline DIR`: DIR is a built checkout of another commit (e.g. `git worktree add /tmp/base
 * 1bc8205 && ln -s $PWD/node_modules /tmp/base/ && (cd /tmp/base && npx tsc -b)`); its
 * dist/limiter/main.js is measured admitting on each store, in the same run, as `baseline-*` rows
 * (and at the fixed rate as `rate-baseline-*` when the latency scenario runs).
 *
 * `--uws-peer ALIAS` (issue 23): also measures the sidecar admitting and denying on each store with
 * another uWS build (bench/lib/uws-builds.ts: rjweb, uwebsockets, trufflesuite), installed under
 * bench/.scratch/uws-builds/ and loaded through bench/lib/uws-redirect.cjs, as `uwspeer-*` rows;
 * every round measures both builds, in alternating order, and the ratios hold the pinned build to
 * ≥ 0.95× the peer. `--heading` writes to another section of bench/RESULTS.md.
 *
 * `--profile` instead runs scenario (b) alone (or (c) with `--scenario deny`, the abuse workload
 * with `--scenario abuse`) with the sidecar under `--cpu-prof --cpu-prof-dir
 * bench/.scratch/profile-<ms>`, and prints the 15 functions with the most self time while it
 * served requests, then its hottest source lines (through the source maps).
 *
 * Every figure also records the CPU share the server under test used: a server well under one
 * core was not what limited that row (see bench/RESULTS.md, "Method").
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { PROJECT_ROOT } from '../shared/paths.js';
import { ENV } from '../bin/env-catalogue.js';
import { enumJsonNames } from '../shared/proto-json.js';
import { QuotaSchema } from '../proto/gen/quota/v1/quota_pb.js';
import { hotLines, topSelfTime, type CpuProfile } from './lib/cpu-profile.js';
import { runAutocannon, runWrk, type LoadOptions, type Measurement, type RotatingHeader, type Tool } from './lib/load.js';
import { nginxVersion, startNginx } from './lib/nginx.js';
import {
  corePlan,
  cpuSeconds,
  freePort,
  pinProcess,
  spawnPinned,
  stopAll,
  waitForHttp,
  waitForPort,
  which,
  type CorePlan,
  type Started,
} from './lib/processes.js';
import { startRedis } from './lib/redis.js';
import {
  DECISION_METRIC,
  decisionLatency,
  parseDecisionBuckets,
  type DecisionBuckets,
  type DecisionLatency,
} from './lib/decision-latency.js';
import {
  cpuUs,
  machine,
  ratios,
  RESULTS_HEADING,
  table,
  warnings,
  writeResults,
  medians,
  type RatioContext,
  type Row,
} from './lib/report.js';
import { installUwsBuild, UWS_BUILDS, UWS_REDIRECT, type InstalledBuild, type UwsAlias } from './lib/uws-builds.js';
import { installedBuild } from '../test/limiter/fixtures/uws-conformance.js';

const ALL_SCENARIOS = ['direct', 'bare', 'admit', 'deny', 'abuse', 'approx', 'nginx', 'fastify', 'latency'];

const HELP = `node dist/bench/sidecar.js [options]
  --duration N        seconds per measurement (default 10)
  --connections N     concurrent connections (default 50)
  --store S           memory | redis | both (default both)
  --scenario LIST     comma-separated: ${ALL_SCENARIOS.join(',')} (default all; also a,b,c,d)
  --baseline DIR      also measure DIR/dist/limiter/main.js (a built checkout of another commit) admitting;
                      with --profile, profile that build instead
  --abuse-rps N       the request rate the abuse workload's limits are sized for (default 50000): each of
                      the 10,000 keys may take one request per (10,000 × 10 / N) s, so at N req/s each
                      is offered 10× its limit
  --rate N            the fixed rate of the latency scenario, requests/s (default 5000)
  --warmup N          unmeasured seconds before each target (default 2)
  --rounds N          run every measurement N times, alternating servers, and report each row's
                      median (default 1)
  --tools LIST        autocannon,wrk (default both; wrk only when installed)
  --upstream K        uws | node: the minimal upstream's server (default uws)
  --redis-url URL     use this Redis instead of a redis-server of the bench's own
  --no-pin            do not pin processes to cores
  --install           apt-get install nginx and wrk when missing (needs root)
  --no-write          print only; leave bench/RESULTS.md alone
  --uws-peer ALIAS    also measure the sidecar admitting and denying with another uWS build
                      (${Object.keys(UWS_BUILDS).join(', ')}), installed under bench/.scratch/uws-builds/
  --heading TEXT      the bench/RESULTS.md section to write (default "${RESULTS_HEADING}")
  --workers N         LIMITER_WORKERS=N for the sidecar (passed even where the build does not read it),
                      worker_processes N for nginx, N cluster workers for the fastify gateway (default 1)
  --server-cores L    taskset -c list for the server under test (default: bench/lib/processes.ts corePlan)
  --load-cores L      taskset -c list for the load generator (wrk, and this process for autocannon)
  --upstream-cores L  taskset -c list for the upstream and Redis
  --profile           run scenario (b) alone (or (c) with --scenario deny, the abuse workload with
                      --scenario abuse) with the sidecar under --cpu-prof, on the first store of
                      --store; print the top self time`;

const { values: argv } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    store: { type: 'string', default: 'both' },
    scenario: { type: 'string', default: ALL_SCENARIOS.join(',') },
    baseline: { type: 'string' },
    'abuse-rps': { type: 'string', default: '50000' },
    rate: { type: 'string', default: '5000' },
    warmup: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '1' },
    tools: { type: 'string', default: 'autocannon,wrk' },
    upstream: { type: 'string', default: 'uws' },
    'redis-url': { type: 'string' },
    'no-pin': { type: 'boolean', default: false },
    install: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'uws-peer': { type: 'string' },
    heading: { type: 'string', default: RESULTS_HEADING },
    workers: { type: 'string', default: '1' },
    'server-cores': { type: 'string' },
    'load-cores': { type: 'string' },
    'upstream-cores': { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (argv.help) {
  console.log(HELP);
  process.exit(0);
}

function positive(name: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) usage(`--${name} must be a positive integer, got "${raw}"`);
  return n;
}
function usage(msg: string): never {
  console.error(`${msg}\n\n${HELP}`);
  process.exit(2);
}

const DURATION = positive('duration', argv.duration);
const CONNECTIONS = positive('connections', argv.connections);
const RATE = positive('rate', argv.rate);
const ABUSE_RPS = positive('abuse-rps', argv['abuse-rps']);
const ROUNDS = positive('rounds', argv.rounds);
const WARMUP = argv.warmup === '0' ? 0 : positive('warmup', argv.warmup);
const STORES = argv.store === 'both' ? ['memory', 'redis'] : [argv.store];
if (!STORES.every((s) => s === 'memory' || s === 'redis')) usage(`--store must be memory, redis or both`);
const ALIASES: Record<string, string> = { a: 'direct', b: 'admit', c: 'deny', d: 'nginx', rate: 'latency' };
const SCENARIOS = new Set(argv.scenario.split(',').map((s) => ALIASES[s.trim()] ?? s.trim()));
for (const s of SCENARIOS) if (!ALL_SCENARIOS.includes(s)) usage(`unknown scenario "${s}"`);
const WANT_TOOLS = new Set(argv.tools.split(',').map((s) => s.trim()));
for (const t of WANT_TOOLS) if (t !== 'autocannon' && t !== 'wrk') usage(`unknown tool "${t}"`);
if (argv.upstream !== 'uws' && argv.upstream !== 'node') usage(`--upstream must be uws or node`);
const BASELINE = argv.baseline === undefined ? undefined : resolve(argv.baseline);
const UWS_PEER = argv['uws-peer'] as UwsAlias | undefined;
if (UWS_PEER !== undefined && !(UWS_PEER in UWS_BUILDS)) usage(`--uws-peer must be one of ${Object.keys(UWS_BUILDS).join(', ')}`);
if (!/^## \S/.test(argv.heading)) usage('--heading must start with "## "');
const WORKERS = positive('workers', argv.workers);
const CORE_LIST = /^\d+(-\d+)?(,\d+(-\d+)?)*$/;
for (const f of ['server-cores', 'load-cores', 'upstream-cores'] as const) {
  const v = argv[f];
  if (v !== undefined && !CORE_LIST.test(v)) usage(`--${f} must be a taskset -c list such as 0, 2-5 or 0,2; got "${v}"`);
}

/** The default core plan with the roles the layout flags name replaced. */
function layout(base: CorePlan): CorePlan {
  const server = argv['server-cores'];
  const load = argv['load-cores'];
  const aux = argv['upstream-cores'];
  if (server === undefined && load === undefined && aux === undefined) return base;
  if (!which('taskset')) usage('the core layout flags need taskset (util-linux)');
  const plan: CorePlan = {
    server: server ?? base.server,
    load: load ?? base.load,
    aux: aux ?? base.aux,
    description: '',
  };
  plan.description =
    `taskset (--server-cores/--load-cores/--upstream-cores): the server under test on ${plan.server ?? 'any core'}; ` +
    `the load generator (wrk, and autocannon in the bench process) on ${plan.load ?? 'any core'}; the upstream and Redis on ${plan.aux ?? 'any core'}`;
  return plan;
}

const SCRATCH = join(PROJECT_ROOT, 'bench', '.scratch');
const RESULTS = join(PROJECT_ROOT, 'bench', 'RESULTS.md');
const SIDECAR_MAIN = join(PROJECT_ROOT, 'dist', 'limiter', 'main.js');
const UPSTREAM_MAIN = join(PROJECT_ROOT, 'dist', 'bench', 'upstream.js');
const BARE_MAIN = join(PROJECT_ROOT, 'dist', 'bench', 'peers', 'bare-proxy.js');
const FASTIFY_MAIN = join(PROJECT_ROOT, 'dist', 'bench', 'peers', 'fastify-gateway.js');
const PATH = '/v1/bench';
const ADMIT_KEY = 'bench-admit-key';
const DENY_KEY = 'bench-deny-key';
const APPROX_KEY = 'bench-approx-key';
const DENY_INTERVAL_MS = 3_600_000;
/**
 * The abuse workload: 10,000 keys, each a token bucket of one token per ABUSE_TOKEN_MS and no burst
 * (burst 1), sized so that at ABUSE_RPS each key is offered ABUSE_MULTIPLE× its limit. No burst:
 * a burst of 10 per key would admit 100,000 requests before the steady state the workload is about
 * (one admission per key as each token comes due, nine refusals in between).
 */
const ABUSE: RotatingHeader = { header: 'x-api-key', prefix: 'bench-abuse-', count: 10_000 };
const ABUSE_MULTIPLE = 10;
const ABUSE_TOKEN_MS = Math.round((ABUSE.count * ABUSE_MULTIPLE * 1000) / ABUSE_RPS);

const note = (msg: string): void => void process.stderr.write(`${msg}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ── prerequisites ────────────────────────────────────────────────────────────

function install(packages: string[]): void {
  note(`--install: apt-get install -y ${packages.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [
    ['update', '-qq'],
    ['install', '-y', '-qq', ...packages],
  ]) {
    const r = spawnSync('apt-get', args, { stdio: 'inherit', env });
    if (r.status !== 0) throw new Error(`apt-get ${args[0]} failed (exit ${r.status}); are you root?`);
  }
}

function prerequisites(): { nginx: string | undefined; wrk: boolean; redisServer: string | undefined } {
  for (const f of [SIDECAR_MAIN, UPSTREAM_MAIN, BARE_MAIN, FASTIFY_MAIN]) {
    if (!existsSync(f)) throw new Error(`${relative(PROJECT_ROOT, f)} is not built: run \`npx tsc -b\` first`);
  }
  if (BASELINE && !existsSync(join(BASELINE, 'dist', 'limiter', 'main.js'))) {
    throw new Error(`--baseline ${BASELINE}: no dist/limiter/main.js there; build it first (npx tsc -b in that checkout)`);
  }
  const needNginx = !argv.profile && (SCENARIOS.has('nginx') || SCENARIOS.has('latency'));
  const needWrk = !argv.profile && WANT_TOOLS.has('wrk');
  const missing = [...(needNginx && !which('nginx') ? ['nginx'] : []), ...(needWrk && !which('wrk') ? ['wrk'] : [])];
  if (missing.length > 0 && argv.install) install(missing);
  const nginx = which('nginx');
  if (needNginx && !nginx) {
    note(
      'nginx is not installed: the peer rows (d) are skipped. Install it with `apt-get update && apt-get install -y nginx` ' +
        '(or re-run with --install as root).',
    );
  }
  const wrk = which('wrk') !== undefined;
  if (needWrk && !wrk) note('wrk is not installed: autocannon only. `apt-get install -y wrk` (or --install) adds the wrk rows.');
  const redisServer = which('redis-server');
  if (STORES.includes('redis') && !argv['redis-url'] && !redisServer) {
    throw new Error('the Redis store needs redis-server (apt-get install -y redis-server), or --redis-url, or --store memory');
  }
  return { nginx: needNginx ? nginx : undefined, wrk: needWrk && wrk, redisServer };
}

// ── the processes under test ─────────────────────────────────────────────────

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/**
 * The JSON value of `accuracy: approximate` in a quota record, when this build's quota contract has
 * the field (issue 17, item 2); undefined otherwise, and the approximate-mode row is skipped.
 */
function approximateValue(): string | undefined {
  const f = QuotaSchema.fields.find((x) => x.name === 'accuracy');
  if (!f) return undefined;
  if (f.fieldKind === 'enum') return enumJsonNames(f.enum).find((n) => n.startsWith('approx'));
  if (f.fieldKind === 'scalar') return 'approximate';
  return undefined;
}
const APPROXIMATE = approximateValue();
const APPROX_MISSING = APPROXIMATE === undefined ? 'needs the quota `accuracy` field (issue 17, item 2), absent in this build' : undefined;

/**
 * The quota snapshot: an admitting key no run can exhaust, a denying key (1 per hour, burst 1), the
 * 10,000 abuse keys, and (`approximate`) an admitting key in approximate mode. The baseline build
 * gets it without the approximate key: an older contract rejects the unknown field.
 */
function writeQuotaFile(name: string, approximate: string | undefined): string {
  const file = join(SCRATCH, name);
  const bucket = (key: string, plan: string, rate: number, burst: number, intervalMs: number): Record<string, unknown> => ({
    subject_id: `key:${sha256(key)}`,
    algorithm: 'token_bucket',
    rate,
    burst,
    interval_ms: intervalMs,
    plan,
  });
  const quotas: Record<string, unknown>[] = [
    { subject_id: 'plan:default', algorithm: 'token_bucket', rate: 100, burst: 200, interval_ms: 1000, plan: 'default' },
    bucket(ADMIT_KEY, 'bench_admit', 1_000_000_000, 1_000_000_000, 1000),
    bucket(DENY_KEY, 'bench_deny', 1, 1, DENY_INTERVAL_MS),
  ];
  if (approximate !== undefined)
    quotas.push({ ...bucket(APPROX_KEY, 'bench_approx', 1_000_000_000, 1_000_000_000, 1000), accuracy: approximate });
  for (let i = 0; i < ABUSE.count; i++) quotas.push(bucket(`${ABUSE.prefix}${i}`, 'bench_abuse', 1, 1, ABUSE_TOKEN_MS));
  writeFileSync(file, JSON.stringify({ version: 1, issued_at: Math.floor(Date.now() / 1000), quotas }));
  return file;
}

async function startUpstream(cpu: string | undefined): Promise<{ port: number; process: Started }> {
  const port = await freePort();
  const log = join(SCRATCH, 'upstream.log');
  const p = spawnPinned('upstream', process.execPath, [UPSTREAM_MAIN, String(port), argv.upstream], { cpu, logFile: log });
  await waitForHttp(p, `http://127.0.0.1:${port}${PATH}`, log);
  return { port, process: p };
}

interface SidecarProcess {
  port: number;
  admin: number;
  process: Started;
}

async function startSidecar(
  label: string,
  main: string,
  store: string,
  upstreamPort: number,
  quotaFile: string,
  redisUrl: string | undefined,
  cpu: string | undefined,
  profileDir?: string,
  uws?: InstalledBuild,
): Promise<SidecarProcess> {
  const [port, admin] = [await freePort(), await freePort()];
  // Nothing the sidecar reads may leak in from the caller's shell (a REDIS_URL, a LIMITER_*): start
  // from the environment minus every variable of the catalogue, then set the bench's own.
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(ENV)) delete env[name];
  Object.assign(env, {
    HOST: '127.0.0.1',
    LIMITER_PORT: String(port),
    LIMITER_ADMIN_PORT: String(admin),
    LIMITER_ROUTES: `/v1=http://127.0.0.1:${upstreamPort}`,
    LIMITER_QUOTA_FILE: quotaFile,
    LOG_LEVEL: 'warn',
    SHUTDOWN_GRACE: '2s',
    // No identity in the bench: an address that refuses at once.
    JWKS_URL: 'http://127.0.0.1:1/none',
    // Passed whether or not this build reads it (issue 26's worker threads): see --workers.
    LIMITER_WORKERS: String(WORKERS),
    ...(store === 'redis' ? { REDIS_URL: redisUrl } : {}),
    ...(uws ? { UWS_BUILD_DIR: uws.dir } : {}),
  });
  const args = [...(uws ? ['--require', UWS_REDIRECT] : []), ...(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []), main];
  const log = join(SCRATCH, `${label.replace(/[^a-z0-9-]+/gi, '-')}-${store}.log`);
  const p = spawnPinned(`${label} (${store})`, process.execPath, args, { cpu, env, logFile: log });
  await waitForHttp(p, `http://127.0.0.1:${admin}/readyz`, log);
  return { port, admin, process: p };
}

/** One request per key, to fail fast on a miswired run instead of measuring 404s. */
async function checkWiring(label: string, url: string, key: string, expect: 'admit' | 'deny'): Promise<void> {
  let status = 0;
  for (let i = 0; i < 3; i++) {
    const r = await fetch(url, { headers: { 'x-api-key': key } });
    await r.arrayBuffer();
    status = r.status;
  }
  const ok = expect === 'admit' ? status === 200 : status === 429;
  if (!ok) throw new Error(`${label}: expected ${expect === 'admit' ? 200 : 429} from ${url}, got ${status}`);
}

// ── the issue's table (issue 26) ─────────────────────────────────────────────

/** The number of cores a taskset -c list names ("0-3,6" → 5), or undefined for none. */
function coreCount(list: string | undefined): number | undefined {
  if (list === undefined) return undefined;
  let n = 0;
  for (const part of list.split(',')) {
    const [a, b] = part.split('-').map(Number);
    n += b === undefined ? 1 : b - a! + 1;
  }
  return n;
}

/**
 * Issue 26's table for this run's --workers: admitted requests/s of nginx and of the sidecar on each
 * store (its ratio to nginx, and both CPU µs per request: a load-generator-bound row is judged by
 * those), from the wrk rows when there are any, else autocannon's.
 */
function coresTable(rows: readonly Row[], plan: CorePlan): string {
  const tool = rows.some((r) => r.m.tool === 'wrk') ? 'wrk' : 'autocannon';
  const get = (id: string): Measurement | undefined => rows.find((r) => r.id === id && r.m.tool === tool)?.m;
  const nginx = get('nginx-admit');
  const us = (m: Measurement): string => (Number.isFinite(cpuUs(m)) ? `${cpuUs(m).toFixed(1)} µs/req` : 'CPU n/a');
  const cell = (m: Measurement | undefined, vsNginx: boolean): string => {
    if (m === undefined) return '—';
    const rps = Math.round(m.rps).toLocaleString('en');
    const ratio = vsNginx && nginx ? `${(m.rps / nginx.rps).toFixed(2)}×, ` : '';
    const cpu =
      vsNginx && nginx && Number.isFinite(cpuUs(m)) && Number.isFinite(cpuUs(nginx))
        ? `, ${(cpuUs(nginx) / cpuUs(m)).toFixed(2)}× by CPU`
        : '';
    return `${rps} (${ratio}${us(m)}${cpu})`;
  };
  const cores = coreCount(plan.server);
  return [
    `Issue 26's table (${tool}; admitted requests/s, and against nginx by requests/s and by CPU µs per request). ` +
      `N = --workers ${WORKERS} (LIMITER_WORKERS, nginx worker_processes); server cores: ${plan.server ?? 'not pinned'}` +
      `${cores !== undefined && cores !== WORKERS ? ` (${cores} cores for ${WORKERS} workers)` : ''}.`,
    '',
    '| N cores | nginx admitted | sidecar in-process admitted | sidecar on one Redis, exact | approximate |',
    '|---:|---:|---:|---:|---:|',
    `| ${WORKERS} | ${cell(nginx, false)} | ${cell(get('sidecar-memory-admit'), true)} | ${cell(get('sidecar-redis-admit'), true)} | ${cell(get('sidecar-redis-approx-admit'), true)} |`,
  ].join('\n');
}

// ── the decision-latency histogram ───────────────────────────────────────────

async function scrapeDecisions(admin: number): Promise<DecisionBuckets> {
  const r = await fetch(`http://127.0.0.1:${admin}/metrics`);
  return parseDecisionBuckets(await r.text());
}

// ── measuring ────────────────────────────────────────────────────────────────

interface Target {
  id: string;
  label: string;
  url: string;
  /** The API key sent, or the rotating key set (abuse workload). */
  key: string | RotatingHeader;
  /** The server under test, for its CPU use. */
  pid: number;
  /** Fixed rate (latency scenario). */
  rate?: number;
  /** Around each measured run (after the warm-up). */
  before?: () => Promise<void>;
  after?: () => Promise<void>;
}

async function measure(t: Target, tools: readonly Tool[], plan: CorePlan, rows: Row[]): Promise<void> {
  const o: LoadOptions = {
    url: t.url,
    headers: typeof t.key === 'string' ? { 'x-api-key': t.key } : {},
    connections: CONNECTIONS,
    durationSec: DURATION,
    ...(typeof t.key === 'string' ? {} : { rotate: t.key }),
    ...(t.rate ? { rate: t.rate } : {}),
  };
  if (WARMUP > 0) await runAutocannon({ ...o, durationSec: WARMUP });
  for (const tool of tools) {
    // wrk cannot hold a fixed rate (that is wrk2); the latency rows are autocannon's.
    if (tool === 'wrk' && t.rate) continue;
    note(`  ${t.label} · ${tool} · ${DURATION} s`);
    await sleep(300);
    await t.before?.();
    const cpu0 = cpuSeconds(t.pid);
    const t0 = performance.now();
    const m: Measurement = tool === 'autocannon' ? await runAutocannon(o) : await runWrk(o, plan.load, SCRATCH);
    m.serverCpu = (cpuSeconds(t.pid) - cpu0) / ((performance.now() - t0) / 1000);
    await t.after?.();
    rows.push({ id: t.id, label: t.label, m });
    const cpu = Number.isFinite(m.serverCpu) ? `, server CPU ${Math.round(m.serverCpu * 100)}%` : '';
    const refused = m.non2xx > 0 ? `, ${((m.non2xx / Math.max(1, m.responses)) * 100).toFixed(1)}% non-2xx` : '';
    note(`    ${Math.round(m.rps).toLocaleString('en')} req/s, p50 ${m.p50Ms.toFixed(3)} ms, p99 ${m.p99Ms.toFixed(3)} ms${cpu}${refused}`);
  }
}

const ORDER = [
  'direct',
  'bare-admit',
  'bare-undici-admit',
  'sidecar-memory-admit',
  'uwspeer-memory-admit',
  'sidecar-redis-admit',
  'uwspeer-redis-admit',
  'sidecar-redis-approx-admit',
  'baseline-memory-admit',
  'baseline-redis-admit',
  'nginx-admit',
  'fastify-memory-admit',
  'fastify-redis-admit',
  'sidecar-memory-deny',
  'uwspeer-memory-deny',
  'sidecar-redis-deny',
  'uwspeer-redis-deny',
  'nginx-deny',
  'fastify-memory-deny',
  'fastify-redis-deny',
  'sidecar-memory-abuse',
  'sidecar-redis-abuse',
  'fastify-memory-abuse',
  'fastify-redis-abuse',
  'rate-direct',
  'rate-sidecar-memory',
  'rate-uwspeer-memory',
  'rate-sidecar-redis',
  'rate-uwspeer-redis',
  'rate-nginx',
];

async function benchmark(): Promise<void> {
  const pre = prerequisites();
  const mach = machine(pre.nginx ? nginxVersion(pre.nginx) : undefined);
  const loadAtStart = loadavg();
  const plan = layout(corePlan(!argv['no-pin']));
  pinProcess(process.pid, plan.load);
  const tools: Tool[] = [...(WANT_TOOLS.has('autocannon') ? (['autocannon'] as const) : []), ...(pre.wrk ? (['wrk'] as const) : [])];
  if (tools.length === 0) throw new Error('no load generator to run: --tools names none that is installed');
  note(`pinning: ${plan.description}`);

  const uwsPeer = UWS_PEER ? installUwsBuild(UWS_PEER, note) : undefined;
  const approx = SCENARIOS.has('approx') && STORES.includes('redis') ? APPROXIMATE : undefined;
  if (SCENARIOS.has('approx') && APPROX_MISSING) note(`approximate mode: skipped (${APPROX_MISSING})`);
  const quotaFile = writeQuotaFile('quotas.json', approx);
  const baselineQuotaFile = BASELINE ? writeQuotaFile('quotas-baseline.json', undefined) : undefined;
  const upstream = await startUpstream(plan.aux);
  const upstreamOrigin = `http://127.0.0.1:${upstream.port}`;
  const direct = `${upstreamOrigin}${PATH}`;
  const rateLabel = `${RATE.toLocaleString('en')} req/s`;
  // Every round's rows and decision latencies; the report takes each one's median over the rounds.
  const rows: Row[] = [];
  const decisions: DecisionLatency[] = [];

  // One Redis for every Redis-backed server of the run (sidecars, baseline, fastify): each writes
  // its own keys (prefixes), and the bench's own redis-server holds nothing else.
  let redis: { url: string; process: Started } | undefined;
  let redisUrl = argv['redis-url'];
  const usesRedis = STORES.includes('redis') && ['admit', 'deny', 'abuse', 'approx', 'latency', 'fastify'].some((s) => SCENARIOS.has(s));
  if (usesRedis && !redisUrl) {
    redis = await startRedis(pre.redisServer!, SCRATCH, plan.aux);
    redisUrl = redis.url;
  }

  for (let round = 1; round <= ROUNDS; round++) {
    if (ROUNDS > 1) note(`round ${round} of ${ROUNDS}`);
    if (SCENARIOS.has('direct'))
      await measure(
        { id: 'direct', label: '(a) direct to upstream', url: direct, key: ADMIT_KEY, pid: upstream.process.child.pid! },
        tools,
        plan,
        rows,
      );
    if (SCENARIOS.has('latency')) {
      await measure(
        {
          id: 'rate-direct',
          label: `latency @ ${rateLabel}: direct`,
          url: direct,
          key: ADMIT_KEY,
          pid: upstream.process.child.pid!,
          rate: RATE,
        },
        tools,
        plan,
        rows,
      );
    }

    if (SCENARIOS.has('bare')) {
      // The floor is the runtime with the sidecar's own upstream client (h1); undici's row beside it
      // says what that client is worth without the rest of the sidecar.
      for (const client of ['h1', 'undici'] as const) {
        const port = await freePort();
        const log = join(SCRATCH, `bare-proxy-${client}.log`);
        const bare = spawnPinned(`bare proxy (${client})`, process.execPath, [BARE_MAIN, String(port), upstreamOrigin, client], {
          cpu: plan.server,
          logFile: log,
        });
        await waitForPort(bare, port, log);
        await measure(
          {
            id: client === 'h1' ? 'bare-admit' : 'bare-undici-admit',
            label:
              client === 'h1' ? "floor: bare uWS + h1 proxy (the sidecar's client), no decision" : 'bare uWS + undici proxy, no decision',
            url: `http://127.0.0.1:${port}${PATH}`,
            key: ADMIT_KEY,
            pid: bare.child.pid!,
          },
          tools,
          plan,
          rows,
        );
        await bare.stop();
      }
    }

    for (const store of STORES) {
      if (!['admit', 'deny', 'abuse', 'approx', 'latency'].some((s) => SCENARIOS.has(s))) break;
      // The peer build first in even rounds, after in odd ones: neither always runs on a warmer machine.
      const peerRun = async (): Promise<void> => {
        if (!uwsPeer) return;
        const peer = await startSidecar(
          'uws-peer',
          SIDECAR_MAIN,
          store,
          upstream.port,
          quotaFile,
          redisUrl,
          plan.server,
          undefined,
          uwsPeer,
        );
        const url = `http://127.0.0.1:${peer.port}${PATH}`;
        const pid = peer.process.child.pid!;
        await checkWiring(`sidecar on ${uwsPeer.id} (${store})`, url, ADMIT_KEY, 'admit');
        await checkWiring(`sidecar on ${uwsPeer.id} (${store})`, url, DENY_KEY, 'deny');
        if (SCENARIOS.has('admit'))
          await measure(
            { id: `uwspeer-${store}-admit`, label: `(b) sidecar on ${uwsPeer.id}, ${store} store, admitting`, url, key: ADMIT_KEY, pid },
            tools,
            plan,
            rows,
          );
        if (SCENARIOS.has('deny'))
          await measure(
            { id: `uwspeer-${store}-deny`, label: `(c) sidecar on ${uwsPeer.id}, ${store} store, denying`, url, key: DENY_KEY, pid },
            tools,
            plan,
            rows,
          );
        if (SCENARIOS.has('latency'))
          await measure(
            {
              id: `rate-uwspeer-${store}`,
              label: `latency @ ${rateLabel}: sidecar on ${uwsPeer.id}, ${store} store`,
              url,
              key: ADMIT_KEY,
              pid,
              rate: RATE,
            },
            tools,
            plan,
            rows,
          );
        await peer.process.stop('SIGTERM', 10_000);
      };
      if (round % 2 === 0) await peerRun();
      const sc = await startSidecar('sidecar', SIDECAR_MAIN, store, upstream.port, quotaFile, redisUrl, plan.server);
      const url = `http://127.0.0.1:${sc.port}${PATH}`;
      const pid = sc.process.child.pid!;
      await checkWiring(`sidecar (${store})`, url, ADMIT_KEY, 'admit');
      await checkWiring(`sidecar (${store})`, url, DENY_KEY, 'deny');
      if (SCENARIOS.has('admit'))
        await measure(
          { id: `sidecar-${store}-admit`, label: `(b) sidecar, ${store} store, admitting`, url, key: ADMIT_KEY, pid },
          tools,
          plan,
          rows,
        );
      if (SCENARIOS.has('approx') && store === 'redis' && approx !== undefined) {
        await checkWiring(`sidecar (${store}, approximate)`, url, APPROX_KEY, 'admit');
        await measure(
          { id: 'sidecar-redis-approx-admit', label: '(b) sidecar, redis store, approximate mode, admitting', url, key: APPROX_KEY, pid },
          tools,
          plan,
          rows,
        );
      }
      if (SCENARIOS.has('deny'))
        await measure(
          { id: `sidecar-${store}-deny`, label: `(c) sidecar, ${store} store, denying`, url, key: DENY_KEY, pid },
          tools,
          plan,
          rows,
        );
      if (SCENARIOS.has('abuse'))
        await measure(
          { id: `sidecar-${store}-abuse`, label: `(c) sidecar, ${store} store, abuse workload`, url, key: ABUSE, pid },
          tools,
          plan,
          rows,
        );
      if (SCENARIOS.has('latency')) {
        const label = `latency @ ${rateLabel}: sidecar, ${store} store`;
        let before: DecisionBuckets = new Map();
        await measure(
          {
            id: `rate-sidecar-${store}`,
            label,
            url,
            key: ADMIT_KEY,
            pid,
            rate: RATE,
            before: async () => void (before = await scrapeDecisions(sc.admin)),
            after: async () => {
              const d = decisionLatency(store, before, await scrapeDecisions(sc.admin));
              if (d) decisions.push(d);
              else note(`    (no ${DECISION_METRIC}{store="${store}"} on the admin port: this build does not have it)`);
            },
          },
          tools,
          plan,
          rows,
        );
      }
      await sc.process.stop('SIGTERM', 10_000);
      if (round % 2 === 1) await peerRun();
    }

    if (BASELINE && SCENARIOS.has('admit')) {
      const main = join(BASELINE, 'dist', 'limiter', 'main.js');
      for (const store of STORES) {
        const sc = await startSidecar('baseline', main, store, upstream.port, baselineQuotaFile!, redisUrl, plan.server);
        const url = `http://127.0.0.1:${sc.port}${PATH}`;
        await checkWiring(`baseline (${store})`, url, ADMIT_KEY, 'admit');
        await measure(
          {
            id: `baseline-${store}-admit`,
            label: `(b) baseline build, ${store} store, admitting`,
            url,
            key: ADMIT_KEY,
            pid: sc.process.child.pid!,
          },
          tools,
          plan,
          rows,
        );
        // The baseline at the fixed rate too: before/after of the added p99 in the same run.
        if (SCENARIOS.has('latency'))
          await measure(
            {
              id: `rate-baseline-${store}`,
              label: `latency @ ${rateLabel}: baseline build, ${store} store`,
              url,
              key: ADMIT_KEY,
              pid: sc.process.child.pid!,
              rate: RATE,
            },
            tools,
            plan,
            rows,
          );
        await sc.process.stop('SIGTERM', 10_000);
      }
    }

    if (pre.nginx) {
      const ports = { admit: await freePort(), deny: await freePort(), upstream: upstream.port, workers: WORKERS };
      const ng = await startNginx(pre.nginx, SCRATCH, ports, plan.server);
      const admit = `http://127.0.0.1:${ports.admit}${PATH}`;
      const deny = `http://127.0.0.1:${ports.deny}${PATH}`;
      await checkWiring('nginx', admit, ADMIT_KEY, 'admit');
      await checkWiring('nginx', deny, DENY_KEY, 'deny');
      if (SCENARIOS.has('nginx'))
        await measure(
          { id: 'nginx-admit', label: '(d) nginx limit_req, admitting', url: admit, key: ADMIT_KEY, pid: ng.child.pid! },
          tools,
          plan,
          rows,
        );
      if (SCENARIOS.has('nginx'))
        await measure(
          { id: 'nginx-deny', label: '(d) nginx limit_req, denying', url: deny, key: DENY_KEY, pid: ng.child.pid! },
          tools,
          plan,
          rows,
        );
      if (SCENARIOS.has('latency'))
        await measure(
          { id: 'rate-nginx', label: `latency @ ${rateLabel}: nginx (peer)`, url: admit, key: ADMIT_KEY, pid: ng.child.pid!, rate: RATE },
          tools,
          plan,
          rows,
        );
      await ng.stop('SIGQUIT', 10_000);
    }

    if (SCENARIOS.has('fastify')) {
      for (const store of STORES) {
        const ports = { admit: await freePort(), deny: await freePort(), abuse: await freePort() };
        const log = join(SCRATCH, `fastify-${store}.log`);
        const args = [FASTIFY_MAIN, upstreamOrigin, String(ports.admit), String(ports.deny), String(ports.abuse), String(ABUSE_TOKEN_MS)];
        if (store === 'redis') args.push(redisUrl!);
        const fy = spawnPinned(`fastify (${store})`, process.execPath, args, {
          cpu: plan.server,
          logFile: log,
          env: { ...process.env, FASTIFY_WORKERS: String(WORKERS) },
        });
        for (const p of Object.values(ports)) await waitForPort(fy, p, log);
        const at = (port: number): string => `http://127.0.0.1:${port}${PATH}`;
        await checkWiring(`fastify (${store})`, at(ports.admit), ADMIT_KEY, 'admit');
        await checkWiring(`fastify (${store})`, at(ports.deny), DENY_KEY, 'deny');
        const pid = fy.child.pid!;
        const who = `(d) fastify gateway, ${store === 'memory' ? 'in-process' : 'redis'} counters`;
        await measure(
          { id: `fastify-${store}-admit`, label: `${who}, admitting`, url: at(ports.admit), key: ADMIT_KEY, pid },
          tools,
          plan,
          rows,
        );
        await measure(
          { id: `fastify-${store}-deny`, label: `${who}, denying`, url: at(ports.deny), key: DENY_KEY, pid },
          tools,
          plan,
          rows,
        );
        if (SCENARIOS.has('abuse'))
          await measure(
            { id: `fastify-${store}-abuse`, label: `${who}, abuse workload`, url: at(ports.abuse), key: ABUSE, pid },
            tools,
            plan,
            rows,
          );
        await fy.stop('SIGTERM', 10_000);
      }
    }
  }
  await redis?.process.stop();
  await upstream.process.stop();

  const medianRows = medians(rows);
  medianRows.sort((a, b) => ORDER.indexOf(a.id) - ORDER.indexOf(b.id) || a.m.tool.localeCompare(b.m.tool));
  const medianDecisions = STORES.flatMap((st) => {
    const d = decisions.filter((x) => x.store === st).sort((a, b) => a.p99Ms - b.p99Ms);
    return d.length > 0 ? [d[(d.length - 1) >> 1]!] : [];
  });
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const tbl = table(medianRows);
  const ctx: RatioContext = {
    stores: STORES,
    decisions: medianDecisions,
    ...(APPROX_MISSING ? { approxMissing: APPROX_MISSING } : {}),
    ...(BASELINE ? {} : { baselineMissing: 'run with --baseline DIR, a built checkout of the commit before issue 17 (1bc8205)' }),
    ...(uwsPeer ? { uwsPeer: uwsPeer.id } : {}),
  };
  const rat = ratios(medianRows, ctx);
  const warn = warnings(medianRows, RATE);
  const cores = coresTable(medianRows, plan);
  console.log(`\n${tbl}\n`);
  console.log(`${cores}\n`);
  if (rat) console.log(`${rat}\n`);
  for (const w of warn) console.log(`warning: ${w}`);

  if (argv['no-write']) return;
  const cmd = `node dist/bench/sidecar.js ${process.argv
    .slice(2)
    .map((a) => (/\s/.test(a) ? `"${a}"` : a))
    .join(' ')}`.trim();
  const baselineCommit = BASELINE
    ? spawnSync('git', ['-C', BASELINE, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim()
    : '';
  const body = [
    `Run ${date} on ${mach.cores} cores (${mach.cpu}), ${mach.kernel}; node ${mach.node}, ${mach.nginx}, ` +
      `${mach.wrk}, redis ${mach.redis}.`,
    `Machine load (1, 5, 15 min load averages, as \`uptime\` shows them) at the start: ${loadAtStart.map((x) => x.toFixed(2)).join(', ')}; ` +
      `at the end: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(', ')}. Above about 1 on 2 cores, other work shared the machine: compare CPU µs per request rather than requests/s.`,
    `Command: \`${cmd}\`: ${DURATION} s per measurement after a ${WARMUP} s unmeasured warm-up per target` +
      `${ROUNDS > 1 ? `, every measurement taken in each of ${ROUNDS} rounds (all servers in turn per round) and the median shown` : ''}, ` +
      `${CONNECTIONS} keep-alive connections, one \`GET ${PATH}\` per request with an \`X-API-Key\`.`,
    ...(DURATION < 10
      ? [
          `> Short run (${DURATION} s per measurement), on a machine shared with other work: a smoke check of the script, not figures to quote.`,
        ]
      : []),
    '### Method',
    [
      `- Pinning: ${plan.description}.`,
      `- Upstream: ${argv.upstream === 'uws' ? 'uWebSockets.js' : 'node:http'} in its own process, 200 with a 3-byte body for any request.`,
      `- Sidecar: \`node dist/limiter/main.js\` on uWS ${installedBuild()}, one process, LOG_LEVEL=warn, other settings at their defaults (global bucket off, ` +
        `decision sampling 1%), quotas from a snapshot file: the admitting key has a token bucket of rate and burst 10⁹/s, the denying ` +
        `key rate 1, burst 1 per ${DENY_INTERVAL_MS / 3_600_000} h. Redis store: ${argv['redis-url'] ? 'the given Redis' : "a redis-server of the bench's own"} (no persistence) on the upstream's core.`,
      `- Abuse workload: ${ABUSE.count.toLocaleString('en')} API keys, each a token bucket of one request per ${(ABUSE_TOKEN_MS / 1000).toFixed(2)} s ` +
        `without burst; the load generator rotates the key on every request (wrk: a Lua script; autocannon: \`setupRequest\`), so at ` +
        `${ABUSE_RPS.toLocaleString('en')} req/s each key is offered ${ABUSE_MULTIPLE}× its limit and about ${100 - 100 / ABUSE_MULTIPLE}% of requests are ` +
        `refused, while every key keeps coming back as its tokens come due. The issue's "10× a limit of 10/s" is scaled to the rate ` +
        `this machine can offer (\`--abuse-rps\`); the non-2xx share in the table says how close a run came to ${ABUSE_MULTIPLE}×.`,
      `- Floor: bench/peers/bare-proxy.ts, uWS + the sidecar's own upstream client (limiter/upstream/h1-pool.ts, UPSTREAM_CLIENT=h1) driven as the sidecar drives it ` +
        `(the \`bare uWS + undici\` row: the same with undici's Pool), forwarding the same header set ` +
        `(client headers minus hop-by-hop, X-Subject, X-Subject-Role, X-Subject-Address, X-Forwarded-For/-Host/-Proto/-Port, Forwarded; the rate-limit ` +
        `response headers as constant strings), no decision, no hashing, no canonical path.`,
      ...(uwsPeer
        ? [
            `- uWS peer: the same dist/limiter/main.js, settings and snapshot on ${uwsPeer.id} (\`node --require bench/lib/uws-redirect.cjs\`, ` +
              `installed under bench/.scratch/uws-builds/), admitting and denying, measured in every round right after the pinned build ` +
              `(odd rounds) or right before it (even rounds).`,
          ]
        : []),
      ...(BASELINE
        ? [
            `- Baseline: \`${relative(PROJECT_ROOT, BASELINE) || BASELINE}\` at ${baselineCommit}, its dist/limiter/main.js with the same settings and snapshot (less the approximate key).`,
          ]
        : []),
      `- Workers: --workers ${WORKERS}: LIMITER_WORKERS=${WORKERS} in the sidecar's environment (passed whether or not this build reads it; ` +
        `a build without worker threads runs one event loop), nginx \`worker_processes ${WORKERS}\`, the fastify gateway ${WORKERS === 1 ? 'one process' : `${WORKERS} node:cluster workers`}.`,
      `- Peers: nginx, \`worker_processes ${WORKERS}\`, \`limit_req\` keyed on \`$http_x_api_key\` (admitting: rate 10⁸ r/s, burst 10⁸ nodelay; ` +
        `denying: 1 r/m, burst 1 nodelay; \`limit_req_status 429\`), \`proxy_pass\` to the same upstream over keep-alive ` +
        `connections (HTTP/1.1, \`keepalive 128\`), X-Forwarded-For/-Proto set, access log off. The fastify gateway ` +
        `(bench/peers/fastify-gateway.ts): fastify 5, @fastify/rate-limit keyed on X-API-Key (in process, or on the same Redis through ioredis), ` +
        `@fastify/reply-from (undici, 128 connections), X-Forwarded-For/-Proto set; its abuse server allows 1 request per ${(ABUSE_TOKEN_MS / 1000).toFixed(2)} s per key (a fixed window).`,
      `- autocannon runs in the bench process; latency is its per-response time recorded at 1 µs resolution (all statuses). ` +
        `wrk: one thread, \`--latency\`. The latency rows hold autocannon at a fixed overall rate (wrk cannot).`,
      `- Decision latency: the sidecar's \`${DECISION_METRIC}\` histogram (arrival in the uWS callback → the decision, per store), ` +
        `scraped from its admin port right before and after the fixed-rate run; percentiles are the upper bounds of the buckets the ` +
        `deltas put them in.`,
      `- Server CPU: user + system time of the server under test (the upstream for direct rows; nginx master and worker) ` +
        `over the run, from /proc, as a share of one core. Well under 100% means the load generator (or other work on the ` +
        `machine), not the server, set that row's requests/s. CPU µs / request is that time per response: on a machine ` +
        `shared with other work it is the steadier comparison, and each ratio also gives it ("by CPU per request").`,
    ].join('\n'),
    '### Figures',
    tbl,
    cores,
    ...(rat ? [rat] : []),
    ...(warn.length > 0 ? [warn.map((w) => `- warning: ${w}`).join('\n')] : []),
  ].join('\n\n');
  writeResults(RESULTS, body, argv.heading);
  note(`\n${relative(PROJECT_ROOT, RESULTS)}: section "${argv.heading}" written`);
}

// ── --profile ────────────────────────────────────────────────────────────────

async function profile(): Promise<void> {
  prerequisites();
  const plan = layout(corePlan(!argv['no-pin']));
  pinProcess(process.pid, plan.load);
  const store = STORES[0]!;
  const quotaFile = writeQuotaFile('quotas.json', undefined);
  const upstream = await startUpstream(plan.aux);
  let redis: { url: string; process: Started } | undefined;
  let redisUrl = argv['redis-url'];
  if (store === 'redis' && !redisUrl) {
    redis = await startRedis(which('redis-server')!, SCRATCH, plan.aux);
    redisUrl = redis.url;
  }
  const dir = join(SCRATCH, `profile-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const main = BASELINE ? join(BASELINE, 'dist', 'limiter', 'main.js') : SIDECAR_MAIN;
  const sc = await startSidecar('sidecar', main, store, upstream.port, quotaFile, redisUrl, plan.server, dir);
  const url = `http://127.0.0.1:${sc.port}${PATH}`;
  // (b) unless only (c) or the abuse workload was asked for.
  const kind = SCENARIOS.has('admit') ? 'admit' : SCENARIOS.has('abuse') ? 'abuse' : SCENARIOS.has('deny') ? 'deny' : 'admit';
  await checkWiring('sidecar', url, ADMIT_KEY, 'admit');
  await checkWiring('sidecar', url, DENY_KEY, 'deny');
  const what = kind === 'deny' ? '(c) sidecar, denying' : kind === 'abuse' ? '(c) sidecar, abuse workload' : '(b) sidecar, admitting';
  note(`profiling ${what}, ${store} store: ${WARMUP + DURATION} s of autocannon`);
  const key = kind === 'deny' ? DENY_KEY : ADMIT_KEY;
  const m = await runAutocannon({
    url,
    headers: kind === 'abuse' ? {} : { 'x-api-key': key },
    connections: CONNECTIONS,
    durationSec: WARMUP + DURATION,
    ...(kind === 'abuse' ? { rotate: ABUSE } : {}),
  });
  await sc.process.stop('SIGTERM', 15_000);
  await redis?.process.stop();
  await upstream.process.stop();
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`the sidecar wrote no .cpuprofile into ${dir}: see the sidecar log in ${SCRATCH}`);
  const prof = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
  // Only the stretch that served requests: start-up and shutdown would weigh heavily in a short run.
  const top = topSelfTime(prof, PROJECT_ROOT, 15, { url: '/dist/limiter/data-plane.js', functionName: 'onRequest' });
  console.log(`\n${what}, ${store} store: ${Math.round(m.rps).toLocaleString('en')} req/s under the profiler`);
  console.log(`profile: ${relative(PROJECT_ROOT, join(dir, file))} (open it in Chrome DevTools or speedscope)\n`);
  console.log('Top self time, between the first and the last sample in the request handler (DataPlane.onRequest):\n');
  console.log('| # | function (source) | self ms | % of busy |');
  console.log('|---:|---|---:|---:|');
  top.forEach((t, i) =>
    console.log(
      `| ${i + 1} | ${t.name.replaceAll('|', '\\|')} | ${t.selfMs.toFixed(1)} | ${t.name.startsWith('(idle)') ? '—' : (t.busyShare * 100).toFixed(1)} |`,
    ),
  );
  console.log('\nHottest lines of limiter/ and shared/ (samples in the line itself, native calls it makes included):\n');
  for (const within of ['/dist/limiter/', '/dist/shared/']) {
    for (const l of hotLines(prof, PROJECT_ROOT, within, 8).filter((x) => x.ticks >= 5))
      console.log(`  ${String(l.ticks).padStart(6)}  ${l.line}`);
  }
}

mkdirSync(SCRATCH, { recursive: true });
try {
  await (argv.profile ? profile() : benchmark());
} catch (err) {
  console.error(`bench failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
} finally {
  await stopAll();
}
