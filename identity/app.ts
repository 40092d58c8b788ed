/**
 * The identity service's core, started in-process by main.ts and by tests. It owns its database
 * schema and answers /healthz, /readyz and /metrics, and runs the event-sourced users and orders
 * (identity/events/identity-events.ts): the event store, the projectors and the orders API; and
 * the OAuth 2.0 / OpenID Connect authorization server (identity/oauth): keys, clients, tokens,
 * discovery, JWKS, authorize, token, device, userinfo, introspection.
 */
import { systemClock, type Clock } from '../shared/clock.js';
import type { ConfigOf } from '../shared/config.js';
import { createVerifier, TokenError, type Verifier } from '../shared/jwt/index.js';
import { isTokenRevoked } from './tokens/revocation-store.js';
import type { Logger } from '../shared/log.js';
import { createRegistry } from '../shared/metrics.js';
import { openDatabase, postgresCheck, requireDatabaseUrl } from '../shared/pg-service.js';
import { startHttpService, type HttpService } from '../shared/service.js';
import type { Started } from '../shared/main.js';
import { startAdminBootstrap, type AdminBootstrap } from './accounts/bootstrap-admin.js';
import { registerAccountRoutes } from './accounts/routes.js';
import { identityOpenApi } from './openapi.js';
import { serveOpenApi } from '../shared/openapi.js';
import type { identityConfig } from './config.js';
import type { CardTokenizer } from './domain/card.js';
import { createIdentityEvents, type IdentityEvents } from './events/identity-events.js';
import { dpopSettings } from './oauth/dpop.js';
import { createOAuthRuntime, oauthSettings, registerOAuthRoutes, signingKeysCheck, startOAuth, type RunningOAuth } from './oauth/index.js';
import { createNotifyRelay, type NotifyRelay, type ServiceAuth } from './notify/index.js';

export interface IdentityDeps {
  /** Default: the system clock. */
  clock?: Clock;
  /** Default: random opaque card tokens (no payment provider yet). */
  tokenizeCard?: CardTokenizer;
  /** The notification relay's credentials at the notifier. Default: IDENTITY_NOTIFY_API_KEY, else a self-signed service token. */
  notifierAuth?: ServiceAuth;
}

export interface Identity extends Started {
  port: number;
  /** The event store, user and order commands, read models and projection runner. */
  events: IdentityEvents;
  /** With IDENTITY_BOOTSTRAP_ADMIN: the promotion of that account, once it exists. */
  adminBootstrap: AdminBootstrap | undefined;
}

