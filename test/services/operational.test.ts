/**
 * Every PostgreSQL-backed service, started in-process: ready against its own database, serving
 * /healthz, /readyz and /metrics, answering unknown paths with problem+json, and refusing to start
 * without a database with a one-line configuration error.
 */
import t from 'tap';
import { createTestDatabase, useTestDatabase } from '../harness/db.js';
import { useService, testEnv } from '../harness/services.js';
import { loadConfig } from '../../shared/config.js';
import { startNotifier } from '../../notifier/app.js';
import { notifierConfig } from '../../notifier/config.js';
import { testLogger } from '../harness/log.js';
import { loadMigrations } from '../../shared/migrate.js';
import { migrationsDir } from '../../shared/paths.js';

for (const name of ['control-plane', 'notifier', 'identity'] as const) {
  t.test(`${name}: ready against its database, with health, metrics and problem+json 404`, async (t) => {
    // An empty database, not a copy of the migrated template: the service migrates it at start.
    const db = await useTestDatabase(t, name, { empty: true });
    const svc = await useService(t, name, { DATABASE_URL: db.url });
    const dir = migrationsDir(name === 'control-plane' ? 'limiter/control-plane' : name);
    const files = (await loadMigrations(dir)).map((m) => m.version);
    const { rows } = await db.pool.query<{ version: number }>('SELECT version FROM schema_migrations WHERE service = $1 ORDER BY version', [
      name,
    ]);
    t.same(
      rows.map((r) => r.version),
      files,
      'its migrations were applied at start',
    );
    const health = await fetch(`${svc.url}/healthz`);
    t.equal(health.status, 200);
    const ready = await fetch(`${svc.url}/readyz`);
    t.equal(ready.status, 200);
    const readiness = (await ready.json()) as { status: string; checks: Record<string, string> };
    t.equal(readiness.status, 'ready');
    t.equal(readiness.checks.postgres, 'ok', 'the database check is among the readiness checks');
    const metrics = await (await fetch(`${svc.url}/metrics`)).text();
    t.match(metrics, new RegExp(`process_cpu_user_seconds_total\\{service="${name}"\\}`));
    const missing = await fetch(`${svc.url}/no/such/thing`);
    t.equal(missing.status, 404);
    t.equal(missing.headers.get('content-type'), 'application/problem+json');
    t.equal(((await missing.json()) as { code: string }).code, 'not_found');
  });
}

t.test('a service without DATABASE_URL refuses to start, naming the variable', async (t) => {
  const env = testEnv({ DATABASE_URL: undefined });
  delete env.DATABASE_URL;
  await t.rejects(startNotifier(loadConfig(notifierConfig, env), testLogger('notifier')), {
    name: 'ConfigError',
    message: 'config: DATABASE_URL is required by notifier (npm start provides an embedded PostgreSQL)',
  });
});

t.test('/readyz turns 503 naming postgres when the database goes away', async (t) => {
  const db = await createTestDatabase('readyz-db-gone');
  t.teardown(() => db.drop());
  const svc = await useService(t, 'notifier', { DATABASE_URL: db.url });
  t.equal((await fetch(`${svc.url}/readyz`)).status, 200);
  await db.drop(); // DROP DATABASE … WITH (FORCE): the service's sessions end and cannot come back
  const r = await fetch(`${svc.url}/readyz`);
  t.equal(r.status, 503);
  const body = (await r.json()) as { status: string; checks: Record<string, string> };
  t.equal(body.status, 'not_ready');
  t.match(body.checks.postgres, /^postgres/);
  t.equal((await fetch(`${svc.url}/healthz`)).status, 200, 'still alive: only readiness changes');
});
