/**
 * The user command handlers: what a signup endpoint, an account page or the OAuth server calls.
 * Each loads the User aggregate, decides with the pure decider (user.ts) and appends; registration
 * and email changes also claim (and release) the address in `email_reservations` inside the same
 * transaction, so two users can never hold one address, whatever the read models say.
 *
 * Reading a user for login: `findUserIdByEmail` (the reservation table: strongly consistent) and
 * `get` (the aggregate from the event store).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import type { JsonRecord } from '../../shared/proto-json.js';
import { AggregateRepository, type Loaded, type Saved } from '../events/aggregate-repository.js';
import { ConcurrencyError, isConcurrencyError } from '../events/errors.js';
import type { EventStore, Queryable } from '../events/event-store.js';
import { isValidEmail, normalizeEmail } from './email.js';
import { EmailTaken, UserAlreadyExists, UserNotFound } from './errors.js';
import { decideUser, userAggregate, type UserCommand, type UserState } from './user.js';

export interface UsersDeps {
  store: EventStore;
  clock: Clock;
  log: Logger;
  /** Take a snapshot every this many events of a stream (IDENTITY_SNAPSHOT_EVERY). */
  snapshotEvery: number;
  /** New user ids; default random UUIDs. */
  newId?: () => string;
}

export interface CommandOptions {
  /** Decide only against this stream version (If-Match); otherwise conflicts are retried. */
  expectedVersion?: number;
  /** Who and why, stored with the events (never secrets). */
  metadata?: JsonRecord;
}

export interface RegisterInput {
  /** Default: a fresh UUID. */
  userId?: string;
  email: string;
  name: string;
}

const RESERVE = {
  name: 'email_reserve',
  text: 'INSERT INTO email_reservations (email, user_id) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING RETURNING user_id',
};
const RELEASE = { name: 'email_release', text: 'DELETE FROM email_reservations WHERE email = $1 AND user_id = $2' };
const LOOKUP = { name: 'email_lookup', text: 'SELECT user_id FROM email_reservations WHERE email = $1' };

export class Users {
  readonly repo: AggregateRepository<UserState>;
  private readonly newId: () => string;

  constructor(private readonly deps: UsersDeps) {
    this.repo = new AggregateRepository(deps.store, userAggregate, { snapshotEvery: deps.snapshotEvery, log: deps.log });
    this.newId = deps.newId ?? randomUUID;
  }

  /**
   * Registers a user: UserRegistered, with the email reserved in the same transaction.
   *
   * @param opts.client run inside the caller's transaction (e.g. a signup that also stores a password
   *   hash); the work is wrapped in a savepoint, so a refusal leaves the caller's transaction usable.
   *   Call `store.appended(result)` after your COMMIT to wake the projectors at once.
   * @throws InvalidEmail, UserAlreadyExists, EmailTaken, PlatformError `invalid_field` (name, user_id)
   */
  async register(
    input: RegisterInput,
    opts: { client?: pg.PoolClient; metadata?: JsonRecord } = {},
  ): Promise<Saved<UserState> & { userId: string }> {
    const userId = input.userId ?? this.newId();
    const command: UserCommand = { type: 'RegisterUser', userId, email: input.email, name: input.name };
    const saved = await this.inTransaction(opts.client, async (client) => {
      const loaded = await this.repo.load(userId, { client });
      const events = decideUser(command, loaded.state, this.deps.clock.now());
      const event = events[0];
      if (event?.type !== 'UserRegistered') throw new Error('RegisterUser decided no UserRegistered');
      await this.reserve(client, event.data.email, userId, 'email');
      try {
        return await this.repo.save(userId, loaded, events, { client, metadata: opts.metadata });
      } catch (err) {
        if (isConcurrencyError(err)) throw new UserAlreadyExists(userId);
        throw err;
      }
    });
    return { ...saved, userId };
  }

