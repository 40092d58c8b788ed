/**
 * `GET /.well-known/openid-configuration` (OpenID Connect Discovery 1.0; the same document at
 * `/.well-known/oauth-authorization-server`, RFC 8414) and `GET /.well-known/jwks.json`.
 * Every endpoint is advertised under the issuer (JWT_ISSUER), which is what clients and the
 * sidecar are configured with.
 */
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
  adminClients: '/auth/admin/clients',
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
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials', DEVICE_CODE_GRANT],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['ES256', 'RS256'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    code_challenge_methods_supported: ['S256'],
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

export function jwksEndpoint(rt: OAuthRuntime): Handler {
  const maxAge = Math.floor(rt.settings.jwksMaxAgeMs / 1000);
  return async () => {
    await rt.keys.ensureReady();
    return {
      body: rt.keys.jwks(),
      contentType: 'application/json',
      headers: { 'cache-control': `public, max-age=${maxAge}` },
    };
  };
}
