/**
 * Identity tokens: client-credentials tokens/s with p50/p99, refresh-token rotations/s,
 * and ES256 verifications/s of the tokens identity issued through the shared verifier (the
 * sidecar's; bench/jwt-verify.ts measures it on synthetic tokens beside jose).
 *
 * The OAuth endpoints run in a child process (as identity's own process would) against a fresh database on DATABASE_URL (default the local
 * postgres://postgres@127.0.0.1:5432/postgres; dropped at the end). The load generator is this
 * thread: `--concurrency` loops over an undici pool of as many keep-alive connections, each
 * request timed from send to full body. A refresh loop presents the refresh token its previous
 * answer returned, so every request is a real rotation (lock, successor insert, commit).
 *
 * Run: `npx tsc -b && node dist/bench/identity-tokens.js [--seconds 5] [--concurrency 16]
 * [--no-write]`. Writes the "## Identity tokens (issue 6)" section of bench/RESULTS.md.
 * Targets on 2 cores: ≥ 1,500 client-credentials tokens/s with p99 ≤ 25 ms; ≥ 800 refresh
 * rotations/s; ≥ 10,000 ES256 verifications/s per core.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { loadConfig } from '../shared/config.js';
import { createPool } from '../shared/db.js';
import { createVerifier } from '../shared/jwt/index.js';
import { createLogger } from '../shared/log.js';
import { createRegistry } from '../shared/metrics.js';
import { migrate } from '../shared/migrate.js';
import { migrationsDir, PROJECT_ROOT } from '../shared/paths.js';
import { startHttpService } from '../shared/service.js';
import { validateRegistration } from '../identity/clients/client.js';
import { registerClient } from '../identity/clients/client-store.js';
import {
  createOAuthRuntime,
  oauthConfig,
  oauthSettings,
  registerOAuthRoutes,
  startOAuth,
  type OAuthDeps,
} from '../identity/oauth/index.js';
import { createGrant } from '../identity/tokens/grant-store.js';
import { replaceSection } from './lib/report.js';

const HEADING = '## Identity tokens (issue 6)';

interface ServerJob {
  dbUrl: string;
  poolMax: number;
}

const SERVE_FLAG = '--serve-identity';

// ── the identity OAuth endpoints (child process) ───────────────────────────

async function serve(job: ServerJob): Promise<void> {
  const log = createLogger({ service: 'identity', level: 'silent' });
  const pool = createPool(job.dbUrl, { applicationName: 'bench-identity', max: job.poolMax, log });
  // The issuer URL names the port, so a free port is found before the routes are registered.
  const registry = createRegistry('identity', { defaults: false });
  const port = await new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const p = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(p));
    });
  });
  const d: OAuthDeps = { settings: oauthSettings(loadConfig(oauthConfig, { JWT_ISSUER: `http://127.0.0.1:${port}` })), log, registry };
  const rt = createOAuthRuntime(pool, d);
  const http = await startHttpService({
    name: 'identity',
    host: '127.0.0.1',
    port,
    log,
    registry,
    maxBodyBytes: 65536,
    checks: [],
    routes: (app, edge) => registerOAuthRoutes(app, edge, rt),
  });
  const running = await startOAuth(rt, { tickMs: 3_600_000 });
  process.send!({ type: 'ready', port });
  process.on('message', (m: { type: string }) => {
    if (m.type !== 'stop') return;
    void (async () => {
      await running.close();
      await http.close(1000);
      await pool.end();
      process.exit(0);
    })();
  });
}

// ── load and report (main thread) ──────────────────────────────────────────

interface Result {
  ops: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * Runs `concurrency` loops for `seconds`; each loop calls `step(i)` back to back. Returns the
 * rate and latency quantiles of the successful steps.
 */
