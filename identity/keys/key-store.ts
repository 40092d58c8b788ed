/**
 * The `signing_keys` table. SQL only; the schedule is key-schedule.ts, the step is rotation.ts,
 * revocation is revocation.ts. A revoked row is kept (without its private key) as the record of
 * the revocation; everything that schedules, signs or publishes reads only unrevoked rows.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import type { PublicJwk } from './key-material.js';
import type { KeyRecord, SigningAlg } from './key-schedule.js';

type Db = Pool | PoolClient;

/** A stored key: its schedule, its public JWK and (for signing only) its private PEM. */
export interface StoredKey extends KeyRecord {
  readonly publicJwk: PublicJwk;
  readonly privatePkcs8: string;
}

interface Row {
  kid: string;
  alg: SigningAlg;
  public_jwk: PublicJwk;
  private_pkcs8: string;
  created_at: Date;
  activate_at: Date;
  retire_at: Date | null;
}

function fromRow(r: Row): StoredKey {
  return {
    kid: r.kid,
    alg: r.alg,
    publicJwk: r.public_jwk,
    privatePkcs8: r.private_pkcs8,
    createdAt: r.created_at.getTime(),
    activateAt: r.activate_at.getTime(),
    retireAt: r.retire_at ? r.retire_at.getTime() : undefined,
  };
}

/** The keys in the schedule: every unrevoked key, with its private PEM. */
export async function listKeys(db: Db): Promise<StoredKey[]> {
  const { rows } = await db.query<Row>(
    'SELECT kid, alg, public_jwk, private_pkcs8, created_at, activate_at, retire_at FROM signing_keys WHERE revoked_at IS NULL ORDER BY activate_at, created_at',
  );
  return rows.map(fromRow);
}

/** A key as operators see it: the schedule and any revocation, never key material. */
export interface KeyStatusRecord extends KeyRecord {
  readonly revokedAt: number | undefined;
  readonly revokedReason: string | undefined;
}

/** Every stored key, revoked ones included (oldest first). */
export async function listKeyStatus(db: Db): Promise<KeyStatusRecord[]> {
  const { rows } = await db.query<Omit<Row, 'public_jwk' | 'private_pkcs8'> & { revoked_at: Date | null; revoked_reason: string | null }>(
    'SELECT kid, alg, created_at, activate_at, retire_at, revoked_at, revoked_reason FROM signing_keys ORDER BY created_at, activate_at',
  );
  return rows.map((r) => ({
    kid: r.kid,
    alg: r.alg,
    createdAt: r.created_at.getTime(),
    activateAt: r.activate_at.getTime(),
    retireAt: r.retire_at ? r.retire_at.getTime() : undefined,
    revokedAt: r.revoked_at ? r.revoked_at.getTime() : undefined,
    revokedReason: r.revoked_reason ?? undefined,
  }));
}

/** Marks a key revoked and wipes its private key. False when no unrevoked key has this kid. */
export async function markRevoked(db: Db, kid: string, revokedAt: number, reason: string | undefined): Promise<boolean> {
  const r = await db.query(
    'UPDATE signing_keys SET revoked_at = $2, revoked_reason = $3, private_pkcs8 = NULL WHERE kid = $1 AND revoked_at IS NULL',
    [kid, new Date(revokedAt), reason ?? null],
  );
  return r.rowCount === 1;
}

/** Moves a pending key's activation to `activateAt` (a revocation promoting its successor). */
export async function setActivateAt(db: Db, kid: string, activateAt: number): Promise<void> {
  await db.query('UPDATE signing_keys SET activate_at = $2 WHERE kid = $1 AND revoked_at IS NULL', [kid, new Date(activateAt)]);
}

/** The NOTIFY channel on which identity replicas hear that the key set changed (a wake-up hint). */
export const KEYS_CHANGED_CHANNEL = 'identity_signing_keys';

/** Sends the hint; inside a transaction it is delivered at commit, and not at all on rollback. */
export async function notifyKeysChanged(db: Db, kid: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [KEYS_CHANGED_CHANNEL, kid]);
}

export async function insertKey(
  db: Db,
  k: { kid: string; alg: SigningAlg; publicJwk: PublicJwk; privatePkcs8: string; createdAt: number; activateAt: number },
): Promise<void> {
  await db.query(
    'INSERT INTO signing_keys (kid, alg, public_jwk, private_pkcs8, created_at, activate_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [k.kid, k.alg, JSON.stringify(k.publicJwk), k.privatePkcs8, new Date(k.createdAt), new Date(k.activateAt)],
  );
}

export async function setRetireAt(db: Db, kid: string, retireAt: number): Promise<void> {
  await db.query('UPDATE signing_keys SET retire_at = $2 WHERE kid = $1 AND retire_at IS NULL', [kid, new Date(retireAt)]);
}

/** Deletes a retired key, private material included. */
export async function deleteKey(db: Db, kid: string): Promise<void> {
  await db.query('DELETE FROM signing_keys WHERE kid = $1', [kid]);
}
