/**
 * Bearer-token authentication for identity's resource endpoints: the access token from
 * `Authorization: Bearer …`, verified by the shared verifier (shared/jwt), turned into the Actor the
 * commands take. No header → 401 `credentials_required`; a bad token → the verifier's 401; a role
 * this service does not know → 403.
 */
import { PlatformError } from '../../shared/errors.js';
import type { RequestContext } from '../../shared/http.js';
import type { AccessClaims, Verifier } from '../../shared/jwt/index.js';
import { roleOf, type Actor } from '../domain/actor.js';

export interface Caller {
  readonly actor: Actor;
  readonly claims: AccessClaims;
}

const BEARER = /^Bearer[ ]+([^\s]+)\s*$/i;

export class BearerAuth {
  constructor(private readonly verifier: Verifier) {}

  /** The verified caller of `ctx`. Throws a 401 or 403 PlatformError. */
  async authenticate(ctx: Pick<RequestContext, 'headers'>): Promise<Caller> {
    const header = ctx.headers.authorization;
    if (header === undefined || header.trim() === '') {
      throw new PlatformError('credentials_required', {
        detail: 'send an access token: Authorization: Bearer <token>',
        headers: { 'www-authenticate': 'Bearer' },
      });
    }
    const m = BEARER.exec(header);
    if (!m) {
      throw new PlatformError('invalid_token', {
        detail: 'the Authorization header is not a bearer token',
        headers: { 'www-authenticate': 'Bearer error="invalid_request"' },
      });
    }
    const claims = await this.verifier.verifyAccessToken(m[1]!);
    const role = roleOf(claims.role);
    if (!role) throw new PlatformError('forbidden', { detail: 'the token carries a role this service does not grant anything to' });
    return { actor: { id: claims.sub, role }, claims };
  }
}
