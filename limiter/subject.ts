/**
 * Who is calling: the subject a request is counted against and vouched for upstream.
 *
 * Order (README, "Who is calling"): an `X-API-Key` first, hashed with SHA-256 before anything
 * else looks at it (the raw key is never stored, logged or traced); else a bearer access token,
 * verified at the edge; else, on routes that take no credentials, the client address under a
 * coarse per-IP cap; else 401 `credentials_required`.
 */
import { hash } from 'node:crypto';
import { PlatformError } from '../shared/errors.js';
import { quotaSubjectOf, type AccessClaims } from '../shared/jwt/index.js';

export type CallerKind = 'key' | 'token' | 'ip';

export interface Caller {
  kind: CallerKind;
  /** The quota subject: `key:<sha256 hex>`, `tenant:<id>`, `user:<id>` or `ip:<address>`. */
  subject: string;
  /** X-Subject-Role upstream: the token's role; `service` for API keys; `anonymous` by IP. */
  role: string;
  /** The user id for ownership checks (tokens only). */
  userId: string | undefined;
  /** The token's `plan` claim, if any. */
  plan: string | undefined;
}

/** `key:<sha256 hex of the raw key>`: the only form in which an API key exists past this line. */
export function apiKeySubject(rawKey: string): string {
  // crypto.hash (Node ≥ 20.12) is a one-shot digest: 2–3× cheaper than createHash().update().digest().
  return 'key:' + hash('sha256', rawKey, 'hex');
}

export function keyCaller(rawKey: string): Caller {
  return { kind: 'key', subject: apiKeySubject(rawKey), role: 'service', userId: undefined, plan: undefined };
}

export function tokenCaller(claims: AccessClaims): Caller {
  return { kind: 'token', subject: quotaSubjectOf(claims), role: claims.role || 'customer', userId: claims.sub, plan: claims.plan };
}

export function ipCaller(address: string): Caller {
  return { kind: 'ip', subject: 'ip:' + address, role: 'anonymous', userId: undefined, plan: undefined };
}

/** True when an Authorization header uses the Bearer scheme (the one the sidecar verifies). */
export function isBearer(authorization: string): boolean {
  return (
    authorization.length >= 6 &&
    authorization.slice(0, 6).toLowerCase() === 'bearer' &&
    (authorization.length === 6 || authorization[6] === ' ')
  );
}

/** True when an Authorization header uses the DPoP scheme (RFC 9449 §7.1). */
export function isDpopScheme(authorization: string): boolean {
  return authorization.length > 5 && authorization[4] === ' ' && authorization.slice(0, 4).toLowerCase() === 'dpop';
}

/** The token of an `Authorization: DPoP <token>` header; a malformed header is a 401. */
export function dpopSchemeToken(authorization: string): string {
  const token = authorization.slice(5).trim();
  if (token !== '' && !token.includes(' ')) return token;
  throw new PlatformError('invalid_token', {
    detail: 'the Authorization header must be "DPoP <access token>"',
    headers: { 'www-authenticate': 'DPoP error="invalid_request"' },
  });
}

export const BEARER_CHALLENGE: readonly string[] = ['www-authenticate', 'Bearer'];
export const ONLY_BEARER =
  'this route takes an X-API-Key or an Authorization: Bearer (or DPoP, with a DPoP proof) access token; other schemes are not accepted';

/** The token of an `Authorization: Bearer <token>` header; a malformed header is a 401. */
export function bearerToken(authorization: string): string {
  const sp = authorization.indexOf(' ');
  if (sp > 0 && authorization.slice(0, sp).toLowerCase() === 'bearer') {
    const token = authorization.slice(sp + 1).trim();
    if (token !== '') return token;
  }
  throw new PlatformError('invalid_token', {
    detail: 'the Authorization header must be "Bearer <access token>"',
    headers: { 'www-authenticate': 'Bearer error="invalid_request"' },
  });
}

/**
 * A path the route table's ownership rule gives to user `owner` (RouteTable.ownerOf) may be called
 * by that user (a token whose `sub` is `owner`), an API key, or a service role. Returns the
 * refusal, or undefined.
 */
export function ownerRefusal(owner: string, caller: Caller, serviceRoles: readonly string[]): PlatformError | undefined {
  if (caller.kind === 'key' || serviceRoles.includes(caller.role)) return undefined;
  if (caller.userId !== undefined && caller.userId === owner) return undefined;
  return new PlatformError('forbidden', { detail: 'this resource belongs to another user' });
}
