/**
 * The relay's credentials at the sidecar, which vouches for it upstream with role `service`:
 *
 * - IDENTITY_NOTIFY_API_KEY set: `X-API-Key` (the sidecar gives API keys role `service`; the key
 *   needs a quota in the control plane, as every API key does);
 * - else a service access token identity signs for itself with its own key ring (`sub`
 *   {@link RELAY_SUBJECT}, role `service`, scope {@link RELAY_SCOPE}), reused until a minute before it
 *   expires. Any verifier of identity's tokens accepts it (the sidecar, or the notifier itself
 *   when the relay is pointed straight at it), so `npm start` needs no key set up. At the sidecar
 *   its quota is `user:identity-notify-relay`'s, else LIMITER_DEFAULT_PLAN.
 */
import type { Clock } from '../../shared/clock.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import type { ServiceAuth } from './notifier-client.js';

export const RELAY_SUBJECT = 'identity-notify-relay';
/** The token's API scope (a token must carry one); the notifier authorizes by role. */
export const RELAY_SCOPE = 'write:notifications';
const TOKEN_TTL_MS = 15 * 60_000;
const RENEW_BEFORE_MS = 60_000;

export function apiKeyAuth(key: string): ServiceAuth {
  return async () => ({ 'x-api-key': key });
}

export function selfIssuedAuth(tokens: TokenIssuer, clock: Clock): ServiceAuth {
  let cached: { token: string; renewAt: number } | undefined;
  return async () => {
    if (!cached || clock.now() >= cached.renewAt) {
      await tokens.ready();
      const issued = tokens.accessToken({ sub: RELAY_SUBJECT, role: 'service', scope: RELAY_SCOPE, ttlMs: TOKEN_TTL_MS });
      cached = { token: issued.token, renewAt: clock.now() + TOKEN_TTL_MS - RENEW_BEFORE_MS };
    }
    return { authorization: `Bearer ${cached.token}` };
  };
}
