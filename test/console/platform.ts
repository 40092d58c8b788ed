/**
 * The platform the console's tests run against, in-process on one fresh database, as `npm start`
 * runs it: identity (its admin token registers the console's OAuth client exactly as npm start
 * does, through console/registration.ts), the control plane and the notifier (each verifying the
 * operator's access tokens against identity's JWKS), the sandbox providers, and the console on
 * port 0 with its public URL naming that port. An operator account is signed up through identity's
 * own API and made admin with identity's promotion (what `npm run admin -- promote` runs).
 */
import { loadConfig } from '../../shared/config.js';
import { systemClock } from '../../shared/clock.js';
import { startConsole, type RunningConsole } from '../../console/app.js';
import { consoleConfig } from '../../console/config.js';
import { ensureConsoleClient } from '../../console/registration.js';
import { promoteToAdmin } from '../../identity/accounts/promote.js';
import type { Sandbox } from '../../sandbox/app.js';
import { useTestDatabase, type TestContext, type TestDatabase } from '../harness/db.js';
import { freePort } from '../harness/ports.js';
import { testLogger } from '../harness/log.js';
import { testEnv, useService } from '../harness/services.js';
import { ADMIN_TOKEN as IDENTITY_ADMIN_TOKEN, AUDIENCE, ISSUER, signup, useIdentity, useSandbox } from '../identity/notify/helpers.js';
import { FAST_ENV } from '../notifier/core/helpers.js';

/** The control plane's static admin token (the console never uses it; tests set up data with it). */
export const CP_ADMIN_TOKEN = 'console-test-control-plane-admin-token-0123';
export const OPERATOR = { email: 'ops@example.com', password: 'operator passphrase 42', name: 'Olive Operator' };
export const CUSTOMER = { email: 'carl@example.com', password: 'customer passphrase 42', name: 'Carl Customer' };

export interface Platform {
  db: TestDatabase;
  sandbox: Sandbox;
  identityUrl: string;
  notifierUrl: string;
  controlPlaneUrl: string;
  /** host:port of the control plane's gRPC (a sidecar's LIMITER_CONTROL_PLANE_URL). */
  controlPlaneGrpc: string;
  consoleUrl: string;
  console: RunningConsole;
  operatorId: string;
  customerId: string;
}

/** Everything started, torn down with `t`. */
/** `notifierEnv`: the notifier's own settings for this test (a ramp provider, an approval threshold, …). */
export async function startPlatform(
  t: TestContext,
  label: string,
  consoleEnv: Record<string, string> = {},
  notifierEnv: Record<string, string> = {},
): Promise<Platform> {
  const db = await useTestDatabase(t, label, { poolMax: 6 });
  const sandbox = await useSandbox(t);
  // identity's relay goes nowhere the test cares about: a closed port (it retries quietly).
  const { url: identityUrl } = await useIdentity(t, db, `http://127.0.0.1:${await freePort()}`, { IDENTITY_NOTIFY_RELAY: 'false' });
  const jwks = { IDENTITY_URL: identityUrl, JWKS_URL: `${identityUrl}/.well-known/jwks.json`, JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE };
  const grpcPort = await freePort();
  const cp = await useService(t, 'control-plane', {
    ...jwks,
    DATABASE_URL: db.url,
    ADMIN_TOKEN: CP_ADMIN_TOKEN,
    CONTROL_PLANE_GRPC_PORT: String(grpcPort),
    SHUTDOWN_GRACE: '1s',
  });
  const notifier = await useService(t, 'notifier', {
    ...FAST_ENV,
    ...jwks,
    DATABASE_URL: db.url,
    FCM_URL: sandbox.url,
    SMS_URL: sandbox.url,
    SMTP_URL: sandbox.smtpUrl,
    ...notifierEnv,
  });

  const operatorId = await signup(identityUrl, OPERATOR.email, OPERATOR.password, OPERATOR.name);
  const customerId = await signup(identityUrl, CUSTOMER.email, CUSTOMER.password, CUSTOMER.name);
  const promoted = await promoteToAdmin(db.pool, OPERATOR.email, { by: 'test:console', clock: systemClock });
  if (promoted.outcome !== 'promoted') throw new Error(`the operator was not promoted: ${promoted.outcome}`);

  // The console's port is chosen first: its public URL (and so its redirect URI) names it.
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const { clientSecret } = await ensureConsoleClient({
    identityUrl,
    adminToken: IDENTITY_ADMIN_TOKEN,
    clientId: 'console',
    redirectUri: `${publicUrl}/auth/callback`,
  });
  const config = loadConfig(
    consoleConfig,
    testEnv({
      CONSOLE_PORT: String(port),
      CONSOLE_PUBLIC_URL: publicUrl,
      CONSOLE_CLIENT_ID: 'console',
      CONSOLE_CLIENT_SECRET: clientSecret,
      CONSOLE_CONTROL_PLANE_URL: cp.url,
      IDENTITY_URL: identityUrl,
      NOTIFIER_URL: notifier.url,
      JWT_ISSUER: ISSUER,
      SHUTDOWN_GRACE: '1s',
      ...consoleEnv,
    }),
  );
  const running = await startConsole(config, testLogger('console'));
  t.teardown(() => running.close());
  return {
    db,
    sandbox,
    identityUrl,
    notifierUrl: notifier.url,
    controlPlaneUrl: cp.url,
    controlPlaneGrpc: `127.0.0.1:${grpcPort}`,
    consoleUrl: publicUrl,
    console: running,
    operatorId,
    customerId,
  };
}
