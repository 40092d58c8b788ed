/**
 * The platform pieces the relay tests need, each in-process on a real database: identity (its
 * relay pointed at the sidecar or straight at the notifier), the notifier, the sandbox providers
 * and the sidecar; identity and the notifier share one database, as under `npm start`.
 */
import type pg from 'pg';
import { loadConfig } from '../../../shared/config.js';
import { startIdentity, type Identity, type IdentityDeps } from '../../../identity/app.js';
import { identityConfig } from '../../../identity/config.js';
import { startSandbox, type Sandbox } from '../../../sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { testLogger } from '../../harness/log.js';
import { testEnv, useService, type RunningService } from '../../harness/services.js';
import { waitFor } from '../../harness/wait.js';
import { FAST_ENV, SERVICE_SECRET } from '../../notifier/core/helpers.js';

export { SERVICE_SECRET };
export const ISSUER = 'https://identity.notify.test';
export const AUDIENCE = 'edge-api';
export const ADMIN_TOKEN = 'notify-test-identity-admin-token-0123456789';

/** A service caller vouched for by the sidecar (what the notifier tests send). */
export const SERVICE_HEADERS: Record<string, string> = {
  'x-subject': `key:${'b'.repeat(64)}`,
  'x-subject-role': 'service',
  'x-subject-secret': SERVICE_SECRET,
};

export async function useSandbox(t: TestContext): Promise<Sandbox> {
  const sandbox = await startSandbox();
  t.teardown(() => sandbox.close(1000));
  return sandbox;
}

/** The notifier on `db`, sending to the sandbox; `port` to choose it (0: any). */
export function useNotifier(t: TestContext, db: { url: string }, sandbox: Sandbox, port = 0): Promise<RunningService> {
  return useService(t, 'notifier', {
    ...FAST_ENV,
    DATABASE_URL: db.url,
    NOTIFIER_PORT: String(port),
    FCM_URL: sandbox.url,
    SMS_URL: sandbox.url,
    SMTP_URL: sandbox.smtpUrl,
    JWT_ISSUER: ISSUER,
    JWT_AUDIENCE: AUDIENCE,
  });
}

export interface RunningIdentity {
  identity: Identity;
  url: string;
}

/** identity on `db`, its relay sending to `notifyUrl`; fast relay timings unless `env` says otherwise. */
export async function useIdentity(
  t: TestContext,
  db: { url: string },
  notifyUrl: string,
  env: Record<string, string> = {},
  deps: IdentityDeps = {},
): Promise<RunningIdentity> {
  const config = loadConfig(
    identityConfig,
    testEnv({
      DATABASE_URL: db.url,
      JWT_ISSUER: ISSUER,
      JWT_AUDIENCE: AUDIENCE,
      IDENTITY_JWKS_URL: undefined,
      IDENTITY_ADMIN_TOKEN: ADMIN_TOKEN,
      SERVICE_SECRET,
      SHUTDOWN_GRACE: '1s',
      IDENTITY_PROJECTION_POLL_INTERVAL: '50ms',
      IDENTITY_NOTIFY_URL: notifyUrl,
      IDENTITY_NOTIFY_POLL_INTERVAL: '50ms',
      IDENTITY_NOTIFY_RETRY_MIN: '50ms',
      IDENTITY_NOTIFY_RETRY_MAX: '200ms',
      IDENTITY_NOTIFY_TIMEOUT: '2s',
      ...env,
    }),
  );
  const identity = await startIdentity(config, testLogger('identity'), deps);
  t.teardown(() => identity.close());
  return { identity, url: `http://127.0.0.1:${identity.port}` };
}

/** A JSON call; answers status and parsed body. */
export async function call(
  url: string,
  method: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown> | undefined; text: string }> {
  const res = await fetch(url, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** Signs up through identity's `POST /auth/signup`; returns the user id. */
export async function signup(identityUrl: string, email: string, password: string, name = 'Ada'): Promise<string> {
  const r = await call(`${identityUrl}/auth/signup`, 'POST', { email, password, name });
  if (r.status !== 201) throw new Error(`signup ${email}: ${r.status} ${r.text}`);
  return String(r.json?.user_id);
}

/** The notifier's stored profile of `userId` (read as a service), once `done` holds for it. */
export function waitProfile(
  notifierUrl: string,
  userId: string,
  done: (p: Record<string, unknown>) => boolean,
  what: string,
): Promise<Record<string, unknown>> {
  return waitFor(
    async () => {
      const r = await call(`${notifierUrl}/api/v1/users/${userId}/profile`, 'GET', undefined, SERVICE_HEADERS);
      return r.status === 200 && r.json && done(r.json) ? r.json : undefined;
    },
    { timeoutMs: 15_000, what },
  );
}

/** The e-mails the sandbox accepted for `to` whose subject matches `subject`. */
export function mails(sandbox: Sandbox, to: string, subject: RegExp): ReturnType<Sandbox['messages']> {
  return sandbox.messages({ channel: 'email', to }).filter((m) => subject.test(m.subject ?? ''));
}

/** The outbox rows of a user, oldest first. */
export async function outboxOf(pool: pg.Pool, userId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await pool.query(
    `SELECT id::text AS id, kind, payload, attempts, sent_at, parked_at, last_error FROM notification_outbox WHERE user_id = $1 ORDER BY id`,
    [userId],
  );
  return rows;
}
