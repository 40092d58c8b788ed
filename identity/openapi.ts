/**
 * The OpenAPI 3.1 document of the identity service, served at `/openapi.json`: accounts, the
 * orders API, the operator endpoints, and the OAuth 2.0 / OpenID Connect endpoints. For the
 * latter the discovery document (`/.well-known/openid-configuration`) is authoritative (grants,
 * auth methods, scopes, algorithms); they are listed here so every path is in one place, with
 * their RFC error shape (`{error, error_description}`), not problem+json. The sign-in and device
 * pages answer HTML.
 */
import {
  anyObject,
  bool,
  buildDocument,
  int,
  num,
  obj,
  OPERATIONAL_SCHEMAS,
  operationalOperations,
  ref,
  str,
  strings,
  type OperationSpec,
  type Schema,
} from '../shared/openapi.js';

const ORDERS = ['bearer'];
const ADMIN = ['identityAdmin'];
const NONE: string[] = [];
const html = (description: string) => ({ description, schema: str, contentType: 'text/html' });
const oauthError = (description = 'OAuth error (RFC 6749 §5.2)') => ({ description, schema: ref('OAuthError') });
const open = (description: string): Schema => ({ ...anyObject, description });
const ID = { id: { description: 'The order id', example: 'ord_x' } };
const ORDER_ERRORS = [400, 401, 403, 404, 409, 428, 503];

const client = obj(
  {
    client_id: str,
    client_type: { enum: ['confidential', 'public'] },
    name: str,
    redirect_uris: strings,
    grant_types: strings,
    scope: str,
    role: str,
    token_endpoint_auth_method: { enum: ['client_secret_basic', 'none'] },
    created_at: { ...num, description: 'Epoch seconds' },
    dpop_bound_access_tokens: bool,
    tenant_id: str,
    plan: str,
    client_secret: { ...str, description: 'Only when registered: shown this once' },
  },
  ['tenant_id', 'plan', 'client_secret'],
);

const order = (summary: string, extra: Partial<OperationSpec> = {}): OperationSpec => ({
  summary,
  tags: ['orders'],
  security: ORDERS,
  path: ID,
  responses: { '200': { schema: open('The order (identity/http/orders.ts)') } },
  errors: ORDER_ERRORS,
  ...extra,
});

