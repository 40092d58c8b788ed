/**
 * Identity verifying its own access tokens (userinfo, introspection, the admin API) with the
 * shared resource-server verifier (shared/jwt), the same one the sidecar runs, over the keys it
 * publishes right now. The verifier is rebuilt whenever the published set changes, so a retired
 * or revoked key stops verifying here at the same moment it leaves the JWKS: on the replica that
 * revoked it before the revocation answers, on the others when their key ring reloads
 * (identity/keys/key-watch.ts: on the NOTIFY, else within the poll period).
 */
import type { Clock } from '../../shared/clock.js';
import { createVerifier, type AccessClaims, type TokenBinding, type Verifier } from '../../shared/jwt/index.js';
import type { KeyRing } from '../keys/key-ring.js';
import type { OAuthSettings } from './settings.js';

export interface VerifiedAccessToken {
  claims: AccessClaims;
  /** The grant (`sid`) of a user token; undefined for client-credentials and login tokens. */
  sid: string | undefined;
}

export class LocalVerifier {
  private current: { ids: string; verifier: Verifier } | undefined;

  constructor(
    private readonly keys: KeyRing,
    private readonly settings: OAuthSettings,
    private readonly clock: Clock,
  ) {}

  /**
   * Verifies an access token; rejects with the verifier's `TokenError`. `binding` as in the shared
   * verifier: none for a bearer token, the DPoP proof's key, or `'any'` (introspection).
   */
  async verify(token: string, binding?: TokenBinding | 'any'): Promise<VerifiedAccessToken> {
    await this.keys.ensureReady();
    const doc = this.keys.jwks();
    const ids = doc.keys.map((k) => k.kid).join(' ');
    if (this.current?.ids !== ids) {
      // The old verifier is dropped, not closed: a verification in flight on it finishes.
      this.current = {
        ids,
        verifier: createVerifier({
          issuer: this.settings.issuer,
          audience: this.settings.audience,
          keys: doc,
          clockToleranceSec: this.settings.clockSkewSec,
          clock: this.clock,
        }),
      };
    }
    const claims = await this.current.verifier.verifyAccessToken(token, binding);
    // The signature held, so the payload is ours; read the one claim the shared verifier does not keep.
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { sid?: unknown };
    return { claims, sid: typeof payload.sid === 'string' ? payload.sid : undefined };
  }
}
