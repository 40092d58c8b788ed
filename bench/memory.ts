/**
 * Memory per live subject of the in-process counter store (issue 17, item 7; target ≤ 150 bytes of
 * RSS per live subject over 1,000,000 distinct subjects), measured two ways:
 *
 *   (a) the store alone, in a child process (`node --expose-gc`): the counter table
 *       (limiter/admission/counter-table.ts, behind MemoryCounterStore) beside its predecessor, an
 *       lru-cache of string keys and state objects (the store as it was before the table, kept here
 *       as the peer), for API-key subjects (`key:<sha256 hex>`) and address subjects
 *       (`ip:10.x.y.z`);
 *   (b) from outside: the sidecar itself (dist/limiter/main.js, in-process counters, default
 *       `LIMITER_COUNTER_MAX_KEYS` of 1,000,000) behind HTTP, one request per distinct subject.
 *       Distinct API keys would each need a quota record (an unknown key gets a decoy 429 and no
 *       counter, README "Unknown API keys"), which would measure the quota cache too; so the
 *       subjects are client addresses on a route that takes no credentials (`auth=optional`,
 *       per-IP cap), each a distinct `X-Forwarded-For` from a trusted proxy
 *       (`LIMITER_TRUST_PROXY`). `--baseline DIR` measures another build the same way (e.g. the
 *       commit before the table) in the same run.
 *
 * Each figure: RSS after minus RSS before, divided by the subjects added in between, both RSS
 * readings after a forced full GC (twice). A warm-up of `--warmup` subjects comes before the first
 * reading (code compiled, buffers allocated); in the sidecar each reading follows 10.5 s of quiet
 * and a /metrics scrape, which rolls its hot-keys window (a sampled map of at most 100,000
 * subjects), so what remains is what the counters keep.
 *
 *   npm run bench:memory -- [--subjects 1000000] [--warmup 20000] [--mode all|store|http]
 *     [--runs 1] [--baseline DIR [--baseline-name NAME]] [--no-write]
 *
 * `--baseline DIR`: a built checkout of another commit (e.g. `git archive 2cdc884 | tar -x -C
 * /tmp/base && ln -s $PWD/node_modules /tmp/base/ && (cd /tmp/base && npx tsc -b)`), measured
 * from outside like this build, the runs alternating between the two.
 *
 * Writes its section of bench/RESULTS.md ("Memory per live subject (issue 17)").
 */
