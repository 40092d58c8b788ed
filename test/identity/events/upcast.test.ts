import t from 'tap';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fromJson, toJson, type JsonRecord } from '../../../shared/proto-json.js';
import { EVENT_CATALOG, EVENT_TYPES, isEventType, userRegisteredV1toV2 } from '../../../identity/events/catalog.js';
import { upcast } from '../../../identity/events/codec.js';
import { START } from '../../../identity/events/event-store.js';
import { userCardProjector } from '../../../identity/events/projectors/user-docs.js';
import { Users } from '../../../identity/domain/users.js';
import { FakeClock } from '../../../shared/clock.js';
import { testLogger } from '../../harness/log.js';
import { readToHead, testRunner, useEventsDb } from './helpers.js';
import { sourceUrl } from '../../harness/source.js';

/**
 * The frozen fixture set: one file per stored (event type, schema version), with the payload as it
 * was stored and as readers must see it today. Files are never edited (MANIFEST.sha256 pins them);
 * a new schema version adds a file.
 */
const DIR = new URL('./fixtures/', sourceUrl(import.meta.url));

interface Fixture {
  file: string;
  type: string;
  schema_version: number;
  stored: JsonRecord;
  current: JsonRecord;
}

const fixtures: Fixture[] = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((file) => ({ file, ...(JSON.parse(readFileSync(new URL(file, DIR), 'utf8')) as Omit<Fixture, 'file'>) }));

t.test('every stored version of every event type has a fixture, and no fixture is unknown', async (t) => {
  const have = new Set(fixtures.map((f) => `${f.type}.v${f.schema_version}`));
  for (const type of EVENT_TYPES) {
    for (let v = 1; v <= EVENT_CATALOG[type].version; v++) t.ok(have.has(`${type}.v${v}`), `${type} v${v} has a fixture`);
  }
  for (const f of fixtures) {
    t.ok(isEventType(f.type), `${f.file}: ${f.type} is in the catalogue`);
    if (isEventType(f.type)) t.ok(f.schema_version <= EVENT_CATALOG[f.type].version, `${f.file}: version is not from the future`);
    t.equal(f.file, `${f.type}.v${f.schema_version}.json`, `${f.file} is named for its type and version`);
  }
  t.ok(EVENT_CATALOG.UserRegistered.version >= 2, 'UserRegistered has a V1 and a V2 side by side');
});

t.test('the fixtures are frozen: their checksums match MANIFEST.sha256', async (t) => {
  const manifest = new Map(
    readFileSync(new URL('MANIFEST.sha256', DIR), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const [sum, name] = l.trim().split(/\s+/);
        return [name!, sum!] as const;
      }),
  );
  t.same([...manifest.keys()].sort(), fixtures.map((f) => f.file).sort(), 'the manifest lists exactly the fixture files');
  for (const f of fixtures) {
    const text = readFileSync(new URL(f.file, DIR), 'utf8').replace(/\r\n/g, '\n');
    t.equal(createHash('sha256').update(text).digest('hex'), manifest.get(f.file), `${f.file} is unchanged`);
  }
});

t.test('upcasting each stored version gives the current payload, which fits the proto contract exactly', async (t) => {
  for (const f of fixtures) {
    if (!isEventType(f.type)) continue;
    const spec = EVENT_CATALOG[f.type];
    const up = upcast(f.type, f.schema_version, f.stored);
    t.equal(up.schemaVersion, spec.version, `${f.file}: upcast to v${spec.version}`);
    t.same(up.data, f.current, `${f.file}: payload as readers see it`);
    const message = fromJson(spec.schema, f.current);
    t.same(toJson(spec.schema, message), f.current, `${f.file}: the current payload is the contract's complete JSON`);
  }
});

t.test('upcasters tolerate missing fields; unknown types and future versions pass through', async (t) => {
  t.same(userRegisteredV1toV2({ user_id: 'u', email: 'e@x.io' }), { user_id: 'u', email: 'e@x.io', name: '', created_at: 0 });
  t.same(userRegisteredV1toV2({ user_id: 'u', full_name: 'N', registered_at: 'not a date' }), { user_id: 'u', name: 'N', created_at: 0 });
  t.same(upcast('SomethingNew', 3, { a: 1 }), { schemaVersion: 3, data: { a: 1 } });
  t.same(upcast('UserRegistered', 9, { a: 1 }), { schemaVersion: 9, data: { a: 1 } });
});

t.test('stored rows of every version read back upcast, by stream and by position; V1 and V2 project side by side', async (t) => {
  const { pool, store } = await useEventsDb(t, 'events_upcast');
  for (const [i, f] of fixtures.entries()) {
    await store.append(`fixture-${i}`, 0, [{ type: f.type, schemaVersion: f.schema_version, data: f.stored }]);
  }
  const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM events WHERE schema_version = 1 AND event_type = $1', [
    'UserRegistered',
  ]);
  t.equal(Number(rows[0]!.n), 1, 'the V1 row is stored as V1: nothing is rewritten');
  for (const [i, f] of fixtures.entries()) {
    const [e] = await store.readStream(`fixture-${i}`);
    t.same(e?.data, f.current, `${f.file} by stream`);
  }
  const all = await readToHead(store, START, 100);
  t.same(
    all.events.map((e) => e.data),
    fixtures.map((f) => f.current),
    'by position',
  );

  // A user registered under V1 and one under V2 both reach the read model and the aggregate.
  const users = new Users({ store, clock: new FakeClock(1_767_225_600_000), log: testLogger(), snapshotEvery: 100 });
  await store.append('user-legacy', 0, [
    {
      type: 'UserRegistered',
      schemaVersion: 1,
      data: { user_id: 'legacy', email: 'old@example.com', full_name: 'Old Timer', registered_at: '2020-01-01T00:00:00Z' },
    },
  ]);
  await users.register({ userId: 'modern', email: 'new@example.com', name: 'New Comer' });
  const runner = testRunner(pool, store, [userCardProjector]);
  await runner.ensure();
  await runner.drain();
  const { rows: cards } = await pool.query<{ user_id: string; name: string }>(
    `SELECT user_id, name FROM user_cards WHERE user_id IN ('legacy', 'modern') ORDER BY user_id`,
  );
  t.same(cards, [
    { user_id: 'legacy', name: 'Old Timer' },
    { user_id: 'modern', name: 'New Comer' },
  ]);
  const legacy = await users.get('legacy');
  t.equal(legacy?.state.name, 'Old Timer');
  t.equal(legacy?.state.createdAt, Date.UTC(2020, 0, 1) / 1000);
});
