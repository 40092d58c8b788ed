// @tier: pure
/**
 * limiter/quota-sync.ts against a real grpc-js QuotaSyncService (test/limiter/sync/fake-control-plane.ts)
 * on port 0: ordering, acks, full fetch on a foreign delta, reconnect with backoff, the poll
 * fallback, the last-known-good file, the max-age rule and the bearer token.
 */
import t, { type Test } from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { SnapshotSchema } from '../../../proto/gen/quota/v1/quota_pb.js';
import { FakeClock, systemClock } from '../../../shared/clock.js';
import { createRegistry, exposition } from '../../../shared/metrics.js';
import { fromJsonString } from '../../../shared/proto-json.js';
import { QuotaCache, compileQuota } from '../../../limiter/quota-cache.js';
import { QuotaLookup } from '../../../limiter/quota-lookup.js';
import { QuotaSync, type QuotaSyncOptions } from '../../../limiter/quota-sync.js';
import { backoffDelay } from '../../../limiter/quota-sync-backoff.js';
import { registerQuotaSyncMetrics } from '../../../limiter/quota-sync-metrics.js';
import { nodeTimers, type Timers } from '../../../limiter/snapshot-store.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';
import { FakeControlPlane, quota } from './fake-control-plane.js';

const log = testLogger('quota-sync');

async function controlPlane(t: Test): Promise<FakeControlPlane> {
  const cp = await new FakeControlPlane().start();
  t.teardown(() => cp.stop());
  return cp;
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'quota-sync-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

interface Setup {
  sync: QuotaSync;
  cache: QuotaCache;
  path: string;
}

function sidecar(t: Test, url: string, opts: Partial<QuotaSyncOptions> & { path?: string } = {}): Setup {
  const path = opts.path ?? join(tempDir(t), 'limiter-snapshot.json');
  const cache = opts.cache ?? new QuotaCache(1000);
  const sync = new QuotaSync({
    controlPlaneUrl: url,
    sidecarId: 'sc-1',
    cache,
    log,
    snapshotPath: path,
    // Long enough that only the tests that want a poll see one.
    pollIntervalMs: 60_000,
    backoff: { baseMs: 20, maxMs: 200 },
    minWriteIntervalMs: 0,
    ...opts,
  });
  t.teardown(() => sync.close());
  return { sync, cache, path };
}

function fileVersion(path: string): number {
  return Number(fromJsonString(SnapshotSchema, readFileSync(path, 'utf8')).version);
}

t.test('a full snapshot then deltas are applied in order, and each applied version is acked', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  cp.put(quota('key:b', 20));
  const { sync, cache, path } = sidecar(t, cp.url);
  await sync.start();
  await waitFor(() => cache.version === 2, { what: 'the full snapshot' });
  t.equal(Number(cp.watches[0]!.request.sinceVersion), 0, 'an empty sidecar watches from 0');
  t.equal(cp.watches[0]!.request.sidecarId, 'sc-1');
  t.equal(cache.record('key:a')?.limit?.rate, 10);

  cp.put(quota('key:a', 11));
  cp.delete('key:b');
  cp.put(quota('key:c', 30));
  await waitFor(() => cache.version === 5, { what: 'the deltas' });
  t.equal(cache.record('key:a')?.limit?.rate, 11, 'an update replaces the record');
  t.notOk(cache.has('key:b'), 'a delete removes it');
  t.notOk(cache.has('key:c'), 'a key created while not held stays out of the working set (looked up on first sight)');

  await waitFor(() => cp.acks.length === 4, { what: 'acks' });
  t.strictSame(
    cp.acks.map((a) => [a.sidecarId, a.version]),
    [
      ['sc-1', 2],
      ['sc-1', 3],
      ['sc-1', 4],
      ['sc-1', 5],
    ],
    'one ack per applied version, in order',
  );
  const status = sync.status();
  t.equal(status.version, 5);
  t.equal(status.connected, true);
  t.equal(status.consecutiveFailures, 0);
  t.equal(status.stale, false, 'no max age configured');

  const registry = createRegistry('limiter', { defaults: false });
  registerQuotaSyncMetrics(registry, sync, systemClock);
  const { body } = await exposition(registry);
  t.match(body, /^ratelimit_quota_version\{service="limiter"\} 5$/m);
  t.match(body, /^ratelimit_quota_sync_connected\{service="limiter"\} 1$/m);
  t.match(body, /^ratelimit_quota_sync_consecutive_failures\{service="limiter"\} 0$/m);
  t.match(body, /^ratelimit_quota_stale\{service="limiter"\} 0$/m);
  t.match(body, /^ratelimit_quota_sync_age_seconds\{service="limiter"\} \d/m);

  await waitFor(() => sync.snapshotWrites > 0 && fileVersion(path) === 5, { what: 'the snapshot file' });
  const onDisk = fromJsonString(SnapshotSchema, readFileSync(path, 'utf8'));
  t.equal(onDisk.delta, false, 'the file is a full snapshot');
  t.strictSame(
    onDisk.quotas.map((q) => [q.subjectId, q.rate]),
    [['key:a', 11]],
    'the working set held',
  );
});

