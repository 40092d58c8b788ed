/**
 * The identity service in-process on port 0 for the orders API tests, with bearer tokens signed by
 * a test key served as the JWKS (no signup needed), every response body kept, and the database's
 * events at hand.
 */
import { Agent, fetch } from 'undici';
import type pg from 'pg';
import { loadConfig } from '../../../shared/config.js';
import { startIdentity, type Identity } from '../../../identity/app.js';
import { identityConfig } from '../../../identity/config.js';
import { useTestDatabase, type TestContext } from '../../harness/db.js';
import { testEnv } from '../../harness/services.js';
import { accessClaims, generateTestKey, jwksOf, sign, startJwksServer, TEST_AUDIENCE, TEST_ISSUER } from '../../harness/tokens.js';
import { captureLogger } from '../events/helpers.js';

export interface Answer {
  status: number;
  headers: Headers;
  json: Record<string, unknown> | undefined;
  text: string;
}

export interface OrdersApi {
  identity: Identity;
  pool: pg.Pool;
  /** Every log line so far. */
  lines: string[];
  /** A bearer token for `sub` with `role`. */
  token(sub: string, role: 'customer' | 'support' | 'admin'): string;
  call(method: string, path: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<Answer>;
  /** The event types of an order's stream, in order. */
  events(orderId: string): Promise<string[]>;
}

export async function startOrdersApi(t: TestContext, label: string): Promise<OrdersApi> {
  const db = await useTestDatabase(t, label, { poolMax: 4 });
  const key = await generateTestKey('ES256');
  const jwks = await startJwksServer(jwksOf(key));
  t.teardown(() => jwks.close());
  const { log, lines } = captureLogger();
  const identity = await startIdentity(
    loadConfig(
      identityConfig,
      testEnv({
        DATABASE_URL: db.url,
        IDENTITY_JWKS_URL: jwks.url,
        JWT_ISSUER: TEST_ISSUER,
        JWT_AUDIENCE: TEST_AUDIENCE,
        IDENTITY_PROJECTION_POLL_INTERVAL: '50ms',
        SHUTDOWN_GRACE: '1s',
      }),
    ),
    log,
  );
  t.teardown(() => identity.close());
  const base = `http://127.0.0.1:${identity.port}`;
  const agent = new Agent();
  t.teardown(() => agent.close());
  return {
    identity,
    pool: db.pool,
    lines,
    token: (sub, role) => sign(accessClaims({ nowMs: Date.now() }, { sub, user_id: sub, role }), { key }),
    async call(method, path, opts = {}) {
      const headers: Record<string, string> = { ...opts.headers };
      if (opts.token) headers.authorization = `Bearer ${opts.token}`;
      const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
      if (body !== undefined) headers['content-type'] ??= 'application/json';
      const res = await fetch(base + path, { method, headers, body, dispatcher: agent });
      const text = await res.text();
      return { status: res.status, headers: res.headers, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined, text };
    },
    async events(orderId) {
      const { rows } = await db.pool.query<{ event_type: string }>(
        'SELECT event_type FROM events WHERE stream_id = $1 ORDER BY stream_version',
        [`order-${orderId}`],
      );
      return rows.map((r) => r.event_type);
    },
  };
}
