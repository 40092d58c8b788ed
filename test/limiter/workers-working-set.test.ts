/**
 * `LIMITER_WORKERS=2` with a control plane (limiter/README.md, "Worker threads"): the process's one
 * working set, held by the main thread (limiter/quota-relay.ts, limiter/quota-replica.ts). A real
 * control plane on real PostgreSQL, a real two-worker sidecar, real HTTP with a connection per
 * request (so the kernel spreads them over both workers; `ratelimit_worker_requests{worker}` says
 * both took some).
 *
 * - the control plane sees one sidecar (one stream, one id) for the process;
 * - a first-seen key requested on both workers at once is looked up once (the control plane's
 *   `quota_lookup_subjects_total`);
 * - a downgrade Put returns once both workers applied it, and every request after it, on either
 *   worker, sees it; while a worker's event loop is blocked the ack waits (the Put reports the
 *   process lagging) and follows once the worker has applied it;
 * - a random-key flood from one address is budgeted once for the process (LIMITER_UNKNOWN_KEY_BUDGET
 *   lookups, not one budget per worker);
 * - a worker made to throw is replaced and serves the held keys at their current versions, and
 *   takes later deltas;
 * - the last-known-good file is one file for the process, and a restart starts warm from it with
 *   the control plane down.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Algorithm } from '../../proto/gen/quota/v1/quota_pb.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/log.js';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { limiterConfig } from '../../limiter/config.js';
import { startWorkers, type Workers } from '../../limiter/workers.js';
import { useTestDatabase, type TestContext } from '../harness/db.js';
import { startUpstream, type Upstream } from '../harness/upstream.js';
import { generateTestKey, jwksOf, TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';
import { waitFor } from '../harness/wait.js';
import { holdWorker } from './fixtures/worker-hold.js';
import { fileHolds, issuedKeys, subjectOf } from './fixtures/issued-keys.js';
import { adminClient, put, quota, useControlPlane } from '../control-plane/helpers.js';
import { metricSum, parseMetrics, SERVICE_SECRET } from './fixtures/sidecar.js';

const db = await useTestDatabase(t, 'workers_working_set');
const up: Upstream = await startUpstream();
t.teardown(() => up.close());
const dir = mkdtempSync(join(tmpdir(), 'workers-working-set-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const jwks = jwksOf(await generateTestKey('ES256'));
const preload = pathToFileURL(join(PROJECT_ROOT, 'dist/test/limiter/fixtures/worker-throw.js')).href;

const KEYS = 50;
// Issued keys (rate 100, burst 100), written straight into the table once the first control plane
// has migrated the database.
const issued = issuedKeys(db.pool, 'ww_key_', KEYS);
const keyName = issued.name;
const seed = issued.seed;

interface Answer {
  status: number;
  limit: string | undefined;
}

/** One request on a connection of its own. */
function get(port: number, key: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((res, rej) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/v1/orders', headers: { 'x-api-key': key, ...headers }, agent: new Agent({ keepAlive: false }) },
      (r) => {
        r.resume();
        r.on('end', () => res({ status: r.statusCode ?? 0, limit: r.headers['x-ratelimit-limit'] as string | undefined }));
      },
    );
    req.on('error', rej);
    req.end();
  });
}

async function scrape(url: string): Promise<Map<string, number>> {
  return parseMetrics(await (await fetch(`${url}/metrics`)).text());
}

const perWorker = async (sc: Workers): Promise<number[]> => {
  const m = await scrape(sc.urls.admin!);
  return [0, 1].map((w) => metricSum(m, 'ratelimit_worker_requests', { worker: String(w) }));
};

/**
 * `n` requests for `key`, each on its own connection, `n` at once; also how many each worker took
 * meanwhile (nothing else is sent while they run). /metrics answers with a worker's last figures
 * when it does not answer within 1.5 s (limiter/workers.ts), so one scrape after the burst may not
 * count it yet: the counts are scraped until both workers have counted some, or the counts cover
 * all `n` (one worker took everything: the caller's assertion then fails on that, not on a late
 * scrape).
 */
