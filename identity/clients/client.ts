/**
 * OAuth clients: the registered record and the validation of a registration (pure).
 *
 * Rules we chose (also in README, "Clients"):
 * - `client_credentials` only for confidential clients; public clients use the authorization
 *   code (with PKCE) and device grants.
 * - redirect URIs are absolute, without fragment or wildcard, and are compared as exact strings
 *   (no prefix, no normalisation, the loopback port included). `https` everywhere; `http` only on
 *   a loopback host (127.0.0.1, [::1], localhost) for development and native apps; a private-use
 *   scheme (reverse domain name, e.g. `com.example.app:/cb`) only for public clients (RFC 8252).
 * - the role of a client's own (client-credentials) tokens is `service` or `admin`.
 */
import { randomBytes } from 'node:crypto';
import { invalidField } from '../../shared/errors.js';
import { isValidScopeToken } from '../oauth/scopes.js';

export type ClientType = 'public' | 'confidential';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

export type GrantType = 'authorization_code' | 'refresh_token' | 'client_credentials' | typeof DEVICE_CODE_GRANT;

export const GRANT_TYPES: readonly GrantType[] = ['authorization_code', 'refresh_token', 'client_credentials', DEVICE_CODE_GRANT];

export const CLIENT_ROLES = ['service', 'admin'] as const;

/** A registered client as the authorization server uses it. */
export interface OAuthClient {
  readonly clientId: string;
  readonly type: ClientType;
  readonly name: string;
  readonly redirectUris: readonly string[];
  readonly grantTypes: readonly GrantType[];
  /** Every scope the client may ask for. */
  readonly scopes: readonly string[];
  /** Role claim of its client-credentials tokens. */
  readonly role: string;
  readonly tenantId: string | undefined;
  readonly plan: string | undefined;
  /** SHA-256 of the secret; confidential clients only. */
  readonly secretSha256: Buffer | undefined;
  /** RFC 9449 §5.2 `dpop_bound_access_tokens`: every token request must carry a DPoP proof (absent: false). */
  readonly dpopBoundAccessTokens?: boolean;
  readonly createdAt: number;
}

/** A validated registration, ready to store. */
export interface ClientRegistration {
  readonly clientId: string;
  readonly type: ClientType;
  readonly name: string;
  readonly redirectUris: readonly string[];
  readonly grantTypes: readonly GrantType[];
  readonly scopes: readonly string[];
  readonly role: string;
  readonly tenantId: string | undefined;
  readonly plan: string | undefined;
  readonly dpopBoundAccessTokens: boolean;
}

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const MAX_REDIRECT_URIS = 20;
const MAX_URI_LENGTH = 2000;
const MAX_SCOPES = 100;
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** A client id: 1–128 of letters, digits and `. _ : -`, starting alphanumeric. */
export function isValidClientId(id: unknown): id is string {
  return typeof id === 'string' && ID_RE.test(id);
}

/** A new random client id (16 bytes, base64url). */
export function newClientId(): string {
  return randomBytes(16).toString('base64url');
}

/** Why a redirect URI cannot be registered, or undefined when it can. */
export function redirectUriProblem(uri: string, type: ClientType): string | undefined {
  if (uri.length === 0 || uri.length > MAX_URI_LENGTH) return `must be 1 to ${MAX_URI_LENGTH} characters`;
  if (uri.includes('*')) return 'must not contain a wildcard';
  if (uri.includes('#')) return 'must not contain a fragment';
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(uri)) return 'must not contain spaces or control characters';
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return 'must be an absolute URI';
  }
  if (u.username !== '' || u.password !== '') return 'must not contain credentials';
  if (u.protocol === 'https:') return u.hostname === '' ? 'must name a host' : undefined;
  if (u.protocol === 'http:') return LOOPBACK_HOSTS.has(u.hostname) ? undefined : 'http is only allowed on a loopback host; use https';
  if (type === 'public' && /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/.test(u.protocol)) return undefined;
  return 'must be https, http on a loopback host, or (public clients) a private-use reverse-domain scheme';
}

function stringList(v: unknown, field: string): string[] {
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw invalidField(field, 'must be an array of strings');
  return v as string[];
}

function optionalId(v: unknown, field: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isValidClientId(v)) throw invalidField(field, 'must be 1 to 128 letters, digits or . _ : - starting with a letter or digit');
  return v;
}

