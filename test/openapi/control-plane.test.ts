/**
 * The control plane's OpenAPI document (limiter/control-plane/openapi.ts) against a real control
 * plane: its routes both ways, and recorded answers (success and error) validated against it.
 */
import t from 'tap';
import { useTestDatabase } from '../harness/db.js';
import { ADMIN_TOKEN, useControlPlane } from '../control-plane/helpers.js';
import {
  checkRoutes,
  fetchDocument,
  record,
  requestValidator,
  responseChecker,
  responseValidator,
  schemaProblems,
  type Doc,
} from './helpers.js';

const db = await useTestDatabase(t, 'openapi_control_plane');
const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_ACK_TIMEOUT: '100ms' });
const doc = await fetchDocument(t, cp.http);
const valid = responseValidator(doc);
const validRequest = requestValidator(doc);
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

t.test('every served route is documented and every documented route is served', (t) => checkRoutes(t, doc, cp.port));

t.test('recorded answers match the document', async (t) => {
  const own = { algorithm: 'token_bucket', rate: 10, burst: 20, unit: 'second' };
  const cases: [string, string, string, { headers?: Record<string, string>; body?: unknown }][] = [
    ['PUT', '/internal/subjects/:subject/quota', '/internal/subjects/plan%3Agold/quota', { headers: admin, body: own }],
    ['PUT', '/internal/subjects/:subject/quota', '/internal/subjects/user%3A1/quota', { headers: admin, body: { rate: 0, plan: 'gold' } }],
    [
      'PUT',
      '/internal/quotas/:api_key',
      '/internal/quotas/sk_test_1',
      { headers: admin, body: { ...own, routes: [{ path_prefix: '/v1', cost: 2 }] } },
    ],
    ['PUT', '/internal/quotas/:api_key', '/internal/quotas/sk_test_1', { headers: admin, body: { ...own, algorithm: 'gcra' } }],
    ['GET', '/internal/quotas/:api_key', '/internal/quotas/sk_test_1', { headers: admin }],
    ['GET', '/internal/subjects/:subject/quota', '/internal/subjects/user%3A1/quota', { headers: admin }],
    ['GET', '/internal/subjects/:subject/quota', '/internal/subjects/user%3Anobody/quota', { headers: admin }],
    ['GET', '/internal/quotas', '/internal/quotas?limit=2', { headers: admin }],
    ['GET', '/internal/quotas', '/internal/quotas?subject_kind=ip', { headers: admin }],
    ['GET', '/internal/quotas', '/internal/quotas', {}],
    ['GET', '/internal/sidecars', '/internal/sidecars', { headers: admin }],
    ['DELETE', '/internal/quotas/:api_key', '/internal/quotas/sk_test_1', { headers: admin }],
    ['GET', '/healthz', '/healthz', {}],
    ['GET', '/readyz', '/readyz', {}],
    ['GET', '/metrics', '/metrics', {}],
  ];
  const statuses: number[] = [];
  for (const [method, pattern, path, opts] of cases) {
    const r = await record(cp.http, method, path, opts);
    if (r.status < 300 && opts.body !== undefined && typeof opts.body !== 'string') validRequest(t, method, pattern, opts.body);
    statuses.push(r.status);
    valid(t, method, pattern, r, `${method} ${path} → ${r.status}`);
  }
  t.same(statuses, [201, 201, 201, 400, 200, 200, 404, 200, 400, 401, 200, 204, 200, 200, 200], 'the answers recorded');
});

t.test('the check refuses what the document does not say', async (t) => {
  const check = responseChecker(doc);
  const good = await record(cp.http, 'GET', '/internal/sidecars', { headers: admin });
  t.equal(check('GET', '/internal/sidecars', good), undefined);
  const body = good.body as Record<string, unknown>;
  t.match(check('GET', '/internal/sidecars', { ...good, body: { ...body, extra: 1 } }), /does not match/, 'an undocumented field');
  t.match(check('GET', '/internal/sidecars', { ...good, body: { sidecars: [] } }), /does not match/, 'a missing field');
  t.match(check('GET', '/internal/sidecars', { ...good, status: 418 }), /status 418 is not documented/);
  t.match(check('GET', '/internal/sidecars', { ...good, contentType: 'text/html' }), /content type text\/html/);
  t.match(check('GET', '/internal/nothing', good), /not in the document/);
  const quota = await record(cp.http, 'GET', '/internal/subjects/plan%3Agold/quota', { headers: admin });
  const q = (quota.body as { quota: Record<string, unknown> }).quota;
  t.match(
    check('GET', '/internal/subjects/:subject/quota', { ...quota, body: { quota: { ...q, algorithm: 'gcra' } } }),
    /does not match/,
    'an enum value the contract does not have',
  );
  const broken = structuredClone<Doc>(doc);
  const op = broken.paths['/internal/sidecars']!['get']! as unknown as { operationId: string; responses: Record<string, unknown> };
  op.responses['200'] = { description: 'x', content: { 'application/json': { schema: { $ref: '#/components/schemas/Nothing' } } } };
  op.operationId = 'get_internal_quotas';
  const problems = schemaProblems(broken);
  t.match(
    problems,
    [/operationId get_internal_quotas missing or repeated/, /Nothing/],
    'a repeated operationId and a dangling $ref are found',
  );
});
