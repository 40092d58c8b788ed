/**
 * What the OAuth endpoints share: settings, clock, the key ring, the token issuer, the local
 * verifier, the user directory and the metrics. Built once by the composition root
 * (identity/app.ts) on the open pool, then handed to `registerOAuthRoutes`, `startOAuth` and
 * `signingKeysCheck`.
 */
import { systemClock, type Clock } from '../../shared/clock.js';
import type { Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import type { Registry } from '../../shared/metrics.js';
import { ClientCache } from '../clients/client-cache.js';
import { getClient } from '../clients/client-store.js';
import type { OAuthClient } from '../clients/client.js';
import { KeyRing } from '../keys/key-ring.js';
import type { UserProfile } from '../tokens/claims.js';
import type { SecurityAlert } from '../tokens/security-events.js';
import { TokenIssuer } from '../tokens/token-issuer.js';
import { credentialProfile, verifyPassword } from './credentials.js';
import { createIdentityDpop, DPOP_SETTINGS_DEFAULT, type DpopSettings, type IdentityDpop } from './dpop.js';
import { LocalVerifier } from './local-verifier.js';
import { RevocationList } from './revocation-list.js';
import { createOAuthMetrics, type OAuthMetrics } from './metrics.js';
import { rotationPolicy, type OAuthSettings } from './settings.js';

/** Where sign-in checks passwords and where id tokens and userinfo get the user's attributes. */
export interface UserDirectory {
  /** The user id for these credentials, or undefined. Must cost the same for unknown and wrong. */
  verifyPassword(email: string, password: string): Promise<string | undefined>;
  /** Role and profile of a user; undefined when the user does not exist (any more). */
  profile(userId: string): Promise<UserProfile | undefined>;
}

/** The default directory: the `credentials` table. */
export function credentialsDirectory(pool: Pool): UserDirectory {
  return {
    verifyPassword: (email, password) => verifyPassword(pool, email, password),
    profile: async (userId) => {
      const p = await credentialProfile(pool, userId);
      return p && { role: p.role, email: p.email, emailVerified: false, name: p.name };
    },
  };
}

/** What `createOAuthRuntime` builds the runtime from. */
export interface OAuthDeps {
  readonly settings: OAuthSettings;
  readonly log: Logger;
  /** Default: the system clock. */
  readonly clock?: Clock;
  /** Default: `credentialsDirectory`. */
  readonly users?: (pool: Pool) => UserDirectory;
  /** identity's registry, for the metrics in metrics.ts. */
  readonly registry?: Registry;
  /** DPoP (IDENTITY_DPOP_NONCE, DPOP_IAT_WINDOW). Default: nonces required, a 60 s window. */
  readonly dpop?: DpopSettings;
  /** Called after commit for every security alert (e.g. to record it on the User aggregate). */
  readonly onSecurityAlert?: (alert: SecurityAlert) => void | Promise<void>;
}

export interface OAuthRuntime {
  readonly pool: Pool;
  readonly settings: OAuthSettings;
  readonly log: Logger;
  readonly clock: Clock;
  readonly keys: KeyRing;
  readonly tokens: TokenIssuer;
  readonly verifier: LocalVerifier;
  readonly users: UserDirectory;
  readonly metrics: OAuthMetrics;
  /** DPoP proofs at /token and /userinfo (oauth/dpop.ts). */
  readonly dpop: IdentityDpop;
  /** The revocation list the sidecars poll (revocation-list.ts); invalidate it after revoking. */
  readonly revocations: RevocationList;
  /** A registered client (cached briefly: see ClientCache). */
  client(clientId: string): Promise<OAuthClient | undefined>;
  /** Drops a client from the cache after this process changed it. */
  invalidateClient(clientId: string): void;
  /** Logs, counts and forwards an alert already recorded in `security_events`. Never throws. */
  alert(a: SecurityAlert): Promise<void>;
}

/** Builds the runtime on an open pool. Call it once per process and pass the result around. */
export function createOAuthRuntime(pool: Pool, deps: OAuthDeps): OAuthRuntime {
  const clock = deps.clock ?? systemClock;
  const s = deps.settings;
  const policy = rotationPolicy(s);
  const keys = new KeyRing(pool, policy, clock, deps.log);
  const metrics = createOAuthMetrics(deps.registry);
  const clients = new ClientCache((id) => getClient(pool, id), clock);
  const rt: OAuthRuntime = {
    pool,
    settings: s,
    log: deps.log,
    clock,
    keys,
    tokens: new TokenIssuer(keys, clock, {
      issuer: s.issuer,
      audience: s.audience,
      accessTokenTtlMs: s.accessTokenTtlMs,
      idTokenTtlMs: s.idTokenTtlMs,
      maxTtlMs: policy.retireAfterMs - s.clockSkewSec * 1000,
    }),
    verifier: new LocalVerifier(keys, s, clock),
    users: (deps.users ?? credentialsDirectory)(pool),
    metrics,
    dpop: createIdentityDpop(pool, s.issuer, deps.dpop ?? DPOP_SETTINGS_DEFAULT, clock),
    revocations: new RevocationList(pool, s, clock, deps.log),
    client: (clientId) => clients.get(clientId),
    invalidateClient: (clientId) => clients.invalidate(clientId),
    async alert(a) {
      // Every alert is raised by a revocation of its family: the sidecars hear of it at their next poll.
      rt.revocations.invalidate();
      metrics.securityAlerts.inc({ type: a.type });
      deps.log.warn(
        { alert: a.type, user_id: a.userId, client_id: a.clientId, family_id: a.familyId },
        'security alert: a used credential was presented again; the grant is revoked',
      );
      try {
        await deps.onSecurityAlert?.(a);
      } catch (err) {
        deps.log.error({ err, alert: a.type, family_id: a.familyId }, 'security alert hook failed');
      }
    },
  };
  return rt;
}
