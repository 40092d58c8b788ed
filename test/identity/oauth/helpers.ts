/**
 * Helpers for the authorization-server tests: the OAuth endpoints on a real uWS server (port
 * chosen first, because the issuer URL must name it) against a fresh, migrated test database, a
 * clock the test can move, a logger whose lines are kept (to prove no token or secret is ever
 * logged), and a "browser" that signs in through the real sign-in page.
 */
import { Writable } from 'node:stream';
import type pg from 'pg';
import { loadConfig } from '../../../shared/config.js';
import { createLogger, type Logger } from '../../../shared/log.js';
import { createRegistry } from '../../../shared/metrics.js';
import { migrate } from '../../../shared/migrate.js';
import { migrationsDir } from '../../../shared/paths.js';
import { startHttpService, type HttpService } from '../../../shared/service.js';
import { validateRegistration } from '../../../identity/clients/client.js';
import { registerClient } from '../../../identity/clients/client-store.js';
import {
  oauthConfig,
  oauthSettings,
  createOAuthRuntime,
  registerOAuthRoutes,
  setCredentials,
  startOAuth,
  type OAuthDeps,
  type OAuthRuntime,
  type RunningOAuth,
  type SecurityAlert,
} from '../../../identity/oauth/index.js';
import { createTestDatabase, type TestContext, type TestDatabase } from '../../harness/db.js';
import { freePort } from '../../harness/ports.js';

export const ADMIN_TOKEN = 'test-identity-admin-token-0123456789abcdef';

/** The system clock plus an offset the test moves forward (tokens stay valid for real clients). */
export class OffsetClock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}

export interface OAuthServer {
  issuer: string;
  db: TestDatabase;
  pool: pg.Pool;
  clock: OffsetClock;
  deps: OAuthDeps;
  running: RunningOAuth;
  http: HttpService;
  alerts: SecurityAlert[];
  /** Every log line written so far. */
  logText(): string;
  /** Registers a public client with these redirect URIs (and options). */
  publicClient(id: string, redirectUris: string[], extra?: Record<string, unknown>): Promise<string>;
  /** Registers a confidential client; returns its id and secret. */
  confidentialClient(id: string, extra?: Record<string, unknown>): Promise<{ clientId: string; clientSecret: string }>;
  /** Creates a user with credentials; returns the user id. */
  user(userId: string, email: string, password: string, role?: 'customer' | 'support' | 'admin', name?: string): Promise<string>;
}

function capturingLogger(): { log: Logger; text: () => string } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { log: createLogger({ service: 'identity', level: 'debug', destination }), text: () => lines.join('') };
}

/**
 * Starts the endpoints on 127.0.0.1 with `JWT_ISSUER` = their own URL. `env` overrides the
 * configuration (e.g. `IDENTITY_REFRESH_GRACE`). Everything is closed, and the database dropped
 * (kept when the test failed), at teardown.
 */
export async function startOAuthServer(t: TestContext, label: string, env: Record<string, string> = {}): Promise<OAuthServer> {
  const db = await createTestDatabase(label, { poolMax: 12 });
  await migrate(db.pool, { service: 'identity', dir: migrationsDir('identity') });
  const clock = new OffsetClock();
  const { log, text } = capturingLogger();
  const alerts: SecurityAlert[] = [];
  let http: HttpService | undefined;
  let issuer = '';
  let deps: OAuthDeps | undefined;
  let runtime: OAuthRuntime | undefined;
  // The issuer URL names the port, so the port is chosen before the routes exist; another process
  // may take it in between, so try again a few times.
  for (let attempt = 0; attempt < 5 && !http; attempt++) {
    const port = await freePort();
    issuer = `http://127.0.0.1:${port}`;
    const config = loadConfig(oauthConfig, { JWT_ISSUER: issuer, JWT_AUDIENCE: 'edge-api', IDENTITY_ADMIN_TOKEN: ADMIN_TOKEN, ...env });
    deps = {
      settings: oauthSettings(config),
      log,
      clock,
      registry: createRegistry('identity', { defaults: false }),
      onSecurityAlert: (a) => void alerts.push(a),
    };
    const rt = createOAuthRuntime(db.pool, deps);
    runtime = rt;
    try {
      http = await startHttpService({
        name: 'identity',
        host: '127.0.0.1',
        port,
        log,
        registry: deps.registry!,
        maxBodyBytes: 1024 * 1024,
        checks: [],
        routes: (app, edge) => registerOAuthRoutes(app, edge, rt),
      });
    } catch (err) {
      if ((err as { code?: string }).code !== 'EADDRINUSE') throw err;
    }
  }
  if (!http || !deps || !runtime) throw new Error('could not listen on a free port');
  const running = await startOAuth(runtime, { tickMs: 3_600_000 });
  const server = http;
  t.teardown(async () => {
    await running.close();
    await server.close(1000);
    if (t.passing()) await db.drop();
    else {
      await db.keep();
      process.stderr.write(`# kept test database ${db.name} for inspection\n`);
    }
  });
  return {
    issuer,
    db,
    pool: db.pool,
    clock,
    deps,
    running,
    http,
    alerts,
    logText: text,
    async publicClient(id, redirectUris, extra = {}) {
      const reg = validateRegistration({ client_id: id, client_type: 'public', redirect_uris: redirectUris, ...extra });
      await registerClient(db.pool, reg, clock.now());
      return id;
    },
    async confidentialClient(id, extra = {}) {
      const reg = validateRegistration({ client_id: id, client_type: 'confidential', ...extra });
      const { clientSecret } = await registerClient(db.pool, reg, clock.now());
      return { clientId: id, clientSecret: clientSecret! };
    },
    async user(userId, email, password, role = 'customer', name) {
      await setCredentials(db.pool, { userId, email, password, role, name });
      return userId;
    },
  };
}

