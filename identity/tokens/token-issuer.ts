/**
 * Signs access and id tokens with the key that signs now (KeyRing), at the injected clock's time.
 * `/auth/login` (accounts) signs its access tokens here too, with its own lifetime.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import type { KeyRing } from '../keys/key-ring.js';
import { accessTokenClaims, idTokenClaims, type UserProfile } from './claims.js';
import { signJwt } from './jws.js';

export interface TokenIssuerOptions {
  issuer: string;
  audience: string;
  accessTokenTtlMs: number;
  idTokenTtlMs: number;
  /**
   * The longest lifetime a token may be given: the key schedule retires a key this long after it
   * stops signing, so a longer-lived token would outlive its key. Default: no limit.
   */
  maxTtlMs?: number;
}

export interface IssuedAccessToken {
  token: string;
  jti: string;
  /** Seconds, for the `expires_in` member. */
  expiresIn: number;
}

export interface AccessTokenRequest {
  sub: string;
  role: string;
  /** API scopes, space-separated. */
  scope: string;
  /** Undefined for tokens not issued to an OAuth client (`/auth/login`). */
  clientId?: string | undefined;
  tenantId?: string | undefined;
  plan?: string | undefined;
  sid?: string | undefined;
  /** Binds the token to this DPoP key (`cnf.jkt`, RFC 9449 §6.1). */
  jkt?: string | undefined;
  /** Overrides the configured lifetime (e.g. 3600 s for /auth/login). */
  ttlMs?: number;
}

export interface IdTokenRequest {
  sub: string;
  clientId: string;
  authTimeMs: number;
  nonce?: string | undefined;
  sid: string;
  profile: UserProfile;
  scopes: readonly string[];
}

export class TokenIssuer {
  constructor(
    private readonly keys: KeyRing,
    private readonly clock: Clock,
    private readonly opts: TokenIssuerOptions,
  ) {}

  /** Resolves once a signing key is available (first use of a new database creates one). */
  ready(): Promise<void> {
    return this.keys.ensureReady();
  }

  /** Signs an access token. Call `ready()` first (the endpoints do). */
  accessToken(req: AccessTokenRequest): IssuedAccessToken {
    const ttlMs = req.ttlMs ?? this.opts.accessTokenTtlMs;
    if (this.opts.maxTtlMs !== undefined && ttlMs > this.opts.maxTtlMs) {
      throw new RangeError(`access token lifetime ${ttlMs} ms exceeds the key schedule's ${this.opts.maxTtlMs} ms`);
    }
    const jti = randomBytes(16).toString('base64url');
    const claims = accessTokenClaims({
      issuer: this.opts.issuer,
      audience: this.opts.audience,
      sub: req.sub,
      role: req.role,
      scope: req.scope,
      clientId: req.clientId,
      tenantId: req.tenantId,
      plan: req.plan,
      sid: req.sid,
      jkt: req.jkt,
      jti,
      nowMs: this.clock.now(),
      ttlMs,
    });
    return { token: signJwt(this.keys.signingKey(), 'at+jwt', claims), jti, expiresIn: Math.floor(ttlMs / 1000) };
  }

  /** Signs an OpenID Connect id token. */
  idToken(req: IdTokenRequest): string {
    const claims = idTokenClaims({
      issuer: this.opts.issuer,
      sub: req.sub,
      clientId: req.clientId,
      authTimeMs: req.authTimeMs,
      nonce: req.nonce,
      sid: req.sid,
      profile: req.profile,
      scopes: req.scopes,
      nowMs: this.clock.now(),
      ttlMs: this.opts.idTokenTtlMs,
    });
    return signJwt(this.keys.signingKey(), 'JWT', claims);
  }
}
