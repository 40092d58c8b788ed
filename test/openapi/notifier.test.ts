/**
 * The notifier's OpenAPI document (notifier/openapi.ts) against a real notifier with scripted
 * providers: its routes both ways, and recorded answers (success and error) validated against it.
 */
import t from 'tap';
import { addDevice, createTemplate, putProfile, request, scriptedChannels, settled, startCore } from '../notifier/core/helpers.js';
import { checkRoutes, fetchDocument, record, requestValidator, responseValidator } from './helpers.js';

const core = await startCore(t, 'openapi_notifier', { channels: scriptedChannels() });
const doc = await fetchDocument(t, core.url);
const valid = responseValidator(doc);
const validRequest = requestValidator(doc);

t.test('every served route is documented and every documented route is served', (t) => checkRoutes(t, doc, core.notifier.port));

t.test('recorded answers match the document', async (t) => {
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u1', { email: 'ada@example.test' });
  await addDevice(core, 'u1', 'tok-1');
  const sent = await record(core.url, 'POST', '/api/v1/notifications', {
    headers: core.service,
    body: request({ channels: ['push', 'in_app'] }),
  });
  valid(t, 'POST', '/api/v1/notifications', sent);
  validRequest(t, 'POST', '/api/v1/notifications', request({ channels: ['push', 'in_app'] }));
  const id = (sent.body as { notification_id: string }).notification_id;
  await core.waitStatus(id, settled);

  const cases: [string, string, string, { headers?: Record<string, string>; body?: unknown }, number][] = [
    ['POST', '/api/v1/notifications', '/api/v1/notifications', { headers: core.service, body: request({ priority: 'urgent' }) }, 400],
    ['GET', '/api/v1/notifications/:notification_id/status', `/api/v1/notifications/${id}/status`, { headers: core.service }, 200],
    ['GET', '/api/v1/notifications/:notification_id/status', `/api/v1/notifications/${id}/status`, {}, 401],
    ['GET', '/api/v1/users/:user_id/notifications', '/api/v1/users/u1/notifications', { headers: core.user('u1') }, 200],
    ['GET', '/api/v1/users/:user_id/notifications', '/api/v1/users/u1/notifications', { headers: core.user('u2') }, 403],
    ['GET', '/api/v1/admin/notifications', '/api/v1/admin/notifications?user_id=u1', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/notifications', '/api/v1/admin/notifications?channel=email&status=failed', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/notifications', '/api/v1/admin/notifications?status=nonsense', { headers: core.admin }, 400],
    ['GET', '/api/v1/admin/notifications/:id', `/api/v1/admin/notifications/${id}`, { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/notification-types', '/api/v1/admin/notification-types', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/dlq', '/api/v1/admin/dlq', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/dlq', '/api/v1/admin/dlq', { headers: core.user('u1') }, 403],
    ['GET', '/api/v1/users/:user_id/profile', '/api/v1/users/u1/profile', { headers: core.service }, 200],
    ['GET', '/api/v1/users/:user_id/profile', '/api/v1/users/u9/profile', { headers: core.service }, 404],
    ['GET', '/api/v1/users/:user_id/devices', '/api/v1/users/u1/devices', { headers: core.service }, 200],
    [
      'POST',
      '/api/v1/users/:user_id/devices',
      '/api/v1/users/u1/devices',
      { headers: core.service, body: { token: 't', platform: 'tv' } },
      400,
    ],
    ['GET', '/api/v1/track/open/:file', '/api/v1/track/open/x.y.gif', {}, 200],
    ['POST', '/api/v1/admin/suppressions', '/api/v1/admin/suppressions', { headers: core.admin, body: { address: 'x@example.test' } }, 201],
    ['POST', '/api/v1/admin/suppressions', '/api/v1/admin/suppressions', { headers: core.admin, body: { address: 'x@example.test' } }, 200],
    ['GET', '/api/v1/admin/suppressions', '/api/v1/admin/suppressions?q=example', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/suppressions/:address', '/api/v1/admin/suppressions/x%40example.test', { headers: core.admin }, 200],
    ['DELETE', '/api/v1/admin/suppressions/:address', '/api/v1/admin/suppressions/x%40example.test', { headers: core.admin }, 204],
    ['GET', '/api/v1/admin/suppressions/:address', '/api/v1/admin/suppressions/x%40example.test', { headers: core.admin }, 404],
    [
      'PUT',
      '/api/v1/admin/segments/:segment_id',
      '/api/v1/admin/segments/fr-users',
      { headers: core.admin, body: { kind: 'rule', rule: { locale: 'fr' } } },
      201,
    ],
    ['GET', '/api/v1/admin/segments', '/api/v1/admin/segments', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/segments/:segment_id', '/api/v1/admin/segments/fr-users', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/segments/:segment_id/versions', '/api/v1/admin/segments/fr-users/versions', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/campaigns', '/api/v1/admin/campaigns', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/templates', '/api/v1/admin/templates', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/templates/:template_id', '/api/v1/admin/templates/code_v1', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/templates/:template_id', '/api/v1/admin/templates/code_v1.fr', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/templates/:template_id', '/api/v1/admin/templates/nothing_v1', { headers: core.admin }, 404],
    ['GET', '/api/v1/admin/providers', '/api/v1/admin/providers', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/providers/:channel', '/api/v1/admin/providers/push', { headers: core.admin }, 200],
    ['GET', '/api/v1/admin/providers/:channel/changes', '/api/v1/admin/providers/push/changes', { headers: core.admin }, 200],
    ['GET', '/readyz', '/readyz', {}, 200],
  ];
  for (const [method, pattern, path, opts, expected] of cases) {
    const r = await record(core.url, method, path, opts);
    if (r.status < 300 && opts.body !== undefined && typeof opts.body !== 'string') validRequest(t, method, pattern, opts.body);
    t.equal(r.status, expected, `${method} ${path}: ${expected}`);
    valid(t, method, pattern, r, `${method} ${path} → ${r.status}`);
  }
});