import { hash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { LRUCache } from 'lru-cache';
import { Pool } from 'undici';
import { PROJECT_ROOT } from '../shared/paths.js';
import { ENV } from '../bin/env-catalogue.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { MemoryCounterStore } from '../limiter/admission/counter-store.memory.js';
import { decide, newAdmission, type Bucket } from '../limiter/admission/decide.js';
import type { AdmitRequest, AdmitResult } from '../limiter/admission/counter-store.js';
import type { AlgorithmCode, BucketState, LimitParams, Step } from '../limiter/admission/limit.js';
import { freePort, spawnPinned, stopAll, waitForHttp, waitUntil, type Started } from './lib/processes.js';
import { replaceSection } from './lib/report.js';

const HEADING = '## Memory per live subject (issue 17)';
const RESULTS = join(PROJECT_ROOT, 'bench', 'RESULTS.md');
const SCRATCH = join(PROJECT_ROOT, 'bench', '.scratch');
const SELF = fileURLToPath(import.meta.url);
const TARGET_BYTES = 150;

// ── the peer: the store as it was before the counter table ──────────────────────

/** A stored bucket of the lru-cache store: its state plus when it is back at rest. */
class Entry implements BucketState {
  alg: AlgorithmCode;
  a: number;
  b: number;
  c: number;
  restAtMs: number;
  constructor(from: Step) {
    const s = from.newState;
    this.alg = s.alg;
    this.a = s.a;
    this.b = s.b;
    this.c = s.c;
    this.restAtMs = from.resetAtMs;
  }
}

/** The in-process store before issue 17 (commit 2cdc884), subject buckets only: lru-cache, string keys. */
class LruCounterStore {
  readonly #clock: Clock;
  readonly #buckets: LRUCache<string, Entry>;
  readonly #key: Bucket = { params: undefined as never, state: undefined };
  readonly #adm = newAdmission();
  constructor(clock: Clock, max: number) {
    this.#clock = clock;
    this.#buckets = new LRUCache<string, Entry>({ max, dispose: () => undefined });
  }
  get size(): number {
    return this.#buckets.size;
  }
  admit(req: AdmitRequest): AdmitResult {
    const now = this.#clock.now();
    const entry = this.#buckets.get(req.key);
    this.#key.params = req.limit;
    this.#key.state = entry;
    const a = decide(this.#key, undefined, now, req.cost, this.#adm);
    if (a.allowed) {
      if (entry === undefined) this.#buckets.set(req.key, new Entry(a.key));
      else {
        const s = a.key.newState;
        entry.alg = s.alg;
        entry.a = s.a;
        entry.b = s.b;
        entry.c = s.c;
        entry.restAtMs = a.key.resetAtMs;
      }
    }
    return {
      allowed: a.allowed,
      limit: a.limit,
      remaining: a.remaining,
      resetAtMs: a.resetAtMs,
      retryAfterMs: a.retryAfterMs,
      binding: a.binding,
    };
  }
}

// ── (a) the store alone, in a child process ─────────────────────────────────────

type StoreKind = 'table' | 'lru-cache';
type SubjectKind = 'key' | 'ip';

interface StoreFigures {
  store: StoreKind;
  subjects: SubjectKind;
  added: number;
  live: number;
  rssBefore: number;
  rssAfter: number;
  heapDelta: number;
  arrayBuffersDelta: number;
  nsPerAdmit: number;
}

const subjectOf = (kind: SubjectKind, i: number): string =>
  kind === 'key' ? `key:${hash('sha256', `bench-memory-${i}`, 'hex')}` : `ip:10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;

function fullGc(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the child with --expose-gc');
  gc();
  gc();
}

/** The child: fills one store with `total` subjects and prints its figures as one JSON line. */
function child(store: StoreKind, subjects: SubjectKind, total: number, warmup: number): void {
  const limit: LimitParams = { algorithm: 'token_bucket', rate: 10, burst: 20, intervalMs: 1000 };
  const s = store === 'table' ? new MemoryCounterStore({ clock: systemClock, maxKeys: total }) : new LruCounterStore(systemClock, total);
  const req = { key: '', limit, global: undefined, cost: 1 };
  const drive = (from: number, to: number): void => {
    for (let i = from; i < to; i++) {
      req.key = subjectOf(subjects, i);
      if (!s.admit(req).allowed) throw new Error('a fresh subject was refused');
    }
  };
  drive(0, warmup);
  fullGc();
  const before = process.memoryUsage();
  const started = process.hrtime.bigint();
  drive(warmup, total);
  const ns = Number(process.hrtime.bigint() - started);
  fullGc();
  const after = process.memoryUsage();
  const figures: StoreFigures = {
    store,
    subjects,
    added: total - warmup,
    live: s.size,
    rssBefore: before.rss,
    rssAfter: after.rss,
    heapDelta: after.heapUsed - before.heapUsed,
    arrayBuffersDelta: after.arrayBuffers - before.arrayBuffers,
    nsPerAdmit: ns / (total - warmup),
  };
  console.log(JSON.stringify(figures));
}

function runChild(store: StoreKind, subjects: SubjectKind, total: number, warmup: number): Promise<StoreFigures> {
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      ['--expose-gc', SELF, '--child', store, '--child-subjects', subjects, '--subjects', String(total), '--warmup', String(warmup)],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.once('error', reject);
    p.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`child ${store}/${subjects} exited ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as StoreFigures);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}

// ── (b) the sidecar from outside ────────────────────────────────────────────────

interface HttpFigures {
  build: string;
  added: number;
  rssBefore: number;
  rssAfter: number;
  evictions: number;
  refused: number;
  seconds: number;
}