const operations: Record<string, OperationSpec> = {
  // ── accounts (identity/accounts/routes.ts) ──
  'POST /auth/signup': {
    summary: 'Create an account (always a customer)',
    tags: ['accounts'],
    security: NONE,
    body: { schema: obj({ email: str, password: str, name: str }) },
    responses: { '201': { schema: obj({ user_id: str }) } },
    errors: [400, 409, 415, 503],
  },
  'POST /auth/login': {
    summary: 'Sign in with e-mail and password: an access token',
    tags: ['accounts'],
    security: NONE,
    body: { schema: obj({ email: str, password: str }) },
    responses: { '200': { schema: obj({ access_token: str, token_type: { const: 'Bearer' }, expires_in: int }) } },
    errors: [400, 401, 415, 429, 503],
  },
  // ── orders (identity/http/orders.ts) ──
  'POST /checkout': {
    summary: 'Place (and by default pay) an order for the caller',
    tags: ['orders'],
    security: ORDERS,
    body: { schema: open('items, card token and last four digits (or a card number), pay, idempotency_key') },
    responses: { '201': { schema: open('The order') } },
    errors: ORDER_ERRORS,
  },
  'POST /checkout/:id/pay': order('Pay an order placed unpaid'),
  'GET /order/:id': order('The order (read model; ?consistent=true from the write model)', {
    query: { consistent: { schema: { enum: ['true', 'false'] } }, reason: { description: 'Needed for a staff read (audited)' } },
  }),
  'GET /orders': {
    summary: "The caller's orders (support and admin name the customer)",
    tags: ['orders'],
    security: ORDERS,
    query: { user_id: {}, reason: {} },
    responses: { '200': { schema: open('The orders') } },
    errors: [400, 401, 403, 503],
  },
  'GET /orders/:id/payment-method': order('The card as its last four digits'),
  'POST /orders/:id/cancel': order('Cancel an order'),
  'POST /order/:id/cancel': order('Cancel an order (earlier path)'),
  'POST /orders/:id/refund': order('Refund an order'),
  'POST /order/:id/refund': order('Refund an order (earlier path)'),
  'PATCH /orders/:id': order('Modify an order', { body: { schema: open('The changes') } }),
  'POST /order/:id/modify': order('Modify an order (earlier path)', { body: { schema: open('The changes') } }),
  'DELETE /orders/:id': order('Delete an order', { responses: { '204': {} } }),
  'DELETE /order/:id': order('Delete an order (earlier path)', { responses: { '204': {} } }),
  // ── operators: projections (identity/events/admin-http.ts) ──
  'GET /auth/admin/projections': {
    summary: 'Each projector: generations, positions, open dead letters',
    tags: ['admin'],
    security: ORDERS,
    responses: { '200': { schema: open('identity/events/admin-http.ts') } },
    errors: [401, 403, 503],
  },
  'POST /auth/admin/projections/:name/rebuild': {
    summary: 'Replay the log into a new generation',
    tags: ['admin'],
    security: ORDERS,
    path: { name: { example: 'order_search' } },
    responses: { '202': { schema: open('The rebuild') } },
    errors: [401, 403, 404, 409, 503],
  },
  'GET /auth/admin/dead-letters': {
    summary: 'Projection dead letters (default: open ones)',
    tags: ['admin'],
    security: ORDERS,
    query: { projector: {}, status: {} },
    responses: { '200': { schema: open('The dead letters') } },
    errors: [400, 401, 403, 503],
  },
  'POST /auth/admin/dead-letters/redrive': {
    summary: 'Re-drive open dead letters after a fix',
    tags: ['admin'],
    security: ORDERS,
    body: {
      schema: obj({ projector: str, ids: { type: 'array', items: { type: 'integer', minimum: 1 } } }, ['projector', 'ids']),
      required: false,
    },
    responses: {
      '200': {
        schema: {
          ...obj({
            redriven: { ...int, minimum: 0, description: 'Dead letters applied now, marked redriven' },
            failed: {
              ...int,
              minimum: 0,
              description: 'Dead letters refused or failed again: still open, attempts raised, error replaced, nothing written',
            },
            remaining: { ...int, minimum: 0, description: 'Open dead letters left of the re-driven projectors' },
          }),
          description: 'Only what really projected counts as redriven (identity/events/dead-letters.ts)',
        },
      },
    },
    errors: [400, 401, 403, 415, 503],
  },
  // ── operators: OAuth clients (identity/clients/admin-endpoint.ts) ──
  'POST /auth/admin/clients': {
    summary: "Register a client; a confidential client's secret is shown this once",
    tags: ['clients'],
    security: ADMIN,
    body: {
      schema: {
        type: 'object',
        required: ['client_type'],
        description: 'RFC 7591 names where they exist (identity/clients/client.ts validateRegistration)',
        properties: {
          client_id: { ...str, description: 'Generated when absent' },
          client_type: { enum: ['public', 'confidential'] },
          name: str,
          redirect_uris: { ...strings, description: 'Needed by the authorization_code grant' },
          grant_types: {
            type: 'array',
            items: {
              enum: ['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'],
            },
            description: 'Default: authorization_code and refresh_token (public), client_credentials (confidential)',
          },
          scope: { ...str, description: 'Space-separated scopes the client may ask for' },
          role: { enum: ['service', 'admin'], description: 'The role of its client_credentials tokens (default service)' },
          tenant_id: str,
          plan: str,
          dpop_bound_access_tokens: { ...bool, description: 'The client must use DPoP (RFC 9449 §5.2); default false' },
        },
      },
    },
    responses: { '201': { schema: client } },
    errors: [400, 401, 403, 409, 415, 503],
  },
  'GET /auth/admin/clients': {
    summary: 'Every client (never a secret)',
    tags: ['clients'],
    security: ADMIN,
    responses: { '200': { schema: obj({ clients: { type: 'array', items: client } }) } },
    errors: [401, 403, 503],
  },
  'GET /auth/admin/clients/:id': {
    summary: 'One client (never a secret)',
    tags: ['clients'],
    security: ADMIN,
    path: { id: { example: 'console' } },
    responses: { '200': { schema: client } },
    errors: [401, 403, 404, 503],
  },
  'POST /auth/admin/clients/:id/secret': {
    summary: 'A new secret, shown this once (the old one stops working at once)',
    tags: ['clients'],
    security: ADMIN,
    path: { id: { example: 'console' } },
    responses: { '200': { schema: obj({ client_id: str, client_secret: str }) } },
    errors: [400, 401, 403, 404, 503],
  },
  'DELETE /auth/admin/clients/:id': {
    summary: 'Remove a client',
    tags: ['clients'],
    security: ADMIN,
    path: { id: { example: 'console' } },
    responses: { '204': {} },
    errors: [401, 403, 404, 503],
  },
  // ── operators: user look-up (identity/accounts/admin-users.ts) ──
  'GET /auth/admin/users': {
    summary: 'Who some user ids are (e-mail, name, role); unknown ids are left out',
    tags: ['accounts'],
    security: ADMIN,
    query: { id: { required: true, description: 'A user id; repeat for more (at most 100)', example: 'u1' } },
    responses: {
      '200': {
        schema: obj({
          users: { type: 'array', items: obj({ user_id: str, email: str, name: { oneOf: [str, { type: 'null' }] }, role: str }) },
        }),
      },
    },
    errors: [400, 401, 403, 503],
  },
  // ── operators: signing keys (identity/keys/admin-endpoint.ts) ──
  'GET /auth/admin/keys': {
    summary: 'Every signing key with its state and schedule (never key material)',
    tags: ['keys'],
    security: ADMIN,
    responses: { '200': { schema: open('{keys: [...]}') } },
    errors: [401, 403, 503],
  },
  'POST /auth/admin/keys/:kid/revoke': {
    summary: 'Emergency revocation of a signing key',
    tags: ['keys'],
    security: ADMIN,
    path: { kid: { example: 'k1' } },
    body: { schema: obj({ reason: str }, ['reason']), required: false },
    responses: { '200': { schema: open('{kid, revoked_at, already_revoked, successor}') } },
    errors: [400, 401, 403, 404, 503],
  },
  // ── OAuth 2.0 / OpenID Connect: the discovery document is authoritative ──
  'GET /.well-known/openid-configuration': {
    summary: 'OpenID Connect discovery: the endpoints, grants, scopes and algorithms below',
    tags: ['oauth'],
    security: NONE,
    responses: { '200': { schema: open('OpenID Provider Metadata (OpenID Connect Discovery 1.0)') } },
  },
  'GET /.well-known/oauth-authorization-server': {
    summary: 'OAuth 2.0 Authorization Server Metadata (RFC 8414), the same document',
    tags: ['oauth'],
    security: NONE,
    responses: { '200': { schema: open('RFC 8414 metadata') } },
  },
  'GET /.well-known/jwks.json': {
    summary: 'The public signing keys (JWK Set)',
    tags: ['oauth'],
    security: NONE,
    responses: { '200': { schema: obj({ keys: { type: 'array', items: anyObject } }) } },
  },
  'GET /authorize': {
    summary: 'Authorization endpoint (code flow with PKCE): the sign-in page, or a redirect with the code or an error',
    tags: ['oauth'],
    security: NONE,
    responses: {
      '200': html('The sign-in page'),
      '302': { description: 'To the redirect_uri with code or error' },
      '303': {},
      '400': html('An error page (no trusted redirect_uri)'),
    },
  },
  'POST /authorize': {
    summary: 'The sign-in form, posted back (anti-forgery token and same-site checked)',
    tags: ['oauth'],
    security: NONE,
    body: { schema: open('The form'), contentType: 'application/x-www-form-urlencoded' },
    responses: {
      '200': html('The page again, with the error'),
      '302': { description: 'To the redirect_uri with the code' },
      '303': {},
      '400': html('An error page'),
      '403': html('A cross-site or forged post'),
      '429': html('Sign-in throttled'),
    },
  },
  'POST /token': {
    summary: 'Token endpoint: authorization_code, refresh_token, client_credentials, device_code (see discovery)',
    tags: ['oauth'],
    security: NONE,
    body: { schema: open('The grant parameters'), contentType: 'application/x-www-form-urlencoded' },
    responses: {
      '200': { schema: open('access_token, token_type, expires_in, refresh_token?, id_token?, scope') },
      '400': oauthError(),
      '401': oauthError('invalid_client'),
      '415': oauthError(),
      '503': oauthError('temporarily_unavailable'),
    },
  },
  'POST /auth/device_authorization': {
    summary: 'Device authorization (RFC 8628)',
    tags: ['oauth'],
    security: NONE,
    body: { schema: open('client_id, scope'), contentType: 'application/x-www-form-urlencoded' },
    responses: {
      '200': { schema: open('device_code, user_code, verification_uri, …') },
      '400': oauthError(),
      '401': oauthError(),
      '415': oauthError(),
    },
  },
  'GET /auth/device': {
    summary: 'The device page: enter the user code and sign in',
    tags: ['oauth'],
    security: NONE,
    responses: { '200': html('The device page'), '400': html('An error page') },
  },
  'POST /auth/device': {
    summary: 'The device page, posted back',
    tags: ['oauth'],
    security: NONE,
    body: { schema: open('The form'), contentType: 'application/x-www-form-urlencoded' },
    responses: {
      '200': html('The page, with the outcome'),
      '400': html('An error page'),
      '403': html('A cross-site or forged post'),
      '429': html('Throttled'),
    },
  },
  'GET /userinfo': {
    summary: 'OpenID Connect UserInfo (bearer or DPoP access token)',
    tags: ['oauth'],
    security: ORDERS,
    responses: {
      '200': { schema: open('Claims: sub, email, name, role …') },
      '401': { description: 'WWW-Authenticate says why' },
      '403': {},
    },
  },
  'POST /userinfo': {
    summary: 'OpenID Connect UserInfo, by POST',
    tags: ['oauth'],
    security: ORDERS,
    responses: { '200': { schema: open('Claims') }, '401': { description: 'WWW-Authenticate says why' }, '403': {} },
  },
  'POST /auth/introspect': {
    summary: 'Token introspection (RFC 7662), for confidential clients',
    tags: ['oauth'],
    security: ['clientBasic'],
    body: { schema: open('token, token_type_hint'), contentType: 'application/x-www-form-urlencoded' },
    responses: { '200': { schema: open('{active, …}') }, '400': oauthError(), '401': oauthError(), '415': oauthError() },
  },
  'POST /revoke': {
    summary: 'Token revocation (RFC 7009): a refresh token ends its family, an access token itself',
    description:
      'The client authenticates as at /token (a public client with client_id alone). 200 whether or not anything was revoked: an unknown, invalid or expired token, or one issued to another client, changes nothing.',
    tags: ['oauth'],
    security: ['clientBasic'],
    body: {
      schema: open('token, token_type_hint (access_token or refresh_token), client_id'),
      contentType: 'application/x-www-form-urlencoded',
    },
    responses: {
      '200': { description: 'Revoked, or nothing to revoke; no body' },
      '400': oauthError(),
      '401': oauthError(),
      '415': oauthError(),
    },
  },
  'GET /.well-known/revoked-tokens.json': {
    summary: 'The revocation list the sidecars poll: revoked families (sid) and access tokens (jti), each with its last exp',
    tags: ['oauth'],
    security: NONE,
    responses: {
      '200': {
        schema: obj({
          iss: str,
          complete: bool,
          sid: { type: 'object', additionalProperties: int, description: "Revoked families: grant id (the tokens' sid) → epoch seconds" },
          jti: { type: 'object', additionalProperties: int, description: 'Revoked access tokens: jti → their exp' },
        }),
      },
      '304': { description: 'Not modified (If-None-Match matched the ETag)' },
    },
  },
  ...operationalOperations(),
};

export const identityOpenApi = buildDocument({
  title: 'Identity',
  version: '1',
  description:
    'Accounts, the orders API, operator endpoints, and the OAuth 2.0 / OpenID Connect authorization server (identity/README.md). The OAuth endpoints follow their RFCs: /.well-known/openid-configuration is authoritative for them and their errors are {error, error_description}; everything else answers errors as application/problem+json naming the field at fault.',
  securitySchemes: {
    bearer: { type: 'http', scheme: 'bearer', description: "An access token of identity's (Bearer, or DPoP when bound)" },
    identityAdmin: {
      type: 'http',
      scheme: 'bearer',
      description: 'IDENTITY_ADMIN_TOKEN, or an access token whose role is admin',
    },
    clientBasic: { type: 'http', scheme: 'basic', description: 'client_id and client_secret' },
  },
  security: ORDERS,
  schemas: {
    OAuthError: {
      type: 'object',
      required: ['error'],
      properties: { error: str, error_description: str, error_uri: str },
    },
    ...OPERATIONAL_SCHEMAS,
  },
  operations,
});
