/**
 * Every metric docs/grafana/edge-platform.json queries is one the service of its row really
 * exports: each service is started in-process as in production (the sidecar syncing quotas from a
 * running control plane, the notifier with its real channels, identity with its relay) and its
 * /metrics scraped; the names come from the `# TYPE` lines, so a metric registered with no sample
 * yet counts, and a histogram counts only as its _bucket, _sum and _count series.
 */
import t from 'tap';
import { useTestDatabase } from '../harness/db.js';
import { useService, useSidecar } from '../harness/services.js';
import { useControlPlane } from '../control-plane/helpers.js';
import { exportedSeries } from './promql.js';
import { loadDashboard, problems, queries, type Service } from './dashboard.js';

async function scrape(url: string): Promise<Set<string>> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return exportedSeries(await res.text());
}

t.test('every metric the dashboard queries is exported by the service of its row', async (t) => {
  const exported = new Map<Service, Set<string>>();

  const cpDb = await useTestDatabase(t, 'dashboard-cp');
  const cp = await useControlPlane(t, cpDb.url);
  exported.set('control-plane', await scrape(`${cp.http}/metrics`));
  const sidecar = await useSidecar(t, {
    LIMITER_CONTROL_PLANE_URL: cp.grpc,
    LIMITER_ROUTES: '/v1=http://127.0.0.1:9',
    SIDECAR_ID: 'dashboard-sidecar',
  });
  exported.set('limiter', await scrape(`${sidecar.adminUrl}/metrics`));
  for (const name of ['notifier', 'identity'] as const) {
    const db = await useTestDatabase(t, `dashboard-${name}`);
    const svc = await useService(t, name, { DATABASE_URL: db.url });
    exported.set(name, await scrape(`${svc.url}/metrics`));
  }
  for (const [service, names] of exported) t.ok(names.size > 20, `${service} exports metrics (${names.size} series names)`);

  const qs = queries(await loadDashboard());
  t.ok(qs.length > 40, `${qs.length} queries read from the dashboard`);
  t.same(problems(qs, exported), [], 'no query names a metric its service does not export');

  // The check can fail: the same dashboard with one plausible mistake (the counter's name as
  // another library would spell it) is caught against the same exports.
  const wrong = qs.map((q) => ({ ...q, expr: q.expr.replace(/\bratelimit_decisions\b/g, 'ratelimit_decisions_total') }));
  t.ok(
    problems(wrong, exported).some((p) => p.includes('ratelimit_decisions_total is not exported by limiter')),
    'a misnamed metric is reported',
  );
});