t.test('older deltas are ignored', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  cp.put(quota('key:b', 20));
  cp.put(quota('key:c', 30));
  const { sync, cache } = sidecar(t, cp.url);
  await sync.start();
  await waitFor(() => cache.version === 3);

  cp.push(create(SnapshotSchema, { version: 3n, delta: true, baseVersion: 2n, quotas: [quota('key:a', 999)], issuedAt: 1 }));
  cp.put(quota('key:d', 40));
  await waitFor(() => cache.version === 4, { what: 'the next real change' });
  t.equal(cache.record('key:a')?.limit?.rate, 10, 'the delta at our own version was not applied again');
  t.ok(cache.has('key:c'));
  // The ack is sent after the version is applied: wait for the last one, then read them all (an
  // ack for the ignored snapshot would show as a second 3).
  await waitFor(() => cp.acks.at(-1)?.version === 4, { what: 'the ack for version 4' });
  t.strictSame(
    cp.acks.map((a) => a.version),
    [3, 4],
    'nothing acked for the ignored snapshot',
  );
});

t.test('a control plane whose table went back (a full table older than ours) is taken as the authority', async (t) => {
  // E.g. a last-known-good file from another deployment, or a database restored from a backup:
  // keeping our higher version would serve a table the control plane no longer has, forever.
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  cp.put(quota('key:b', 20));
  cp.put(quota('key:c', 30));
  const { sync, cache } = sidecar(t, cp.url);
  await sync.start();
  await waitFor(() => cache.version === 3);
  cp.push(create(SnapshotSchema, { version: 2n, delta: false, quotas: [quota('key:restored', 1)], issuedAt: 1 }));
  await waitFor(() => cache.version === 2, { what: 'the older full table to be taken' });
  t.ok(cache.has('key:restored'), "the control plane's table replaced ours");
  t.notOk(cache.has('key:c'));
  await waitFor(() => cp.acks.at(-1)?.version === 2, { what: 'its version acked' });
});

t.test('a delta cut from another base makes the sidecar fetch a full snapshot at once', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  const { sync, cache } = sidecar(t, cp.url);
  await sync.start();
  await waitFor(() => cache.version === 1);

  // Two changes the stream misses, then a delta that only applies on top of the first.
  cp.silent = true;
  cp.put(quota('key:x', 5));
  cp.put(quota('key:y', 6));
  cp.silent = false;
  cp.push(cp.snapshotAfter(2));
  await waitFor(() => cache.version === 3, { what: 'the full fetch' });
  t.equal(cache.record('key:x')?.limit?.rate, 5, 'the change the delta did not carry arrived with the full table');
  t.equal(cache.record('key:y')?.limit?.rate, 6);
  t.strictSame(
    cp.snapshots.map((s) => Number(s.request.sinceVersion)),
    [0],
    'one unary Snapshot(since_version 0)',
  );
  await waitFor(() => cp.acks.some((a) => a.version === 3));
});

t.test('a dropped stream reconnects with exponential backoff and resumes from the version held', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  cp.put(quota('key:b', 20));
  const delays: number[] = [];
  const timers: Timers = {
    setTimeout: (fn, ms) => {
      if (ms > 0 && ms < 50_000) delays.push(ms); // not the poll, not the file writes
      return nodeTimers.setTimeout(fn, ms);
    },
    clearTimeout: nodeTimers.clearTimeout,
  };
  const { sync, cache } = sidecar(t, cp.url, { timers, random: () => 0 });
  await sync.start();
  await waitFor(() => cache.version === 2);

  cp.failWatches = 3;
  cp.drop();
  cp.put(quota('key:b', 30)); // committed while no stream is open
  await waitFor(() => cache.version === 3, { what: 'the change made while disconnected' });
  t.equal(cache.record('key:b')?.limit?.rate, 30);
  t.strictSame(
    delays,
    [0, 1, 2, 3].map((n) => backoffDelay(n, 0, { baseMs: 20, maxMs: 200 })),
    'each failed attempt doubles the delay',
  );
  t.strictSame(delays, [10, 20, 40, 80]);
  t.strictSame(
    cp.watches.slice(1).map((w) => Number(w.request.sinceVersion)),
    [2, 2, 2, 2],
    'every reconnect resumes from the version held',
  );
  t.equal(cp.snapshots.length, 0, 'no full fetch was needed');
  const status = sync.status();
  t.equal(status.reconnects, 4);
  t.equal(status.consecutiveFailures, 0, 'the streak ends with the successful sync');
  t.equal(status.connected, true);
});