/** VmRSS of a process, bytes. */
function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** Sends SIGUSR2 (the preload below runs a full GC and logs it) and waits for the log line. */
async function gcIn(p: Started, logFile: string): Promise<void> {
  const count = (): number => (readFileSync(logFile, 'utf8').match(/memory-bench: gc done/g) ?? []).length;
  const before = count();
  p.child.kill('SIGUSR2');
  await waitUntil(p, 'a forced GC', () => Promise.resolve(count() > before), logFile);
}

/** One request per subject `from..to-1`, 16 connections × 8 pipelined; counts what was not 200. */
async function drive(pool: Pool, from: number, to: number): Promise<number> {
  let next = from;
  let refused = 0;
  const worker = async (): Promise<void> => {
    while (next < to) {
      const i = next++;
      const ip = `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;
      const r = await pool.request({ path: '/v1/things', method: 'GET', headers: { 'x-forwarded-for': ip } });
      await r.body.dump();
      if (r.statusCode !== 200) refused++;
    }
  };
  await Promise.all(Array.from({ length: 128 }, worker));
  return refused;
}

async function metric(admin: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name)) sum += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  return sum;
}

async function measureSidecar(build: string, root: string, upstreamPort: number, total: number, warmup: number): Promise<HttpFigures> {
  const main = join(root, 'dist', 'limiter', 'main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: build it first (npx tsc -b)`);
  const [port, admin] = [await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(ENV)) delete env[name];
  Object.assign(env, {
    HOST: '127.0.0.1',
    LIMITER_PORT: String(port),
    LIMITER_ADMIN_PORT: String(admin),
    LIMITER_ROUTES: `/v1=http://127.0.0.1:${upstreamPort};auth=optional`,
    LIMITER_TRUST_PROXY: 'true',
    LOG_LEVEL: 'warn',
    SHUTDOWN_GRACE: '2s',
    JWKS_URL: 'http://127.0.0.1:1/none',
  });
  // The sidecar as it runs, plus a SIGUSR2 handler that runs a full GC (the bench's only addition).
  const preload =
    `process.on('SIGUSR2', () => { globalThis.gc(); globalThis.gc(); console.log('memory-bench: gc done'); });` +
    `import(${JSON.stringify(pathToFileURL(main).href)});`;
  const log = join(SCRATCH, `memory-sidecar-${build.replace(/[^a-z0-9-]+/gi, '-')}.log`);
  const p = spawnPinned(`sidecar (${build})`, process.execPath, ['--expose-gc', '-e', preload], {
    cpu: undefined,
    env,
    cwd: root,
    logFile: log,
  });
  try {
    await waitForHttp(p, `http://127.0.0.1:${admin}/readyz`, log);
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 16, pipelining: 8 });
    // Both readings alike: 10.5 s of quiet, a scrape (which rolls the 10 s hot-keys window, so
    // its sampled map of recent subjects is not counted), a full GC, then VmRSS.
    const settle = async (): Promise<number> => {
      await new Promise((r) => setTimeout(r, 10_500));
      await metric(admin, 'ratelimit_counter_evictions');
      await gcIn(p, log);
      return rssOf(p.child.pid!);
    };
    let refused = await drive(pool, 0, warmup);
    const rssBefore = await settle();
    const started = performance.now();
    refused += await drive(pool, warmup, total);
    const seconds = (performance.now() - started) / 1000;
    await pool.close();
    const rssAfter = await settle();
    const evictions = await metric(admin, 'ratelimit_counter_evictions');
    return { build, added: total - warmup, rssBefore, rssAfter, evictions, refused, seconds };
  } finally {
    await p.stop();
  }
}

// ── the report ──────────────────────────────────────────────────────────────────

const mb = (n: number): string => (n / 1048576).toFixed(1);
const perSubject = (delta: number, n: number): number => delta / n;
const verdict = (b: number): string => (b <= TARGET_BYTES ? 'met' : 'not met');
function median(xs: readonly number[]): number {
  const v = [...xs].sort((x, y) => x - y);
  const m = v.length >> 1;
  return v.length % 2 === 1 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}

