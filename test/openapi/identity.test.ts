/**
 * The identity service's OpenAPI document (identity/openapi.ts) against a real identity: its routes
 * both ways, and recorded answers (accounts, the client registry, OAuth errors, discovery)
 * validated against it.
 */
import t from 'tap';
import { startTestIdentity } from '../identity/accounts/helpers.js';
import { checkRoutes, fetchDocument, record, requestValidator, responseValidator } from './helpers.js';

const ADMIN_TOKEN = 'openapi-identity-admin-token-0123456789abcdef';
const id = await startTestIdentity(t, 'openapi_identity', { IDENTITY_ADMIN_TOKEN: ADMIN_TOKEN });
const doc = await fetchDocument(t, id.base);
const valid = responseValidator(doc);
const validRequest = requestValidator(doc);
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

t.test('every served route is documented and every documented route is served', (t) => checkRoutes(t, doc, id.identity.port));

t.test('recorded answers match the document', async (t) => {
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const cases: [string, string, string, { headers?: Record<string, string>; body?: unknown }, number][] = [
    ['POST', '/auth/signup', '/auth/signup', { body: { email: 'ada@example.test', password: 'correct horse battery', name: 'Ada' } }, 201],
    ['POST', '/auth/signup', '/auth/signup', { body: { email: 'not-an-email', password: 'x', name: 'A' } }, 400],
    ['POST', '/auth/login', '/auth/login', { body: { email: 'ada@example.test', password: 'correct horse battery' } }, 200],
    ['POST', '/auth/login', '/auth/login', { body: { email: 'ada@example.test', password: 'wrong password!' } }, 401],
    [
      'POST',
      '/auth/admin/clients',
      '/auth/admin/clients',
      {
        headers: admin,
        body: {
          client_id: 'openapi-test',
          client_type: 'confidential',
          name: 'OpenAPI test',
          redirect_uris: ['http://127.0.0.1:9/cb'],
          grant_types: ['authorization_code'],
          scope: 'openid',
        },
      },
      201,
    ],
    ['GET', '/auth/admin/clients', '/auth/admin/clients', { headers: admin }, 200],
    ['GET', '/auth/admin/clients/:id', '/auth/admin/clients/openapi-test', { headers: admin }, 200],
    ['POST', '/auth/admin/clients/:id/secret', '/auth/admin/clients/openapi-test/secret', { headers: admin }, 200],
    ['GET', '/auth/admin/clients/:id', '/auth/admin/clients/nothing', { headers: admin }, 404],
    ['GET', '/auth/admin/clients', '/auth/admin/clients', {}, 401],
    ['POST', '/token', '/token', { headers: form, body: 'grant_type=password' }, 400],
    ['GET', '/.well-known/jwks.json', '/.well-known/jwks.json', {}, 200],
    ['GET', '/.well-known/revoked-tokens.json', '/.well-known/revoked-tokens.json', {}, 200],
    ['POST', '/revoke', '/revoke', { headers: form, body: 'token=x' }, 401],
    [
      'POST',
      '/auth/admin/clients',
      '/auth/admin/clients',
      {
        headers: admin,
        body: { client_id: 'openapi-public', client_type: 'public', redirect_uris: ['http://127.0.0.1:9/cb'], scope: 'openid' },
      },
      201,
    ],
    ['POST', '/revoke', '/revoke', { headers: form, body: 'client_id=openapi-public&token=not-a-token' }, 200],
    ['POST', '/revoke', '/revoke', { headers: form, body: 'client_id=openapi-public' }, 400],
    ['GET', '/.well-known/openid-configuration', '/.well-known/openid-configuration', {}, 200],
    ['GET', '/orders', '/orders', {}, 401],
    ['GET', '/healthz', '/healthz', {}, 200],
  ];
  for (const [method, pattern, path, opts, expected] of cases) {
    const r = await record(id.base, method, path, opts);
    if (r.status < 300 && opts.body !== undefined && typeof opts.body !== 'string') validRequest(t, method, pattern, opts.body);
    t.equal(r.status, expected, `${method} ${path}: ${expected}`);
    valid(t, method, pattern, r, `${method} ${path} → ${r.status}`);
  }
});
