/**
 * What an idle notifier costs: the CPU of the notifier process and of PostgreSQL (every `postgres`
 * process on the machine) while a notifier with workers and nothing to do runs, from 2 s after it
 * is ready, for `--seconds`. Idle is the state of most of a test's notifiers most of the time, and
 * of a production replica between bursts (bench/RESULTS.md, "One statement for the idle poll").
 *
 *   npx tsc -b && node dist/bench/notifier-idle.js [--poll 100ms] [--seconds 10] [--rounds 3] [--build <checkout>]...
 *
 * `--poll` is NOTIFIER_IDLE_POLL for every tier (`default`: the notifier's own per-tier default).
 * Each `--build` (a built checkout; default this one) runs once per round, alternating, against a
 * fresh database on DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres). Prints a
 * table; writes nothing.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { PROJECT_ROOT } from '../shared/paths.js';
import { freePort, postgresCpu, procCpu, spawnPinned, waitForHttp } from './lib/processes.js';

const { values: argv } = parseArgs({
  options: {
    poll: { type: 'string', default: '100ms' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    build: { type: 'string', multiple: true },
  },
});
const SECONDS = Number(argv.seconds);
const ROUNDS = Number(argv.rounds);
const BUILDS = argv.build ?? [PROJECT_ROOT];
const SCRATCH = join(PROJECT_ROOT, 'bench/.scratch');

async function once(build: string): Promise<{ notifier: number; postgres: number }> {
  const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `bench_idle_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const u = new URL(adminUrl);
  u.pathname = `/${dbName}`;
  const port = await freePort();
  const log = join(SCRATCH, 'notifier-idle.log');
  const p = spawnPinned('notifier', process.execPath, [join(build, 'dist/notifier/main.js')], {
    cpu: undefined,
    logFile: log,
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      DATABASE_URL: u.toString(),
      NOTIFIER_PORT: String(port),
      SERVICE_SECRET: 'idle-bench-service-secret-0123456789',
      NOTIFIER_TRACKING_SECRET: 'idle-bench-tracking-secret-0123',
      NOTIFIER_WORKERS: 'true',
      ...(argv.poll !== 'default' && {
        NOTIFIER_IDLE_POLL: ['transactional', 'high', 'normal', 'low'].map((t) => `${t}=${argv.poll}`).join(','),
      }),
    },
  });
  try {
    await waitForHttp(p, `http://127.0.0.1:${port}/readyz`, log, 200);
    await sleep(2000);
    const n0 = procCpu(p.child.pid);
    const pg0 = postgresCpu();
    await sleep(SECONDS * 1000);
    return { notifier: procCpu(p.child.pid) - n0, postgres: postgresCpu() - pg0 };
  } finally {
    await p.stop();
    await admin.query(`DROP DATABASE ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

const rows: string[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  for (const build of BUILDS) {
    const c = await once(build);
    const row = `| ${r} | ${build} | ${argv.poll} | ${c.notifier.toFixed(2)} | ${c.postgres.toFixed(2)} | ${((c.notifier + c.postgres) / SECONDS).toFixed(3)} |`;
    rows.push(row);
    process.stderr.write(row + '\n');
  }
}
console.log(`| round | build | idle poll | notifier CPU s | PostgreSQL CPU s | cores |\n|---:|---|---|---:|---:|---:|\n${rows.join('\n')}`);
console.log(`(${SECONDS} s idle each, from 2 s after /readyz)`);
