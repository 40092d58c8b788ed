// @tier: pure
/**
 * The control plane's pure cores: subject forms, record validation and its resolved form, the
 * in-memory table's snapshots (a property: any delta applied to the state it was cut from equals
 * the full table), and the sidecar registry's ack waits under a fake clock.
 */
import t from 'tap';
import fc from 'fast-check';
import { create } from '@bufbuild/protobuf';
import { Algorithm, QuotaSchema, RouteRuleSchema, Unit, type Quota } from '../../proto/gen/quota/v1/quota_pb.js';
import { FakeClock } from '../../shared/clock.js';
import { PlatformError } from '../../shared/errors.js';
import { Registry } from '../../shared/metrics.js';
import { createControlPlaneMetrics } from '../../limiter/control-plane/metrics.js';
import { validateQuota } from '../../limiter/control-plane/quota-record.js';
import { QuotaTable } from '../../limiter/control-plane/quota-table.js';
import { SidecarRegistry } from '../../limiter/control-plane/sidecars.js';
import type { Change } from '../../limiter/control-plane/store.js';
import { apiKeySubject, checkSubjectId } from '../../limiter/control-plane/subject.js';

const fieldOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    if (err instanceof PlatformError) return err.field;
    throw err;
  }
  return undefined;
};

t.test('subjects: an API key is key: + the hex SHA-256 of the raw key; four forms only', async (t) => {
  t.equal(apiKeySubject('test'), 'key:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 'the README example');
  for (const ok of [apiKeySubject('x'), 'user:u-1', 'tenant:acme@eu', 'plan:pro.v2', `user:${'a'.repeat(123)}`]) {
    t.equal(
      fieldOf(() => checkSubjectId(ok)),
      undefined,
      `${ok.slice(0, 20)} accepted`,
    );
  }
  for (const bad of [
    '',
    'key:ABC',
    `key:${'A'.repeat(64)}`,
    `key:${'a'.repeat(63)}`,
    'user:',
    'user:two words',
    'plan:has space',
    'ip:1.2.3.4',
    'acme',
    `user:${'a'.repeat(124)}`,
  ]) {
    t.equal(
      fieldOf(() => checkSubjectId(bad)),
      'subject_id',
      `${JSON.stringify(bad.slice(0, 20))} refused`,
    );
  }
});

t.test('records: defaults resolve into the stored form', async (t) => {
  const q = validateQuota(
    create(QuotaSchema, {
      subjectId: 'user:a',
      algorithm: Algorithm.TOKEN_BUCKET,
      rate: 5,
      unit: Unit.HOUR,
      cost: 2,
      routes: [
        create(RouteRuleSchema, { pathPrefix: '/v1/x' }),
        create(RouteRuleSchema, { pathPrefix: '/v1/y', cost: 3, rate: 9, burst: 4 }),
      ],
      version: 99n,
      updatedAt: 5,
    }),
  ).quota;
  t.same(
    [q.burst, q.intervalMs, q.unit, q.cost, q.version, q.updatedAt],
    [5, 3_600_000, Unit.UNSPECIFIED, 2, 0n, 0],
    'burst = rate, unit → ms, version not taken from input',
  );
  t.same(
    q.routes.map((r) => [r.cost, r.rate, r.burst]),
    [
      [2, undefined, undefined],
      [3, 9, 4],
    ],
    "a rule's cost 0 is the record's cost",
  );
  t.equal(
    validateQuota(create(QuotaSchema, { subjectId: 'user:a', algorithm: 1, rate: 5 })).quota.intervalMs,
    1000,
    'seed default interval',
  );
  const plan = validateQuota(create(QuotaSchema, { subjectId: 'plan:pro', algorithm: 2, rate: 5 }));
  t.same([plan.quota.plan, plan.referencedPlan], ['pro', undefined]);
  const ref = validateQuota(create(QuotaSchema, { subjectId: 'user:b', rate: 0, plan: 'pro', shadow: true }));
  t.same([ref.referencedPlan, ref.quota.rate, ref.quota.shadow, ref.quota.intervalMs], ['plan:pro', 0, true, 0]);
  t.equal(
    fieldOf(() => validateQuota(create(QuotaSchema, { subjectId: 'user:b', rate: 0, plan: 'pro', unit: Unit.SECOND }), 'quota.')),
    'quota.unit',
  );
  t.equal(
    fieldOf(() =>
      validateQuota(
        create(QuotaSchema, {
          subjectId: 'user:b',
          algorithm: 1,
          rate: 5,
          burst: 5,
          routes: [create(RouteRuleSchema, { pathPrefix: '/a', cost: 6 })],
        }),
      ),
    ),
    'routes[0].cost',
  );
});

// ── the in-memory table ───────────────────────────────────────────────────

const op = fc.record({
  subject: fc.constantFrom('user:a', 'user:b', 'user:c', 'plan:p', 'tenant:t'),
  del: fc.boolean(),
  rate: fc.integer({ min: 1, max: 1000 }),
});

function history(ops: { subject: string; del: boolean; rate: number }[]): { changes: Change[]; states: Map<string, number>[] } {
  const states: Map<string, number>[] = [new Map()];
  const changes: Change[] = ops.map((o, i) => {
    const version = i + 1;
    const next = new Map(states[i]);
    if (o.del) next.delete(o.subject);
    else next.set(o.subject, o.rate);
    states.push(next);
    return {
      version,
      subjectId: o.subject,
      record: o.del ? undefined : create(QuotaSchema, { subjectId: o.subject, rate: o.rate, version: BigInt(version) }),
    };
  });
  return { changes, states };
}

const asMap = (quotas: Quota[]): Map<string, number> => new Map(quotas.map((q) => [q.subjectId, q.rate]));

t.test('table: every snapshot brings a receiver at `since` exactly to the current table (a full one: its plans)', async (t) => {
  fc.assert(
    fc.property(
      fc.array(op, { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 10 }),
      fc.nat(),
      fc.boolean(),
      (ops, keep, sinceSeed, replayed) => {
        const { changes, states } = history(ops);
        const table = new QuotaTable(keep);
        if (replayed) {
          for (const c of changes) if (!table.advance([c])) return false;
        } else {
          const last = states[states.length - 1]!;
          table.replace({
            version: changes.length,
            plans: [...last].filter(([s]) => s.startsWith('plan:')).map(([s, rate]) => create(QuotaSchema, { subjectId: s, rate })),
            changes: changes.slice(-keep - 3),
          });
        }
        const current = changes.length;
        const since = sinceSeed % (current + 2); // 0 .. current + 1 (one ahead of us)
        const { snapshot, kind } = table.snapshotSince(since);
        if (Number(snapshot.version) !== current) return false;
        let result: Map<string, number>;
        let expected = states[current]!;
        if (kind === 'full') {
          // A full snapshot holds the plans only: key records are looked up (QuotaStore.lookup).
          if (snapshot.delta || snapshot.deletedSubjectIds.length > 0) return false;
          result = asMap(snapshot.quotas);
          expected = new Map([...expected].filter(([s]) => s.startsWith('plan:')));
        } else {
          if (Number(snapshot.baseVersion) !== since || since < current - keep) return false;
          result = new Map(states[since]);
          for (const id of snapshot.deletedSubjectIds) result.delete(id);
          for (const [s, rate] of asMap(snapshot.quotas)) result.set(s, rate);
        }
        // Deltas whenever the kept changes reach back to `since`; full otherwise.
        const expectDelta = since > 0 && since <= current && since >= current - keep;
        return (kind !== 'full') === expectDelta && JSON.stringify([...result].sort()) === JSON.stringify([...expected].sort());
      },
    ),
    { numRuns: 300 },
  );
  t.pass('300 random histories');
});

t.test('table: advance refuses a gap', async (t) => {
  const table = new QuotaTable(5);
  const { changes } = history([
    { subject: 'user:a', del: false, rate: 1 },
    { subject: 'user:b', del: false, rate: 2 },
  ]);
  t.notOk(table.advance([changes[1]!]), 'version 2 on top of 0');
  t.equal(table.version, 0);
  t.ok(table.advance(changes));
  t.ok(table.advance([changes[0]!]), 'an old change is skipped');
  t.equal(table.version, 2);
});

// ── the sidecar registry ──────────────────────────────────────────────────

t.test('registry: waits for the sidecars connected at commit, under a fake clock', async (t) => {
  const clock = new FakeClock(1_000_000);
  const registry = new Registry();
  const metrics = createControlPlaneMetrics(registry);
  const r = new SidecarRegistry(clock, metrics, 60_000);
  r.connect('a');
  r.connect('b');
  r.committed(7);
  const wait = r.waitForAcks(7, 60_000);
  r.connect('late'); // connects after the commit: not waited for
  clock.advance(12);
  r.ack('a', 7);
  clock.advance(30);
  r.ack('b', 8); // a later version counts
  t.same(await wait, { acked: ['a', 'b'], lagging: [] });
  const hist = (await registry.getSingleMetric('quota_propagation_seconds')!.get()).values as { metricName?: string; value: number }[];
  const sum = hist.find((v) => v.metricName === 'quota_propagation_seconds_sum')?.value ?? NaN;
  t.ok(Math.abs(sum - (0.012 + 0.042)) < 1e-9, `commit-to-ack per sidecar (sum ${sum})`);
  t.equal((await registry.getSingleMetric('quota_connected_sidecars')!.get()).values[0]?.value, 3);

  const w2 = r.waitForAcks(9, 60_000);
  r.disconnect('late');
  r.ack('a', 9);
  r.ack('b', 9);
  t.same(await w2, { acked: ['a', 'b'], lagging: ['late'] }, 'a sidecar that leaves while waited for lags at once');

  t.same(await r.waitForAcks(9, 60_000), { acked: ['a', 'b'], lagging: [] }, 'already acked: at once');
  t.same(await r.waitForAcks(10, 0), { acked: [], lagging: ['a', 'b'] }, 'timeout 0: at once, naming who has not');
  const w3 = r.waitForAcks(10, 60_000);
  r.close();
  t.same(await w3, { acked: [], lagging: ['a', 'b'] }, 'shutdown ends the waits');

  r.ack('poller', 3); // no stream: remembered, never waited for
  t.equal(r.ackedVersion('poller'), 3);
  clock.advance(61_000);
  r.sweep();
  t.equal(r.ackedVersion('poller'), 0, 'forgotten after idleForgetMs');
  t.equal(r.ackedVersion('a'), 9, 'connected sidecars are kept');
});

t.test('registry: the timeout names the laggards', async (t) => {
  const r = new SidecarRegistry(new FakeClock(), createControlPlaneMetrics(new Registry()));
  r.connect('x');
  r.connect('y');
  const start = Date.now();
  const outcome = await r.waitForAcks(1, 30).then((o) => o);
  t.same(outcome, { acked: [], lagging: ['x', 'y'] });
  t.ok(Date.now() - start >= 25);
  r.ack('x', 1);
  const later = r.waitForAcks(1, 50);
  t.same(await later, { acked: ['x'], lagging: ['y'] });
});
