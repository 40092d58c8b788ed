/**
 * Starts any service in-process on port 0 for a test, with its config built the way main.ts builds
 * it (from the environment, here with overrides), and registers its shutdown at once.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../shared/config.js';
import type { Sidecar, SidecarDeps } from '../../limiter/sidecar.js';
import type { TestContext } from './db.js';
import { testLogger } from './log.js';

export interface RunningService {
  port: number;
  url: string;
  close(): Promise<void>;
}

type Env = Record<string, string | undefined>;

const PORT_ZERO: Env = {
  LIMITER_PORT: '0',
  LIMITER_ADMIN_PORT: '0',
  CONTROL_PLANE_HTTP_PORT: '0',
  CONTROL_PLANE_GRPC_PORT: '0',
  NOTIFIER_PORT: '0',
  IDENTITY_PORT: '0',
};

/** The environment a service sees in a test: the process's, ports 0, then the overrides. */
export function testEnv(overrides: Env = {}): Env {
  return { ...process.env, ...PORT_ZERO, ...overrides };
}

/** Starts the control plane, notifier or identity service against `DATABASE_URL` (pass a test database's url). */
export async function useService(t: TestContext, name: 'control-plane' | 'notifier' | 'identity', overrides: Env): Promise<RunningService> {
  const log = testLogger(name);
  const env = testEnv(overrides);
  // Each service's code is loaded when a test starts it, not by every file that imports this
  // harness: loading all four took each test process about 1.1 s of CPU, one about 0.5 s.
  const started = await (async () => {
    if (name === 'control-plane') {
      const [{ startControlPlane }, { controlPlaneConfig }] = await Promise.all([
        import('../../limiter/control-plane/app.js'),
        import('../../limiter/control-plane/config.js'),
      ]);
      return startControlPlane(loadConfig(controlPlaneConfig, env), log);
    }
    if (name === 'notifier') {
      const [{ startNotifier }, { notifierConfig }] = await Promise.all([
        import('../../notifier/app.js'),
        import('../../notifier/config.js'),
      ]);
      return startNotifier(loadConfig(notifierConfig, env), log);
    }
    const [{ startIdentity }, { identityConfig }] = await Promise.all([
      import('../../identity/app.js'),
      import('../../identity/config.js'),
    ]);
    return startIdentity(loadConfig(identityConfig, env), log);
  })();
  t.teardown(() => started.close());
  return { port: started.port, url: `http://127.0.0.1:${started.port}`, close: () => started.close() };
}

/** Starts a sidecar; `overrides` are environment variables (LIMITER_ROUTES, LIMITER_QUOTA_FILE, …). */
export async function useSidecar(
  t: TestContext,
  overrides: Env,
  deps: SidecarDeps = {},
): Promise<Sidecar & { url: string; adminUrl: string }> {
  // Each sidecar keeps its last-known-good snapshot in its own file.
  const snapshotFile = join(mkdtempSync(join(tmpdir(), 'sidecar-')), 'snapshot.json');
  // In-process counters unless the test asks for Redis (the runner's REDIS_URL is in the
  // environment, and sidecars of different tests must not share buckets); a Redis the test does
  // ask for gets a key prefix of its own.
  const env = testEnv({
    LIMITER_SNAPSHOT_FILE: snapshotFile,
    REDIS_URL: undefined,
    REDIS_CLUSTER_NODES: undefined,
    LIMITER_REDIS_PREFIX: `t${randomBytes(6).toString('hex')}`,
    ...overrides,
  });
  const [{ startSidecar }, { limiterConfig }] = await Promise.all([import('../../limiter/sidecar.js'), import('../../limiter/config.js')]);
  const s = await startSidecar(loadConfig(limiterConfig, env), testLogger('limiter'), deps);
  t.teardown(() => s.close(1000));
  return { ...s, url: `http://127.0.0.1:${s.port}`, adminUrl: `http://127.0.0.1:${s.adminPort}` };
}
