/**
 * The sidecar benchmark (targets in bench/lib/report.ts `ratios`): requests/s, p50 and p99 of
 *   (a) the minimal upstream, direct;
 *   (b) the sidecar with an admitting quota, (c) with a denying one, each on the in-memory and the
 *       Redis counter store;
 *   (d) the peer: nginx `limit_req` + `proxy_pass`, one worker, admitting and denying;
 *   and, at a fixed 5,000 requests/s, the latency direct vs through each proxy (the added p99);
 * measured with autocannon and, when installed, wrk. The script starts everything it measures,
 * pinned to cores (bench/lib/processes.ts `corePlan`), stops it all after, prints a markdown
 * table with the ratios against the targets, and replaces its section of bench/RESULTS.md.
 *
 *   npx tsc -b && node dist/bench/sidecar.js [--duration 10] [--connections 50]
 *     [--store memory|redis|both] [--scenario direct,admit,deny,nginx,latency] [--rate 5000]
 *     [--warmup 2] [--tools autocannon,wrk] [--upstream uws|node] [--redis-url URL] [--no-pin]
 *     [--install] [--no-write] [--profile]
 *
 * `--profile` instead runs scenario (b) alone (or (c), with `--scenario deny`) with the sidecar under
 * `--cpu-prof --cpu-prof-dir bench/.scratch/profile-<ms>`, and prints the 15 functions with the most
 * self time while it served requests, then its hottest source lines (through the source maps).
 *
 * Every figure also records the CPU share the server under test used: a server well under one
 * core was not what limited that row (see bench/RESULTS.md, "Method").
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { PROJECT_ROOT } from '../shared/paths.js';
import { ENV } from '../shared/env.js';
import { hotLines, topSelfTime, type CpuProfile } from './lib/cpu-profile.js';
import { runAutocannon, runWrk, type LoadOptions, type Measurement, type Tool } from './lib/load.js';
import { nginxVersion, startNginx } from './lib/nginx.js';
import {
  corePlan,
  cpuSeconds,
  freePort,
  pinProcess,
  spawnPinned,
  stopAll,
  waitForHttp,
  which,
  type CorePlan,
  type Started,
} from './lib/processes.js';
import { startRedis } from './lib/redis.js';
import { machine, ratios, RESULTS_HEADING, table, warnings, writeResults, type Row } from './lib/report.js';

const HELP = `node dist/bench/sidecar.js [options]
  --duration N        seconds per measurement (default 10)
  --connections N     concurrent connections (default 50)
  --store S           memory | redis | both (default both)
  --scenario LIST     comma-separated: direct,admit,deny,nginx,latency (default all; also a,b,c,d)
  --rate N            the fixed rate of the latency scenario, requests/s (default 5000)
  --warmup N          unmeasured seconds before each target (default 2)
  --tools LIST        autocannon,wrk (default both; wrk only when installed)
  --upstream K        uws | node: the minimal upstream's server (default uws)
  --redis-url URL     use this Redis instead of a redis-server of the bench's own
  --no-pin            do not pin processes to cores
  --install           apt-get install nginx and wrk when missing (needs root)
  --no-write          print only; leave bench/RESULTS.md alone
  --profile           run scenario (b) alone (or (c) with --scenario deny) with the sidecar under
                      --cpu-prof, on the first store of --store; print the top self time`;

const { values: argv } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    store: { type: 'string', default: 'both' },
    scenario: { type: 'string', default: 'direct,admit,deny,nginx,latency' },
    rate: { type: 'string', default: '5000' },
    warmup: { type: 'string', default: '2' },
    tools: { type: 'string', default: 'autocannon,wrk' },
    upstream: { type: 'string', default: 'uws' },
    'redis-url': { type: 'string' },
    'no-pin': { type: 'boolean', default: false },
    install: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
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
const WARMUP = argv.warmup === '0' ? 0 : positive('warmup', argv.warmup);
const STORES = argv.store === 'both' ? ['memory', 'redis'] : [argv.store];
if (!STORES.every((s) => s === 'memory' || s === 'redis')) usage(`--store must be memory, redis or both`);
const ALIASES: Record<string, string> = { a: 'direct', b: 'admit', c: 'deny', d: 'nginx', rate: 'latency' };
const SCENARIOS = new Set(argv.scenario.split(',').map((s) => ALIASES[s.trim()] ?? s.trim()));
for (const s of SCENARIOS) if (!['direct', 'admit', 'deny', 'nginx', 'latency'].includes(s)) usage(`unknown scenario "${s}"`);
const WANT_TOOLS = new Set(argv.tools.split(',').map((s) => s.trim()));
for (const t of WANT_TOOLS) if (t !== 'autocannon' && t !== 'wrk') usage(`unknown tool "${t}"`);
if (argv.upstream !== 'uws' && argv.upstream !== 'node') usage(`--upstream must be uws or node`);

const SCRATCH = join(PROJECT_ROOT, 'bench', '.scratch');
const RESULTS = join(PROJECT_ROOT, 'bench', 'RESULTS.md');
const SIDECAR_MAIN = join(PROJECT_ROOT, 'dist', 'limiter', 'main.js');
const UPSTREAM_MAIN = join(PROJECT_ROOT, 'dist', 'bench', 'upstream.js');
const PATH = '/v1/bench';
const ADMIT_KEY = 'bench-admit-key';
const DENY_KEY = 'bench-deny-key';
const DENY_INTERVAL_MS = 3_600_000;

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
  if (!existsSync(SIDECAR_MAIN) || !existsSync(UPSTREAM_MAIN)) {
    throw new Error(`${relative(PROJECT_ROOT, SIDECAR_MAIN)} or the bench upstream is not built: run \`npx tsc -b\` first`);
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

/** The quota snapshot: an admitting key no run can exhaust, and a denying key (1 per hour, burst 1). */
function writeQuotaFile(): string {
  const file = join(SCRATCH, 'quotas.json');
  const snapshot = {
    version: 1,
    issued_at: Math.floor(Date.now() / 1000),
    quotas: [
      { subject_id: 'plan:default', algorithm: 'token_bucket', rate: 100, burst: 200, interval_ms: 1000, plan: 'default' },
      {
        subject_id: `key:${sha256(ADMIT_KEY)}`,
        algorithm: 'token_bucket',
        rate: 1_000_000_000,
        burst: 1_000_000_000,
        interval_ms: 1000,
        plan: 'bench_admit',
      },
      {
        subject_id: `key:${sha256(DENY_KEY)}`,
        algorithm: 'token_bucket',
        rate: 1,
        burst: 1,
        interval_ms: DENY_INTERVAL_MS,
        plan: 'bench_deny',
      },
    ],
  };
  writeFileSync(file, JSON.stringify(snapshot, null, 2));
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
  process: Started;
}

