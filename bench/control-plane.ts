/**
 * Quota control plane: how fast a quota write reaches every connected sidecar, and how
 * many admin writes per second the control plane takes.
 *
 * Starts a control plane in-process against a fresh database on DATABASE_URL (default the local
 * postgres://postgres@127.0.0.1:5432/postgres; dropped at the end) and, in a worker thread (its own
 * event loop), N sidecar stand-ins: each its own gRPC connection, Watch, applies every snapshot to
 * a real QuotaCache and Acks it, as the sidecar does. The admin client is a grpc-js
 * QuotaAdminService client in the main thread.
 *
 * Propagation, "commit to the last ack": measured inside the control plane, from the moment the
 * store's write transaction has committed to the moment the N-th sidecar's Ack of that version is
 * recorded (the bench wraps QuotaStore.put and SidecarRegistry.ack to timestamp both). Shown beside
 * the Put round trip as the admin client sees it, with and without sidecars, and the server's own
 * histogram (quota_propagation_seconds, commit to each sidecar's ack) as bucket bounds.
 *
 * Run: `npx tsc -b && node dist/bench/control-plane.js [--puts 200] [--seconds 3] [--sidecars 10]
 * [--concurrency 8] [--no-write]`. Writes its section of bench/RESULTS.md.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import pg from 'pg';
import {
  AckRequestSchema,
  PutRequestSchema,
  QuotaAdminService,
  QuotaSchema,
  QuotaSyncService,
  WatchRequestSchema,
  type Snapshot,
} from '../proto/gen/quota/v1/quota_pb.js';
import { loadConfig } from '../shared/config.js';
import { grpcClientConstructor, unaryCall } from '../shared/grpc.js';
import { createLogger } from '../shared/log.js';
import { startControlPlane } from '../limiter/control-plane/app.js';
import { controlPlaneConfig } from '../limiter/control-plane/config.js';
import { SidecarRegistry } from '../limiter/control-plane/sidecars.js';
import { QuotaStore } from '../limiter/control-plane/store.js';
import { QuotaCache } from '../limiter/quota-cache.js';
import { replaceSection } from './lib/report.js';

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const HEADING = '## Control plane (issue 4)';

interface WatcherJob {
  address: string;
  count: number;
}

if (!isMainThread) runSidecars(workerData as WatcherJob);
else await main();

// ── the sidecar stand-ins (worker thread) ──────────────────────────────────

function runSidecars(job: WatcherJob): void {
  const Sync = grpcClientConstructor(QuotaSyncService);
  const versions: number[] = new Array(job.count).fill(0);
  const clients: InstanceType<typeof Sync>[] = [];
  for (let i = 0; i < job.count; i++) {
    // A connection of its own per sidecar, as separate processes would have.
    const client = new Sync(job.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    clients.push(client);
    const cache = new QuotaCache(1_000_000);
    const sidecarId = `bench-sidecar-${i}`;
    const stream = client.watch(create(WatchRequestSchema, { sinceVersion: 0n, sidecarId }));
    stream.on('data', (s: Snapshot) => {
      if (!cache.apply(s, Date.now()).applied) return;
      client.ack(create(AckRequestSchema, { sidecarId, version: s.version }), () => {});
      versions[i] = cache.version;
      parentPort!.postMessage({ type: 'version', min: Math.min(...versions) });
    });
    stream.on('error', () => {});
  }
  parentPort!.on('message', (m: { type: string }) => {
    if (m.type === 'stop') {
      for (const c of clients) c.close();
      parentPort!.close();
    }
  });
}

// ── the benchmark (main thread) ────────────────────────────────────────────

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      puts: { type: 'string', default: '200' },
      seconds: { type: 'string', default: '3' },
      sidecars: { type: 'string', default: '10' },
      concurrency: { type: 'string', default: '8' },
      'no-write': { type: 'boolean', default: false },
    },
  });
  const puts = Number(values.puts);
  const seconds = Number(values.seconds);
  const sidecars = Number(values.sidecars);
  const concurrency = Number(values.concurrency);
  const timing = instrument(sidecars);

  const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `bench_cp_${randomBytes(4).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${dbName}`);
  const dbUrl = withDatabase(adminUrl, dbName);
  const env = {
    DATABASE_URL: dbUrl,
    CONTROL_PLANE_HTTP_PORT: '0',
    CONTROL_PLANE_GRPC_PORT: '0',
    ADMIN_TOKEN,
    CONTROL_PLANE_ACK_TIMEOUT: '5s',
    SHUTDOWN_GRACE: '2s',
  };
  const cp = await startControlPlane(loadConfig(controlPlaneConfig, env), createLogger({ service: 'control-plane', level: 'silent' }));
  const address = `127.0.0.1:${cp.grpcPort}`;
  const Admin = grpcClientConstructor(QuotaAdminService);
  const admin = new Admin(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${ADMIN_TOKEN}`);
  let n = 0;
  const put = async (subject: string) => {
    const rate = 1 + (n++ % 2) * 99; // alternate limits, as the end-to-end test does
    const quota = create(QuotaSchema, { subjectId: subject, algorithm: 1, rate, burst: rate });
    return unaryCall(admin, 'put', create(PutRequestSchema, { quota, ackTimeoutMs: 5_000 }), { metadata: md });
  };

  try {
    for (let i = 0; i < 100; i++) await put(`tenant:seed-${i}`); // a table to snapshot
    const noSidecars = await sequential(puts, () => put('user:hot'));
    const noSidecarsRate = await throughput(seconds, concurrency, (i) => put(`user:t-${i % 64}`));

    const worker = new Worker(new URL(import.meta.url), { workerData: { address, count: sidecars } satisfies WatcherJob });
    let minVersion = 0;
    worker.on('message', (m: { type: string; min: number }) => {
      if (m.type === 'version') minVersion = m.min;
    });
    const current = Number((await put('user:hot')).version);
    await until(() => minVersion >= current, 10_000, 'every sidecar to hold the table');
    // Let every stream settle (acks of the first full snapshot) before measuring.
    await new Promise((r) => setTimeout(r, 200));
    const before = await histogram(cp.port);
    const measured: number[] = [];
    const withSidecars = await sequential(puts, async () => {
      const r = await put('user:hot');
      if (r.ackedSidecarIds.length !== sidecars) {
        throw new Error(`only ${r.ackedSidecarIds.length} of ${sidecars} sidecars acked (lagging: ${r.laggingSidecarIds.join(', ')})`);
      }
      measured.push(Number(r.version));
    });
    const propagation = quantiles(
      measured.slice(-puts).map((v) => {
        const committed = timing.commitAt.get(v);
        const lastAck = timing.lastAckAt.get(v);
        if (committed === undefined || lastAck === undefined) throw new Error(`no timing for version ${v}`);
        return lastAck - committed;
      }),
    );
    const after = await histogram(cp.port);
    const withSidecarsRate = await throughput(seconds, concurrency, (i) => put(`user:t-${i % 64}`));
    worker.postMessage({ type: 'stop' });
    await worker.terminate();

    const perAck = quantilesFromBuckets(after, before);
    const rows = [
      [
        `**Commit → last of ${sidecars} acks** (in the control plane)`,
        `**${fmt(propagation.p50)}**`,
        `**${fmt(propagation.p99)}**`,
        `${puts} writes, each acked by all ${sidecars}`,
      ],
      [
        `Commit → each sidecar's ack (server histogram, bucket upper bounds)`,
        `≤ ${perAck.p50}`,
        `≤ ${perAck.p99}`,
        `${perAck.count} acks, warm-up included`,
      ],
      ['Put round trip at the admin client, no sidecar connected', fmt(noSidecars.p50), fmt(noSidecars.p99), `${puts} sequential puts`],
      [
        `Put round trip at the admin client, ${sidecars} sidecars connected (answered after the last ack)`,
        fmt(withSidecars.p50),
        fmt(withSidecars.p99),
        `${puts} sequential puts`,
      ],
    ];
    const throughputRows = [
      ['no sidecar connected', Math.round(noSidecarsRate).toLocaleString('en')],
      [`${sidecars} sidecars connected, each put waiting for all acks`, Math.round(withSidecarsRate).toLocaleString('en')],
    ];
    const pgVersion = (await adminQuery(adminUrl, 'SHOW server_version')).rows[0]?.server_version as string | undefined;
    const cpu = (/^model name\s*:\s*(.+)$/m.exec(safeRead('/proc/cpuinfo'))?.[1] ?? cpus()[0]?.model ?? 'unknown').trim();
    const body = [
      `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')} on ${cpus().length} cores (${cpu}); node ${process.version}, PostgreSQL ${pgVersion ?? '?'} (local, default settings).`,
      '',
      `Command: \`node dist/bench/control-plane.js --puts ${puts} --seconds ${seconds} --sidecars ${sidecars} --concurrency ${concurrency}\`. The control plane runs in-process; the ${sidecars} sidecar stand-ins (own gRPC connection each; Watch, apply to a QuotaCache, Ack) in a worker thread; all on one machine.`,
      '',
      '> Short run on a machine shared with other work: a smoke check of the script, not figures to quote.',
      '',
      '### Propagation (ms)',
      '',
      '| measure | p50 | p99 | n |',
      '|---|---:|---:|---|',
      ...rows.map((r) => `| ${r.join(' | ')} |`),
      '',
      `### Admin Put throughput (${concurrency} in flight, ${seconds} s, distinct subjects)`,
      '',
      '| scenario | puts/s |',
      '|---|---:|',
      ...throughputRows.map((r) => `| ${r.join(' | ')} |`),
      '',
      'Every write is one transaction that takes the single version row lock (versions gap-free in commit order), so writes are serialised by design: throughput is bounded by one PostgreSQL commit at a time.',
    ].join('\n');
    process.stdout.write(`${body}\n`);
    if (!values['no-write']) {
      const file = new URL('../../bench/RESULTS.md', import.meta.url);
      const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
      writeFileSync(file, replaceSection(text, HEADING, body).replace(/\n*$/, '\n'));
      process.stdout.write(`\nwrote ${HEADING} in bench/RESULTS.md\n`);
    }
  } finally {
    admin.close();
    await cp.close();
    await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
}

/**
 * Timestamps (performance.now, ms) of each version's commit and of its N-th ack, taken inside the
 * control plane by wrapping the store's put and the registry's ack. Bench-only instrumentation.
 */
