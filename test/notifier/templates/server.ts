/**
 * A real notifier (in-process, port 0, over a test database) for the template, profile and device
 * API tests, and the headers each kind of caller sends: as the sidecar vouches for them
 * (X-Subject, X-Subject-Role, X-Subject-Secret), or with a bearer access token signed by a test
 * key that the notifier fetches from a real JWKS endpoint.
 */
import type { TestContext, TestDatabase } from '../../harness/db.js';
import { useService } from '../../harness/services.js';
import { accessClaims, generateTestKey, jwksOf, sign, startJwksServer, TEST_AUDIENCE, TEST_ISSUER } from '../../harness/tokens.js';

export const SERVICE_SECRET = 'test-service-secret-0123456789';

export interface TestServer {
  url: string;
  /** Headers of a caller the sidecar vouches for. */
  as(subject: string, role: string): Record<string, string>;
  user(id: string): Record<string, string>;
  service: Record<string, string>;
  admin: Record<string, string>;
  /** `Authorization: Bearer` with a valid access token: the default claims with `overrides`. */
  bearer(overrides: Record<string, unknown>): Record<string, string>;
}

export async function startTestServer(t: TestContext, db: TestDatabase): Promise<TestServer> {
  const key = await generateTestKey('ES256');
  const jwks = await startJwksServer(jwksOf(key));
  t.teardown(() => jwks.close());
  const notifier = await useService(t, 'notifier', {
    DATABASE_URL: db.url,
    DATABASE_POOL_MAX: '5',
    SERVICE_SECRET,
    JWKS_URL: jwks.url,
    JWT_ISSUER: TEST_ISSUER,
    JWT_AUDIENCE: TEST_AUDIENCE,
    SHUTDOWN_GRACE: '1s',
  });
  const as = (subject: string, role: string): Record<string, string> => ({
    'x-subject': subject,
    'x-subject-role': role,
    'x-subject-secret': SERVICE_SECRET,
  });
  return {
    url: notifier.url,
    as,
    user: (id) => as(`user:${id}`, 'customer'),
    service: as('key:' + 'a'.repeat(64), 'service'),
    admin: as('user:ops-1', 'admin'),
    bearer: (overrides) => ({ authorization: `Bearer ${sign(accessClaims({ nowMs: Date.now() }, overrides), { key })}` }),
  };
}

export interface JsonResponse {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

/** One request with a JSON body (when given); the answer parsed as JSON (empty for a 204). */
export async function call(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<JsonResponse> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}