async function startSidecar(
  store: string,
  upstreamPort: number,
  quotaFile: string,
  redisUrl: string | undefined,
  cpu: string | undefined,
  profileDir?: string,
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
    ...(store === 'redis' ? { REDIS_URL: redisUrl } : {}),
  });
  const args = profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir, SIDECAR_MAIN] : [SIDECAR_MAIN];
  const log = join(SCRATCH, `sidecar-${store}.log`);
  const p = spawnPinned(`sidecar (${store})`, process.execPath, args, { cpu, env, logFile: log });
  await waitForHttp(p, `http://127.0.0.1:${admin}/readyz`, log);
  return { port, process: p };
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

// ── measuring ────────────────────────────────────────────────────────────────

interface Target {
  id: string;
  label: string;
  url: string;
  key: string;
  /** The server under test, for its CPU use. */
  pid: number;
  /** Fixed rate (latency scenario). */
  rate?: number;
}

async function measure(t: Target, tools: readonly Tool[], plan: CorePlan, rows: Row[]): Promise<void> {
  const o: LoadOptions = {
    url: t.url,
    headers: { 'x-api-key': t.key },
    connections: CONNECTIONS,
    durationSec: DURATION,
    ...(t.rate ? { rate: t.rate } : {}),
  };
  if (WARMUP > 0) await runAutocannon({ ...o, durationSec: WARMUP });
  for (const tool of tools) {
    // wrk cannot hold a fixed rate (that is wrk2); the latency rows are autocannon's.
    if (tool === 'wrk' && t.rate) continue;
    note(`  ${t.label} · ${tool} · ${DURATION} s`);
    await sleep(300);
    const cpu0 = cpuSeconds(t.pid);
    const t0 = performance.now();
    const m: Measurement = tool === 'autocannon' ? await runAutocannon(o) : await runWrk(o, plan.load, SCRATCH);
    m.serverCpu = (cpuSeconds(t.pid) - cpu0) / ((performance.now() - t0) / 1000);
    rows.push({ id: t.id, label: t.label, m });
    const cpu = Number.isFinite(m.serverCpu) ? `, server CPU ${Math.round(m.serverCpu * 100)}%` : '';
    note(`    ${Math.round(m.rps).toLocaleString('en')} req/s, p50 ${m.p50Ms.toFixed(3)} ms, p99 ${m.p99Ms.toFixed(3)} ms${cpu}`);
  }
}

