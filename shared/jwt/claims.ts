/**
 * The access-token claims (README, "Tokens"; RFC 9068) and their validation: a pure function of
 * (payload, expectations, now), run only after the signature has been verified.
 */
import { TokenError } from './errors.js';

/** The verified claims of an access token. Frozen: the same object may be returned again from the cache. */
export interface AccessClaims {
  readonly iss: string;
  /** The user id (or, for client-credentials tokens, the client's subject). */
  readonly sub: string;
  /** Always equal to `sub`; filled from `sub` when the token omits it. */
  readonly user_id: string;
  readonly role: string;
  /** Space-separated `<action>:<resource>` scopes; empty when the token has none. */
  readonly scope: string;
  /** As in the token: our audience, or an array that contains it. */
  readonly aud: string | readonly string[];
  /** Epoch seconds. */
  readonly exp: number;
  readonly iat: number;
  readonly nbf?: number;
  readonly jti: string;
  readonly tenant_id?: string;
  readonly plan?: string;
  readonly client_id?: string;
  /**
   * The token's family (the grant it was issued under; OpenID Connect's session id): revoking the
   * family revokes every access token that carries it (the revocation list, revocation-list.ts).
   */
  readonly sid?: string;
  /**
   * `cnf.jkt` (RFC 9449 §6.1): the token is DPoP-bound to the key with this RFC 7638 thumbprint
   * and is accepted only with a proof made by that key, never as a bearer token.
   */
  readonly jkt?: string;
}

export interface ClaimExpectations {
  issuer: string;
  audience: string;
  clockToleranceSec: number;
}

const MAX_ID_LENGTH = 256;
const MAX_SCOPE_LENGTH = 4096;

function isTime(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}

function requiredString(p: Record<string, unknown>, name: string, max = MAX_ID_LENGTH): string {
  const v = p[name];
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    throw new TokenError('claim_invalid', `token claim ${name} is missing or invalid`);
  }
  return v;
}

function optionalString(p: Record<string, unknown>, name: string, max = MAX_ID_LENGTH): string | undefined {
  if (p[name] === undefined) return undefined;
  return requiredString(p, name, max);
}

function audienceOk(aud: unknown, audience: string): boolean {
  if (typeof aud === 'string') return aud === audience;
  return Array.isArray(aud) && aud.length > 0 && aud.every((a) => typeof a === 'string') && aud.includes(audience);
}

const JKT = /^[A-Za-z0-9_-]{43}$/;

/** The `jkt` of a `cnf` claim; any other confirmation method (mTLS `x5t#S256`, …) is one we cannot check. */
function confirmationJkt(cnf: unknown): string {
  if (cnf === null || typeof cnf !== 'object' || Array.isArray(cnf)) throw new TokenError('claim_invalid', 'token claim cnf is invalid');
  const jkt = (cnf as Record<string, unknown>).jkt;
  if (jkt === undefined) throw new TokenError('claim_invalid', 'token is bound by a confirmation method this server does not support');
  if (typeof jkt !== 'string' || !JKT.test(jkt)) throw new TokenError('claim_invalid', 'token claim cnf.jkt is invalid');
  return jkt;
}

/**
 * Validates a verified payload and returns the normalised, frozen claims. Throws `TokenError`.
 *
 * Time rules, each with the tolerance `t` (JWT_CLOCK_SKEW, default 60 s): expired when `now − t ≥ exp`;
 * not yet valid when `nbf > now + t`; refused when `iat > now + t` (a token from the future is a
 * clock fault or a forgery either way).
 */
export function validateAccessClaims(payload: Record<string, unknown>, want: ClaimExpectations, nowMs: number): AccessClaims {
  if (payload.iss !== want.issuer) throw new TokenError('iss_mismatch', 'token issuer is not accepted');
  if (payload.aud === undefined) throw new TokenError('aud_missing', 'token has no audience');
  if (!audienceOk(payload.aud, want.audience)) throw new TokenError('aud_mismatch', 'token audience is not accepted');

  const now = nowMs / 1000;
  const t = want.clockToleranceSec;
  const { exp, iat, nbf } = payload;
  if (exp === undefined) throw new TokenError('exp_missing', 'token has no expiry (exp)');
  if (!isTime(exp)) throw new TokenError('claim_invalid', 'token claim exp is invalid');
  if (now - t >= exp) throw new TokenError('expired', 'token has expired');
  if (nbf !== undefined) {
    if (!isTime(nbf)) throw new TokenError('claim_invalid', 'token claim nbf is invalid');
    if (nbf > now + t) throw new TokenError('not_yet_valid', 'token is not valid yet (nbf)');
  }
  if (!isTime(iat)) throw new TokenError('claim_invalid', 'token claim iat is missing or invalid');
  if (iat > now + t) throw new TokenError('iat_future', 'token was issued in the future (iat)');

  const sub = requiredString(payload, 'sub');
  const userId = optionalString(payload, 'user_id');
  if (userId !== undefined && userId !== sub) throw new TokenError('claim_invalid', 'token claim user_id does not match sub');
  // Absent and empty mean the same (no scope): identity writes `scope: ""` into a token granted only
  // OpenID scopes (openid, profile), which are not API scopes, and services decide on its role.
  const scope = payload.scope === undefined || payload.scope === '' ? '' : requiredString(payload, 'scope', MAX_SCOPE_LENGTH);

  const claims: {
    -readonly [K in keyof AccessClaims]: AccessClaims[K];
  } = {
    iss: want.issuer,
    sub,
    user_id: sub,
    role: requiredString(payload, 'role'),
    scope,
    aud: Array.isArray(payload.aud) ? Object.freeze([...(payload.aud as string[])]) : (payload.aud as string),
    exp,
    iat,
    jti: requiredString(payload, 'jti'),
  };
  if (nbf !== undefined) claims.nbf = nbf;
  const tenant = optionalString(payload, 'tenant_id');
  if (tenant !== undefined) claims.tenant_id = tenant;
  const plan = optionalString(payload, 'plan');
  if (plan !== undefined) claims.plan = plan;
  const clientId = optionalString(payload, 'client_id');
  if (clientId !== undefined) claims.client_id = clientId;
  const sid = optionalString(payload, 'sid');
  if (sid !== undefined) claims.sid = sid;
  if (payload.cnf !== undefined) claims.jkt = confirmationJkt(payload.cnf);
  return Object.freeze(claims);
}

/**
 * The quota subject of a verified token (README, "Who is calling"): `tenant:<tenant_id>` when
 * the token names a tenant, else `user:<sub>`.
 */
export function quotaSubjectOf(claims: Pick<AccessClaims, 'sub' | 'tenant_id'>): string {
  return claims.tenant_id !== undefined && claims.tenant_id !== '' ? `tenant:${claims.tenant_id}` : `user:${claims.sub}`;
}
