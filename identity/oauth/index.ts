/**
 * The OAuth 2.0 / OpenID Connect authorization server of the identity service (README, "Sign-in and tokens").
 *
 * Wiring (identity/app.ts):
 *
 * ```ts
 * const oauth = createOAuthRuntime(pool, { settings: oauthSettings(config), log, registry });
 * const running = await startOAuth(oauth, { databaseUrl });   // keys loaded; rotation and purge timer
 * const http = await startHttpService({
 *   ...,
 *   checks: [signingKeysCheck(oauth)],
 *   routes: (app, edge) => registerOAuthRoutes(app, edge, oauth),
 * });
 * // on shutdown: await http.close(), then running.close(), then pool.end()
 * ```
 *
 * Endpoints (all under the issuer, JWT_ISSUER):
 *
 * | method | path | what |
 * |---|---|---|
 * | GET, POST | /authorize | sign-in page; authorization code + PKCE (S256) |
 * | POST | /token | authorization_code, refresh_token, client_credentials, device_code |
 * | POST | /auth/device_authorization | RFC 8628 device authorization |
 * | GET, POST | /auth/device | the user-code page |
 * | GET, POST | /userinfo | claims of the signed-in user (bearer) |
 * | POST | /auth/introspect | RFC 7662, confidential clients |
 * | POST | /revoke | RFC 7009 token revocation |
 * | GET | /.well-known/revoked-tokens.json | the revocation list the sidecars poll |
 * | GET | /.well-known/openid-configuration, /.well-known/oauth-authorization-server | metadata |
 * | GET | /.well-known/jwks.json | public signing keys |
 * | GET, POST, DELETE | /auth/admin/clients[/:id[/secret]] | client registry (admin) |
 * | GET, POST | /auth/admin/keys, /auth/admin/keys/:kid/revoke | signing keys; emergency revocation (admin) |
 * | GET | /auth/admin/users?id=… | who some user ids are: e-mail, name, role (admin; accounts/admin-users.ts) |
 */
import { route, type EdgeOptions, type Handler, type HealthCheck } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { adminClientRoutes } from '../clients/admin-endpoint.js';
import { adminKeyRoutes } from '../keys/admin-endpoint.js';
import { adminUserRoutes } from '../accounts/admin-users.js';
import { watchSigningKeys } from '../keys/key-watch.js';
import { authorizeGet, authorizePost } from './authorize-endpoint.js';
import { deviceAuthorizationEndpoint, devicePageGet, devicePagePost } from './device-endpoint.js';
import { discoveryEndpoint, jwksEndpoint, PATHS } from './discovery.js';
import { introspectionEndpoint } from './introspection-endpoint.js';
import { revocationEndpoint } from './revocation-endpoint.js';
import { revocationListEndpoint } from './revocation-list.js';
import { databaseUnavailable, isDatabaseUnavailable } from '../../shared/db-errors.js';
import { purgeExpired } from './purge.js';
import type { OAuthRuntime } from './runtime.js';
import { tokenEndpoint } from './token-endpoint.js';
import { userinfoEndpoint } from './userinfo-endpoint.js';

export {
  oauthSettings,
  rotationPolicy,
  OAUTH_CONFIG_VARS,
  oauthConfig,
  LOGIN_TOKEN_TTL_MS,
  type OAuthConfig,
  type OAuthSettings,
} from './settings.js';
export { createOAuthRuntime, credentialsDirectory, type OAuthDeps, type OAuthRuntime, type UserDirectory } from './runtime.js';
export { verifyPassword, setCredentials, hashPassword, ARGON2_OPTIONS } from './credentials.js';
export { discoveryDocument, PATHS } from './discovery.js';
export type { SecurityAlert } from '../tokens/security-events.js';
export { registerClient, rotateClientSecret } from '../clients/client-store.js';
export { validateRegistration, type ClientRegistration, type OAuthClient } from '../clients/client.js';
export type { TokenIssuer, AccessTokenRequest, IssuedAccessToken } from '../tokens/token-issuer.js';