async function burst(
  sc: Workers,
  key: string,
  n: number,
  headers: Record<string, string> = {},
): Promise<{ answers: Answer[]; took: number[] }> {
  const before = await perWorker(sc);
  const answers = await Promise.all(Array.from({ length: n }, () => get(sc.port, key, headers)));
  const took = await waitFor(
    async () => {
      const d = (await perWorker(sc)).map((a, i) => a - before[i]!);
      return (d.every((x) => x > 0) || d.reduce((x, y) => x + y, 0) >= n) && d;
    },
    { timeoutMs: 20_000, what: `the workers' counts of ${n} requests` },
  );
  return { answers, took };
}

async function startProcess(t: TestContext, cpGrpc: string, extra: Record<string, string> = {}): Promise<Workers> {
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    LIMITER_WORKERS: '2',
    LIMITER_PORT: '0',
    LIMITER_ADMIN_PORT: '0',
    NOTIFIER_URL: up.url,
    IDENTITY_URL: up.url,
    LIMITER_ROUTES: `/v1=${up.url}`,
    SERVICE_SECRET,
    JWT_ISSUER: TEST_ISSUER,
    JWT_AUDIENCE: TEST_AUDIENCE,
    REVOCATION_REFRESH_INTERVAL: '0',
    LIMITER_DECISION_SAMPLE_RATE: '0',
    LIMITER_CONTROL_PLANE_URL: cpGrpc,
    LIMITER_SYNC_POLL_INTERVAL: '200ms',
    LIMITER_SNAPSHOT_FILE: join(dir, `snapshot-${randomBytes(4).toString('hex')}.json`),
    SIDECAR_ID: `ww-${randomBytes(3).toString('hex')}`,
    ...extra,
  };
  const log = createLogger({ service: 'limiter', level: 'warn', destination: { write: () => undefined } });
  const sc = await startWorkers(loadConfig(limiterConfig, env), log, { execArgv: [], jwks, preload, workingSetWriteDelayMs: 0 });
  t.teardown(() => sc.close(2_000));
  return sc;
}

const sidecarId = (sc: Workers): string => sc.workingSet!.sync.status().sidecarId;

/**
 * The ack wait of a Put that is expected to be acked (the control plane's ack_timeout_ms): it
 * returns as soon as the process acks, so a generous bound costs nothing when all goes well and
 * covers a thread booting on a loaded 2-core machine.
 */
const ACKED_MS = 20_000;

t.test('one stream and one sidecar id for the process; a key first seen on both workers at once is looked up once', async (t) => {
  const cp = await useControlPlane(t, db.url);
  await seed();
  const sc = await startProcess(t, cp.grpc);
  const id = sidecarId(sc);
  const streams = await waitFor(
    async () => {
      const m = await scrape(cp.http);
      return metricSum(m, 'quota_connected_sidecars') === 1 && m;
    },
    { what: 'the process connected' },
  );
  const ids = [...streams.keys()]
    .filter((k) => k.startsWith('quota_sidecar_applied_version{'))
    .map((k) => /sidecar="([^"]*)"/.exec(k)?.[1]);
  t.strictSame(ids, [id], `the control plane knows one sidecar, ${id} (no per-worker ids)`);

  const lookups = async (): Promise<number> => metricSum(await scrape(cp.http), 'quota_lookup_subjects_total', { result: 'found' });
  const before = await lookups();
  const { answers, took } = await burst(sc, keyName(0), 20);
  t.strictSame(
    answers.map((a) => a.status),
    Array(20).fill(200),
    'all 20 admitted',
  );
  t.ok(
    took.every((n) => n > 0),
    `both workers took some (${took.join(' and ')})`,
  );
  t.equal((await lookups()) - before, 1, 'the control plane was asked once');
  const m = await scrape(sc.urls.admin!);
  t.equal(metricSum(m, 'ratelimit_quota_lookups_total', { result: 'found' }), 1, "the process's lookups: one");
  t.equal(metricSum(m, 'ratelimit_quota_records_held'), 1, 'the main thread holds the record once');
});

