import t from 'tap';
import { FakeClock } from '../../../shared/clock.js';
import { EmailTaken, InvalidEmail, UserAlreadyExists, UserNotFound } from '../../../identity/domain/errors.js';
import { Users } from '../../../identity/domain/users.js';
import { ConcurrencyError } from '../../../identity/events/errors.js';
import { EventStore } from '../../../identity/events/event-store.js';
import { testLogger } from '../../harness/log.js';
import { useEventsDb } from './helpers.js';

const { pool, store } = await useEventsDb(t, 'events_users', { poolMax: 20 });
const clock = new FakeClock(Date.UTC(2026, 0, 1));
const users = new Users({ store, clock, log: testLogger(), snapshotEvery: 100 });

const events = async (): Promise<number> => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
const reservations = async () =>
  (await pool.query<{ email: string; user_id: string }>('SELECT email, user_id FROM email_reservations ORDER BY email')).rows;

t.test('register: the event, the reservation, lookup by email in any case, the user from the write model', async (t) => {
  const saved = await users.register({ userId: 'ada', email: ' Ada@Example.com', name: 'Ada Lovelace' });
  t.equal(saved.userId, 'ada');
  t.equal(saved.version, 1);
  t.equal(await users.findUserIdByEmail('ADA@example.COM '), 'ada');
  t.equal(await users.findUserIdByEmail('nobody@example.com'), undefined);
  t.equal(await users.findUserIdByEmail('not an email'), undefined);
  const loaded = await users.get('ada');
  t.match(loaded?.state, { exists: true, email: 'ada@example.com', name: 'Ada Lovelace', createdAt: clock.now() / 1000 });
  t.equal(await users.get('nobody'), undefined);
  const generated = await users.register({ email: 'gen@example.com', name: 'Generated' });
  t.match(generated.userId, /^[0-9a-f-]{36}$/, 'a fresh UUID when no id is given');
});

t.test('refusals write nothing: InvalidEmail, EmailTaken, UserAlreadyExists', async (t) => {
  const before = { events: await events(), reservations: await reservations() };
  await t.rejects(users.register({ userId: 'bad', email: 'not-an-email', name: 'X' }), InvalidEmail);
  await t.rejects(users.register({ userId: 'copy', email: 'ADA@example.com', name: 'Copycat' }), EmailTaken);
  await t.rejects(users.register({ userId: 'ada', email: 'other@example.com', name: 'Ada again' }), UserAlreadyExists);
  await t.rejects(users.register({ userId: 'ada', email: 'ada@example.com', name: 'Ada again' }), UserAlreadyExists);
  t.same({ events: await events(), reservations: await reservations() }, before);
});

t.test('ten concurrent registrations of one address: exactly one wins, the rest get EmailTaken', async (t) => {
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) => users.register({ userId: `racer-${i}`, email: 'race@example.com', name: `Racer ${i}` })),
  );
  const won = results.filter((r) => r.status === 'fulfilled');
  t.equal(won.length, 1);
  t.ok(results.every((r) => r.status === 'fulfilled' || r.reason instanceof EmailTaken));
  const winner = (won[0] as PromiseFulfilledResult<{ userId: string }>).value.userId;
  t.equal(await users.findUserIdByEmail('race@example.com'), winner);
  t.equal(Number((await pool.query(`SELECT count(*) AS n FROM events WHERE stream_id LIKE 'user-racer-%'`)).rows[0].n), 1);
});

t.test('concurrent registrations of one user id: one wins, and only its address stays reserved', async (t) => {
  const results = await Promise.allSettled(
    Array.from({ length: 6 }, (_, i) => users.register({ userId: 'same-id', email: `same${i}@example.com`, name: 'Same' })),
  );
  t.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
  t.ok(results.every((r) => r.status === 'fulfilled' || r.reason instanceof UserAlreadyExists));
  t.equal((await reservations()).filter((r) => r.user_id === 'same-id').length, 1);
});

t.test('change email: the new address is reserved and the old one released, in one transaction', async (t) => {
  await users.register({ userId: 'bob', email: 'bob@example.com', name: 'Bob' });
  await t.rejects(users.changeEmail('bob', { newEmail: 'ada@example.com', reason: 'x', triggeredBy: 'bob' }), EmailTaken);
  t.equal(await users.findUserIdByEmail('bob@example.com'), 'bob', 'a refused change keeps the old reservation');
  const saved = await users.changeEmail('bob', { newEmail: 'robert@example.com', reason: 'user_request', triggeredBy: 'bob' });
  t.equal(saved.version, 2);
  t.equal(await users.findUserIdByEmail('robert@example.com'), 'bob');
  t.equal(await users.findUserIdByEmail('bob@example.com'), undefined, 'the old address is free');
  await users.register({ userId: 'bobby', email: 'bob@example.com', name: 'Bobby' });
  t.equal(await users.findUserIdByEmail('bob@example.com'), 'bobby');
  const [, updated] = await store.readStream('user-bob');
  t.match(updated?.data, { old_email: 'bob@example.com', new_email: 'robert@example.com', reason: 'user_request', triggered_by: 'bob' });
  await t.rejects(
    users.changeEmail('bob', { newEmail: 'r@example.com', reason: '', triggeredBy: 'bob' }, { expectedVersion: 1 }),
    ConcurrencyError,
  );
  await t.rejects(users.changeEmail('ghost', { newEmail: 'g@example.com', reason: '', triggeredBy: 'ghost' }), UserNotFound);
});

t.test("register inside the caller's transaction: a refusal leaves it usable; projectors are told after the commit", async (t) => {
  await pool.query('CREATE TABLE IF NOT EXISTS test_passwords (user_id text PRIMARY KEY, hash text NOT NULL)');
  const told: number[] = [];
  const notifyingStore = new EventStore(pool, { onAppended: (r) => told.push(r.version) });
  const notifying = new Users({ store: notifyingStore, clock, log: testLogger(), snapshotEvery: 100 });
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await t.rejects(notifying.register({ userId: 'dup', email: 'ada@example.com', name: 'Dup' }, { client }), EmailTaken);
    const saved = await notifying.register({ userId: 'signup', email: 'signup@example.com', name: 'Signup' }, { client });
    await client.query('INSERT INTO test_passwords VALUES ($1, $2)', ['signup', 'argon2-hash']);
    t.same(told, [], 'not announced before the commit');
    await client.query('COMMIT');
    notifyingStore.appended(saved.append!);
    t.same(told, [1], 'announced once committed');
  } finally {
    client.release();
  }
  t.equal(await users.findUserIdByEmail('signup@example.com'), 'signup');
  t.equal((await pool.query(`SELECT hash FROM test_passwords WHERE user_id = 'signup'`)).rows[0]?.hash, 'argon2-hash');
});

t.test('follow needs both users; following twice adds nothing', async (t) => {
  await t.rejects(users.follow('ada', 'ghost'), UserNotFound);
  const first = await users.follow('ada', 'bob');
  const second = await users.follow('ada', 'bob');
  t.equal(first.events.length, 1);
  t.equal(second.events.length, 0);
  t.equal(second.version, first.version);
});
