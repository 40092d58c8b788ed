/**
 * The claims of the tokens identity signs, as pure functions (README, "Tokens";
 * proto/identity/v1 AccessTokenClaims and IdTokenClaims).
 *
 * Access token (RFC 9068, header `typ: at+jwt`): `iss`, `sub` = `user_id` (the client id for a
 * client-credentials token), `role`, `scope` (API scopes `<action>:<resource>`), `aud` (the one API
 * audience), `exp`, `iat`, `nbf`, `jti`, `client_id`, and when they apply `tenant_id`, `plan` and
 * `sid` (the grant a user token belongs to; revoking the grant makes it inactive at userinfo and
 * introspection), and `cnf.jkt` for a DPoP-bound token (RFC 9449 §6.1: the RFC 7638 thumbprint of
 * the key whose proofs must accompany it).
 *
 * Id token (OpenID Connect, header `typ: JWT`): `iss`, `sub`, `aud` = the client id, `exp`, `iat`,
 * `auth_time`, `nonce` (when the authorization request had one), `user_id`, `role`, `sid`, and
 * `email` / `email_verified` / `name` as the granted scopes allow.
 */

export interface AccessTokenInput {
  issuer: string;
  audience: string;
  sub: string;
  role: string;
  /** API scopes, space-separated (may be empty). */
  scope: string;
  /** The OAuth client; undefined for tokens not issued to a client (`/auth/login`). */
  clientId?: string | undefined;
  tenantId?: string | undefined;
  plan?: string | undefined;
  /** The grant id (user tokens only). */
  sid?: string | undefined;
  /** DPoP key thumbprint: the token is bound to it (`cnf.jkt`). */
  jkt?: string | undefined;
  jti: string;
  nowMs: number;
  ttlMs: number;
}

export function accessTokenClaims(i: AccessTokenInput): Record<string, unknown> {
  const iat = Math.floor(i.nowMs / 1000);
  const claims: Record<string, unknown> = {
    iss: i.issuer,
    sub: i.sub,
    user_id: i.sub,
    role: i.role,
    scope: i.scope,
    aud: i.audience,
    exp: iat + Math.floor(i.ttlMs / 1000),
    iat,
    nbf: iat,
    jti: i.jti,
  };
  if (i.clientId !== undefined) claims.client_id = i.clientId;
  if (i.tenantId !== undefined) claims.tenant_id = i.tenantId;
  if (i.plan !== undefined) claims.plan = i.plan;
  if (i.sid !== undefined) claims.sid = i.sid;
  if (i.jkt !== undefined) claims.cnf = { jkt: i.jkt };
  return claims;
}

export interface UserProfile {
  role: string;
  email?: string | undefined;
  emailVerified?: boolean | undefined;
  name?: string | undefined;
}

export interface IdTokenInput {
  issuer: string;
  sub: string;
  clientId: string;
  /** Epoch ms of the sign-in. */
  authTimeMs: number;
  nonce?: string | undefined;
  sid: string;
  profile: UserProfile;
  /** The granted scopes (OpenID ones decide which profile claims appear). */
  scopes: readonly string[];
  nowMs: number;
  ttlMs: number;
}

export function idTokenClaims(i: IdTokenInput): Record<string, unknown> {
  const iat = Math.floor(i.nowMs / 1000);
  const claims: Record<string, unknown> = {
    iss: i.issuer,
    sub: i.sub,
    aud: i.clientId,
    exp: iat + Math.floor(i.ttlMs / 1000),
    iat,
    auth_time: Math.floor(i.authTimeMs / 1000),
    user_id: i.sub,
    role: i.profile.role,
    sid: i.sid,
  };
  if (i.nonce !== undefined) claims.nonce = i.nonce;
  Object.assign(claims, profileClaims(i.profile, i.scopes));
  return claims;
}

/** The profile claims a set of scopes releases (OpenID Connect Core §5.4), for id tokens and userinfo. */
export function profileClaims(p: UserProfile, scopes: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (scopes.includes('email') && p.email !== undefined) {
    out.email = p.email;
    out.email_verified = p.emailVerified ?? false;
  }
  if (scopes.includes('profile') && p.name !== undefined) out.name = p.name;
  return out;
}