async function drive(seconds: number, concurrency: number, step: (loop: number) => Promise<boolean>): Promise<Result> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const ok = await step(loop);
        if (ok) latencies.push(performance.now() - t0);
        else errors++;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return { ops: latencies.length, rps: latencies.length / elapsed, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), errors };
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en');
const ms = (n: number): string => n.toFixed(2);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '5' },
      concurrency: { type: 'string', default: '16' },
      'pool-max': { type: 'string', default: '10' },
      'no-write': { type: 'boolean', default: false },
    },
  });
  const loadBefore = loadavg()[0]!;
  const seconds = Number(values.seconds);
  const concurrency = Number(values.concurrency);
  const poolMax = Number(values['pool-max']);

  const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `bench_identity_${randomBytes(4).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${dbName}`);
  const dbUrl = withDatabase(adminUrl, dbName);
  const log = createLogger({ service: 'bench', level: 'silent' });
  const pool = createPool(dbUrl, { applicationName: 'bench-setup', max: 4, log });
  let child: ChildProcess | undefined;
  try {
    await migrate(pool, { service: 'identity', dir: migrationsDir('identity') });
    const { clientSecret } = await registerClient(
      pool,
      validateRegistration({
        client_id: 'bench-svc',
        client_type: 'confidential',
        scope: 'read:orders write:orders',
        tenant_id: 'bench',
        plan: 'pro',
      }),
      Date.now(),
    );
    await registerClient(
      pool,
      validateRegistration({
        client_id: 'bench-app',
        client_type: 'public',
        redirect_uris: ['https://bench.example/cb'],
        scope: 'openid read:orders',
      }),
      Date.now(),
    );

    const job: ServerJob = { dbUrl, poolMax };
    child = fork(fileURLToPath(import.meta.url), [SERVE_FLAG], { env: { ...process.env, BENCH_IDENTITY_JOB: JSON.stringify(job) } });
    const c = child;
    const port = await new Promise<number>((resolve, reject) => {
      c.once('error', reject);
      c.once('exit', (code) => reject(new Error(`the identity process exited (${code})`)));
      c.on('message', (m: { type: string; port: number }) => {
        if (m.type === 'ready') resolve(m.port);
      });
    });
    const origin = `http://127.0.0.1:${port}`;
    const http = new HttpPool(origin, { connections: concurrency, pipelining: 1 });

    // ── client credentials ──
    const basic = `Basic ${Buffer.from(`bench-svc:${clientSecret!}`).toString('base64')}`;
    const ccBody = 'grant_type=client_credentials&scope=read%3Aorders';
    const issued: string[] = [];
    const cc = async (): Promise<boolean> => {
      const r = await http.request({
        path: '/token',
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic },
        body: ccBody,
      });
      const body = (await r.body.json()) as { access_token?: string };
      if (r.statusCode !== 200 || !body.access_token) return false;
      if (issued.length < 20_000) issued.push(body.access_token);
      return true;
    };
    await drive(1, concurrency, cc); // warm-up
    issued.length = 0;
    const ccResult = await drive(seconds, concurrency, cc);

    // ── refresh rotations: one chain per loop ──
    const chains: string[] = [];
    for (let i = 0; i < concurrency; i++) {
      const now = Date.now();
      const { refreshToken } = await createGrant(pool, {
        userId: `bench-user-${i}`,
        clientId: 'bench-app',
        scope: 'openid read:orders',
        authTimeMs: now,
        nowMs: now,
        refreshTtlMs: 86_400_000,
      });
      chains.push(refreshToken!);
    }
    // The default user directory reads `credentials`; give the users a row so tokens carry a role.
    for (let i = 0; i < concurrency; i++) {
      await pool.query(`INSERT INTO credentials (user_id, email, password_hash) VALUES ($1, $2, 'x')`, [
        `bench-user-${i}`,
        `b${i}@bench.example`,
      ]);
    }
    const rotate = async (loop: number): Promise<boolean> => {
      const r = await http.request({
        path: '/token',
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `grant_type=refresh_token&client_id=bench-app&refresh_token=${chains[loop]!}`,
      });
      const body = (await r.body.json()) as { refresh_token?: string };
      if (r.statusCode !== 200 || !body.refresh_token) return false;
      chains[loop] = body.refresh_token;
      return true;
    };
    await drive(1, concurrency, rotate);
    const refreshResult = await drive(seconds, concurrency, rotate);
    await http.close();

    // ── ES256 verifications of the issued tokens, one core, cache off ──
    const jwks = (await (await fetch(`${origin}/.well-known/jwks.json`)).json()) as { keys: Record<string, unknown>[] };
    const verifier = createVerifier({ issuer: origin, audience: 'edge-api', keys: { keys: jwks.keys }, tokenCacheSize: 0 });
    await verifier.ready();
    for (let i = 0; i < 2_000; i++) await verifier.verifyAccessToken(issued[i % issued.length]!);
    let n = 0;
    const vStart = performance.now();
    const vEnd = vStart + Math.min(seconds, 3) * 1000;
    while (performance.now() < vEnd) for (let k = 0; k < 500; k++) await verifier.verifyAccessToken(issued[n++ % issued.length]!);
    const verifyRate = n / ((performance.now() - vStart) / 1000);
    verifier.close();

    const machine = `${cpus().length} cores (${cpus()[0]?.model ?? 'cpu'}), node ${process.version}`;
    const pgVersion = await pool.query<{ server_version: string }>('SHOW server_version').then((r) => r.rows[0]!.server_version);
    const verdict = (ok: boolean): string => (ok ? 'met' : 'not met');
    const body = [
      `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')} on ${machine}; PostgreSQL ${pgVersion} (local, default settings, fsync on).`,
      '',
      `Command: \`node dist/bench/identity-tokens.js --seconds ${seconds} --concurrency ${concurrency}\`. The OAuth endpoints run in a child process (pool of ${poolMax} PostgreSQL connections); the load comes from ${concurrency} back-to-back request loops over keep-alive connections in the main thread, on the same 2 cores as PostgreSQL.`,
      '',
      `> Short runs on a machine shared with other work (1-minute load average ${loadBefore.toFixed(1)} before the run, ${loadavg()[0]!.toFixed(1)} after, on 2 cores): indicative figures, not a capacity plan.`,
      '',
      '| measure | per second | p50 ms | p99 ms | requests | errors |',
      '|---|---:|---:|---:|---:|---:|',
      `| client-credentials tokens (\`POST /token\`, client_secret_basic, ES256 signed) | ${fmt(ccResult.rps)} | ${ms(ccResult.p50)} | ${ms(ccResult.p99)} | ${fmt(ccResult.ops)} | ${ccResult.errors} |`,
      `| refresh-token rotations (\`POST /token\`, one committed rotation each, access + id token signed) | ${fmt(refreshResult.rps)} | ${ms(refreshResult.p50)} | ${ms(refreshResult.p99)} | ${fmt(refreshResult.ops)} | ${refreshResult.errors} |`,
      `| ES256 verifications of those access tokens, shared verifier, cache off, one core | ${fmt(verifyRate)} | | | ${fmt(n)} | 0 |`,
      '',
      `- client credentials: ${fmt(ccResult.rps)}/s, p99 ${ms(ccResult.p99)} ms (target ≥ 1,500/s with p99 ≤ 25 ms: ${verdict(ccResult.rps >= 1500 && ccResult.p99 <= 25)})`,
      `- refresh rotations: ${fmt(refreshResult.rps)}/s (target ≥ 800/s: ${verdict(refreshResult.rps >= 800)})`,
      `- ES256 verifications: ${fmt(verifyRate)}/s on one core (target ≥ 10,000/s: ${verdict(verifyRate >= 10_000)}); \`npm run bench:jwt\` compares the verifier with jose on synthetic tokens`,
      '',
      'What bounds each figure:',
      '',
      '- client credentials: no database write; the client record comes from a 2 s in-process cache, so a token costs one form parse, one SHA-256 of the secret and one ES256 signature. CPU-bound, shared with the load generator and PostgreSQL.',
      "- refresh rotations: one committed PostgreSQL statement per rotation (lock, rotate out, insert the successor; fsync on) plus a read of the user's role, then two signatures (access and id token). Bound by commit latency: more connections raise it (`--concurrency 32 --pool-max 20`).",
      "- verifications: the sidecar's verifier in this process, one core, after the load; on a busy machine it gets less than a core.",
    ].join('\n');
    process.stdout.write(`\n${HEADING}\n\n${body}\n`);
    if (!values['no-write']) {
      const file = join(PROJECT_ROOT, 'bench/RESULTS.md');
      const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
      writeFileSync(file, replaceSection(text, HEADING, body).replace(/\n*$/, '\n'));
      process.stdout.write(`\nwrote ${HEADING} in bench/RESULTS.md\n`);
    }
  } finally {
    if (child && child.exitCode === null) {
      const c = child;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.send({ type: 'stop' });
      });
    }
    await pool.end();
    await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
}

// Last, so every module-level constant above is initialised before either role runs.
if (process.argv.includes(SERVE_FLAG)) await serve(JSON.parse(process.env.BENCH_IDENTITY_JOB!) as ServerJob);
else await main();