/**
 * Validates a registration body (JSON, snake_case as in RFC 7591 where the names exist):
 * `client_id`? (generated when absent), `client_type` (`public` | `confidential`), `name`?,
 * `redirect_uris`?, `grant_types`?, `scope`? (space-separated scopes the client may ask for),
 * `role`?, `tenant_id`?, `plan`?, `dpop_bound_access_tokens`? (boolean, default false: the client
 * must use DPoP, RFC 9449 §5.2). Throws `invalid_field` naming the field.
 */
export function validateRegistration(body: Record<string, unknown>): ClientRegistration {
  const type = body.client_type;
  if (type !== 'public' && type !== 'confidential') throw invalidField('client_type', 'must be public or confidential');
  const clientId = body.client_id === undefined ? newClientId() : optionalId(body.client_id, 'client_id')!;
  const name = body.name === undefined ? clientId : body.name;
  if (typeof name !== 'string' || name.trim() === '' || name.length > 200) throw invalidField('name', 'must be 1 to 200 characters');

  const grantTypes = (
    body.grant_types === undefined
      ? type === 'public'
        ? ['authorization_code', 'refresh_token']
        : ['client_credentials']
      : stringList(body.grant_types, 'grant_types')
  ) as GrantType[];
  if (grantTypes.length === 0) throw invalidField('grant_types', 'must name at least one grant type');
  for (const g of grantTypes) {
    if (!GRANT_TYPES.includes(g)) {
      throw invalidField('grant_types', `unknown or refused grant type "${g}" (implicit and password are not offered)`);
    }
  }
  if (type === 'public' && grantTypes.includes('client_credentials')) {
    throw invalidField('grant_types', 'client_credentials needs a confidential client');
  }
  if (grantTypes.includes('refresh_token') && !grantTypes.includes('authorization_code') && !grantTypes.includes(DEVICE_CODE_GRANT)) {
    throw invalidField('grant_types', 'refresh_token needs authorization_code or the device grant');
  }

  const redirectUris = body.redirect_uris === undefined ? [] : stringList(body.redirect_uris, 'redirect_uris');
  if (redirectUris.length > MAX_REDIRECT_URIS) throw invalidField('redirect_uris', `must list at most ${MAX_REDIRECT_URIS} URIs`);
  redirectUris.forEach((uri, i) => {
    const why = redirectUriProblem(uri, type);
    if (why) throw invalidField(`redirect_uris[${i}]`, why);
  });
  if (grantTypes.includes('authorization_code') && redirectUris.length === 0) {
    throw invalidField('redirect_uris', 'the authorization_code grant needs at least one redirect URI');
  }

  const defaultScope = grantTypes.includes('client_credentials') && grantTypes.length === 1 ? '' : 'openid profile email';
  const rawScope = body.scope === undefined ? defaultScope : body.scope;
  if (typeof rawScope !== 'string') throw invalidField('scope', 'must be a space-separated string of scopes');
  const scopes = [...new Set(rawScope.split(' ').filter((s) => s !== ''))];
  if (scopes.length > MAX_SCOPES) throw invalidField('scope', `must name at most ${MAX_SCOPES} scopes`);
  for (const s of scopes)
    if (!isValidScopeToken(s)) throw invalidField('scope', `"${s.slice(0, 80)}" is not a scope (<action>:<resource> or an OpenID scope)`);

  const role = body.role === undefined ? 'service' : body.role;
  if (typeof role !== 'string' || !(CLIENT_ROLES as readonly string[]).includes(role))
    throw invalidField('role', 'must be service or admin');

  return {
    clientId,
    type,
    name: name.trim(),
    redirectUris,
    grantTypes,
    scopes,
    role,
    tenantId: optionalId(body.tenant_id, 'tenant_id'),
    plan: optionalId(body.plan, 'plan'),
    dpopBoundAccessTokens: dpopFlag(body.dpop_bound_access_tokens),
  };
}

function dpopFlag(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalidField('dpop_bound_access_tokens', 'must be true or false');
  return v;
}

/** The client as the admin API shows it: no secret, no hash. */
export function clientView(c: OAuthClient): Record<string, unknown> {
  const out: Record<string, unknown> = {
    client_id: c.clientId,
    client_type: c.type,
    name: c.name,
    redirect_uris: [...c.redirectUris],
    grant_types: [...c.grantTypes],
    scope: c.scopes.join(' '),
    role: c.role,
    token_endpoint_auth_method: c.type === 'confidential' ? 'client_secret_basic' : 'none',
    created_at: c.createdAt / 1000,
    dpop_bound_access_tokens: c.dpopBoundAccessTokens === true,
  };
  if (c.tenantId !== undefined) out.tenant_id = c.tenantId;
  if (c.plan !== undefined) out.plan = c.plan;
  return out;
}