const ORDER = [
  'direct',
  'sidecar-memory-admit',
  'sidecar-redis-admit',
  'nginx-admit',
  'sidecar-memory-deny',
  'sidecar-redis-deny',
  'nginx-deny',
  'rate-direct',
  'rate-sidecar-memory',
  'rate-sidecar-redis',
  'rate-nginx',
];

async function benchmark(): Promise<void> {
  const pre = prerequisites();
  const mach = machine(pre.nginx ? nginxVersion(pre.nginx) : undefined);
  const plan = corePlan(!argv['no-pin']);
  pinProcess(process.pid, plan.load);
  const tools: Tool[] = [...(WANT_TOOLS.has('autocannon') ? (['autocannon'] as const) : []), ...(pre.wrk ? (['wrk'] as const) : [])];
  if (tools.length === 0) throw new Error('no load generator to run: --tools names none that is installed');
  note(`pinning: ${plan.description}`);

  const quotaFile = writeQuotaFile();
  const upstream = await startUpstream(plan.aux);
  const direct = `http://127.0.0.1:${upstream.port}${PATH}`;
  const rateLabel = `${RATE.toLocaleString('en')} req/s`;
  const rows: Row[] = [];

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

  let redis: { url: string; process: Started } | undefined;
  for (const store of STORES) {
    if (!['admit', 'deny', 'latency'].some((s) => SCENARIOS.has(s))) break;
    let redisUrl: string | undefined;
    if (store === 'redis') {
      redisUrl = argv['redis-url'];
      if (!redisUrl) {
        redis = await startRedis(pre.redisServer!, SCRATCH, plan.aux);
        redisUrl = redis.url;
      }
    }
    const sc = await startSidecar(store, upstream.port, quotaFile, redisUrl, plan.server);
    const url = `http://127.0.0.1:${sc.port}${PATH}`;
    await checkWiring(`sidecar (${store})`, url, ADMIT_KEY, 'admit');
    await checkWiring(`sidecar (${store})`, url, DENY_KEY, 'deny');
    if (SCENARIOS.has('admit'))
      await measure(
        { id: `sidecar-${store}-admit`, label: `(b) sidecar, ${store} store, admitting`, url, key: ADMIT_KEY, pid: sc.process.child.pid! },
        tools,
        plan,
        rows,
      );
    if (SCENARIOS.has('deny'))
      await measure(
        { id: `sidecar-${store}-deny`, label: `(c) sidecar, ${store} store, denying`, url, key: DENY_KEY, pid: sc.process.child.pid! },
        tools,
        plan,
        rows,
      );
    if (SCENARIOS.has('latency')) {
      const label = `latency @ ${rateLabel}: sidecar, ${store} store`;
      await measure({ id: `rate-sidecar-${store}`, label, url, key: ADMIT_KEY, pid: sc.process.child.pid!, rate: RATE }, tools, plan, rows);
    }
    await sc.process.stop('SIGTERM', 10_000);
  }
  await redis?.process.stop();

  if (pre.nginx) {
    const ports = { admit: await freePort(), deny: await freePort(), upstream: upstream.port };
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
  await upstream.process.stop();

  rows.sort((a, b) => ORDER.indexOf(a.id) - ORDER.indexOf(b.id) || a.m.tool.localeCompare(b.m.tool));
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const tbl = table(rows);
  const rat = ratios(rows, STORES);
  const warn = warnings(rows, RATE);
  console.log(`\n${tbl}\n`);
  if (rat) console.log(`${rat}\n`);
  for (const w of warn) console.log(`warning: ${w}`);

  if (argv['no-write']) return;
  const cmd = `node dist/bench/sidecar.js ${process.argv.slice(2).join(' ')}`.trim();
  const body = [
    `Run ${date} on ${mach.cores} cores (${mach.cpu}), ${mach.kernel}; node ${mach.node}, ${mach.nginx}, ` +
      `${mach.wrk}, redis ${mach.redis}.`,
    `Command: \`${cmd}\`: ${DURATION} s per measurement after a ${WARMUP} s unmeasured warm-up per target, ` +
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
      `- Sidecar: \`node dist/limiter/main.js\`, one process, LOG_LEVEL=warn, other settings at their defaults (global bucket off, ` +
        `decision sampling 1%), quotas from a snapshot file: the admitting key has a token bucket of rate and burst 10⁹/s, the denying ` +
        `key rate 1, burst 1 per ${DENY_INTERVAL_MS / 3_600_000} h. Redis store: ${argv['redis-url'] ? 'the given Redis' : "a redis-server of the bench's own"} (no persistence) on the upstream's core.`,
      `- Peer: nginx, \`worker_processes 1\`, \`limit_req\` keyed on \`$http_x_api_key\` (admitting: rate 10⁸ r/s, burst 10⁸ nodelay; ` +
        `denying: 1 r/m, burst 1 nodelay; \`limit_req_status 429\`), \`proxy_pass\` to the same upstream over keep-alive ` +
        `connections (HTTP/1.1, \`keepalive 128\`), X-Forwarded-For/-Proto set, access log off.`,
      `- autocannon runs in the bench process; latency is its per-response time recorded at 1 µs resolution (all statuses). ` +
        `wrk: one thread, \`--latency\`. The latency rows hold autocannon at a fixed overall rate (wrk cannot).`,
      `- Server CPU: user + system time of the server under test (the upstream for direct rows; nginx master and worker) ` +
        `over the run, from /proc, as a share of one core. Well under 100% means the load generator (or other work on the ` +
        `machine), not the server, set that row's requests/s.`,
    ].join('\n'),
    '### Figures',
    tbl,
    ...(rat ? [rat] : []),
    ...(warn.length > 0 ? [warn.map((w) => `- warning: ${w}`).join('\n')] : []),
  ].join('\n\n');
  writeResults(RESULTS, body);
  note(`\n${relative(PROJECT_ROOT, RESULTS)}: section "${RESULTS_HEADING}" written`);
}

