// @tier: pure
/**
 * `LIMITER_WORKERS=2` refuses what it cannot serve, with the error a person reads and the exit
 * code a supervisor does not retry (a ConfigError: shared/lifecycle.ts, exit 78), whether the main
 * thread refuses it (RLS, DPoP without Redis) or a worker thread does at its start (here a quota
 * file beside a control plane, refused by `startSidecar` in each thread).
 */
import t from 'tap';
import { loadConfig, ConfigError } from '../../shared/config.js';
import { createLogger } from '../../shared/log.js';
import { limiterConfig } from '../../limiter/config.js';
import { startWorkers, workerConfig } from '../../limiter/workers.js';
import { TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';
import { SERVICE_SECRET, writeQuotaFile } from './fixtures/sidecar.js';

const base: Record<string, string> = {
  HOST: '127.0.0.1',
  LOG_LEVEL: 'silent',
  LIMITER_WORKERS: '2',
  LIMITER_PORT: '0',
  LIMITER_ADMIN_PORT: '0',
  NOTIFIER_URL: 'http://127.0.0.1:9',
  IDENTITY_URL: 'http://127.0.0.1:9',
  SERVICE_SECRET,
  JWT_ISSUER: TEST_ISSUER,
  JWT_AUDIENCE: TEST_AUDIENCE,
  REVOCATION_REFRESH_INTERVAL: '0',
};
const log = createLogger({ service: 'limiter', level: 'silent' });

t.test('refused by the main thread: LIMITER_RLS_PORT, DPoP without Redis', async (t) => {
  for (const [extra, variable] of [
    [{ LIMITER_RLS_PORT: '0' }, 'LIMITER_WORKERS'],
    [{ LIMITER_PUBLIC_ORIGIN: 'https://api.example.com' }, 'LIMITER_WORKERS'],
  ] as const) {
    const err = await startWorkers(loadConfig(limiterConfig, { ...base, ...extra }), log, { execArgv: [] }).catch((e: unknown) => e);
    t.ok(err instanceof ConfigError, `${Object.keys(extra)[0]}: a ConfigError`);
    t.equal((err as ConfigError).variable, variable);
  }
});

t.test('refused by a worker thread at its start: still a ConfigError naming the variable', async (t) => {
  const file = await writeQuotaFile(t, []);
  const err = await startWorkers(
    loadConfig(limiterConfig, { ...base, LIMITER_QUOTA_FILE: file, LIMITER_CONTROL_PLANE_URL: '127.0.0.1:9' }),
    log,
    { execArgv: [] },
  ).catch((e: unknown) => e);
  t.ok(err instanceof ConfigError, `a ConfigError (${String(err)})`);
  t.equal((err as ConfigError).variable, 'LIMITER_QUOTA_FILE');
  t.match((err as Error).message, /^config: LIMITER_QUOTA_FILE cannot be used together with LIMITER_CONTROL_PLANE_URL/);
});

t.test("each worker's share of what the process bounds: the quota cache copy and the upstream connections", async (t) => {
  const config = loadConfig(limiterConfig, { ...base, LIMITER_WORKERS: '3', LIMITER_QUOTA_CACHE_MAX: '1000', UPSTREAM_CONNECTIONS: '128' });
  const w = workerConfig({ ...config, SIDECAR_ID: 'edge-1' }, { port: 4321 });
  t.equal(w.LIMITER_PORT, 4321);
  t.equal(w.LIMITER_QUOTA_CACHE_MAX, 333, "three workers' copies hold at most the process bound together");
  t.equal(w.UPSTREAM_CONNECTIONS, 42, 'three workers open at most the process cap together');
  // The stream, the sidecar id and the last-known-good file are the main thread's, one per process.
  t.equal(w.SIDECAR_ID, 'edge-1', 'no per-worker sidecar id');
  t.equal(w.LIMITER_SNAPSHOT_FILE, config.LIMITER_SNAPSHOT_FILE, 'no per-worker snapshot file');
  const tiny = workerConfig(loadConfig(limiterConfig, { ...base, LIMITER_WORKERS: '4', UPSTREAM_CONNECTIONS: '2' }), { port: 1 });
  t.equal(tiny.UPSTREAM_CONNECTIONS, 1, 'a cap below N still gives each worker one connection');
});
