/**
 * Accounts (README, "Accounts: signup and login"): `POST /auth/signup` and `POST /auth/login`.
 *
 * Signup registers the user through the event store (UserRegistered, with the email reserved) and
 * stores the argon2id password hash in `credentials` in ONE transaction: there is never a user
 * without credentials or credentials without a user. The password follows password-policy.ts.
 *
 * Login answers `{ access_token, token_type: "Bearer", expires_in: 3600 }`: an RFC 9068 access
 * token (`sub` = `user_id`, `role`, audience JWT_AUDIENCE) signed with identity's own keys, so the
 * sidecar and identity's resource endpoints accept it. Every failed sign-in is the same 401
 * `invalid_credentials`, whatever the cause, and costs the same time (an unknown email is checked
 * against a dummy hash). Failures are throttled per account and per client address
 * (login-throttle.ts): 429 `login_throttled` with `Retry-After`. The client address is the one the
 * sidecar vouches for in `X-Subject-Address`, else the peer; never `X-Forwarded-For`
 * (shared/sidecar-trust.ts).
 */
import { randomUUID } from 'node:crypto';
import { Counter } from 'prom-client';
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { Logger } from '../../shared/log.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { scopeOfRole } from '../authz/permissions.js';
import { roleOf } from '../domain/actor.js';
import { EmailTaken } from '../domain/errors.js';
import type { Users } from '../domain/users.js';
import type { EventStore } from '../events/event-store.js';
import { credentialProfile } from '../oauth/credentials.js';
import { LOGIN_TOKEN_TTL_MS, setCredentials, verifyPassword, type OAuthRuntime } from '../oauth/index.js';
import type { Registry } from '../../shared/metrics.js';
import { sidecarTrust } from '../../shared/sidecar-trust.js';
import { accountKey, LoginThrottle, type ThrottleLimits } from './login-throttle.js';
import { checkPassword } from './password-policy.js';

export interface AccountDeps {
  users: Users;
  /** To wake the projectors once the signup has committed. */
  store: EventStore;
  /** The authorization server's runtime: its keys sign the login tokens. */
  oauth: OAuthRuntime;
  /** identity's registry, for the login and signup counters. */
  registry?: Registry | undefined;
  limits: ThrottleLimits;
  /** SERVICE_SECRET: with it, the sidecar's X-Subject-Address names the client address (shared/sidecar-trust.ts). */
  serviceSecret?: string | undefined;
  clock: Clock;
  log: Logger;
}

export const ACCOUNT_PATHS = { signup: '/auth/signup', login: '/auth/login' } as const;

function stringField(body: Record<string, unknown>, field: string, max: number): string {
  const v = body[field];
  if (typeof v !== 'string' || v.trim() === '' || v.length > max) throw invalidField(field, `must be a string of 1 to ${max} characters`);
  return v;
}

function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(body)) if (!allowed.includes(key)) throw invalidField(key, 'is not a field of this request');
}

const invalidCredentials = (): PlatformError =>
  new PlatformError('invalid_credentials', { detail: 'the email or password is wrong', headers: { 'www-authenticate': 'Bearer' } });

/** Registers `POST /auth/signup` and `POST /auth/login` on `app`. Synchronous; no I/O. */
export function registerAccountRoutes(app: TemplatedApp, edge: EdgeOptions, pool: pg.Pool, deps: AccountDeps): void {
  const rt = deps.oauth;
  const throttle = new LoginThrottle(pool, deps.limits, deps.clock);
  // The client address: the sidecar's X-Subject-Address when it vouches for the request, else the peer.
  const sidecar = sidecarTrust(deps.serviceSecret);
  const registers = deps.registry ? [deps.registry] : [];
  const attempts = new Counter({
    name: 'identity_login_attempts_total',
    help: 'POST /auth/login attempts by outcome (ok, invalid_credentials, throttled)',
    labelNames: ['outcome'],
    registers,
  });
  const signups = new Counter({ name: 'identity_signups_total', help: 'Accounts created by POST /auth/signup', registers });
  let lastPurgeMs = deps.clock.now();

  route(
    app,
    'post',
    ACCOUNT_PATHS.signup,
    async (ctx) => {
      const body = jsonBody(ctx);
      onlyFields(body, ['email', 'password', 'name']);
      const email = stringField(body, 'email', 320);
      const name = stringField(body, 'name', 200);
      const password = checkPassword(body.password);
      const userId = randomUUID();
      const client = await pool.connect();
      let broken = false;
      let saved: Awaited<ReturnType<Users['register']>>;
      try {
        await client.query('BEGIN');
        saved = await deps.users.register({ userId, email, name }, { client, metadata: { actor_id: userId, via: 'signup' } });
        await setCredentials(client, { userId, email, password, role: 'customer', name });
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        // credentials.email is unique too (an operator may have seeded credentials without a user).
        if ((err as { code?: string }).code === '23505') throw new EmailTaken();
        throw err;
      } finally {
        client.release(broken);
      }
      if (saved.append) deps.store.appended(saved.append);
      signups.inc();
      return { status: 201, body: { user_id: userId } };
    },
    edge,
  );

  route(
    app,
    'post',
    ACCOUNT_PATHS.login,
    async (ctx) => {
      const ip = sidecar.clientAddress(ctx);
      const body = jsonBody(ctx);
      onlyFields(body, ['email', 'password']);
      const email = stringField(body, 'email', 320);
      if (typeof body.password !== 'string') throw invalidField('password', 'must be a string');
      const password = body.password;
      const keys = { account: accountKey(email), ip };
      const waitMs = await throttle.blockedForMs(keys);
      if (waitMs > 0) {
        attempts.inc({ outcome: 'throttled' });
        const seconds = Math.ceil(waitMs / 1000);
        throw new PlatformError('login_throttled', {
          detail: `too many failed sign-ins; try again in ${seconds} s`,
          headers: { 'retry-after': String(seconds) },
        });
      }
      const userId = await verifyPassword(pool, email, password);
      const profile = userId === undefined ? undefined : await credentialProfile(pool, userId);
      const role = profile && roleOf(profile.role);
      if (userId === undefined || !role) {
        await throttle.failed(keys);
        attempts.inc({ outcome: 'invalid_credentials' });
        const now = deps.clock.now();
        if (now - lastPurgeMs >= deps.limits.windowMs) {
          lastPurgeMs = now;
          void throttle.purge().catch((err: unknown) => deps.log.warn({ err }, 'accounts: purging closed login windows failed'));
        }
        throw invalidCredentials();
      }
      await throttle.succeeded(keys);
      const issued = rt.tokens.accessToken({ sub: userId, role, scope: scopeOfRole(role), ttlMs: LOGIN_TOKEN_TTL_MS });
      attempts.inc({ outcome: 'ok' });
      return {
        body: { access_token: issued.token, token_type: 'Bearer', expires_in: Math.round(LOGIN_TOKEN_TTL_MS / 1000) },
        headers: { 'cache-control': 'no-store' },
      };
    },
    edge,
  );
}