t.test('a stream that ends cleanly is reopened as well', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  const { sync, cache } = sidecar(t, cp.url);
  await sync.start();
  await waitFor(() => cp.watching === 1 && cache.version === 1);
  cp.drop('end');
  await waitFor(() => cp.watches.length === 2 && cp.watching === 1, { what: 'a new stream' });
  cp.put(quota('key:b', 20));
  await waitFor(() => cache.version === 2);
  t.equal(sync.status().consecutiveFailures, 0, 'a clean end is not a failure');
});

t.test('backoff: exponential, capped, half fixed and half jitter', async (t) => {
  const opts = { baseMs: 100, maxMs: 1000 };
  t.equal(backoffDelay(0, 0, opts), 50);
  t.equal(backoffDelay(0, 0.999, opts), 100);
  t.equal(backoffDelay(3, 0.5, opts), 600, '800 step: 400 + 0.5 × 400');
  t.equal(backoffDelay(10, 0, opts), 500, 'capped at maxMs');
  t.equal(backoffDelay(10, 1, opts), 1000);
  t.equal(backoffDelay(5000, 1, opts), 1000, 'no overflow for very long outages');
});

t.test('a silent stream: the poll brings the change', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  const { sync, cache } = sidecar(t, cp.url, { pollIntervalMs: 50 });
  await sync.start();
  await waitFor(() => cache.version === 1);
  cp.silent = true;
  cp.put(quota('key:a', 12));
  await waitFor(() => cache.version === 2, { what: 'the poll' });
  t.equal(cache.record('key:a')?.limit?.rate, 12);
  t.ok(
    cp.snapshots.some((s) => Number(s.request.sinceVersion) === 1 && s.request.sidecarId === 'sc-1'),
    'polled with since_version = the version held',
  );
  t.equal(cp.watches.length, 1, 'the stream was never reopened');
  await waitFor(() => cp.acks.some((a) => a.version === 2), { what: 'the ack of the polled version' });
});

t.test('the control plane down at start: the last-known-good file is served, then sync resumes', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'nested', 'limiter-snapshot.json');
  const cp = await controlPlane(t);
  cp.put(quota('key:paid', 1000, { plan: 'pro' }));
  cp.put(quota('plan:pro', 1000));
  const first = sidecar(t, cp.url, { path });
  await first.sync.start();
  await waitFor(() => first.cache.version === 2);
  await first.sync.close();
  const port = cp.port;
  await cp.stop();

  const { sync, cache } = sidecar(t, `127.0.0.1:${port}`, { path });
  t.equal(sync.ready(), false);
  await sync.start();
  t.equal(cache.version, 2, 'loaded before any network answer');
  t.equal(cache.record('key:paid')?.limit?.rate, 1000);
  t.equal(cache.plan('pro')?.limit?.rate, 1000);
  t.equal(sync.ready(), true, 'ready to serve from the file');
  await waitFor(() => sync.status().consecutiveFailures >= 2, { what: 'failed reconnects' });
  t.equal(sync.status().connected, false);
  t.equal(cache.version, 2, 'failures leave the cache alone');

  // The control plane comes back (same address) with a newer table.
  const back = new FakeControlPlane();
  back.put(quota('key:paid', 1000, { plan: 'pro' }));
  back.put(quota('plan:pro', 1000));
  back.put(quota('key:paid', 5));
  await back.start(port);
  t.teardown(() => back.stop());
  await waitFor(() => cache.version === 3, { what: 'the resumed sync', timeoutMs: 10_000 });
  t.equal(cache.record('key:paid')?.limit?.rate, 5);
  t.equal(Number(back.watches.at(-1)!.request.sinceVersion), 2, 'resumed from the file version');
  t.equal(sync.status().consecutiveFailures, 0);
});

t.test('a corrupt last-known-good file is ignored, not fatal', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'limiter-snapshot.json');
  const { writeFileSync } = await import('node:fs');
  writeFileSync(path, '{"version": 3, "quotas": [');
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  const { sync, cache } = sidecar(t, cp.url, { path });
  await sync.start();
  t.equal(cache.appliedAt, 0, 'nothing loaded from the bad file');
  await waitFor(() => cache.version === 1);
  await waitFor(() => fileVersion(path) === 1, { what: 'the file replaced by a good one' });
});

