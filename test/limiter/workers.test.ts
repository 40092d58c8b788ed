// @tier: pure
/**
 * `LIMITER_WORKERS=2` (limiter/workers.ts): one sidecar process, two worker threads on one data
 * port over one set of shared in-process counters, through real HTTP, a connection per request,
 * many at once.
 *
 * - each algorithm admits exactly its limit across both workers, and quotas whose bursts and route
 *   costs fast-check draws are exact (time stands still, a `SharedClock`: a request is admitted
 *   exactly when its cost fits what the others left, whatever the interleaving, so the admitted
 *   costs sum to at most the burst and every refused request costs more than what is left);
 * - both workers served (`ratelimit_worker_requests{worker}`) and /metrics reports the process
 *   (the decisions summed over both equal the requests sent);
 * - a worker that throws (a test-only module, fixtures/worker-throw.ts, loaded through
 *   `startWorkers`' `preload`) is replaced in its slot and the counters keep their values;
 * - a worker whose event loop is blocked (the same module, until the test releases it) does not
 *   hold up /metrics, even a flood of scrapes, and /readyz is not ready meanwhile;
 * - SIGTERM to a real `node dist/limiter/main.js` drains both workers: requests in flight on each
 *   are answered, the data port stops taking connections, the process exits 0.
 */
import t from 'tap';
import fc from 'fast-check';
import { request, Agent, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SharedClock } from '../../shared/clock.js';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/log.js';
import { limiterConfig } from '../../limiter/config.js';
import { startWorkers } from '../../limiter/workers.js';
import { ALGORITHMS, type Algorithm } from '../../limiter/admission/limit.js';
import { generateTestKey, jwksOf, TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';
import { waitFor } from '../harness/wait.js';
import { holdWorker } from './fixtures/worker-hold.js';
import { freePort } from '../harness/ports.js';
import { startRawUpstream } from './fixtures/raw-upstream.js';
import { keySubject, metricSum, newApiKey, parseMetrics, SERVICE_SECRET, writeQuotaFile, type QuotaJson } from './fixtures/sidecar.js';

const LIMIT = 25;
const REQUESTS = 60;
/** Connections open at once. */
const WAVE = 20;
const COSTS = [1, 2, 3] as const;

/** One request on a connection of its own; resolves with the status. */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((res, rej) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent: new Agent({ keepAlive: false }) }, (r) => {
      r.resume();
      r.on('end', () => res(r.statusCode ?? 0));
    });
    req.on('error', rej);
    req.end();
  });
}

function text(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((res, rej) => {
    request({ host: '127.0.0.1', port, path }, (r) => {
      let s = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (s += c));
      r.on('end', () => res({ status: r.statusCode ?? 0, body: s }));
    })
      .on('error', rej)
      .end();
  });
}

const scrape = async (adminPort: number): Promise<Map<string, number>> => parseMetrics((await text(adminPort, '/metrics')).body);

/** `paths` sent WAVE connections at a time; the statuses in order. */
async function send(port: number, key: string, paths: readonly string[]): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < paths.length; i += WAVE)
    out.push(...(await Promise.all(paths.slice(i, i + WAVE).map((p) => get(port, p, { 'x-api-key': key })))));
  return out;
}

interface Case {
  algorithm: Algorithm;
  burst: number;
  costs: number[];
}
// Drawn once, before the sidecar starts (its quota file holds a key per case); the seed is printed.
const seed = Date.now() % 1_000_000;
const cases: Case[] = fc.sample(
  fc.record({
    algorithm: fc.constantFrom(...ALGORITHMS),
    burst: fc.integer({ min: 1, max: 30 }),
    costs: fc.array(fc.constantFrom(...COSTS), { minLength: 1, maxLength: 50 }),
  }),
  { seed, numRuns: 8 },
);

const upstream = await startRawUpstream(t);
const exactKeys = ALGORITHMS.map((algorithm) => ({ algorithm, raw: newApiKey(algorithm.slice(0, 4)) }));
const caseKeys = cases.map(() => newApiKey('case'));
const diesKey = newApiKey('dies');
const quota = (raw: string, algorithm: Algorithm, burst: number, extra: Partial<QuotaJson> = {}): QuotaJson => ({
  subject_id: keySubject(raw),
  algorithm,
  rate: algorithm.endsWith('window') ? burst : 1,
  burst,
  interval_ms: 3_600_000,
  ...extra,
});
const quotas: QuotaJson[] = [
  ...exactKeys.map(({ algorithm, raw }) => quota(raw, algorithm, LIMIT)),
  // /v1/cN costs N: route rules without a bucket of their own share the quota's.
  ...cases.map((c, i) => quota(caseKeys[i]!, c.algorithm, c.burst, { routes: COSTS.map((n) => ({ path_prefix: `/v1/c${n}`, cost: n })) })),
  quota(diesKey, 'token_bucket', 20),
];
const env: Record<string, string> = {
  HOST: '127.0.0.1',
  LOG_LEVEL: 'warn',
  LIMITER_WORKERS: '2',
  LIMITER_PORT: '0',
  LIMITER_ADMIN_PORT: '0',
  NOTIFIER_URL: upstream.url,
  IDENTITY_URL: upstream.url,
  LIMITER_ROUTES: `/v1=${upstream.url}`,
  SERVICE_SECRET,
  JWT_ISSUER: TEST_ISSUER,
  JWT_AUDIENCE: TEST_AUDIENCE,
  REVOCATION_REFRESH_INTERVAL: '0',
  LIMITER_DECISION_SAMPLE_RATE: '0',
  LIMITER_QUOTA_FILE: await writeQuotaFile(t, quotas),
  LIMITER_COUNTER_MAX_KEYS: '10000',
};
const logs: string[] = [];
const log = createLogger({ service: 'limiter', level: 'info', destination: { write: (s: string) => void logs.push(s) } });
const clock = new SharedClock(Math.floor(Date.now() / 1000) * 1000);
const sc = await startWorkers(loadConfig(limiterConfig, env), log, {
  clock,
  execArgv: [],
  jwks: jwksOf(await generateTestKey('ES256')),
  preload: pathToFileURL(join(PROJECT_ROOT, 'dist/test/limiter/fixtures/worker-throw.js')).href,
});
t.teardown(() => sc.close(2_000));
let sent = 0;

