/**
 * A real PostgreSQL stopped under running services: every endpoint that needs the database answers
 * 503 `dependency_unavailable` with Retry-After, never a 500 (shared/db-errors.ts, applied to
 * every handler by shared/http.ts `errorReply`). Each endpoint is first shown to work while the
 * database is up, so the 503 is the outage's and nothing else's.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../../shared/embedded-postgres.js';
import { useService } from '../harness/services.js';

const dataDir = mkdtempSync(join(tmpdir(), 'pg-outage-'));
const pg = await startEmbeddedPostgres({ dataDir, ephemeral: true });
t.teardown(async () => {
  await pg.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const SECRET = 'outage-secret';
const ADMIN = 'outage-admin-token';
const env = { DATABASE_URL: pg.url, SERVICE_SECRET: SECRET, ADMIN_TOKEN: ADMIN, NOTIFIER_WORKERS: 'false', DATABASE_POOL_MAX: '4' };
const notifier = await useService(t, 'notifier', env);
const identity = await useService(t, 'identity', env);
const controlPlane = await useService(t, 'control-plane', env);

const asService = { 'x-subject': 'key:test', 'x-subject-role': 'service', 'x-subject-secret': SECRET };
const admin = { authorization: `Bearer ${ADMIN}` };
const json = { 'content-type': 'application/json' };

interface Probe {
  name: string;
  url: string;
  init: RequestInit;
  /** The status while the database is up. */
  up: number;
}
const probes: Probe[] = [
  {
    name: 'notifier: status',
    url: `${notifier.url}/api/v1/notifications/00000000-0000-4000-8000-000000000000/status`,
    init: { headers: asService },
    up: 404,
  },
  { name: 'notifier: inbox', url: `${notifier.url}/api/v1/users/u1/notifications`, init: { headers: asService }, up: 200 },
  { name: 'notifier: devices', url: `${notifier.url}/api/v1/users/u1/devices`, init: { headers: asService }, up: 200 },
  {
    name: 'notifier: ingestion',
    url: `${notifier.url}/api/v1/notifications`,
    init: {
      method: 'POST',
      headers: { ...asService, ...json },
      body: JSON.stringify({
        recipient_id: 'u1',
        event_type: 'test.outage',
        template_id: 'outage_v1',
        priority: 'low',
        channels: ['in_app'],
      }),
    },
    up: 422, // unknown_template: read from the database
  },
  {
    name: 'identity: signup',
    url: `${identity.url}/auth/signup`,
    init: {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ email: `a${Date.now()}@example.com`, password: 'correct horse battery', name: 'A' }),
    },
    up: 201,
  },
  {
    name: 'identity: login',
    url: `${identity.url}/auth/login`,
    init: { method: 'POST', headers: json, body: JSON.stringify({ email: 'nobody@example.com', password: 'wrong password here' }) },
    up: 401,
  },
  { name: 'control plane: get quota', url: `${controlPlane.url}/internal/quotas/some-key`, init: { headers: admin }, up: 404 },
];

t.test('every endpoint works while the database is up', async (t) => {
  for (const p of probes) {
    const r = await fetch(p.url, p.init);
    const body = await r.text();
    t.equal(r.status, p.up, `${p.name}: ${p.up} (${body.slice(0, 200)})`);
  }
});

t.test('with PostgreSQL stopped, every endpoint answers 503 with Retry-After', async (t) => {
  await pg.stop();
  for (const p of probes) {
    // A fresh body per call: signup's email must not be the one already registered.
    const init =
      p.name === 'identity: signup'
        ? { ...p.init, body: JSON.stringify({ email: `b${Date.now()}@example.com`, password: 'correct horse battery', name: 'B' }) }
        : p.init;
    const r = await fetch(p.url, init);
    const body = (await r.json().catch(() => ({}))) as { code?: string; error?: string };
    t.equal(r.status, 503, `${p.name}: 503 (got ${r.status} ${JSON.stringify(body).slice(0, 200)})`);
    t.ok(Number(r.headers.get('retry-after')) >= 1, `${p.name}: Retry-After`);
    t.equal(body.code, 'dependency_unavailable', `${p.name}: dependency_unavailable`);
  }
});
