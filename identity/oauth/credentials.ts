/**
 * Sign-in credentials (`credentials`): email, argon2id password hash and role per user id, kept
 * outside the event log (secrets are not immutable facts). The user id is the event-sourced
 * User's id. Accounts (signup, /auth/login) build on `setCredentials` and `verifyPassword`.
 *
 * Hashing: argon2id with the OWASP Password Storage Cheat Sheet's first configuration (19 MiB,
 * 2 passes, parallelism 1). @node-rs/argon2 hashes and verifies on the libuv thread pool, so the
 * event loop is never blocked; verification compares in constant time inside the library. An
 * unknown email is verified against a fixed dummy hash, so it costs the same time as a wrong
 * password and the timing does not reveal which addresses have accounts.
 */
import { hash, verify, type Options } from '@node-rs/argon2';
import type { Pool, PoolClient } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';
import { normalizeEmail } from '../domain/email.js';

// 2 = Algorithm.Argon2id (a const enum, which isolated modules cannot read).
export const ARGON2_OPTIONS: Options = Object.freeze({ algorithm: 2, memoryCost: 19_456, timeCost: 2, parallelism: 1 });

/** Longer passwords are refused before hashing (a megabyte password is a DoS, not a secret). */
export const MAX_PASSWORD_LENGTH = 1024;
export const MIN_PASSWORD_LENGTH = 8;

export type UserRole = 'customer' | 'support' | 'admin';

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2_OPTIONS);
}

let dummyHash: Promise<string> | undefined;
function dummy(): Promise<string> {
  dummyHash ??= hashPassword('dummy password for unknown accounts');
  return dummyHash;
}

export interface CredentialsInput {
  userId: string;
  email: string;
  password: string;
  role?: UserRole;
  name?: string;
}

/** Creates or replaces a user's credentials. Throws `invalid_field` for an unusable password. */
export async function setCredentials(db: Pool | PoolClient, c: CredentialsInput): Promise<void> {
  if (c.password.length < MIN_PASSWORD_LENGTH || c.password.length > MAX_PASSWORD_LENGTH) {
    throw invalidField('password', `must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`);
  }
  const passwordHash = await hashPassword(c.password);
  await db.query(
    `INSERT INTO credentials (user_id, email, password_hash, role, name) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (user_id) DO UPDATE SET email = EXCLUDED.email, password_hash = EXCLUDED.password_hash,
       role = EXCLUDED.role, name = EXCLUDED.name, updated_at = now()`,
    [c.userId, normalizeEmail(c.email), passwordHash, c.role ?? 'customer', c.name ?? null],
  );
}

/**
 * The user id whose credentials match, or undefined. Same cost whether the email is unknown or
 * the password wrong.
 */
export async function verifyPassword(db: Pool | PoolClient, email: string, password: string): Promise<string | undefined> {
  if (password.length === 0 || password.length > MAX_PASSWORD_LENGTH || email.length > 320) return undefined;
  const { rows } = await db.query<{ user_id: string; password_hash: string }>(
    'SELECT user_id, password_hash FROM credentials WHERE email = $1',
    [normalizeEmail(email)],
  );
  const row = rows[0];
  let ok: boolean;
  try {
    ok = await verify(row?.password_hash ?? (await dummy()), password);
  } catch {
    ok = false; // a corrupt stored hash is a failed sign-in, never a 500
  }
  return row && ok ? row.user_id : undefined;
}

/** The profile the id token and userinfo use. */
export interface CredentialProfile {
  role: UserRole;
  email: string;
  name: string | undefined;
}

export async function credentialProfile(db: Pool | PoolClient, userId: string): Promise<CredentialProfile | undefined> {
  const { rows } = await db.query<{ role: UserRole; email: string; name: string | null }>(
    'SELECT role, email, name FROM credentials WHERE user_id = $1',
    [userId],
  );
  const r = rows[0];
  return r ? { role: r.role, email: r.email, name: r.name ?? undefined } : undefined;
}