t.test('each algorithm admits exactly its limit across two workers; both serve; /metrics sums them', async (t) => {
  for (const { algorithm, raw } of exactKeys) {
    const statuses = await send(
      sc.port,
      raw,
      Array.from({ length: REQUESTS }, (_, i) => `/v1/things/${i}`),
    );
    sent += REQUESTS;
    t.equal(statuses.filter((s) => s === 200).length, LIMIT, `${algorithm}: exactly ${LIMIT} of ${REQUESTS} admitted`);
    t.equal(statuses.filter((s) => s === 429).length, REQUESTS - LIMIT, `${algorithm}: the rest refused with 429`);
  }
  t.equal(upstream.requests.length, LIMIT * exactKeys.length, 'the upstream saw exactly the admitted requests');
  const m = await scrape(sc.adminPort);
  const perWorker = [0, 1].map((w) => metricSum(m, 'ratelimit_worker_requests', { worker: String(w) }));
  t.ok(
    perWorker.every((n) => n > 0),
    `both workers served (${perWorker.join(' and ')} requests): the kernel spread the connections`,
  );
  t.equal(perWorker[0]! + perWorker[1]!, sent, 'ratelimit_worker_requests: every request counted once, by the worker that took it');
  t.equal(metricSum(m, 'ratelimit_decisions'), sent, "ratelimit_decisions is the process's: both workers' decisions summed");
  t.equal(metricSum(m, 'ratelimit_decisions', { result: 'allow' }), LIMIT * exactKeys.length, 'allowed, summed');
  t.ok(metricSum(m, 'process_cpu_user_seconds_total') > 0, "the process's default metrics come from the main thread");
});

t.test(`bursts and route costs drawn by fast-check (seed ${seed}) are exact across two workers`, async (t) => {
  for (const [i, c] of cases.entries()) {
    const statuses = await send(
      sc.port,
      caseKeys[i]!,
      c.costs.map((n, j) => `/v1/c${n}/${j}`),
    );
    sent += c.costs.length;
    const admitted = c.costs.filter((_, j) => statuses[j] === 200).reduce((a, b) => a + b, 0);
    const refused = c.costs.filter((_, j) => statuses[j] === 429);
    const left = c.burst - admitted;
    const what = `${c.algorithm} burst ${c.burst}, costs ${c.costs.join(',')}: admitted cost ${admitted}`;
    t.ok(
      statuses.every((s) => s === 200 || s === 429),
      `${what}: every answer 200 or 429`,
    );
    t.ok(left >= 0, `${what}: never more than the burst`);
    t.ok(
      refused.every((n) => n > left),
      `${what}: every refused request (${refused.join(',')}) cost more than the ${left} left`,
    );
  }
});

t.test('a worker that throws is replaced in its slot; the counters keep their values', async (t) => {
  const first = await send(
    sc.port,
    diesKey,
    Array.from({ length: 10 }, (_, i) => `/v1/dies/${i}`),
  );
  sent += 10;
  t.equal(first.filter((s) => s === 200).length, 10, '10 of the 20 spent');
  const before = await scrape(sc.adminPort);
  const old = sc.threadIds()[0];
  sc.post(0, { test: 'throw' });
  const replacement = await waitFor(
    () => {
      const id = sc.threadIds()[0];
      return id !== undefined && id !== old && id;
    },
    { timeoutMs: 30_000, what: 'a new thread in slot 0' },
  );
  await waitFor(async () => (await text(sc.adminPort, '/readyz')).status === 200, { timeoutMs: 30_000, what: 'ready again' });
  t.not(replacement, old, `slot 0 is served by a new thread (${old} → ${replacement})`);
  t.ok(
    logs.some((l) => l.includes('worker thread exited: starting a replacement')),
    'the main thread logged the exit',
  );
  // Many connections, so both the replacement and the other worker take some.
  const after = await send(
    sc.port,
    diesKey,
    Array.from({ length: 30 }, (_, i) => `/v1/dies/after/${i}`),
  );
  sent += 30;
  t.equal(after.filter((s) => s === 200).length, 10, 'exactly the 10 left are admitted: nothing of the counters was lost');
  const m = await scrape(sc.adminPort);
  for (const name of ['ratelimit_decisions', 'ratelimit_worker_requests'])
    t.ok(metricSum(m, name) >= metricSum(before, name), `${name} did not go down when the thread died`);
  t.ok(
    metricSum(m, 'ratelimit_worker_requests', { worker: '0' }) >= metricSum(before, 'ratelimit_worker_requests', { worker: '0' }),
    'nor did slot 0',
  );
});

