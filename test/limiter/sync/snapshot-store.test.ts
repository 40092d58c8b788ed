// @tier: pure
/**
 * limiter/snapshot-store.ts: the last-known-good file follows full and delta snapshots, is written
 * only for complete states, atomically, coalesced, and a write failure never throws.
 */
import t, { type Test } from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { SnapshotSchema, type Snapshot } from '../../../proto/gen/quota/v1/quota_pb.js';
import { fromJsonString } from '../../../shared/proto-json.js';
import { SnapshotFileError, SnapshotStore } from '../../../limiter/snapshot-store.js';
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
    quotas: Object.entries(rates).map(([s, r]) => quota(s, r)),
    deletedSubjectIds: deleted,
    issuedAt: 1,
  });
}

function onDisk(path: string): { version: number; rates: string[]; issuedAt: number } {
  const s = fromJsonString(SnapshotSchema, readFileSync(path, 'utf8'));
  return { version: Number(s.version), rates: s.quotas.map((q) => `${q.subjectId}=${q.rate}`).sort(), issuedAt: s.issuedAt };
}

t.test('follows a full snapshot and deltas on its base; the file is a full snapshot with the sync time', async (t) => {
  const path = join(tempDir(t), 'snap.json');
  const store = new SnapshotStore({ path, log, minWriteIntervalMs: 0 });
  t.equal(await store.load(), undefined, 'no file yet');
  t.equal(store.version, -1);
  store.apply(full(3, { 'key:a': 1, 'key:b': 2 }), 10_000);
  store.apply(delta(3, 5, { 'key:a': 7, 'key:c': 3 }, ['key:b']), 12_500);
  t.equal(store.version, 5);
  await store.flush();
  t.strictSame(onDisk(path), { version: 5, rates: ['key:a=7', 'key:c=3'], issuedAt: 12.5 });

  const again = new SnapshotStore({ path, log });
  const loaded = await again.load();
  t.equal(Number(loaded?.version), 5, 'load returns the file');
  t.equal(again.version, 5, 'and holds it, so deltas can follow');
  again.apply(delta(5, 6, { 'key:d': 4 }), 13_000);
  t.equal(again.version, 6);
});

t.test('a delta from another base leaves the file as it was until the next full snapshot', async (t) => {
  const path = join(tempDir(t), 'snap.json');
  const store = new SnapshotStore({ path, log, minWriteIntervalMs: 0 });
  store.apply(full(3, { 'key:a': 1 }), 1000);
  await store.flush();
  const writes = store.writes;
  store.apply(delta(4, 5, { 'key:z': 9 }), 2000);
  t.equal(store.version, -1, 'incomplete');
  t.equal(store.snapshot(), undefined);
  await store.flush(true);
  t.equal(store.writes, writes, 'nothing written for an incomplete copy');
  t.strictSame(onDisk(path).rates, ['key:a=1']);
  store.apply(delta(5, 6, { 'key:y': 9 }), 3000);
  t.equal(store.version, -1, 'still incomplete');

  store.adopt(full(6, { 'key:a': 1, 'key:y': 9, 'key:z': 9 }), 4000);
  t.equal(store.version, 6, 'a full snapshot at the cache version makes it whole again');
  await store.flush();
  t.strictSame(onDisk(path), { version: 6, rates: ['key:a=1', 'key:y=9', 'key:z=9'], issuedAt: 4 });
});

t.test('readers never see a partial file, and no temporary file is left', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'snap.json');
  const store = new SnapshotStore({ path, log, minWriteIntervalMs: 0 });
  const big: Record<string, number> = {};
  for (let i = 0; i < 3000; i++) big[`key:${i.toString(16).padStart(64, '0')}`] = i + 1;
  store.apply(full(1, big), 1000);
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
    store.apply(delta(v - 1, v, { [`key:extra${v}`]: v }), v * 1000);
    await store.flush();
  }
  stop = true;
  await reader;
  t.ok(reads > 10, `the reader read the file ${reads} times while it was rewritten`);
  t.equal(onDisk(path).version, 30);
  t.strictSame(readdirSync(dir), ['snap.json'], 'only the file itself');
});

t.test('bursts of versions are coalesced into fewer writes', async (t) => {
  const path = join(tempDir(t), 'snap.json');
  const store = new SnapshotStore({ path, log, minWriteIntervalMs: 200 });
  store.apply(full(1, { 'key:a': 1 }), 1000);
  for (let v = 2; v <= 50; v++) store.apply(delta(v - 1, v, { 'key:a': v }), v);
  await waitFor(() => store.writes >= 1 && onDisk(path).version >= 1);
  await waitFor(() => onDisk(path).version === 50, { what: 'the last version written' });
  t.ok(store.writes <= 3, `50 versions in ${store.writes} writes`);
  t.strictSame(onDisk(path).rates, ['key:a=50']);
});

t.test('a write failure is logged, never thrown', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'not-a-dir'), 'x');
  const store = new SnapshotStore({ path: join(dir, 'not-a-dir', 'snap.json'), log, minWriteIntervalMs: 0 });
  store.apply(full(1, { 'key:a': 1 }), 1000);
  await store.flush();
  t.equal(store.writes, 0);
  t.equal(store.version, 1, 'the copy in memory is intact');
});

t.test('a file that is not a full snapshot is refused with its path', async (t) => {
  const dir = tempDir(t);
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ version: 2, delta: true, base_version: 1 }));
  await t.rejects(new SnapshotStore({ path: bad, log }).load(), new SnapshotFileError(bad, 'is a delta, not a full snapshot'));
  writeFileSync(bad, '{"version": "two"}');
  await t.rejects(new SnapshotStore({ path: bad, log }).load(), { name: 'SnapshotFileError', message: /bad\.json: .*version/ });
  writeFileSync(bad, 'not json');
  await t.rejects(new SnapshotStore({ path: bad, log }).load(), { name: 'SnapshotFileError' });
});

t.test('a relative path is resolved against the project root', async (t) => {
  const store = new SnapshotStore({ path: '.data/limiter-snapshot.json', log });
  t.match(store.path, /\/\.data\/limiter-snapshot\.json$/);
  t.ok(store.path.startsWith('/'));
});