t.test('a downgrade Put returns once both workers applied it; a blocked worker holds the ack back', async (t) => {
  const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_ACK_TIMEOUT: '3s' });
  await seed();
  const admin = adminClient(t, cp.grpc);
  const key = `ww_downgrade_${randomBytes(3).toString('hex')}`;
  await put(admin, quota(subjectOf(key), { algorithm: Algorithm.TOKEN_BUCKET, rate: 100, burst: 1000, intervalMs: 1000 }));
  const sc = await startProcess(t, cp.grpc);
  const id = sidecarId(sc);
  await waitFor(() => sc.workingSet!.sync.status().connected, { what: 'watching' });

  const warm = await burst(sc, key, 20);
  t.ok(
    warm.answers.every((a) => a.status === 200 && a.limit === '1000'),
    'both workers hold the key at 1000',
  );
  t.ok(
    warm.took.every((n) => n > 0),
    `both took some (${warm.took.join(' and ')})`,
  );

  const r = await put(admin, quota(subjectOf(key), { algorithm: Algorithm.TOKEN_BUCKET, rate: 50, burst: 50, intervalMs: 1000 }), ACKED_MS);
  t.strictSame(r.ackedSidecarIds, [id], 'the Put returned acked by the process');
  const after = await burst(sc, key, 20);
  t.strictSame(
    after.answers.map((a) => a.limit),
    Array(20).fill('50'),
    'every request after the Put sees the downgrade',
  );
  t.ok(
    after.took.every((n) => n > 0),
    `on both workers (${after.took.join(' and ')})`,
  );

  // Worker 1's event loop held (until released below): it cannot apply the next delta, so the
  // process does not ack it.
  const held = await holdWorker(t, sc, 1);
  const blocked = await put(
    admin,
    quota(subjectOf(key), { algorithm: Algorithm.TOKEN_BUCKET, rate: 40, burst: 40, intervalMs: 1000 }),
    1000,
  );
  t.strictSame(blocked.laggingSidecarIds, [id], 'while a worker has not applied it, the process has not acked it');
  held.release();
  await waitFor(async () => metricSum(await scrape(cp.http), 'quota_sidecar_applied_version', { sidecar: id }) >= Number(blocked.version), {
    timeoutMs: 20_000,
    what: 'the ack once the worker applied it',
  });
  const later = await burst(sc, key, 20);
  t.strictSame(
    later.answers.map((a) => a.limit),
    Array(20).fill('40'),
    'and then every request sees it',
  );
});

t.test('a random-key flood from one address is budgeted once for the process', async (t) => {
  const cp = await useControlPlane(t, db.url);
  await seed();
  const sc = await startProcess(t, cp.grpc, { LIMITER_UNKNOWN_KEY_BUDGET: '3', LIMITER_TRUST_PROXY: 'true' });
  const unknown = async (): Promise<number> => metricSum(await scrape(cp.http), 'quota_lookup_subjects_total', { result: 'unknown' });
  const from = { 'x-forwarded-for': '203.0.113.7' };
  t.equal((await get(sc.port, keyName(1), from)).status, 200, 'an issued key never counts');
  const before = await unknown();
  const took = [0, 0];
  for (let i = 0; i < 16; i++) {
    const b = await burst(sc, `ww_random_${randomBytes(6).toString('hex')}`, 1, from);
    t.equal(b.answers[0]!.status, 429, `random key ${i}: the unknown-key 429`);
    b.took.forEach((n, w) => (took[w]! += n));
  }
  t.ok(
    took.every((n) => n > 0),
    `both workers took some (${took.join(' and ')})`,
  );
  t.equal((await unknown()) - before, 3, 'the control plane was asked about 3 of the 16: one budget for the process');
  const m = await scrape(sc.urls.admin!);
  t.equal(metricSum(m, 'ratelimit_quota_lookups_total', { result: 'budget' }), 13, 'the other 13 refused by the budget');
  const held = await burst(sc, keyName(1), 10, from);
  t.strictSame(
    held.answers.map((a) => a.status),
    Array(10).fill(200),
    'a key the process holds still works from that address, on either worker',
  );
  t.equal((await get(sc.port, 'ww_random_other', { 'x-forwarded-for': '198.51.100.9' })).status, 429);
  t.equal((await unknown()) - before, 4, 'another address still gets lookups');
});

