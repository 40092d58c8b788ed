import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConcurrencyError } from '../../../identity/events/errors.js';
import { START, type Checkpoint } from '../../../identity/events/event-store.js';
import { raw, readToHead, useEventsDb } from './helpers.js';
import { waitFor } from '../../harness/wait.js';

const ctx = await useEventsDb(t, 'events_store', { poolMax: 20 });
const { pool, store } = ctx;

async function count(streamId?: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM events WHERE $1::text IS NULL OR stream_id = $1', [
    streamId ?? null,
  ]);
  return Number(rows[0]!.n);
}

const readToEnd = (from: Checkpoint, limit = 1000) => readToHead(store, from, limit);

t.test('append and read a stream: versions from 1, positions increasing, metadata kept', async (t) => {
  const a = await store.append('s-1', 0, [raw('Thing', { n: 1 }), raw('Thing', { n: 2 })], { metadata: { actor_id: 'u1' } });
  t.equal(a.version, 2);
  t.equal(a.positions.length, 2);
  t.ok(a.positions[1]! > a.positions[0]!, 'positions increase');
  const b = await store.append('s-1', 2, [raw('Thing', { n: 3 })]);
  t.equal(b.version, 3);
  const events = await store.readStream('s-1');
  t.same(
    events.map((e) => [e.streamVersion, e.data.n, e.metadata.actor_id]),
    [
      [1, 1, 'u1'],
      [2, 2, 'u1'],
      [3, 3, undefined],
    ],
  );
  t.same(
    (await store.readStream('s-1', { afterVersion: 2 })).map((e) => e.streamVersion),
    [3],
  );
  t.equal(await store.streamVersion('s-1'), 3);
  t.equal(await store.streamVersion('nope'), 0);
  t.match(events[0]!.eventId, /^[0-9a-f-]{36}$/);
  t.ok(Math.abs(events[0]!.recordedAt - Date.now()) < 60_000, 'recordedAt is epoch ms');
});

t.test('an append at a stale or future version is a ConcurrencyError and writes nothing', async (t) => {
  await store.append('s-2', 0, [raw('Thing')]);
  const before = await count('s-2');
  const stale = await store.append('s-2', 0, [raw('Thing')]).catch((e: unknown) => e);
  t.type(stale, ConcurrencyError);
  t.equal((stale as ConcurrencyError).code, 'concurrency_conflict');
  t.equal((stale as ConcurrencyError).actualVersion, 1);
  t.same((stale as ConcurrencyError).extra, { retryable: true });
  const future = await store.append('s-2', 5, [raw('Thing'), raw('Thing')]).catch((e: unknown) => e);
  t.type(future, ConcurrencyError, 'a gap is refused too');
  t.equal(await count('s-2'), before, 'nothing written');
});

t.test('concurrent appends at one version: exactly one wins', async (t) => {
  for (let round = 0; round < 5; round++) {
    const stream = `race-${round}`;
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => store.append(stream, 0, [raw('Thing', { writer: i })])));
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    t.equal(won.length, 1, `round ${round}: one winner`);
    t.ok(
      lost.every((r) => r.reason instanceof ConcurrencyError),
      `round ${round}: every loser gets a ConcurrencyError`,
    );
    t.equal(await count(stream), 1);
  }
});

t.test('two writers past the guard: the unique constraint settles it (the second waits, then loses)', async (t) => {
  const a = await pool.connect();
  t.teardown(() => a.release());
  await a.query('BEGIN');
  await store.append('s-unique', 0, [raw('Thing', { by: 'a' })], { client: a });
  // b passes the version guard (it cannot see a's uncommitted row) and blocks on a's index entry.
  // (The handler is attached at once: b's answer may be read before a's COMMIT returns.)
  const b = store.append('s-unique', 0, [raw('Thing', { by: 'b' })]).catch((e: unknown) => e);
  await waitFor(
    async () =>
      (
        await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        )
      ).rows[0]!.n > 0,
    { what: "b to block on a's uncommitted index entry" },
  );
  await a.query('COMMIT');
  const err = await b;
  t.type(err, ConcurrencyError);
  t.same(
    (await store.readStream('s-unique')).map((e) => e.data.by),
    ['a'],
  );
});

t.test('events are append-only', async (t) => {
  await t.rejects(pool.query(`UPDATE events SET data = '{}' WHERE stream_id = 's-1'`), /append-only/);
  await t.rejects(pool.query(`DELETE FROM events WHERE stream_id = 's-1'`), /append-only/);
  await t.rejects(pool.query('TRUNCATE events'), /append-only/);
});

t.test('readAll: log order, type filter passes other events without data, checkpoint moves past them', async (t) => {
  const { next: head } = await readToEnd(START);
  await store.append('f-1', 0, [raw('A', { i: 1 }), raw('B', { i: 2 }), raw('A', { i: 3 })]);
  const r = await waitFor(async () => {
    const read = await store.readAll(head, 10, { types: new Set(['A']) });
    return read.scanned === 3 ? read : undefined;
  });
  t.same(
    r.events.map((e) => e.data.i),
    [1, 3],
  );
  t.equal(r.scanned, 3);
  const again = await store.readAll(r.next, 10);
  t.equal(again.scanned, 0, 'nothing after the checkpoint');
  t.same(again.next, r.next, 'an empty read keeps the checkpoint');
});

