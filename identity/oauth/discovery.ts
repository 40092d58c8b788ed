/**
 * `GET /.well-known/openid-configuration` (OpenID Connect Discovery 1.0; the same document at
 * `/.well-known/oauth-authorization-server`, RFC 8414) and `GET /.well-known/jwks.json`.
 * Every endpoint is advertised under the issuer (JWT_ISSUER), which is what clients and the
 * sidecar are configured with.
 *
 * The JWKS carries a strong ETag (a hash of the exact bytes sent) and answers a matching
 * `If-None-Match` with 304 and no body: sidecars poll it every few seconds (JWKS_REFRESH_INTERVAL)
 * so that a revoked key stops verifying quickly, and almost every poll is then a 304.
 */
import { createHash } from 'node:crypto';
import { DEFAULT_DPOP_ALGS } from '../../shared/dpop/index.js';
import type { Handler } from '../../shared/http.js';
import { DEVICE_CODE_GRANT } from '../clients/client.js';
import { DEVICE_PAGE_PATH } from './device-endpoint.js';
import type { OAuthRuntime } from './runtime.js';
import { OIDC_SCOPES } from './scopes.js';
import type { OAuthSettings } from './settings.js';

export const PATHS = Object.freeze({
  authorize: '/authorize',
  token: '/token',
  userinfo: '/userinfo',
  jwks: '/.well-known/jwks.json',
  discovery: '/.well-known/openid-configuration',
  asMetadata: '/.well-known/oauth-authorization-server',
  deviceAuthorization: '/auth/device_authorization',
  devicePage: DEVICE_PAGE_PATH,
  introspect: '/auth/introspect',
  revoke: '/revoke',
  revocationList: '/.well-known/revoked-tokens.json',
  adminClients: '/auth/admin/clients',
  adminKeys: '/auth/admin/keys',
});

/** The metadata document (pure). */
export function discoveryDocument(s: OAuthSettings): Record<string, unknown> {
  const at = (path: string): string => `${s.issuer}${path}`;
  return {
    issuer: s.issuer,
    authorization_endpoint: at(PATHS.authorize),
    token_endpoint: at(PATHS.token),
    userinfo_endpoint: at(PATHS.userinfo),
    jwks_uri: at(PATHS.jwks),
    device_authorization_endpoint: at(PATHS.deviceAuthorization),
    introspection_endpoint: at(PATHS.introspect),
    revocation_endpoint: at(PATHS.revoke),
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials', DEVICE_CODE_GRANT],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['ES256', 'RS256'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    // RFC 7009 §2.1: a public client revokes its own tokens with its client_id alone.
    revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    code_challenge_methods_supported: ['S256'],
    // RFC 9449 §5.1: the proof algorithms /token and /userinfo accept.
    dpop_signing_alg_values_supported: [...DEFAULT_DPOP_ALGS],
    scopes_supported: [...OIDC_SCOPES],
    claims_supported: [
      'sub',
      'iss',
      'aud',
      'exp',
      'iat',
      'auth_time',
      'nonce',
      'sid',
      'user_id',
      'role',
      'email',
      'email_verified',
      'name',
    ],
    authorization_response_iss_parameter_supported: true,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    claims_parameter_supported: false,
  };
}

export function discoveryEndpoint(rt: OAuthRuntime): Handler {
  const body = discoveryDocument(rt.settings);
  return () => ({ body, headers: { 'cache-control': 'public, max-age=3600' } });
}

/** A strong entity tag for a body: the base64url SHA-256 of its bytes, quoted (RFC 9110 §8.8.3). */
export function strongEtag(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url')}"`;
}

/**
 * Whether an `If-None-Match` header matches `etag`: `*`, or a list naming it. The comparison is
 * weak (RFC 9110 §13.1.2), so `W/"x"` matches `"x"`.
 */
export function ifNoneMatchHits(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === opaque);
}

export function jwksEndpoint(rt: OAuthRuntime): Handler {
  const maxAge = Math.floor(rt.settings.jwksMaxAgeMs / 1000);
  // The key ring hands out the same document object until the published set changes.
  let last: { doc: object; body: string; etag: string } | undefined;
  return async (ctx) => {
    await rt.keys.ensureReady();
    const doc = rt.keys.jwks();
    if (last?.doc !== doc) {
      const body = JSON.stringify(doc);
      last = { doc, body, etag: strongEtag(body) };
    }
    const headers = { 'cache-control': `public, max-age=${maxAge}`, etag: last.etag };
    if (ifNoneMatchHits(ctx.headers['if-none-match'], last.etag)) return { status: 304, headers };
    return { body: last.body, contentType: 'application/json', headers };
  };
}