/** One line per group: the median bytes per subject over the runs, with every run's figure. */
function medians<T>(rows: readonly T[], group: (r: T) => string, bytes: (r: T) => number): string[] {
  const by = new Map<string, number[]>();
  for (const r of rows) by.set(group(r), [...(by.get(group(r)) ?? []), bytes(r)]);
  return [...by].map(
    ([g, xs]) =>
      `- ${g}: median **${median(xs).toFixed(0)} bytes** of RSS per subject over ${xs.length} run${xs.length === 1 ? '' : 's'} ` +
      `(${xs.map((x) => x.toFixed(0)).join(', ')}); target ≤ ${TARGET_BYTES}: ${verdict(median(xs))}`,
  );
}

function report(stores: readonly StoreFigures[], http: readonly HttpFigures[], total: number, warmup: number): string {
  const lines: string[] = [];
  const cpu =
    /^model name\s*:\s*(.+)$/m.exec(existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '')?.[1] ?? cpus()[0]?.model;
  lines.push(
    `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')}Z by \`npm run bench:memory\` (bench/memory.ts): ${cpus().length} cores (${cpu}), ` +
      `${mb(totalmem())} MB RAM, Node ${process.version}. ${total.toLocaleString('en')} distinct subjects, the first ` +
      `${warmup.toLocaleString('en')} a warm-up; bytes per subject = (RSS after − RSS before) / subjects added, each RSS after a forced full GC. ` +
      `Target ≤ ${TARGET_BYTES} bytes of RSS per live subject.`,
    '',
  );
  if (stores.length > 0) {
    lines.push(
      '### The store alone (child process)',
      '',
      '| store | subjects | live | RSS before MB | RSS after MB | RSS bytes / subject | JS heap bytes / subject | ArrayBuffer bytes / subject | target |',
      '|---|---|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const f of stores) {
      const b = perSubject(f.rssAfter - f.rssBefore, f.added);
      lines.push(
        `| ${f.store === 'table' ? 'counter table (this build)' : 'lru-cache, string keys (before)'} | ${f.subjects === 'key' ? '`key:<sha256 hex>`' : '`ip:10.x.y.z`'} | ` +
          `${f.live.toLocaleString('en')} | ${mb(f.rssBefore)} | ${mb(f.rssAfter)} | **${b.toFixed(0)}** | ${perSubject(f.heapDelta, f.added).toFixed(0)} | ` +
          `${perSubject(f.arrayBuffersDelta, f.added).toFixed(0)} | ${verdict(b)} |`,
      );
    }
    lines.push(
      '',
      ...medians(
        stores,
        (f) => `${f.store === 'table' ? 'counter table' : 'lru-cache'}, ${f.subjects === 'key' ? 'API-key subjects' : 'address subjects'}`,
        (f) => perSubject(f.rssAfter - f.rssBefore, f.added),
      ),
      '',
    );
  }
  if (http.length > 0) {
    lines.push(
      '### The sidecar from outside (HTTP, one request per client address)',
      '',
      '| build | subjects added | RSS before MB | RSS after MB | RSS bytes / subject | evictions | not 200 | driven in s | target |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const f of http) {
      const b = perSubject(f.rssAfter - f.rssBefore, f.added);
      lines.push(
        `| ${f.build} | ${f.added.toLocaleString('en')} | ${mb(f.rssBefore)} | ${mb(f.rssAfter)} | **${b.toFixed(0)}** | ${f.evictions} | ${f.refused} | ${f.seconds.toFixed(0)} | ${verdict(b)} |`,
      );
    }
    lines.push(
      '',
      ...medians(
        http,
        (f) => `sidecar, ${f.build}`,
        (f) => perSubject(f.rssAfter - f.rssBefore, f.added),
      ),
      '',
    );
  }
  lines.push(
    'What the figures say:',
    '',
    '- The table allocates per slot a 16-byte fingerprint, the state (1 + 4 × 8 bytes), two 4-byte LRU links and 4 / load bytes of ' +
      'index (load 0.375…0.75): about 65 bytes at the bound (the ArrayBuffer column). It grows by doubling, and untouched pages of a ' +
      'fresh array are not resident, so below the bound RSS follows the subjects, not the allocation.',
    "- The rest of the table rows' RSS is what the process allocated around the store and freed: V8 keeps some of the heap it grew " +
      'into (the API-key rows build a 68-character string per subject, the address rows a shorter one), and in the sidecar every ' +
      'request allocates a little. That is why the sidecar, from outside, reads higher than the store alone.',
    '- lru-cache keeps the key string (68 characters for an API key), a state object whose doubles are boxed, and its own ' +
      'per-entry slots; it also allocates its index arrays for `max` entries at construction, which is why the baseline sidecar ' +
      'starts about 60 MB higher (the "RSS before" column) on top of its higher figure per subject.',
    '- The lru-cache rows of the store alone use a copy of the store before the table (bench/memory.ts, `LruCounterStore`); ' +
      'the baseline sidecar is that commit, built, measured in the same run.',
  );
  return lines.join('\n');
}