t.test('the file is written atomically and only for applied states', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'limiter-snapshot.json');
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  cp.put(quota('key:b', 20));
  const { sync, cache } = sidecar(t, cp.url, { path });
  await sync.start();
  await waitFor(() => cache.version === 2 && sync.snapshotWrites === 1 && fileVersion(path) === 2);
  const before = readFileSync(path, 'utf8');

  // A foreign delta, and the full fetch it triggers fails: nothing applied, nothing written.
  cp.failSnapshots = true;
  cp.push(create(SnapshotSchema, { version: 9n, delta: true, baseVersion: 8n, quotas: [quota('key:z', 1)], issuedAt: 1 }));
  await waitFor(() => cp.snapshots.length === 1 && sync.status().consecutiveFailures === 1, { what: 'the failed full fetch' });
  t.equal(cache.version, 2);
  t.equal(readFileSync(path, 'utf8'), before, 'the file still holds the last applied state');
  t.equal(sync.snapshotWrites, 1);
  t.strictSame(
    readdirSync(dir).filter((f) => f !== 'limiter-snapshot.json'),
    [],
    'no temporary files left behind',
  );

  // Further foreign deltas wait for the next poll instead of hammering the control plane.
  cp.push(create(SnapshotSchema, { version: 10n, delta: true, baseVersion: 9n, issuedAt: 1 }));
  cp.heartbeat();
  await waitFor(() => cp.acks.length >= 1);
  t.equal(cp.snapshots.length, 1, 'no second full fetch before a poll');

  cp.failSnapshots = false;
  await sync.poll();
  t.equal(sync.status().consecutiveFailures, 0, 'the poll answered');
});

t.test('max age: past it, quotas are held to the floor plan until a sync succeeds again', async (t) => {
  const clock = new FakeClock(Date.UTC(2025, 0, 1));
  const dir = tempDir(t);
  const path = join(dir, 'limiter-snapshot.json');
  const cp = await controlPlane(t);
  cp.put(quota('plan:pro', 1000, { plan: 'pro' }));
  cp.put(quota('key:paid', 0, { plan: 'pro', burst: 0 })); // a reference to its plan
  cp.put(quota('key:free', 2));
  const floor = compileQuota(quota('plan:default', 100, { plan: 'default' }));
  const { sync, cache } = sidecar(t, cp.url, { clock, maxAgeMs: 60_000, path });
  t.equal(sync.stale(), true, 'never synced');
  await sync.start();
  await waitFor(() => cache.version === 3);
  t.equal(sync.stale(), false);
  const paid = cache.resolve('key:paid')!;
  const free = cache.resolve('key:free')!;
  t.equal(sync.effective(paid, floor), paid, 'fresh: served as cached');

  clock.advance(60_000);
  t.equal(sync.stale(), false, 'at the max age exactly: still fresh');
  clock.advance(1);
  t.equal(sync.stale(), true, 'past it: stale');
  t.equal(sync.status().stale, true);
  const held = sync.effective(paid, floor);
  t.equal(held.limit?.rate, 100, "the paid plan's rate is held to the default plan's");
  t.equal(held.limit?.burst, 200);
  t.equal(held.policy, 'default');
  t.equal(sync.effective(free, floor), free, 'a quota below the floor is kept as it is');

  cp.heartbeat();
  await waitFor(() => !sync.stale(), { what: 'the heartbeat' });
  t.equal(sync.effective(paid, floor), paid, 'fresh again');

  clock.advance(120_000);
  t.equal(sync.stale(), true);
  await sync.poll();
  t.equal(sync.stale(), false, 'a poll answered with no change counts as a sync');

  // The file records the last sync time: a restart long after it, with the control plane down,
  // starts stale.
  await sync.close();
  const port = cp.port;
  await cp.stop();
  clock.advance(61_000);
  const restarted = sidecar(t, `127.0.0.1:${port}`, { clock, maxAgeMs: 60_000, path });
  await restarted.sync.start();
  t.equal(restarted.cache.version, 3);
  t.equal(restarted.sync.stale(), true, 'a copy older than the max age is stale from the start');
  t.equal(restarted.sync.effective(restarted.cache.resolve('key:paid')!, floor).limit?.rate, 100);
});

