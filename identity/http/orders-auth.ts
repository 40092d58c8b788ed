/**
 * Access-token authentication for identity's orders API and projection operator endpoints: the
 * token from `Authorization: Bearer …`, or from `Authorization: DPoP …` with a `DPoP` proof
 * (RFC 9449 §7) when an `IdentityDpop` is given, verified by the shared verifier (shared/jwt) and
 * turned into the Actor the commands take. No header → 401 `credentials_required`; a bad token or
 * proof → the verifier's (or the proof check's) 401; a role this service does not know → 403.
 *
 * Under the DPoP scheme the proof is checked as at `/userinfo` (identity/oauth/bearer.ts): `htm`,
 * `htu` = the issuer + the request path, `ath`, used once (Postgres), the nonce when nonces are
 * on; then the token must be bound to the proof's key. A DPoP-bound token sent as Bearer is
 * refused by the verifier. Refusals under the DPoP scheme carry a DPoP challenge (RFC 9449 §7.1).
 */
import { PlatformError } from '../../shared/errors.js';
import type { RequestContext } from '../../shared/http.js';
import type { AccessClaims, Verifier } from '../../shared/jwt/index.js';
import { roleOf, type Actor } from '../domain/actor.js';
import type { IdentityDpop } from '../oauth/dpop.js';

export interface Caller {
  readonly actor: Actor;
  readonly claims: AccessClaims;
}

const BEARER = /^Bearer[ ]+([^\s]+)\s*$/i;
const DPOP = /^DPoP[ ]+([^\s]+)\s*$/i;

export class BearerAuth {
  /** Without `dpop`, the DPoP scheme is refused like any other scheme than Bearer. */
  constructor(
    private readonly verifier: Verifier,
    private readonly dpop?: IdentityDpop,
  ) {}

  /** The verified caller of `ctx`. Throws a 401 or 403 PlatformError. */
  async authenticate(ctx: RequestContext): Promise<Caller> {
    const header = ctx.headers.authorization;
    if (header === undefined || header.trim() === '') {
      throw new PlatformError('credentials_required', {
        detail: 'send an access token: Authorization: Bearer <token>',
        headers: { 'www-authenticate': 'Bearer' },
      });
    }
    const claims = await this.verify(ctx, header);
    const role = roleOf(claims.role);
    if (!role) throw new PlatformError('forbidden', { detail: 'the token carries a role this service does not grant anything to' });
    return { actor: { id: claims.sub, role }, claims };
  }

  private async verify(ctx: RequestContext, header: string): Promise<AccessClaims> {
    const bearer = BEARER.exec(header);
    if (bearer) return this.verifier.verifyAccessToken(bearer[1]!);
    const dpop = this.dpop && DPOP.exec(header);
    if (this.dpop && dpop) {
      const token = dpop[1]!;
      const proof = await this.dpop.resourceProof(ctx, ctx.path, token);
      return this.verifier.verifyAccessToken(token, { jkt: proof.jkt });
    }
    throw new PlatformError('invalid_token', {
      detail: this.dpop
        ? 'the Authorization header must be "Bearer <access token>" or "DPoP <access token>"'
        : 'the Authorization header is not a bearer token',
      headers: { 'www-authenticate': 'Bearer error="invalid_request"' },
    });
  }
}
