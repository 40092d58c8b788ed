/**
 * The identity service in-process with its own keys (JWT_ISSUER = its own URL, so its resource
 * endpoints verify the tokens /auth/login signs), a clock the test moves, every log line and
 * response body kept (to prove no card number or secret leaves the service), and helpers to sign
 * users up and in through the real endpoints.
 */
import { Agent, fetch } from 'undici';
import type pg from 'pg';
import { loadConfig } from '../../../shared/config.js';
import { startIdentity, type Identity } from '../../../identity/app.js';
import { identityConfig } from '../../../identity/config.js';
import { useTestDatabase, type TestContext } from '../../harness/db.js';
import { freePort } from '../../harness/ports.js';
import { testEnv } from '../../harness/services.js';
import { captureLogger } from '../events/helpers.js';
import { OffsetClock } from '../oauth/helpers.js';

export const AUDIENCE = 'edge-api';

export interface Reply {
  status: number;
  headers: Headers;
  json: Record<string, unknown> | undefined;
  text: string;
}

export interface TestIdentity {
  base: string;
  issuer: string;
  identity: Identity;
  pool: pg.Pool;
  clock: OffsetClock;
  /** Every log line and every response body so far. */
  lines: string[];
  bodies: string[];
  call(method: string, path: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<Reply>;
  /** Signs up (201 expected) and returns the user id; `role` other than customer is set in `credentials`. */
  signup(email: string, password: string, role?: 'customer' | 'support' | 'admin'): Promise<string>;
  /** Signs in and returns the access token. */
  login(email: string, password: string): Promise<string>;
}

export async function startTestIdentity(t: TestContext, label: string, env: Record<string, string> = {}): Promise<TestIdentity> {
  const db = await useTestDatabase(t, label, { poolMax: 4 });
  const { log, lines } = captureLogger();
  const clock = new OffsetClock();
  let identity: Identity | undefined;
  let issuer = '';
  // The issuer URL names the port, so it is chosen first; another process may take it meanwhile.
  for (let attempt = 0; attempt < 5 && !identity; attempt++) {
    const port = await freePort();
    issuer = `http://127.0.0.1:${port}`;
    const config = loadConfig(
      identityConfig,
      testEnv({
        DATABASE_URL: db.url,
        HOST: '127.0.0.1',
        IDENTITY_PORT: String(port),
        JWT_ISSUER: issuer,
        JWT_AUDIENCE: AUDIENCE,
        IDENTITY_JWKS_URL: undefined,
        IDENTITY_PROJECTION_POLL_INTERVAL: '50ms',
        SHUTDOWN_GRACE: '1s',
        ...env,
      }),
    );
    try {
      identity = await startIdentity(config, log, { clock });
    } catch (err) {
      if (!String((err as Error).message).includes('EADDRINUSE') && (err as { code?: string }).code !== 'EADDRINUSE') throw err;
    }
  }
  if (!identity) throw new Error('could not listen on a free port');
  const started = identity;
  t.teardown(() => started.close());
  const agent = new Agent();
  t.teardown(() => agent.close());
  const base = issuer;
  const bodies: string[] = [];

  const call: TestIdentity['call'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(base + path, { method, headers, body, dispatcher: agent });
    const text = await res.text();
    bodies.push(text);
    let json: Record<string, unknown> | undefined;
    try {
      json = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers as unknown as Headers, json, text };
  };

  return {
    base,
    issuer,
    identity: started,
    pool: db.pool,
    clock,
    lines,
    bodies,
    call,
    async signup(email, password, role = 'customer') {
      const r = await call('POST', '/auth/signup', { body: { email, password, name: email.split('@')[0] } });
      if (r.status !== 201) throw new Error(`signup ${email}: ${r.status} ${r.text}`);
      const userId = String(r.json?.user_id);
      if (role !== 'customer') await db.pool.query('UPDATE credentials SET role = $2 WHERE user_id = $1', [userId, role]);
      return userId;
    },
    async login(email, password) {
      const r = await call('POST', '/auth/login', { body: { email, password } });
      if (r.status !== 200) throw new Error(`login ${email}: ${r.status} ${r.text}`);
      return String(r.json?.access_token);
    },
  };
}
