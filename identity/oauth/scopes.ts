/**
 * Scopes. API scopes have the shape `<action>:<resource>` (`read:orders`; README, "Tokens"); the OpenID
 * scopes `openid`, `profile`, `email` and `offline_access` choose what the id token and userinfo
 * carry. Access tokens carry the API scopes only (their `scope` claim is what resource servers
 * check); the OpenID scopes stay with the grant.
 */
import { OAuthError } from './oauth-error.js';

export const OIDC_SCOPES: ReadonlySet<string> = new Set(['openid', 'profile', 'email', 'offline_access']);

const API_SCOPE_RE = /^[a-z][a-z0-9_-]{0,63}:[a-z][a-z0-9_.-]{0,127}$/;

export function isApiScope(s: string): boolean {
  return API_SCOPE_RE.test(s);
}

export function isValidScopeToken(s: string): boolean {
  return OIDC_SCOPES.has(s) || isApiScope(s);
}

/**
 * Parses a `scope` parameter (space-separated, RFC 6749 §3.3) into distinct scopes, in order.
 * Undefined when absent. Throws `invalid_scope` for a malformed scope.
 */
export function parseScope(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  if (raw.length > 4096) throw new OAuthError('invalid_scope', 'scope is too long');
  const out: string[] = [];
  for (const s of raw.split(' ')) {
    if (s === '') continue;
    if (!isValidScopeToken(s))
      throw new OAuthError('invalid_scope', 'a requested scope is not of the form <action>:<resource> nor an OpenID scope');
    if (!out.includes(s)) out.push(s);
  }
  return out;
}

/**
 * The scopes to grant: the requested ones when every one is allowed to the client (else
 * `invalid_scope`), or, when none is requested, the client's allowed list (RFC 6749 §3.3: a
 * documented default). `only` filters what this grant can carry (client credentials: API scopes).
 */
export function grantScopes(requested: string[] | undefined, allowed: readonly string[], only?: (s: string) => boolean): string[] {
  const pool = only ? allowed.filter(only) : [...allowed];
  if (requested === undefined || requested.length === 0) return pool;
  for (const s of requested) {
    if (!pool.includes(s)) throw new OAuthError('invalid_scope', 'a requested scope is not allowed for this client');
  }
  return requested;
}

/** The access token's `scope` claim: the API scopes of a grant, space-separated. */
export function accessTokenScope(scopes: readonly string[]): string {
  return scopes.filter(isApiScope).join(' ');
}

export function joinScopes(scopes: readonly string[]): string {
  return scopes.join(' ');
}

export function splitScopes(scope: string): string[] {
  return scope.split(' ').filter((s) => s !== '');
}