t.test('a worker whose event loop is blocked: /metrics still answers, a flood of scrapes too, and /readyz is not ready', async (t) => {
  // Worker 1's event loop held in Atomics.wait (fixtures/worker-throw.ts `hold`) until this test has
  // seen what it needs and opens the gate: the scrapes cannot be answered by waiting the block out.
  const held = await holdWorker(t, sc, 1);
  // The thread is blocked now: wait until /readyz sees it not answering.
  const notReady = await waitFor(
    async () => {
      const r = await text(sc.adminPort, '/readyz');
      return r.status === 503 && r;
    },
    { timeoutMs: 20_000, what: '/readyz not ready while worker 1 is blocked' },
  );
  t.match(notReady.body, /worker 1/, `/readyz names the worker (${notReady.body})`);
  const scrapes = await Promise.all(Array.from({ length: 20 }, () => text(sc.adminPort, '/metrics')));
  t.same(
    scrapes.map((s) => s.status),
    Array(20).fill(200),
    '20 scrapes at once are all answered while a worker does not answer (its last figures stand in)',
  );
  t.ok(
    scrapes.every((s) => metricSum(parseMetrics(s.body), 'ratelimit_worker_requests', { worker: '1' }) > 0),
    'the blocked worker is still reported',
  );
  // stillHeld: the thread is inside Atomics.wait (the fixture marks it when it leaves),
  // and only release() ends that wait before 120 s: all 20 answers came while it was blocked.
  t.ok(held.stillHeld(), 'the scrapes did not wait for the blocked thread');
  held.release();
  await waitFor(async () => (await text(sc.adminPort, '/readyz')).status === 200, { timeoutMs: 30_000, what: 'ready again' });
});

t.test('SIGTERM drains both workers: requests in flight on each are answered, then the process exits 0', async (t) => {
  // An upstream that holds every request until told to answer.
  const held: ServerResponse[] = [];
  const hold = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    held.push(res);
  });
  await new Promise<void>((r) => hold.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => hold.close(() => r())));
  const holdUrl = `http://127.0.0.1:${(hold.address() as AddressInfo).port}`;
  const key = newApiKey('drain');
  const port = await freePort();
  const adminPort = await freePort();
  const child = spawn(PLAIN_NODE, plainNodeArgs([join(PROJECT_ROOT, 'dist/limiter/main.js')]), {
    env: {
      ...process.env,
      ...env,
      LOG_LEVEL: 'info',
      LIMITER_PORT: String(port),
      LIMITER_ADMIN_PORT: String(adminPort),
      LIMITER_ROUTES: `/v1=${holdUrl}`,
      LIMITER_QUOTA_FILE: await writeQuotaFile(t, [quota(key, 'token_bucket', 1000)]),
      SHUTDOWN_GRACE: '20s',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await waitFor(async () => (await text(adminPort, '/readyz')).status === 200, { timeoutMs: 60_000, what: 'the sidecar ready' });

  const IN_FLIGHT = 16;
  const answers = Array.from({ length: IN_FLIGHT }, (_, i) => get(port, `/v1/held/${i}`, { 'x-api-key': key }));
  await waitFor(() => held.length === IN_FLIGHT, { timeoutMs: 20_000, what: `${IN_FLIGHT} requests held upstream` });
  const m = await scrape(adminPort);
  const perWorker = [0, 1].map((w) => metricSum(m, 'ratelimit_worker_requests', { worker: String(w) }));
  t.ok(
    perWorker.every((n) => n > 0),
    `both workers have requests in flight (${perWorker.join(' and ')})`,
  );

  child.kill('SIGTERM');
  // Both listen sockets close: a new connection is refused (not queued) once the last one has.
  await waitFor(
    () =>
      new Promise<boolean>((res) => {
        const s = connect(port, '127.0.0.1');
        s.once('connect', () => {
          s.destroy();
          res(false);
        });
        s.once('error', () => res(true));
      }),
    { timeoutMs: 20_000, what: 'the data port closed' },
  );
  t.equal(child.exitCode, null, 'the process is still up while requests are in flight');
  for (const r of held) r.end('done');
  const statuses = await Promise.all(answers);
  t.same(statuses, Array(IN_FLIGHT).fill(200), 'every request in flight was answered 200');
  t.equal(await exited, 0, `the process exited 0 once both workers drained${(await exited) === 0 ? '' : `: ${out.slice(-2000)}`}`);
});
