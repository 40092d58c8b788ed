// @tier: pure
/**
 * limiter/snapshot-store.ts: the last-known-good file is the quota cache's working set (plans and
 * the key records held, looked up ones included), written atomically, coalesced, and a write
 * failure never throws.
 */
import t, { type Test } from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { SnapshotSchema, type Snapshot } from '../../../proto/gen/quota/v1/quota_pb.js';
import { fromJsonString, toJsonString } from '../../../shared/proto-json.js';
import { QuotaCache } from '../../../limiter/quota-cache.js';
import { SnapshotFileError, SnapshotStore, WRITE_CHUNK } from '../../../limiter/snapshot-store.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';
import { quota } from './fake-control-plane.js';

const log = testLogger('snapshot-store');

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'snapshot-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function full(version: number, rates: Record<string, number>): Snapshot {
  return create(SnapshotSchema, {
    version: BigInt(version),
    quotas: Object.entries(rates).map(([s, r]) => quota(s, r)),
    issuedAt: 1,
  });
}

function delta(base: number, version: number, rates: Record<string, number>, deleted: string[] = []): Snapshot {
  return create(SnapshotSchema, {
    version: BigInt(version),
    delta: true,
    baseVersion: BigInt(base),
    quotas: Object.entries(rates).map(([s, r]) => ({ ...quota(s, r), version: BigInt(version) })),
    deletedSubjectIds: deleted,
    issuedAt: 1,
  });
}

function onDisk(path: string): { version: number; rates: string[]; issuedAt: number } {
  const s = fromJsonString(SnapshotSchema, readFileSync(path, 'utf8'));
  return { version: Number(s.version), rates: s.quotas.map((q) => `${q.subjectId}=${q.rate}`).sort(), issuedAt: s.issuedAt };
}

function storeOf(path: string, cache: QuotaCache, minWriteIntervalMs = 0): SnapshotStore {
  return new SnapshotStore({ path, log, minWriteIntervalMs, source: (at) => cache.snapshot(at) });
}

t.test('the file is the working set held, at the version held, with the sync time', async (t) => {
  const path = join(tempDir(t), 'snap.json');
  const cache = new QuotaCache(100);
  const store = storeOf(path, cache);
  t.equal(await store.load(), undefined, 'no file yet');
  cache.apply(full(3, { 'plan:free': 5, 'key:a': 1, 'key:b': 2 }), 10_000);
  store.changed(10_000);
  // key:a and key:b are held: the delta updates one and deletes the other; key:c is not held.
  cache.apply(delta(3, 5, { 'key:a': 7, 'key:c': 3 }, ['key:b']), 12_500);
  store.changed(12_500);
  // A record looked up joins the working set.
  cache.beginLookup('key:d');
  cache.finishLookup('key:d', { ...quota('key:d', 4), version: 2n }, 5);
  store.changed();
  await store.flush();
  t.strictSame(onDisk(path), { version: 5, rates: ['key:a=7', 'key:d=4', 'plan:free=5'], issuedAt: 12.5 });

  const again = new QuotaCache(100);
  const loaded = await storeOf(path, again).load();
  t.equal(Number(loaded?.version), 5, 'load returns the file');
  again.apply(loaded!, 13_000);
  t.equal(again.record('key:d')?.limit?.rate, 4, 'a restarted sidecar starts with what it had looked up');
});

t.test('nothing is written before the cache holds a state', async (t) => {
  const path = join(tempDir(t), 'snap.json');
  const store = storeOf(path, new QuotaCache(10));
  await store.flush(true);
  t.equal(store.writes, 0);
});

t.test('readers never see a partial file, and no temporary file is left', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'snap.json');
  const cache = new QuotaCache(10_000);
  const store = storeOf(path, cache);
  const big: Record<string, number> = {};
  for (let i = 0; i < 3000; i++) big[`key:${i.toString(16).padStart(64, '0')}`] = i + 1;
  cache.apply(full(1, big), 1000);
  store.changed(1000);
  await store.flush();
  let reads = 0;
  let stop = false;
  const reader = (async () => {
    while (!stop) {
      const text = await readFile(path, 'utf8');
      fromJsonString(SnapshotSchema, text); // throws on a torn file
      reads++;
    }
  })();
  for (let v = 2; v <= 30; v++) {
    cache.apply(delta(v - 1, v, { [`key:${(1).toString(16).padStart(64, '0')}`]: v }), v * 1000);
    store.changed(v * 1000);
    await store.flush();
  }
  stop = true;
  await reader;
  t.ok(reads > 10, `the reader read the file ${reads} times while it was rewritten`);
  t.equal(onDisk(path).version, 30);
  t.strictSame(readdirSync(dir), ['snap.json'], 'only the file itself');
});

