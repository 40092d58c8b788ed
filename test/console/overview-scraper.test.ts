// @tier: pure
/**
 * The overview's scraper against real HTTP servers on port 0 (no database): the three services'
 * and the sidecar's /metrics read each round, the numbers recorded at the fake clock's time, a
 * target that does not answer shown as down with a gap in what it feeds, the sidecar URL made
 * from each id the control plane lists, and `stop()` not held up by a target that never answers.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { FakeClock } from '../../shared/clock.js';
import { Scraper } from '../../console/overview/scraper.js';
import { testLogger } from '../harness/log.js';
import type { TestContext } from '../harness/db.js';

async function metricsServer(t: TestContext, body: () => string | undefined): Promise<{ url: string; hits: string[] }> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const b = body();
    if (b === undefined) return; // never answers
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(b);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
}

t.test('a round reads every target; a silent one is down and a gap', async (t) => {
  let dlq = 2;
  let notifierUp = true;
  let decisions = { allow: 10, deny: 0 };
  const notifier = await metricsServer(t, () =>
    notifierUp ? `dlq_depth{channel="email"} ${dlq}\ncampaigns_pending_approval 0\n` : 'not metrics at all {{{',
  );
  const cp = await metricsServer(t, () => 'quota_table_version 3\nquota_sidecar_applied_version{sidecar="127.0.0.1"} 3\n');
  const identity = await metricsServer(t, () => 'circuit_breaker_state{breaker="notifier"} 0\n');
  const sidecar = await metricsServer(
    t,
    () =>
      `ratelimit_decisions{result="allow",tenant="t",route="/"} ${decisions.allow}\n` +
      `ratelimit_decisions{result="deny",tenant="t",route="/"} ${decisions.deny}\n`,
  );
  const sidecarPort = new URL(sidecar.url).port;
  const clock = new FakeClock(5_000_000);
  const s = new Scraper({
    clock,
    log: testLogger('console'),
    intervalMs: 15_000,
    timeoutMs: 5_000,
    controlPlaneUrl: cp.url,
    notifierUrl: `${notifier.url}/`,
    identityUrl: identity.url,
    sidecarMetricsUrl: `http://{sidecar}:${sidecarPort}/metrics`,
  });
  t.teardown(() => s.stop());
  await s.scrapeOnce();
  t.equal(s.completed, 1);
  t.same(notifier.hits, ['/metrics'], 'the service origin + /metrics');
  t.same(sidecar.hits, ['/metrics'], 'the sidecar the control plane lists, through the template');
  t.same(
    s.latest?.targets.map((x) => [x.id, x.up]),
    [
      ['control-plane', true],
      ['notifier', true],
      ['identity', true],
      ['127.0.0.1', true],
    ],
  );
  t.same(s.history.points('dlq_depth'), [{ t: 5_000_000, v: 2 }]);
  t.same(s.history.points('sidecars_behind'), [{ t: 5_000_000, v: 0 }]);

  clock.advance(15_000);
  dlq = 5;
  decisions = { allow: 13, deny: 1 };
  await s.scrapeOnce();
  t.same(s.history.points('dlq_depth'), [
    { t: 5_000_000, v: 2 },
    { t: 5_015_000, v: 5 },
  ]);
  t.equal(s.history.latest('deny_ratio'), 0.25, 'one refused of the four decided since the last round');

  clock.advance(15_000);
  notifierUp = false;
  await s.scrapeOnce();
  t.equal(s.history.points('dlq_depth').at(-1)?.v, null, 'the notifier said nothing readable: a gap');
  t.equal(s.history.latest('dlq_depth'), undefined);
});

t.test('a target that never answers: down after the timeout, and stop() does not wait for it', async (t) => {
  const silent = await metricsServer(t, () => undefined);
  const clock = new FakeClock(0);
  const s = new Scraper({
    clock,
    log: testLogger('console'),
    intervalMs: 15_000,
    timeoutMs: 200,
    controlPlaneUrl: silent.url,
    notifierUrl: silent.url,
    identityUrl: silent.url,
    sidecarMetricsUrl: `${silent.url}/metrics`,
  });
  await s.scrapeOnce();
  t.same(
    s.latest?.targets.map((x) => x.error),
    ['no answer within 200 ms', 'no answer within 200 ms', 'no answer within 200 ms', 'no answer within 200 ms'],
  );
  t.equal(s.history.latest('breakers_open'), undefined, 'nothing answered: no number');

  const slow = new Scraper({
    clock,
    log: testLogger('console'),
    intervalMs: 15_000,
    timeoutMs: 600_000,
    controlPlaneUrl: silent.url,
    notifierUrl: silent.url,
    identityUrl: silent.url,
    sidecarMetricsUrl: `${silent.url}/metrics`,
  });
  const round = slow.scrapeOnce();
  await new Promise<void>((r) => {
    const check = () => (silent.hits.length >= 7 ? r() : setImmediate(check));
    check();
  });
  await slow.stop();
  await round;
  t.equal(slow.completed, 1, 'the round ended once stopped, its scrapes aborted');
  t.ok(
    slow.latest?.targets.every((x) => !x.up),
    'every target down',
  );
});