// ── main ────────────────────────────────────────────────────────────────────────

const { values: argv } = parseArgs({
  options: {
    subjects: { type: 'string', default: '1000000' },
    warmup: { type: 'string', default: '20000' },
    mode: { type: 'string', default: 'all' },
    baseline: { type: 'string' },
    'baseline-name': { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    child: { type: 'string' },
    'child-subjects': { type: 'string', default: 'key' },
    runs: { type: 'string', default: '1' },
  },
});
const TOTAL = Number(argv.subjects);
const WARMUP = Number(argv.warmup);
const RUNS = Number(argv.runs);

async function main(): Promise<void> {
  if (!(WARMUP > 0 && TOTAL > WARMUP)) throw new Error('--subjects must exceed --warmup, both positive');
  if (!(Number.isInteger(RUNS) && RUNS >= 1)) throw new Error('--runs must be a positive integer');
  mkdirSync(SCRATCH, { recursive: true });
  const stores: StoreFigures[] = [];
  const http: HttpFigures[] = [];
  if (argv.mode === 'all' || argv.mode === 'store') {
    for (let run = 0; run < RUNS; run++)
      for (const subjects of ['key', 'ip'] as const) {
        for (const store of ['table', 'lru-cache'] as const) {
          const f = await runChild(store, subjects, TOTAL, WARMUP);
          console.error(`store ${store}, ${subjects}: ${((f.rssAfter - f.rssBefore) / f.added).toFixed(0)} bytes of RSS per subject`);
          stores.push(f);
        }
      }
  }
  if (argv.mode === 'all' || argv.mode === 'http') {
    const upPort = await freePort();
    const upLog = join(SCRATCH, 'memory-upstream.log');
    const up = spawnPinned('upstream', process.execPath, [join(PROJECT_ROOT, 'dist', 'bench', 'upstream.js'), String(upPort)], {
      cpu: undefined,
      logFile: upLog,
    });
    await waitForHttp(up, `http://127.0.0.1:${upPort}/`, upLog);
    const builds: [string, string][] = [['this build', PROJECT_ROOT]];
    if (argv.baseline) builds.push([`baseline: ${argv['baseline-name'] ?? argv.baseline}`, argv.baseline]);
    // Runs alternate the builds, so a drift of the machine falls on both.
    for (let run = 0; run < RUNS; run++)
      for (const [name, root] of builds) {
        const f = await measureSidecar(name, root, upPort, TOTAL, WARMUP);
        console.error(
          `sidecar ${name}: ${((f.rssAfter - f.rssBefore) / f.added).toFixed(0)} bytes of RSS per subject (${f.refused} not 200)`,
        );
        http.push(f);
      }
  }
  const body = report(stores, http, TOTAL, WARMUP);
  console.log(body);
  if (!argv['no-write']) {
    const text = existsSync(RESULTS) ? readFileSync(RESULTS, 'utf8') : '# Benchmark results\n';
    writeFileSync(RESULTS, replaceSection(text, HEADING, body).replace(/\n*$/, '\n'));
    console.error(`bench/RESULTS.md: section "${HEADING}" written`);
  }
}

if (argv.child !== undefined) child(argv.child as StoreKind, argv['child-subjects'] as SubjectKind, TOTAL, WARMUP);
else {
  try {
    await main();
  } finally {
    await stopAll();
  }
}
