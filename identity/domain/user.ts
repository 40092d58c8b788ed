/**
 * The User aggregate as a decider: `decideUser(command, state, now)` returns the events a command
 * produces (or throws a typed error), `evolveUser(state, event)` folds one event into the state.
 * Both are pure; time comes in as `now` (epoch ms) and leaves as epoch seconds in the events.
 *
 * Email uniqueness across users is not decided here (an aggregate sees one user): the command
 * handler (users.ts) holds it with the reservation table, in the transaction that appends.
 */
import { invalidField } from '../../shared/errors.js';
import type { AggregateDefinition } from '../events/aggregate-repository.js';
import type { DomainEvent, EventOf, UserEvent } from '../events/event-data.js';
import { isValidEmail, normalizeEmail } from './email.js';
import { InvalidEmail, UserAlreadyExists, UserNotFound } from './errors.js';

export interface UserState {
  readonly exists: boolean;
  readonly userId: string;
  /** Normal form (see email.ts). */
  readonly email: string;
  readonly name: string;
  readonly picUrl: string;
  /** Epoch seconds. */
  readonly createdAt: number;
  /** Ids of the users this user follows, in the order followed. */
  readonly following: readonly string[];
}

export type UserCommand =
  | { readonly type: 'RegisterUser'; readonly userId: string; readonly email: string; readonly name: string }
  | { readonly type: 'ChangeEmail'; readonly newEmail: string; readonly reason: string; readonly triggeredBy: string }
  | { readonly type: 'ChangeProfilePic'; readonly picUrl: string }
  | { readonly type: 'FollowUser'; readonly followedUserId: string }
  | { readonly type: 'RecordRefreshTokenReuse'; readonly clientId: string; readonly familyId: string };

export const INITIAL_USER: UserState = Object.freeze({
  exists: false,
  userId: '',
  email: '',
  name: '',
  picUrl: '',
  createdAt: 0,
  following: Object.freeze([]),
});

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const MAX_NAME = 200;
const MAX_URL = 2048;
const MAX_REASON = 500;

/** User and order ids: 1–128 characters of letters, digits and `. _ : -`, starting alphanumeric. */
export function isValidId(id: string): boolean {
  return ID_RE.test(id);
}

function checkName(name: string): string {
  const n = name.trim();
  // eslint-disable-next-line no-control-regex
  if (n.length === 0 || n.length > MAX_NAME || /[\u0000-\u001f\u007f]/.test(n)) {
    throw invalidField('name', `must be 1 to ${MAX_NAME} characters without control characters`);
  }
  return n;
}

function checkEmail(raw: string, field: string): string {
  const email = normalizeEmail(raw);
  if (!isValidEmail(email)) throw new InvalidEmail(field);
  return email;
}

function mustExist(state: UserState, id = state.userId): void {
  if (!state.exists) throw new UserNotFound(id || 'unknown');
}

/** The events `command` produces against `state` at `now` (epoch ms). Throws a typed error to refuse. */
export function decideUser(command: UserCommand, state: UserState, now: number): UserEvent[] {
  const ts = now / 1000;
  switch (command.type) {
    case 'RegisterUser': {
      if (!isValidId(command.userId)) throw invalidField('user_id', 'must be 1 to 128 letters, digits or . _ : -');
      if (state.exists) throw new UserAlreadyExists(command.userId);
      const email = checkEmail(command.email, 'email');
      const name = checkName(command.name);
      return [{ type: 'UserRegistered', data: { user_id: command.userId, email, name, created_at: ts } }];
    }
    case 'ChangeEmail': {
      mustExist(state);
      const email = checkEmail(command.newEmail, 'new_email');
      if (email === state.email) return [];
      const reason = command.reason.trim().slice(0, MAX_REASON);
      return [
        {
          type: 'UserEmailUpdated',
          data: {
            user_id: state.userId,
            old_email: state.email,
            new_email: email,
            reason,
            triggered_by: command.triggeredBy,
            timestamp: ts,
          },
        },
      ];
    }
    case 'ChangeProfilePic': {
      mustExist(state);
      let url: URL;
      try {
        url = new URL(command.picUrl);
      } catch {
        throw invalidField('pic_url', 'must be an http or https URL');
      }
      if ((url.protocol !== 'https:' && url.protocol !== 'http:') || command.picUrl.length > MAX_URL) {
        throw invalidField('pic_url', `must be an http or https URL of at most ${MAX_URL} characters`);
      }
      if (command.picUrl === state.picUrl) return [];
      return [{ type: 'UserProfilePicUpdated', data: { user_id: state.userId, pic_url: command.picUrl } }];
    }
    case 'FollowUser': {
      mustExist(state);
      if (!isValidId(command.followedUserId)) throw invalidField('followed_user_id', 'is not a valid user id');
      if (command.followedUserId === state.userId) throw invalidField('followed_user_id', 'a user cannot follow themselves');
      if (state.following.includes(command.followedUserId)) return [];
      return [{ type: 'UserFollowedUser', data: { user_id: state.userId, followed_user_id: command.followedUserId } }];
    }
    case 'RecordRefreshTokenReuse': {
      mustExist(state);
      return [
        {
          type: 'RefreshTokenReuseDetected',
          data: { user_id: state.userId, client_id: command.clientId, family_id: command.familyId, ts },
        },
      ];
    }
  }
}

const str = (v: unknown, fallback = ''): string => (typeof v === 'string' ? v : fallback);
const num = (v: unknown, fallback = 0): number => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);

/** Folds one event into the state. Unknown types and other aggregates' events leave it unchanged. */
export function evolveUser(state: UserState, event: DomainEvent): UserState {
  switch (event.type) {
    case 'UserRegistered': {
      const d = event.data as Partial<EventOf<'UserRegistered'>['data']>;
      return {
        ...state,
        exists: true,
        userId: str(d.user_id, state.userId),
        email: normalizeEmail(str(d.email)),
        name: str(d.name),
        createdAt: num(d.created_at),
      };
    }
    case 'UserEmailUpdated':
      return { ...state, email: normalizeEmail(str((event.data as Partial<EventOf<'UserEmailUpdated'>['data']>).new_email, state.email)) };
    case 'UserProfilePicUpdated':
      return { ...state, picUrl: str((event.data as Partial<EventOf<'UserProfilePicUpdated'>['data']>).pic_url, state.picUrl) };
    case 'UserFollowedUser': {
      const followed = str((event.data as Partial<EventOf<'UserFollowedUser'>['data']>).followed_user_id);
      if (followed === '' || state.following.includes(followed)) return state;
      return { ...state, following: [...state.following, followed] };
    }
    default:
      return state;
  }
}

/** The User aggregate for the repository: streams `user-<id>`, snapshot format 1. */
export const userAggregate: AggregateDefinition<UserState> = {
  kind: 'user',
  streamId: (id) => `user-${id}`,
  initial: () => INITIAL_USER,
  evolve: evolveUser,
  snapshotFormat: 1,
  toSnapshot: (s) => ({ ...s, following: [...s.following] }),
  fromSnapshot: (j) => ({
    exists: j.exists === true,
    userId: str(j.userId),
    email: str(j.email),
    name: str(j.name),
    picUrl: str(j.picUrl),
    createdAt: num(j.createdAt),
    following: Array.isArray(j.following) ? j.following.filter((f): f is string => typeof f === 'string') : [],
  }),
};