function unescapeHtml(s: string): string {
  return s.replace(/&(amp|lt|gt|quot|#39);/g, (_m, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);
}

/** The hidden inputs of the sign-in form on an HTML page. */
export function hiddenInputs(html: string): URLSearchParams {
  const out = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g))
    out.append(unescapeHtml(m[1]!), unescapeHtml(m[2]!));
  return out;
}

export interface SignInResult {
  /** The status of the form POST (303 on success). */
  status: number;
  /** Where the server sent the browser (undefined when it answered with a page). */
  location: string | undefined;
  body: string;
  headers: Headers;
}

/** The `name=value` of the cookie a page set (the form cookie of the sign-in and device pages), or ''. */
export function cookieOf(res: Response): string {
  return (res.headers.get('set-cookie') ?? '').split(';')[0]!.trim();
}

/**
 * Does what a person's browser does: opens the authorization URL (the sign-in page), fills in
 * the form and submits it, with the page's cookie and the headers a browser sends on a
 * same-origin form post (plus `headers` on both requests). Returns where the server redirected.
 */
export async function browserSignIn(
  authorizationUrl: URL | string,
  email: string,
  password: string,
  action = 'approve',
  headers: Record<string, string> = {},
): Promise<SignInResult> {
  const page = await fetch(authorizationUrl, { redirect: 'manual', headers });
  const html = await page.text();
  if (page.status !== 200) throw new Error(`sign-in page answered ${page.status}: ${html.slice(0, 300)}`);
  const form = hiddenInputs(html);
  form.set('email', email);
  form.set('password', password);
  form.set('action', action);
  const u = new URL(authorizationUrl);
  const res = await fetch(`${u.origin}/authorize`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      cookie: cookieOf(page),
      origin: u.origin,
      'sec-fetch-site': 'same-origin',
      ...headers,
    },
    body: form.toString(),
    redirect: 'manual',
  });
  return { status: res.status, location: res.headers.get('location') ?? undefined, body: await res.text(), headers: res.headers };
}

/**
 * What a person does on the device page: opens it with the code, then signs in and approves (or
 * denies) there, as a browser posts the form. When the page has no approval form (an unknown,
 * used or expired code), that page is the answer.
 */
export async function browserApproveDevice(
  issuer: string,
  userCode: string,
  email: string,
  password: string,
  action: 'approve' | 'deny' = 'approve',
  headers: Record<string, string> = {},
): Promise<SignInResult> {
  const page = await fetch(`${issuer}/auth/device?user_code=${encodeURIComponent(userCode)}`, { headers });
  const html = await page.text();
  const form = hiddenInputs(html);
  if (!form.has('csrf_token')) return { status: page.status, location: undefined, body: html, headers: page.headers };
  form.set('email', email);
  form.set('password', password);
  form.set('action', action);
  const res = await fetch(`${issuer}/auth/device`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      cookie: cookieOf(page),
      origin: new URL(issuer).origin,
      'sec-fetch-site': 'same-origin',
      ...headers,
    },
    body: form.toString(),
    redirect: 'manual',
  });
  return { status: res.status, location: res.headers.get('location') ?? undefined, body: await res.text(), headers: res.headers };
}

/** POSTs a form to the server; returns status, headers and parsed JSON (or text). */
export async function postForm(
  url: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown>; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, json, text };
}

export function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/** The decoded header and payload of a JWT (no verification). */
export function decodeJwt(token: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [h, p] = token.split('.');
  return {
    header: JSON.parse(Buffer.from(h!, 'base64url').toString()) as Record<string, unknown>,
    payload: JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>,
  };
}