t.test('a worker made to throw is replaced and serves held keys at their current versions', async (t) => {
  const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_ACK_TIMEOUT: '3s' });
  await seed();
  const admin = adminClient(t, cp.grpc);
  const key = `ww_replaced_${randomBytes(3).toString('hex')}`;
  const set = (burst: number, ackMs = ACKED_MS) =>
    put(admin, quota(subjectOf(key), { algorithm: Algorithm.TOKEN_BUCKET, rate: burst, burst, intervalMs: 1000 }), ackMs);
  await set(1000, 0);
  const sc = await startProcess(t, cp.grpc);
  const id = sidecarId(sc);
  await waitFor(() => sc.workingSet!.sync.status().connected, { what: 'watching' });
  const warm = await burst(sc, key, 20);
  t.ok(warm.answers.every((a) => a.limit === '1000') && warm.took.every((n) => n > 0), 'both workers hold the key at 1000');

  const old = sc.threadIds()[0];
  sc.post(0, { test: 'throw' });
  // Written while the worker dies and its replacement starts: whether the old thread is detached
  // first, or the replacement is attached first and must boot and apply it, the ack follows (a
  // replacement starts from the state, and acks wait only for live threads); ACKED_MS covers a
  // replacement's boot on a loaded machine.
  const during = await set(60);
  t.ok(during.ackedSidecarIds.includes(id), 'the Put made during the replacement was acked by the process');
  await waitFor(
    () => {
      const now = sc.threadIds()[0];
      return now !== undefined && now !== old;
    },
    { timeoutMs: 30_000, what: 'a new thread in slot 0' },
  );
  await waitFor(async () => (await fetch(`${sc.urls.admin!}/readyz`)).status === 200, { timeoutMs: 30_000, what: 'ready again' });
  const after = await burst(sc, key, 20);
  t.strictSame(
    after.answers.map((a) => a.limit),
    Array(20).fill('60'),
    'every request sees the current record, on the replacement too',
  );
  t.ok(
    after.took.every((n) => n > 0),
    `both workers took some (${after.took.join(' and ')})`,
  );

  const next = await set(70);
  t.strictSame(next.ackedSidecarIds, [id], 'a later Put is acked once both, the replacement included, applied it');
  const last = await burst(sc, key, 20);
  t.strictSame(
    last.answers.map((a) => a.limit),
    Array(20).fill('70'),
    'and seen by every request',
  );
});

t.test('one last-known-good file for the process; a restart starts warm from it with the control plane down', async (t) => {
  const cp = await useControlPlane(t, db.url);
  await seed();
  const file = join(dir, `restart-${randomBytes(4).toString('hex')}.json`);
  const first = await startProcess(t, cp.grpc, { LIMITER_SNAPSHOT_FILE: file });
  const key = keyName(20);
  t.equal((await get(first.port, key)).status, 200);
  await fileHolds(file, subjectOf(key));
  await first.close(1000);
  t.notOk(existsSync(`${file}.w0`) || existsSync(`${file}.w1`), 'no per-worker files');
  t.strictSame(
    readdirSync(dir).filter((f) => f.startsWith('restart-')),
    [file.slice(dir.length + 1)],
    'one file',
  );
  await cp.close();

  const second = await startProcess(t, cp.grpc, { LIMITER_SNAPSHOT_FILE: file });
  const warm = await burst(second, key, 20);
  t.strictSame(
    warm.answers.map((a) => `${a.status} ${a.limit}`),
    Array(20).fill('200 100'),
    'served from the file with the control plane down',
  );
  t.ok(
    warm.took.every((n) => n > 0),
    `by both workers (${warm.took.join(' and ')})`,
  );
  t.equal((await get(second.port, keyName(21))).status, 429, 'a key that was not in the file is refused');
});
