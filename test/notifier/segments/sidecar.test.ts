/**
 * A segment upload end to end through the sidecar: the default route table gives
 * `/api/v1/admin/segments` its own body limit, so a 10.5 MB upload (over LIMITER_MAX_BODY's 10 MiB)
 * streams through the sidecar into the notifier's streaming reader and is switched in; the same
 * body on another notifier route is 413 at the sidecar. The operator is a bearer token with role
 * admin, which the sidecar verifies and vouches for.
 */
import t from 'tap';
import { request } from 'node:http';
import { accessClaims, sign } from '../../harness/tokens.js';
import { startTestSidecar } from '../../limiter/fixtures/sidecar.js';
import { SERVICE_SECRET } from '../core/helpers.js';
import { ids, ndjson, startSegmentCore, storedMembers } from './helpers.js';

const core = await startSegmentCore(t, 'notifier_segments_sidecar');
const sc = await startTestSidecar(t, {
  upstream: core.url,
  env: { SERVICE_SECRET, LIMITER_ROUTES: '', LIMITER_IP_BURST: '1000000', LIMITER_DEFAULT_BURST: '1000000' },
});
const operator = sign(accessClaims({ nowMs: sc.clock.now() }, { sub: 'ops-1', user_id: 'ops-1', role: 'admin' }), { key: sc.key });

/** PUTs `body` through the sidecar in 256 KiB writes; the status and parsed answer. */
function put(path: string, body: Buffer, contentType: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(`${sc.base}${path}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${operator}`, 'content-type': contentType, 'content-length': String(body.length) },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') }));
    });
    req.on('error', reject);
    void (async () => {
      for (let i = 0; i < body.length; i += 256 * 1024) {
        if (req.destroyed) return;
        if (!req.write(body.subarray(i, i + 256 * 1024))) await new Promise((r) => req.once('drain', r));
      }
      req.end();
    })();
  });
}

t.test('10.5 MB of ids through the sidecar: stored and switched in', async (t) => {
  const list = ids(300_000, 'customer-0000000000000000-');
  const body = Buffer.from(ndjson(list));
  t.ok(body.length > 10 * 1024 * 1024, `${body.length} bytes, over LIMITER_MAX_BODY`);
  const before = core.bodies.length;
  const res = await put('/api/v1/admin/segments/through-sidecar/members', body, 'application/x-ndjson');
  t.equal(res.status, 201, JSON.stringify(res.body));
  t.match(res.body, { id: 'through-sidecar', kind: 'list', version: 1, size: 300_000, updated_by: 'user:ops-1' });
  t.equal(core.bodies[before]?.received, body.length, "the notifier's reader received every byte");
  const stored = await storedMembers(core, 'through-sidecar', 1);
  t.equal(stored.length, 300_000);
  t.equal(stored[0], list[0]);
  t.equal(stored[stored.length - 1], list[list.length - 1]);
});

t.test('the same body on another notifier route: 413 at the sidecar', async (t) => {
  const body = Buffer.alloc(11 * 1024 * 1024, 0x20);
  const res = await put('/api/v1/admin/templates/big_v1', body, 'application/json');
  t.equal(res.status, 413);
  t.equal(res.body['code'], 'body_too_large');
  t.match(res.body['detail'], /10485760 bytes/, "the sidecar's limit, not the notifier's MAX_BODY_BYTES");
});