/** Registers every OAuth/OIDC endpoint on `app` (see the table above). Synchronous; no I/O. */
export function registerOAuthRoutes(app: TemplatedApp, edge: EdgeOptions, rt: OAuthRuntime): void {
  // An outage of PostgreSQL is a 503, never a 500 (the OAuth endpoints map it themselves).
  const guarded =
    (h: Handler): Handler =>
    async (ctx) => {
      try {
        return await h(ctx);
      } catch (err) {
        throw isDatabaseUnavailable(err) ? databaseUnavailable(err) : err;
      }
    };
  const add = (method: 'get' | 'post' | 'del', path: string, h: Handler): void => route(app, method, path, guarded(h), edge);
  add('get', PATHS.discovery, discoveryEndpoint(rt));
  add('get', PATHS.asMetadata, discoveryEndpoint(rt));
  add('get', PATHS.jwks, jwksEndpoint(rt));
  add('get', PATHS.authorize, authorizeGet(rt));
  add('post', PATHS.authorize, authorizePost(rt));
  add('post', PATHS.token, tokenEndpoint(rt));
  add('post', PATHS.deviceAuthorization, deviceAuthorizationEndpoint(rt));
  add('get', PATHS.devicePage, devicePageGet(rt));
  add('post', PATHS.devicePage, devicePagePost(rt));
  add('get', PATHS.userinfo, userinfoEndpoint(rt));
  add('post', PATHS.userinfo, userinfoEndpoint(rt));
  add('post', PATHS.introspect, introspectionEndpoint(rt));
  add('post', PATHS.revoke, revocationEndpoint(rt));
  add('get', PATHS.revocationList, revocationListEndpoint(rt.revocations));
  for (const r of adminClientRoutes(rt)) add(r.method, r.pattern, r.handler);
  for (const r of adminKeyRoutes(rt)) add(r.method, r.pattern, r.handler);
  for (const r of adminUserRoutes(rt)) add(r.method, r.pattern, r.handler);
}

/** The /readyz check of the authorization server: ready once a signing key is loaded (startOAuth loads it). */
export function signingKeysCheck(rt: OAuthRuntime): HealthCheck {
  return {
    name: 'signing-keys',
    check: async () => {
      if (!rt.keys.ready) throw new Error('signing keys are not loaded yet');
      rt.keys.signingKey();
    },
  };
}

/** How often the background step runs: reload keys (another replica may have rotated), rotate, purge. */
export const OAUTH_TICK_MS = 60_000;

export interface RunningOAuth {
  readonly runtime: OAuthRuntime;
  /** One rotation step, key reload and purge, now (what the timer runs). */
  tick(): Promise<void>;
  /** Stops the timer and waits for a step in progress. */
  close(): Promise<void>;
}

/**
 * Starts the authorization server's background work: a rotation step at once (which creates the
 * first signing key of a new database), then every `tickMs` a rotation step, a key reload and a
 * purge of expired codes and tokens. A failing step is logged and retried at the next tick. Also
 * keeps the key ring in step with other replicas' revocations (key-watch.ts): a reload on their
 * NOTIFY, and every `keyReloadMs` in any case.
 */
export interface StartOAuthOptions {
  /** Background step period. Default `OAUTH_TICK_MS`. */
  tickMs?: number;
  /** For the LISTEN connection that hears other replicas' key revocations at once; without it, polling only. */
  databaseUrl?: string;
  /** Key reload poll period (key-watch.ts). Default `KEY_RELOAD_MS` (5 s). */
  keyReloadMs?: number;
}

export async function startOAuth(rt: OAuthRuntime, opts: StartOAuthOptions = {}): Promise<RunningOAuth> {
  let running: Promise<void> | undefined;
  const tick = (): Promise<void> => {
    running ??= (async () => {
      try {
        const r = await rt.keys.step();
        if (r.created.length) rt.metrics.keyRotations.inc({ action: 'created' }, r.created.length);
        if (r.retireScheduled.length) rt.metrics.keyRotations.inc({ action: 'retire_scheduled' }, r.retireScheduled.length);
        if (r.deleted.length) rt.metrics.keyRotations.inc({ action: 'deleted' }, r.deleted.length);
        const purged = await purgeExpired(rt.pool, rt.clock.now(), rt.settings);
        if (purged.codes + purged.deviceCodes + purged.refreshTokens + purged.grants + purged.revokedTokens > 0)
          rt.log.debug({ purged }, 'oauth: expired records purged');
      } catch (err) {
        rt.log.error({ err }, 'oauth: background step failed; retrying at the next tick');
      }
    })().finally(() => {
      running = undefined;
    });
    return running;
  };
  await rt.keys.ensureReady();
  const timer = setInterval(() => void tick(), opts.tickMs ?? OAUTH_TICK_MS);
  timer.unref();
  const watch = await watchSigningKeys({ ring: rt.keys, databaseUrl: opts.databaseUrl, pollMs: opts.keyReloadMs, log: rt.log });
  return {
    runtime: rt,
    tick,
    async close() {
      clearInterval(timer);
      await watch.close();
      await running;
    },
  };
}