t.test('bursts of changes are coalesced into fewer writes', async (t) => {
  const path = join(tempDir(t), 'snap.json');
  const cache = new QuotaCache(10);
  const store = storeOf(path, cache, 200);
  cache.apply(full(1, { 'key:a': 1 }), 1000);
  store.changed(1000);
  for (let v = 2; v <= 50; v++) {
    cache.apply(delta(v - 1, v, { 'key:a': v }), v);
    store.changed(v);
  }
  await waitFor(() => store.writes >= 1 && onDisk(path).version >= 1);
  await waitFor(() => onDisk(path).version === 50, { what: 'the last version written' });
  t.ok(store.writes <= 3, `50 versions in ${store.writes} writes`);
  t.strictSame(onDisk(path).rates, ['key:a=50']);
});

t.test('a write failure is logged, never thrown', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'not-a-dir'), 'x');
  const cache = new QuotaCache(10);
  const store = storeOf(join(dir, 'not-a-dir', 'snap.json'), cache);
  cache.apply(full(1, { 'key:a': 1 }), 1000);
  store.changed(1000);
  await store.flush();
  t.equal(store.writes, 0);
  t.equal(cache.record('key:a')?.limit?.rate, 1, 'the cache is intact');
});

t.test('a file that is not a full snapshot is refused with its path', async (t) => {
  const dir = tempDir(t);
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ version: 2, delta: true, base_version: 1 }));
  await t.rejects(storeOf(bad, new QuotaCache(1)).load(), new SnapshotFileError(bad, 'is a delta, not a full snapshot'));
  writeFileSync(bad, '{"version": "two"}');
  await t.rejects(storeOf(bad, new QuotaCache(1)).load(), { name: 'SnapshotFileError', message: /bad\.json: .*version/ });
  writeFileSync(bad, 'not json');
  await t.rejects(storeOf(bad, new QuotaCache(1)).load(), { name: 'SnapshotFileError' });
});

t.test('a relative path is resolved against the project root', async (t) => {
  const store = storeOf('.data/limiter-snapshot.json', new QuotaCache(1));
  t.match(store.path, /\/\.data\/limiter-snapshot\.json$/);
  t.ok(store.path.startsWith('/'));
});

t.test('a large working set is written in pieces, a turn of the event loop between them, as the JSON of one snapshot', async (t) => {
  const dir = tempDir(t);
  for (const n of [0, 1, WRITE_CHUNK, 2 * WRITE_CHUNK + 7]) {
    const path = join(dir, `snap-${n}.json`);
    const snapshot = create(SnapshotSchema, {
      version: 9n,
      quotas: Array.from({ length: n }, (_, i) => quota(`key:${i}`, 1 + (i % 50))),
      issuedAt: 1764316800.5,
    });
    const expected = toJsonString(SnapshotSchema, snapshot);
    const store = new SnapshotStore({ path, log, minWriteIntervalMs: 0, source: () => snapshot });
    // The turns of the event loop, counted as the sidecar's serving would use them.
    let turns = 0;
    let ticking = true;
    const tick = (): void => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    // The turn in which each record was serialized (the serializer reads it through this getter).
    const serializedIn = new Set<number>();
    for (const q of snapshot.quotas) {
      const rate = q.rate;
      Object.defineProperty(q, 'rate', {
        get: () => {
          serializedIn.add(turns);
          return rate;
        },
      });
    }
    store.changed(1000);
    await store.flush();
    ticking = false;
    t.equal(await readFile(path, 'utf8'), expected, `${n} records: the same text as one toJsonString`);
    const pieces = Math.ceil(n / WRITE_CHUNK);
    t.equal(serializedIn.size, pieces, `${n} records: serialized in ${pieces} turns of the event loop`);
  }
});