t.test('readers order by transaction id as a number, not as text', async (t) => {
  // Transaction ids 9 and 10, long finished: '10' sorts before '9' as text.
  for (const tx of ['10', '9']) {
    await pool.query(
      `INSERT INTO events (stream_id, stream_version, event_type, schema_version, event_id, data, tx)
       VALUES ($1, 1, 'Old', 1, gen_random_uuid(), '{}', $2::xid8)`,
      [`old-${tx}`, tx],
    );
  }
  const first = await store.readAll(START, 2);
  t.same(
    first.events.map((e) => e.tx),
    ['9', '10'],
  );
});

t.test('late commit: a slow transaction holding an earlier position is never skipped', async (t) => {
  const { next: head } = await readToEnd(START);
  const maxPosition = Number((await pool.query<{ p: string }>('SELECT max(position) AS p FROM events')).rows[0]!.p);
  const slow = await pool.connect();
  t.teardown(() => slow.release());
  await slow.query('BEGIN');
  const early = await store.append('late-slow', 0, [raw('Late', { who: 'slow' })], { client: slow });
  const later = await store.append('late-fast', 0, [raw('Late', { who: 'fast' })]);
  t.ok(early.positions[0]! < later.positions[0]!, 'the slow transaction holds the earlier position');

  // What a reader keyed on position alone would do: see the later event and move past the earlier one.
  const naive = await pool.query<{ position: string }>('SELECT position FROM events WHERE position > $1 ORDER BY position', [maxPosition]);
  t.same(
    naive.rows.map((r) => Number(r.position)),
    [later.positions[0]],
    'the hazard is real: only the later position is visible',
  );

  const during = await store.readAll(head, 100);
  t.equal(during.scanned, 0, 'the reader does not advance past the open transaction');
  t.same(during.next, head);

  await slow.query('COMMIT');
  const after = await readToEnd(head);
  t.same(
    after.events.map((e) => e.data.who),
    ['slow', 'fast'],
    'once it commits, the reader sees both, in order',
  );
});

t.test('late commit with transaction ids out of position order: still nothing skipped', async (t) => {
  const { next: head } = await readToEnd(START);
  const first = await pool.connect();
  const second = await pool.connect();
  t.teardown(() => {
    first.release();
    second.release();
  });
  // `first` takes its transaction id before `second`, but allocates its position after it.
  await first.query('BEGIN');
  await first.query('SELECT pg_current_xact_id()');
  await second.query('BEGIN');
  const held = await store.append('xid-held', 0, [raw('Late', { who: 'held' })], { client: second });
  const quick = await store.append('xid-quick', 0, [raw('Late', { who: 'quick' })], { client: first });
  t.ok(held.positions[0]! < quick.positions[0]!, 'the held transaction has the smaller position');
  await first.query('COMMIT');

  const seen: string[] = [];
  // (Another test's open transaction may hold the horizon for a moment; `held` cannot appear before its commit.)
  const during = await waitFor(async () => {
    const r = await store.readAll(head, 100);
    return r.scanned > 0 ? r : undefined;
  });
  seen.push(...during.events.map((e) => String(e.data.who)));
  t.same(seen, ['quick'], 'the committed event with the older transaction id is readable');
  await second.query('COMMIT');
  const after = await readToEnd(during.next);
  seen.push(...after.events.map((e) => String(e.data.who)));
  t.same(seen, ['quick', 'held'], 'the held one arrives after its commit, though its position is smaller');
});

t.test('concurrent writers with random commit delays: a tailing reader sees every event exactly once', async (t) => {
  const { next: head } = await readToEnd(START);
  const written: number[] = [];
  let writing = true;
  const writer = async (w: number): Promise<void> => {
    for (let i = 0; i < 25; i++) {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await sleep(Math.random() * 4);
        const r = await store.append(`tail-${w}-${i}`, 0, [raw('Tail', { w, i })], { client: c });
        await sleep(Math.random() * 8);
        await c.query('COMMIT');
        written.push(r.positions[0]!);
      } finally {
        c.release();
      }
    }
  };
  const seen: number[] = [];
  const reader = (async () => {
    let cp = head;
    while (writing) {
      const r = await store.readAll(cp, 7);
      seen.push(...r.events.map((e) => e.position));
      cp = r.next;
      if (r.scanned === 0) await sleep(1);
    }
    const rest = await readToEnd(cp, 7);
    seen.push(...rest.events.map((e) => e.position));
  })();
  await Promise.all(Array.from({ length: 8 }, (_, w) => writer(w)));
  writing = false;
  await reader;
  t.equal(new Set(seen).size, seen.length, 'no event twice');
  t.same(
    [...seen].sort((a, b) => a - b),
    [...written].sort((a, b) => a - b),
    'every committed event once',
  );
});