export async function startIdentity(config: ConfigOf<typeof identityConfig>, log: Logger, deps: IdentityDeps = {}): Promise<Identity> {
  const clock = deps.clock ?? systemClock;
  const registry = createRegistry('identity');

  // 1. The database.
  const pool = await openDatabase({
    name: 'identity',
    dir: 'identity',
    databaseUrl: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    log,
  });

  // 2. The domain: the authorization server's runtime (keys, tokens, clients), the verifier of
  // identity's own resource endpoints, and the event-sourced users and orders.
  const oauth = createOAuthRuntime(pool, { settings: oauthSettings(config), dpop: dpopSettings(config), log, registry });
  // With IDENTITY_JWKS_URL, identity's resource endpoints verify against that key set. Without it,
  // against its own key ring, in process: fetching its own JWKS over HTTP would fail while it is
  // still starting, and the verifier would then wait out its refetch cooldown before trying again.
  const remote = createVerifier({
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
    ...(config.IDENTITY_JWKS_URL ? { jwksUrl: config.IDENTITY_JWKS_URL } : { keys: { keys: [] } }),
    clockToleranceSec: Math.round(config.JWT_CLOCK_SKEW / 1000),
    clock,
    log,
  });
  const verifySignature: Verifier['verifyAccessToken'] = config.IDENTITY_JWKS_URL
    ? (token, binding) => remote.verifyAccessToken(token, binding)
    : async (token, binding) => (await oauth.verifier.verify(token, binding)).claims;
  // Called directly (not through a sidecar), a revoked token is refused here at once too: its jti
  // or its family (sid) revoked, read from the database these endpoints use anyway.
  const verifier: Verifier = {
    ...remote,
    verifyAccessToken: async (token, binding) => {
      const claims = await verifySignature(token, binding);
      if (await isTokenRevoked(pool, claims.jti, claims.sid)) {
        throw new TokenError('revoked', 'token has been revoked', binding !== undefined && binding !== 'any' ? 'dpop' : 'bearer');
      }
      return claims;
    },
  };
  const events = createIdentityEvents(
    {
      databaseUrl: requireDatabaseUrl(config.DATABASE_URL, 'identity'),
      snapshotEvery: config.IDENTITY_SNAPSHOT_EVERY,
      runProjections: config.IDENTITY_PROJECTIONS,
      pollIntervalMs: config.IDENTITY_PROJECTION_POLL_INTERVAL,
      batchSize: config.IDENTITY_PROJECTION_BATCH,
      maxAttempts: config.IDENTITY_PROJECTION_MAX_ATTEMPTS,
      warehouseWindowMs: config.IDENTITY_WAREHOUSE_WINDOW,
      selfDeleteMaxTotal: config.IDENTITY_ORDER_SELF_DELETE_MAX_TOTAL,
    },
    { pool, registry, log, clock, verifier, dpop: oauth.dpop, tokenizeCard: deps.tokenizeCard },
  );
  let running: RunningOAuth | undefined;
  let http: HttpService | undefined;
  let relay: NotifyRelay | undefined;
  let bootstrap: AdminBootstrap | undefined;
  try {
    await events.start();
    // Signing keys exist (or are created) before the first token request is served.
    running = await startOAuth(oauth, { databaseUrl: config.DATABASE_URL });

    // 3. Serving: the routes receive the finished runtime, events and pool.
    http = await startHttpService({
      name: 'identity',
      host: config.HOST,
      port: config.IDENTITY_PORT,
      log,
      registry,
      maxBodyBytes: config.MAX_BODY_BYTES,
      checks: [postgresCheck(pool), { name: 'projections', check: () => events.check.check() }, signingKeysCheck(oauth)],
      routes: (app, edge) => {
        events.routes(app, edge);
        registerOAuthRoutes(app, edge, oauth);
        registerAccountRoutes(app, edge, pool, {
          users: events.users,
          store: events.store,
          oauth,
          registry,
          limits: {
            perAccount: config.IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT,
            perIp: config.IDENTITY_LOGIN_MAX_FAILURES_PER_IP,
            windowMs: config.IDENTITY_LOGIN_FAILURE_WINDOW,
          },
          serviceSecret: config.SERVICE_SECRET,
          clock,
          log,
        });
        // This service's document (identity/openapi.ts), without credentials (shared/openapi.ts).
        serveOpenApi(app, edge, identityOpenApi);
      },
    });
    // 4. The notification relay: outbox and recipient profiles → the notifier (identity/notify).
    if (config.IDENTITY_NOTIFY_RELAY) {
      relay = createNotifyRelay(config, { pool, tokens: oauth.tokens, clock, log, registry, auth: deps.notifierAuth });
      relay.start();
    }
    // 5. The first admin, when the deployment names one (identity/accounts/bootstrap-admin.ts).
    if (config.IDENTITY_BOOTSTRAP_ADMIN !== undefined) {
      bootstrap = startAdminBootstrap({ pool, email: config.IDENTITY_BOOTSTRAP_ADMIN, clock, log });
    }
  } catch (err) {
    bootstrap?.close();
    await relay?.close();
    await http?.close(0);
    await running?.close();
    await events.close();
    await pool.end().catch(() => {});
    verifier.close();
    throw err;
  }
  const server = http;
  const oauthRunning = running;
  const notifyRelay = relay;
  const adminBootstrap = bootstrap;
  return {
    port: server.port,
    events,
    adminBootstrap,
    urls: { api: `http://${config.HOST}:${server.port}` },
    close: async () => {
      adminBootstrap?.close();
      await server.close(config.SHUTDOWN_GRACE);
      await notifyRelay?.close();
      await oauthRunning.close();
      await events.close();
      await pool.end();
      verifier.close();
    },
  };
}