// ── --profile ────────────────────────────────────────────────────────────────

async function profile(): Promise<void> {
  prerequisites();
  const plan = corePlan(!argv['no-pin']);
  pinProcess(process.pid, plan.load);
  const store = STORES[0]!;
  const quotaFile = writeQuotaFile();
  const upstream = await startUpstream(plan.aux);
  let redis: { url: string; process: Started } | undefined;
  let redisUrl = argv['redis-url'];
  if (store === 'redis' && !redisUrl) {
    redis = await startRedis(which('redis-server')!, SCRATCH, plan.aux);
    redisUrl = redis.url;
  }
  const dir = join(SCRATCH, `profile-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const sc = await startSidecar(store, upstream.port, quotaFile, redisUrl, plan.server, dir);
  const url = `http://127.0.0.1:${sc.port}${PATH}`;
  // (b) unless only (c) was asked for.
  const deny = SCENARIOS.has('deny') && !SCENARIOS.has('admit');
  await checkWiring('sidecar', url, ADMIT_KEY, 'admit');
  await checkWiring('sidecar', url, DENY_KEY, 'deny');
  const what = deny ? '(c) sidecar, denying' : '(b) sidecar, admitting';
  note(`profiling ${what}, ${store} store: ${WARMUP + DURATION} s of autocannon`);
  const key = deny ? DENY_KEY : ADMIT_KEY;
  const m = await runAutocannon({ url, headers: { 'x-api-key': key }, connections: CONNECTIONS, durationSec: WARMUP + DURATION });
  await sc.process.stop('SIGTERM', 15_000);
  await redis?.process.stop();
  await upstream.process.stop();
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`the sidecar wrote no .cpuprofile into ${dir}: see ${join(SCRATCH, `sidecar-${store}.log`)}`);
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