t.test('the bearer token travels on every call; none without one', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  const token = 'sync-token-0123456789abcdef';
  const { sync, cache } = sidecar(t, cp.url, { token });
  await sync.start();
  await waitFor(() => cache.version === 1 && cp.acks.length === 1);
  await sync.poll();
  t.equal(cp.watches[0]!.authorization, `Bearer ${token}`);
  t.equal(cp.snapshots[0]!.authorization, `Bearer ${token}`);
  t.equal(cp.acks[0]!.authorization, `Bearer ${token}`);

  const cp2 = await controlPlane(t);
  const other = sidecar(t, cp2.url);
  await other.sync.start();
  await waitFor(() => other.cache.appliedAt !== 0 && cp2.acks.length === 1);
  t.equal(cp2.watches[0]!.authorization, undefined);
  t.equal(cp2.acks[0]!.authorization, undefined);
});

t.test('failed acks are not fatal, and the version is acked again on the next answer', async (t) => {
  const cp = await controlPlane(t);
  cp.put(quota('key:a', 10));
  const { sync, cache } = sidecar(t, cp.url);
  await sync.start();
  await waitFor(() => cp.acks.length === 1);
  cp.failAcks = true;
  cp.put(quota('key:a', 11));
  await waitFor(() => cache.version === 2);
  t.equal(cache.record('key:a')?.limit?.rate, 11, 'applied although its ack failed');
  // Let the failed ack come back before the heartbeat.
  await waitFor(() => sync.status().ackedVersion === -1, { what: 'the failed ack' });
  cp.failAcks = false;
  cp.heartbeat();
  await waitFor(() => cp.acks.some((a) => a.version === 2), { what: 'the ack repeated' });
});

t.test('random writes, lookups, dropped streams and silent periods converge on the control plane table', async (t) => {
  const cp = await controlPlane(t);
  const { sync, cache, path } = sidecar(t, cp.url, { pollIntervalMs: 40, workingSetWriteDelayMs: 0 });
  await sync.start();
  // negativeTtlMs 0: nothing is remembered as unknown, every find asks again.
  const lookup = new QuotaLookup({
    cache,
    call: (s) => sync.lookup(s),
    clock: systemClock,
    log,
    negativeMax: 10,
    negativeTtlMs: 0,
    budget: 0,
    budgetWindowMs: 1000,
    failFastMs: 0,
  });
  let seed = 7;
  const rnd = (): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  // Something the sidecar did: a request, an ack, or a version applied.
  const progress = (): number => cp.watches.length + cp.snapshots.length + cp.acks.length + cache.version;
  let mark = progress();
  for (let i = 0; i < 60; i++) {
    const r = rnd();
    const subject = `key:${Math.floor(rnd() * 8)}`;
    if (r < 0.45) cp.put(quota(subject, 1 + Math.floor(rnd() * 100)));
    else if (r < 0.6) void lookup.find(subject);
    else if (r < 0.75 && cp.table.has(subject)) cp.delete(subject);
    else if (r < 0.85) cp.drop();
    else cp.silent = !cp.silent;
    if (i % 10 === 0) {
      // Between bursts, let the sidecar act on what it has seen (stream or poll) before the next.
      await waitFor(() => progress() !== mark, { what: 'the sidecar to act between bursts' });
      mark = progress();
    }
  }
  cp.silent = false;
  await waitFor(() => cache.version === cp.version && cache.lookupsInFlight === 0, { what: 'convergence', timeoutMs: 10_000 });
  t.ok(cp.lookups.length > 0, 'lookups were interleaved with the writes');
  // Every record held is the control plane's (never an older one installed by a racing lookup)...
  for (let k = 0; k < 8; k++) {
    const held = cache.has(`key:${k}`) ? cache.record(`key:${k}`)?.limit?.rate : undefined;
    if (held !== undefined) t.equal(held, cp.table.get(`key:${k}`)?.rate, `key:${k} held as the control plane has it`);
  }
  // ...and every key found now is.
  for (let k = 0; k < 8; k++) {
    const found = await lookup.find(`key:${k}`);
    const own = found ?? cache.record(`key:${k}`);
    t.equal(own?.limit?.rate, cp.table.get(`key:${k}`)?.rate, `key:${k} resolves as the control plane has it`);
  }
  await sync.close();
  const file = fromJsonString(SnapshotSchema, readFileSync(path, 'utf8'));
  t.equal(Number(file.version), cp.version, 'the file holds the final version');
  t.strictSame(
    file.quotas.map((q) => `${q.subjectId}=${q.rate}`).sort(),
    [...cp.table.values()]
      .filter((q) => cache.has(q.subjectId))
      .map((q) => `${q.subjectId}=${q.rate}`)
      .sort(),
    'and the working set held',
  );
});