  /**
   * Changes a user's email: UserEmailUpdated; the new address is reserved and the old one released
   * in the same transaction. The same address again is a no-op.
   *
   * @throws UserNotFound, InvalidEmail (field new_email), EmailTaken, ConcurrencyError
   */
  async changeEmail(
    userId: string,
    input: { newEmail: string; reason: string; triggeredBy: string },
    opts: CommandOptions = {},
  ): Promise<Saved<UserState>> {
    const command: UserCommand = { type: 'ChangeEmail', ...input };
    const attempts = opts.expectedVersion === undefined ? 3 : 1;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.inTransaction(undefined, async (client) => {
          const loaded = await this.loadAt(userId, client, opts.expectedVersion);
          const events = decideUser(command, loaded.state, this.deps.clock.now());
          const event = events[0];
          if (event?.type === 'UserEmailUpdated') {
            await this.reserve(client, event.data.new_email, userId, 'new_email');
            await client.query({ ...RELEASE, values: [event.data.old_email, userId] });
          }
          return this.repo.save(userId, loaded, events, { client, metadata: opts.metadata });
        });
      } catch (err) {
        if (!isConcurrencyError(err) || attempt >= attempts) throw err;
      }
    }
  }

  /** UserProfilePicUpdated (http or https URL); the same URL again is a no-op. */
  changeProfilePic(userId: string, picUrl: string, opts: CommandOptions = {}): Promise<Saved<UserState>> {
    return this.execute(userId, { type: 'ChangeProfilePic', picUrl }, opts);
  }

  /**
   * UserFollowedUser: `userId` follows `followedUserId` (who must exist). Following again is a no-op.
   *
   * @throws UserNotFound for either user
   */
  async follow(userId: string, followedUserId: string, opts: CommandOptions = {}): Promise<Saved<UserState>> {
    const followed = await this.repo.load(followedUserId);
    if (!followed.state.exists) throw new UserNotFound(followedUserId);
    return this.execute(userId, { type: 'FollowUser', followedUserId }, opts);
  }

  /** Records the security alert RefreshTokenReuseDetected on the user's stream (for the OAuth server). */
  recordRefreshTokenReuse(
    userId: string,
    input: { clientId: string; familyId: string },
    opts: CommandOptions = {},
  ): Promise<Saved<UserState>> {
    return this.execute(userId, { type: 'RecordRefreshTokenReuse', ...input }, opts);
  }

  /** The user from the write model (snapshot + later events); undefined when not registered. */
  async get(userId: string): Promise<Loaded<UserState> | undefined> {
    const loaded = await this.repo.load(userId);
    return loaded.state.exists ? loaded : undefined;
  }

  /** The id of the user holding `email` (any case, surrounding spaces ignored); strongly consistent. */
  async findUserIdByEmail(email: string, client?: Queryable): Promise<string | undefined> {
    const normal = normalizeEmail(email);
    if (!isValidEmail(normal)) return undefined;
    const { rows } = await (client ?? this.deps.store.pool).query<{ user_id: string }>({ ...LOOKUP, values: [normal] });
    return rows[0]?.user_id;
  }

  private execute(userId: string, command: UserCommand, opts: CommandOptions): Promise<Saved<UserState>> {
    return this.repo.execute(userId, (loaded) => decideUser(command, loaded.state, this.deps.clock.now()), opts);
  }

  private async loadAt(userId: string, client: Queryable, expectedVersion: number | undefined): Promise<Loaded<UserState>> {
    const loaded = await this.repo.load(userId, { client });
    if (expectedVersion !== undefined && loaded.version !== expectedVersion) {
      throw new ConcurrencyError(userAggregate.streamId(userId), expectedVersion, loaded.version);
    }
    return loaded;
  }

  private async reserve(client: Queryable, email: string, userId: string, field: string): Promise<void> {
    const { rows } = await client.query<{ user_id: string }>({ ...RESERVE, values: [email, userId] });
    if (rows.length > 0) return;
    const { rows: holder } = await client.query<{ user_id: string }>({ ...LOOKUP, values: [email] });
    if (holder[0]?.user_id !== userId) throw new EmailTaken(field);
  }

  /**
   * Runs `fn` in a transaction: the caller's (inside a savepoint) or a new one. After a commit of
   * our own, the projectors are woken.
   */
  private async inTransaction<T extends { append: Saved<UserState>['append'] }>(
    client: pg.PoolClient | undefined,
    fn: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    if (client) {
      await client.query('SAVEPOINT users_command');
      try {
        const out = await fn(client);
        await client.query('RELEASE SAVEPOINT users_command');
        return out;
      } catch (err) {
        await client.query('ROLLBACK TO SAVEPOINT users_command');
        throw err;
      }
    }
    const own = await this.deps.store.pool.connect();
    let broken = false;
    try {
      await own.query('BEGIN');
      const out = await fn(own);
      await own.query('COMMIT');
      if (out.append) this.deps.store.appended(out.append);
      return out;
    } catch (err) {
      await own.query('ROLLBACK').catch(() => (broken = true));
      throw err;
    } finally {
      own.release(broken);
    }
  }
}
