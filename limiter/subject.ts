/**
 * Who is calling: the subject a request is counted against and vouched for upstream.
 *
 * Order (DESIGN.md, "The request path"): an `X-API-Key` first, hashed with SHA-256 before anything
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

const USERS_PREFIX = '/api/v1/users/';

/**
 * Routes under `/api/v1/users/{user_id}/...` belong to that user: the caller must be the user
 * (a token whose `sub` is `user_id`) or hold a service role. Returns the refusal, or undefined.
 */
export function ownerRefusal(path: string, caller: Caller, serviceRoles: readonly string[]): PlatformError | undefined {
  if (!path.startsWith(USERS_PREFIX)) return undefined;
  if (caller.kind === 'key' || serviceRoles.includes(caller.role)) return undefined;
  const end = path.indexOf('/', USERS_PREFIX.length);
  let id = path.slice(USERS_PREFIX.length, end < 0 ? undefined : end);
  try {
    id = decodeURIComponent(id);
  } catch {
    // leave it encoded: it will not equal a user id
  }
  if (caller.userId !== undefined && caller.userId === id) return undefined;
  return new PlatformError('forbidden', { detail: 'this resource belongs to another user' });
}
