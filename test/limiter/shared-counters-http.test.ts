// @tier: pure
/**
 * Two whole sidecars in two worker threads of one process, listening on the same data port
 * (SO_REUSEPORT: the kernel spreads the connections) and deciding on one set of shared counters
 * (limiter/admission/shared-counters.ts): through real HTTP, a connection per request, many at
 * once, each quota admits exactly its limit, whichever thread took each connection, for every
 * algorithm. Both threads must have served (their own /metrics say so), else the test proves
 * nothing. Time is a `SharedClock` that stands still.
 *
 * Not the `LIMITER_WORKERS` supervisor (limiter/workers.ts, tested in workers.test.ts): each thread
 * here is a complete sidecar with its own admin port and quota cache, as the test's scaffolding.
 */
import t from 'tap';
import { request, Agent } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { SharedClock } from '../../shared/clock.js';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { createSharedCounters } from '../../limiter/admission/shared-counters.js';
import { ALGORITHMS } from '../../limiter/admission/limit.js';
import { generateTestKey, jwksOf, TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';
import { startRawUpstream } from './fixtures/raw-upstream.js';
import { keySubject, metricSum, newApiKey, parseMetrics, SERVICE_SECRET, writeQuotaFile, type QuotaJson } from './fixtures/sidecar.js';
import type { SidecarWorkerInit } from './fixtures/sidecar-worker.js';

const WORKER = join(PROJECT_ROOT, 'dist/test/limiter/fixtures/sidecar-worker.js');
const LIMIT = 25;
const REQUESTS = 60;

/** A port free a moment ago (bound to 0 by node:net, then closed). */
function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => res(port));
    });
  });
}

/** One request on a connection of its own; resolves with the status. */
function get(port: number, path: string, headers: Record<string, string>): Promise<number> {
  return new Promise((res, rej) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent: new Agent({ keepAlive: false }) }, (r) => {
      r.resume();
      r.on('end', () => res(r.statusCode ?? 0));
    });
    req.on('error', rej);
    req.end();
  });
}

async function scrape(port: number): Promise<Map<string, number>> {
  const text = await new Promise<string>((res, rej) => {
    // No keep-alive: a connection left idle in the global agent kept its worker thread (uWS still
    // holding the connection after the sidecar closed) from exiting for the agent's 5 s.
    request({ host: '127.0.0.1', port, path: '/metrics', agent: new Agent({ keepAlive: false }) }, (r) => {
      let s = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (s += c));
      r.on('end', () => res(s));
    })
      .on('error', rej)
      .end();
  });
  return parseMetrics(text);
}

t.test('two sidecar threads on one port and one set of shared counters admit exactly the limit', async (t) => {
  const upstream = await startRawUpstream(t);
  const keys = ALGORITHMS.map((algorithm) => ({ algorithm, raw: newApiKey(algorithm.slice(0, 4)) }));
  const quotas: QuotaJson[] = keys.map(({ algorithm, raw }) => ({
    subject_id: keySubject(raw),
    algorithm,
    rate: algorithm.endsWith('window') ? LIMIT : 1,
    burst: LIMIT,
    interval_ms: 3_600_000,
  }));
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    LIMITER_PORT: '0',
    LIMITER_ADMIN_PORT: '0',
    NOTIFIER_URL: upstream.url,
    IDENTITY_URL: upstream.url,
    LIMITER_ROUTES: `/v1=${upstream.url}`,
    SERVICE_SECRET,
    JWT_ISSUER: TEST_ISSUER,
    JWT_AUDIENCE: TEST_AUDIENCE,
    LIMITER_DECISION_SAMPLE_RATE: '0',
    LIMITER_QUOTA_FILE: await writeQuotaFile(t, quotas),
    LIMITER_COUNTER_MAX_KEYS: '10000',
  };
  const shared = createSharedCounters({ maxKeys: 10_000 });
  const clock = new SharedClock(Math.floor(Date.now() / 1000) * 1000);
  const jwks = jwksOf(await generateTestKey('ES256'));

  const workers: Worker[] = [];
  const start = async (port: number): Promise<{ port: number; adminPort: number }> => {
    // Plain JavaScript from dist/: none of the test process's preloads (tap's TypeScript loader
    // among them, whose start cost each thread seconds of CPU).
    const w = new Worker(WORKER, {
      execArgv: ['--enable-source-maps'],
      workerData: { env: { ...env, LIMITER_PORT: String(port) }, shared, clock: clock.buffer, jwks } satisfies SidecarWorkerInit,
    });
    workers.push(w);
    return new Promise((res, rej) => {
      w.once('message', res);
      w.once('error', rej);
    });
  };
  t.teardown(async () => {
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((res) => {
            w.once('exit', () => res());
            w.postMessage('close');
          }),
      ),
    );
  });
  // An explicit port: uSockets sets SO_REUSEPORT only when asked for a port other than 0, so a
  // socket on an ephemeral port cannot be shared (shared/uws.ts `listen`).
  const a = await start(await freePort());
  const b = await start(a.port);
  t.equal(b.port, a.port, 'the second thread listens on the same data port');

  for (const { algorithm, raw } of keys) {
    const statuses: number[] = [];
    for (let i = 0; i < REQUESTS; i += 20) {
      const batch = Array.from({ length: Math.min(20, REQUESTS - i) }, () => get(a.port, '/v1/things', { 'x-api-key': raw }));
      statuses.push(...(await Promise.all(batch)));
    }
    const admitted = statuses.filter((s) => s === 200).length;
    const refused = statuses.filter((s) => s === 429).length;
    t.equal(admitted, LIMIT, `${algorithm}: exactly ${LIMIT} of ${REQUESTS} admitted across both threads`);
    t.equal(refused, REQUESTS - LIMIT, `${algorithm}: the rest refused with 429`);
  }
  t.equal(upstream.requests.length, LIMIT * keys.length, 'the upstream saw exactly the admitted requests');

  const served = await Promise.all([a.adminPort, b.adminPort].map(async (p) => metricSum(await scrape(p), 'ratelimit_decisions')));
  t.ok(
    served.every((n) => n > 0),
    `both threads decided (${served.join(' and ')} decisions): the kernel spread the connections`,
  );
  t.equal(
    served.reduce((x, y) => x + y, 0),
    REQUESTS * keys.length,
    'every request decided once',
  );
});
