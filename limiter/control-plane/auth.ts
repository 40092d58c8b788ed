/**
 * Who may call the control plane. Both transports hand over the `authorization` value (gRPC
 * metadata or HTTP header) and get a principal back or a typed error.
 *
 * Admin API (QuotaAdminService, /internal/quotas): `Bearer <ADMIN_TOKEN>` (compared in constant
 * time), or `Bearer <access token>` whose verified `role` is `admin` (identity's JWKS, through
 * shared/jwt; the verifier is built on first use, so a control plane used with ADMIN_TOKEN only
 * never fetches keys). No credentials: `credentials_required` (401 / UNAUTHENTICATED). A wrong
 * token or a token that does not verify: `invalid_token` (401 / UNAUTHENTICATED). A valid token
 * without the role: `forbidden` (403 / PERMISSION_DENIED).
 *
 * Sync API (QuotaSyncService): open when CONTROL_PLANE_SYNC_TOKEN is unset (the control plane then
 * belongs on a private network: its API is internal, README "Authentication"); when set, `Bearer
 * <sync token>`
 * (or the admin token) is required.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { PlatformError } from '../../shared/errors.js';
import { isTokenError, type Verifier } from '../../shared/jwt/index.js';

export type Principal = { kind: 'admin_token' } | { kind: 'access_token'; sub: string } | { kind: 'sync_token' } | { kind: 'open' };

export interface AuthOptions {
  adminToken: string | undefined;
  syncToken: string | undefined;
  /** Builds the access-token verifier on first use. */
  verifier: () => Verifier;
}

const BEARER_RE = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const CHALLENGE = { 'www-authenticate': 'Bearer realm="control-plane"' };
const INVALID = { 'www-authenticate': 'Bearer realm="control-plane", error="invalid_token"' };

/** The role an access token must carry for the admin API. */
export const ADMIN_ROLE = 'admin';

export class Authenticator {
  private verifier: Verifier | undefined;
  private readonly adminDigest: Buffer | undefined;
  private readonly syncDigest: Buffer | undefined;

  constructor(private readonly opts: AuthOptions) {
    this.adminDigest = opts.adminToken === undefined ? undefined : digest(opts.adminToken);
    this.syncDigest = opts.syncToken === undefined ? undefined : digest(opts.syncToken);
  }

  /** Checks an admin caller. @throws PlatformError credentials_required | invalid_token | forbidden | dependency_unavailable */
  async admin(authorization: string | undefined): Promise<Principal> {
    const token = bearer(authorization);
    if (this.adminDigest && sameSecret(token, this.adminDigest)) return { kind: 'admin_token' };
    if (!JWT_SHAPE.test(token))
      throw new PlatformError('invalid_token', { detail: 'the bearer token is not valid here', headers: INVALID });
    this.verifier ??= this.opts.verifier();
    const claims = await this.verifier.verifyAccessToken(token).catch((err: unknown) => {
      if (isTokenError(err)) throw err;
      throw new PlatformError('invalid_token', { detail: 'the access token could not be verified', headers: INVALID, cause: err });
    });
    if (claims.role !== ADMIN_ROLE) throw new PlatformError('forbidden', { detail: `the admin API needs role ${ADMIN_ROLE}` });
    return { kind: 'access_token', sub: claims.sub };
  }

  /** Checks a sidecar on the sync API. @throws PlatformError credentials_required | invalid_token */
  sync(authorization: string | undefined): Principal {
    if (!this.syncDigest) return { kind: 'open' };
    const token = bearer(authorization);
    if (sameSecret(token, this.syncDigest)) return { kind: 'sync_token' };
    if (this.adminDigest && sameSecret(token, this.adminDigest)) return { kind: 'admin_token' };
    throw new PlatformError('invalid_token', { detail: 'the sync token is not valid', headers: INVALID });
  }

  close(): void {
    this.verifier?.close();
  }
}

function bearer(authorization: string | undefined): string {
  if (authorization === undefined || authorization.trim() === '') {
    throw new PlatformError('credentials_required', { detail: 'send Authorization: Bearer <token>', headers: CHALLENGE });
  }
  const m = BEARER_RE.exec(authorization);
  if (!m) throw new PlatformError('invalid_token', { detail: 'the Authorization header must be Bearer <token>', headers: INVALID });
  return m[1]!;
}

function digest(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Constant-time comparison (of digests, so the lengths never differ). */
function sameSecret(candidate: string, expected: Buffer): boolean {
  return timingSafeEqual(digest(candidate), expected);
}