function instrument(sidecars: number): { commitAt: Map<number, number>; lastAckAt: Map<number, number> } {
  const commitAt = new Map<number, number>();
  const lastAckAt = new Map<number, number>();
  const acks = new Map<number, number>();
  const put = QuotaStore.prototype.put;
  QuotaStore.prototype.put = async function (this: QuotaStore, ...args: Parameters<QuotaStore['put']>) {
    const r = await put.apply(this, args);
    commitAt.set(r.version, performance.now());
    return r;
  };
  const ack = SidecarRegistry.prototype.ack;
  SidecarRegistry.prototype.ack = function (this: SidecarRegistry, id: string, version: number, local?: boolean) {
    ack.call(this, id, version, local);
    const n = (acks.get(version) ?? 0) + 1;
    acks.set(version, n);
    if (n === sidecars) lastAckAt.set(version, performance.now());
  };
  return { commitAt, lastAckAt };
}

async function sequential(count: number, fn: () => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < Math.min(20, count); i++) await fn(); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await fn();
    ms.push(performance.now() - start);
  }
  return quantiles(ms);
}

function quantiles(values: number[]): { p50: number; p99: number } {
  const ms = [...values].sort((a, b) => a - b);
  return { p50: ms[Math.floor(ms.length * 0.5)]!, p99: ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))]! };
}

async function throughput(seconds: number, inFlight: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) {
        await fn(next++);
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

type Buckets = Map<string, number>;

async function histogram(port: number): Promise<Buckets> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out: Buckets = new Map();
  for (const m of text.matchAll(/^quota_propagation_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

/** p50 and p99 of the observations between two readings, as the upper bound of their bucket (ms). */
function quantilesFromBuckets(after: Buckets, before: Buckets): { p50: string; p99: string; count: number } {
  const rows = [...after].map(([le, c]) => ({ le, n: c - (before.get(le) ?? 0) }));
  const count = rows.find((r) => r.le === '+Inf')?.n ?? 0;
  const at = (q: number): string => {
    const r = rows.find((x) => x.n >= q * count);
    if (!r) return 'n/a';
    return r.le === '+Inf' ? '> 10 s' : `${Number(r.le) * 1000} ms`;
  };
  return { p50: at(0.5), p99: at(0.99), count };
}

async function until(pred: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function adminQuery(url: string, sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function fmt(ms: number): string {
  return ms.toFixed(2);
}
