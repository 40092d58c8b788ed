/**
 * Identity logins: `POST /auth/login` per second with p50/p95/p99. Each login is an
 * argon2id verification (OWASP parameters: 19 MiB, 2 passes) on the libuv thread pool, a throttle
 * read and write in PostgreSQL, and an ES256-signed 1 h access token. Target on 2 cores: ≥ 60
 * logins/s with p95 ≤ 300 ms.
 *
 * The identity service runs in this process (its HTTP server on the main thread, argon2 on the
 * thread pool) against a fresh database on DATABASE_URL (default the local
 * postgres://postgres@127.0.0.1:5432/postgres; dropped at the end); the load comes from
 * `--concurrency` back-to-back loops over keep-alive connections, over `--users` accounts.
 *
 * Run: `npx tsc -b && node dist/bench/identity-login.js [--seconds 5] [--concurrency 8]
 * [--users 50] [--no-write]`. Writes the "## Identity logins (issue 6)" section of bench/RESULTS.md.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { loadConfig } from '../shared/config.js';
import { createLogger } from '../shared/log.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import { startIdentity } from '../identity/app.js';
import { identityConfig } from '../identity/config.js';
import { replaceSection } from './lib/report.js';

const HEADING = '## Identity logins (issue 6)';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '8' },
    users: { type: 'string', default: '50' },
    'no-write': { type: 'boolean', default: false },
  },
});
const seconds = Number(args.seconds);
const concurrency = Number(args.concurrency);
const users = Number(args.users);

const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `bench_login_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

let exit = 0;
try {
  const port = 18000 + Math.floor(Math.random() * 2000);
  const issuer = `http://127.0.0.1:${port}`;
  const identity = await startIdentity(
    loadConfig(identityConfig, {
      DATABASE_URL: dbUrl.toString(),
      HOST: '127.0.0.1',
      IDENTITY_PORT: String(port),
      JWT_ISSUER: issuer,
      JWT_AUDIENCE: 'edge-api',
      DATABASE_POOL_MAX: '10',
      // one failure budget per account is never reached here; the per-IP one must not be either
      IDENTITY_LOGIN_MAX_FAILURES_PER_IP: '1000000',
    }),
    createLogger({ service: 'identity', level: 'silent' }),
  );
  const http = new HttpPool(issuer, { connections: concurrency });
  const post = async (path: string, body: unknown): Promise<number> => {
    const res = await http.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await res.body.text();
    return res.statusCode;
  };
  const password = 'bench password 0123456789';
  for (let i = 0; i < users; i++) {
    const status = await post('/auth/signup', { email: `user${i}@bench.example`, password, name: `User ${i}` });
    if (status !== 201) throw new Error(`signup: ${status}`);
  }
  const load1 = loadavg()[0]!;
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const i = next++ % users;
        const t0 = performance.now();
        const status = await post('/auth/login', { email: `user${i}@bench.example`, password });
        latencies.push(performance.now() - t0);
        if (status !== 200) errors++;
      }
    }),
  );
  const load2 = loadavg()[0]!;
  await http.close();
  await identity.close();
  latencies.sort((a, b) => a - b);
  const rate = latencies.length / seconds;
  const [p50, p95, p99] = [50, 95, 99].map((p) => percentile(latencies, p).toFixed(1));
  const pgVersion = (await admin.query<{ v: string }>('SHOW server_version')).rows[0]!.v;
  const row = `| logins (\`POST /auth/login\`: argon2id verify, throttle read + write, ES256 token) | ${Math.round(rate)} | ${p50} | ${p95} | ${p99} | ${latencies.length} | ${errors} |`;
  const body = [
    `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')} on ${cpus().length} cores (${cpus()[0]?.model.trim()}), node ${process.version}; PostgreSQL ${pgVersion} (local).`,
    '',
    `Command: \`node dist/bench/identity-login.js --seconds ${seconds} --concurrency ${concurrency} --users ${users}\`. Identity in process (pool of 10 connections, argon2 on the libuv thread pool of ${process.env.UV_THREADPOOL_SIZE ?? 4}); ${concurrency} back-to-back login loops over ${users} accounts. Target: ≥ 60 logins/s with p95 ≤ 300 ms.`,
    '',
    `> Machine shared with other work (1-minute load average ${load1.toFixed(1)} before, ${load2.toFixed(1)} after): indicative figures.`,
    '',
    '| measure | per second | p50 ms | p95 ms | p99 ms | requests | errors |',
    '|---|---:|---:|---:|---:|---:|---:|',
    row,
  ].join('\n');
  console.log(body);
  if (!args['no-write']) {
    const file = join(PROJECT_ROOT, 'bench', 'RESULTS.md');
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
    writeFileSync(file, replaceSection(text, HEADING, body).replace(/\n*$/, '\n'));
  }
  if (errors > 0) exit = 1;
} finally {
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}
process.exit(exit);
